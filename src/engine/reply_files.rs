//! Files a turn attaches to its reply, from either side: the `reply_attach` tool (a model) and
//! the `http`/`command` backends' `attachments`. Both go through [`attach`], so the same checks
//! hold (the artifact exists; it fits what the chat's platform takes) and the same record is
//! kept ([`Store::reply_attach`]), from which delivery uploads them after the text.
//!
//! [`Store::reply_attach`]: crate::store::Store::reply_attach

use super::Engine;
use super::journal::Journal;
use crate::backend::ReplyFile;
use crate::media_type;
use crate::session::SessionKey;
use crate::store::{Artifact, Attached, NewArtifact, Put, StoreError};
use crate::timing::now_ms;

/// Why files were not attached (none of them is: a reply gets all it asked for or none).
#[derive(Debug, thiserror::Error)]
pub(crate) enum AttachRefused {
    /// Ids that name no artifact.
    #[error(
        "no artifact {}; nothing was attached. artifacts_list shows the ones there are (make one \
         with artifact_put)", .0.join(", ")
    )]
    Unknown(Vec<String>),
    /// A file over what the chat's platform takes for one file.
    #[error(
        "{name} ({id}) is {bytes} bytes, over the {limit} bytes {platform} takes for one file; \
         nothing was attached. Attach a smaller file (split or compress it)"
    )]
    TooLarge {
        /// The file's name.
        name: String,
        /// Its artifact id.
        id: String,
        /// Its size.
        bytes: u64,
        /// The platform's limit.
        limit: u64,
        /// The platform.
        platform: String,
    },
    /// An inline file over `[artifacts] max_bytes`.
    #[error(
        "the inline file {name} is {bytes} bytes, over the limit of {limit} bytes ([artifacts] \
         max_bytes); nothing was attached"
    )]
    OverCap {
        /// The file's name.
        name: String,
        /// Its size.
        bytes: u64,
        /// The cap.
        limit: u64,
    },
    /// The store failed.
    #[error("could not attach the files: {0}")]
    Store(#[from] StoreError),
}

/// Attach the artifacts `ids` to the reply of run `run_id` in `session`: each must exist and
/// be no bigger than the session's platform takes. Returns the run's attachments so far.
pub(crate) async fn attach(
    engine: &Engine,
    session: &SessionKey,
    run_id: &str,
    ids: Vec<String>,
) -> Result<Vec<Artifact>, AttachRefused> {
    let store = engine.store();
    let mut found = Vec::with_capacity(ids.len());
    let mut unknown = Vec::new();
    for id in &ids {
        match store.artifact(id).await? {
            Some(artifact) => found.push(artifact),
            None => unknown.push(id.clone()),
        }
    }
    if !unknown.is_empty() {
        return Err(AttachRefused::Unknown(unknown));
    }
    let limit = engine
        .roster()
        .account(session.platform, &session.account)
        .and_then(|account| account.adapter.max_upload_bytes());
    if let Some(limit) = limit
        && let Some(big) = found.iter().find(|a| a.bytes > limit)
    {
        return Err(AttachRefused::TooLarge {
            name: big.name.clone(),
            id: big.id.clone(),
            bytes: big.bytes,
            limit,
            platform: session.platform.to_string(),
        });
    }
    match store.reply_attach(run_id, ids, now_ms()).await? {
        Attached::Done(attached) => Ok(attached),
        // Pruned between the check and the attach.
        Attached::Unknown(gone) => Err(AttachRefused::Unknown(gone)),
    }
}

/// Attach a backend's `files` to the journal's run: inline ones are kept as artifacts of the
/// run first (under the `[artifacts] max_bytes` cap), then all are attached as by [`attach`].
pub(super) async fn attach_backend_files(
    engine: &Engine,
    journal: &Journal,
    files: Vec<ReplyFile>,
) -> Result<(), AttachRefused> {
    journal.attaches_files();
    let cap = engine.config().artifacts.max_bytes;
    let mut ids = Vec::with_capacity(files.len());
    for file in files {
        let (name, media_type, content) = match file {
            ReplyFile::Artifact(id) => {
                ids.push(id);
                continue;
            }
            ReplyFile::Inline {
                name,
                media_type,
                content,
            } => (name, media_type, content),
        };
        let bytes = content.len() as u64;
        if bytes > cap {
            return Err(AttachRefused::OverCap {
                name,
                bytes,
                limit: cap,
            });
        }
        let media_type = media_type
            .filter(|m| !m.trim().is_empty())
            .unwrap_or_else(|| media_type::guess(&name, "application/octet-stream").to_owned());
        let new = NewArtifact {
            name,
            media_type,
            content,
            bot: journal.session().bot.clone(),
            session: journal.session().clone(),
            run_id: Some(journal.run_id().to_owned()),
            inputs: Vec::new(),
            created_ms: now_ms(),
        };
        match engine.store().artifact_put(new).await? {
            Put::Stored(artifact) => ids.push(artifact.id),
            Put::UnknownInputs(unknown) => return Err(AttachRefused::Unknown(unknown)),
        }
    }
    attach(engine, journal.session(), journal.run_id(), ids).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::journal::journal;
    use crate::gateway::testing::{echo_config, parts};
    use crate::session::test_key;

    fn inline(name: &str, content: &[u8]) -> ReplyFile {
        ReplyFile::Inline {
            name: name.into(),
            media_type: None,
            content: content.to_vec(),
        }
    }

    /// A backend's inline file is kept as an artifact of the run, its type guessed from its
    /// name, and attached to the run's reply.
    #[tokio::test]
    async fn an_inline_file_is_kept_and_attached_to_the_run() {
        let gw = parts(&echo_config(&["b"], "")).await;
        let opened = journal(&gw.engine, &test_key("room"), "run-1".into()).await;
        attach_backend_files(&gw.engine, &opened, vec![inline("notes.txt", b"hi")])
            .await
            .unwrap();
        let files = gw.engine.store().reply_files("run-1").await.unwrap();
        let [file] = files.as_slice() else {
            panic!("one file attached: {files:?}");
        };
        assert_eq!((file.name.as_str(), file.bytes), ("notes.txt", 2));
        assert_eq!(file.media_type, "text/plain");
        assert_eq!(file.run_id.as_deref(), Some("run-1"));
    }

    /// A reply gets all its files or none: an inline file over `[artifacts] max_bytes`, or an
    /// id naming no artifact, attaches nothing.
    #[tokio::test]
    async fn an_oversized_or_unknown_file_attaches_nothing() {
        let gw = parts(&echo_config(&["b"], "\n[artifacts]\nmax_bytes = 4\n")).await;
        let opened = journal(&gw.engine, &test_key("room"), "run-1".into()).await;
        let files = vec![inline("a.txt", b"ok"), inline("b.txt", b"too big")];
        let refused = attach_backend_files(&gw.engine, &opened, files).await;
        assert!(
            matches!(refused, Err(AttachRefused::OverCap { ref name, bytes: 7, limit: 4 }) if name == "b.txt"),
            "{refused:?}"
        );
        let files = vec![
            inline("a.txt", b"ok"),
            ReplyFile::Artifact("art-nope".into()),
        ];
        let refused = attach_backend_files(&gw.engine, &opened, files).await;
        assert!(
            matches!(&refused, Err(AttachRefused::Unknown(ids)) if ids == &["art-nope"]),
            "{refused:?}"
        );
        assert!(
            gw.engine
                .store()
                .reply_files("run-1")
                .await
                .unwrap()
                .is_empty()
        );
    }
}
