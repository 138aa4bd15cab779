//! Step 9½: the files posted with a message that woke a bot (Slack files, Discord attachments,
//! Feishu image and file messages) become artifacts of the bot's session, fetched through the
//! account's adapter with its credentials, within `[artifacts] max_bytes`; the turn is told
//! about each one.
//!
//! Only a message that takes a turn is fetched from (one that is kept as history is not), once
//! per bot it wakes, each with its own account's credentials. Each artifact belongs to the bot
//! the file was posted to (artifacts name only bots as their makers; the turn is told who posted
//! it, and the transcript keeps the sender with the message), in the run answering the message,
//! under a name unique within the message: a replay of the event after a restart finds what the first
//! run kept by that name and downloads nothing again, and the artifact ids, which derive from
//! content, name and run, could not double anyway.
//!
//! A file that is over the cap (by the platform's word, before fetching, or by its bytes,
//! while fetching) or that cannot be fetched is logged with the reason and named to the bot
//! as not read; the turn runs all the same.

use std::collections::HashMap;

use baton_contract::{DownloadError, InboundFile};

use super::Inbound;
use crate::backend::{Image, PostedFile};
use crate::engine::{Engine, InlineBudget, artifact_line, artifact_reference};
use crate::media_type;
use crate::store::{Artifact, ArtifactQuery, NewArtifact, Put};
use crate::timing::now_ms;

/// The image types a vision model is given as image parts (what OpenAI-compatible servers
/// read); any other image goes by reference.
const VISION_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// What the turn is given of a message's files.
#[derive(Debug, Default)]
pub(super) struct FilesIn {
    /// Lines for the end of the message: each file inline, by reference, shown as an image, or
    /// not read and why. Empty when the message had no files.
    pub text: String,
    /// Every file, read or not.
    pub files: Vec<PostedFile>,
    /// The images shown to a `vision` model.
    pub images: Vec<Image>,
}

/// Keep the files of `inbound` as artifacts of the session, made in run `run_id`.
pub(super) async fn take_in(engine: &Engine, inbound: &Inbound<'_>, run_id: &str) -> FilesIn {
    let event = &inbound.event;
    let mut out = FilesIn::default();
    if event.files.is_empty() {
        return out;
    }
    let store = engine.store();
    let sender = inbound.speaker.label.as_str();
    let vision = inbound.account.bot.config.vision;
    // What a first run of this event already kept, by name: a replay takes these.
    let kept: HashMap<String, Artifact> = store
        .artifacts(ArtifactQuery::Run(run_id.to_owned()), 1000)
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|a| &a.bot == inbound.bot())
        .map(|a| (a.name.clone(), a))
        .collect();
    let mut lines = vec!["Files posted with this message:".to_owned()];
    let mut budget = InlineBudget::new();
    for (file, name) in event.files.iter().zip(unique_names(&event.files)) {
        let found = match kept.get(&name) {
            Some(artifact) => Ok(artifact.clone()),
            None => keep(engine, inbound, run_id, file, &name).await,
        };
        let artifact = match found {
            Ok(artifact) => artifact,
            Err(reason) => {
                tracing::warn!(
                    platform = %event.platform, account = %inbound.account.id,
                    message = %event.message_id, file = %name, %reason,
                    "a file posted in a chat was not read; the turn is told"
                );
                let size = file.size.map(|n| format!(" ({})", size_text(n)));
                lines.push(format!(
                    "- file {name}{} was not read: {reason}",
                    size.unwrap_or_default()
                ));
                out.files.push(PostedFile {
                    name,
                    media_type: file.media_type.clone(),
                    bytes: file.size,
                    artifact: None,
                    not_read: Some(reason),
                });
                continue;
            }
        };
        let shown = vision && VISION_TYPES.contains(&artifact.media_type.as_str());
        let image = if shown {
            store.artifact_content(&artifact.id).await.ok().flatten()
        } else {
            None
        };
        match image {
            Some((_, data)) => {
                lines.push(format!(
                    "{}: shown to you as an image",
                    artifact_reference(&artifact, Some(sender))
                ));
                out.images.push(Image {
                    media_type: artifact.media_type.clone(),
                    data,
                });
            }
            None => {
                let line = artifact_line(store, &artifact.id, &mut budget, Some(sender));
                lines.push(line.await);
            }
        }
        out.files.push(PostedFile {
            name: artifact.name,
            media_type: Some(artifact.media_type),
            bytes: Some(artifact.bytes),
            artifact: Some(artifact.id),
            not_read: None,
        });
    }
    out.text = lines.join("\n");
    out
}

/// Fetch `file` and keep it as the artifact `name`; the reason, when it is not kept.
async fn keep(
    engine: &Engine,
    inbound: &Inbound<'_>,
    run_id: &str,
    file: &InboundFile,
    name: &str,
) -> Result<Artifact, String> {
    let limit = engine.config().artifacts.max_bytes;
    if let Some(size) = file.size.filter(|size| *size > limit) {
        return Err(reason(&DownloadError::TooLarge {
            size: Some(size),
            limit,
        }));
    }
    let adapter = &inbound.account.adapter;
    let downloaded = adapter
        .download(&file.source, limit)
        .await
        .map_err(|err| reason(&err))?;
    let media_type = [file.media_type.as_deref(), downloaded.media_type.as_deref()]
        .into_iter()
        .flatten()
        .map(|t| t.split(';').next().unwrap_or_default().trim())
        .find(|t| !t.is_empty() && *t != "application/octet-stream")
        .or_else(|| media_type::sniff(&downloaded.bytes))
        .unwrap_or_else(|| media_type::guess(name, "application/octet-stream"))
        .to_owned();
    let new = NewArtifact {
        name: name.to_owned(),
        media_type,
        content: downloaded.bytes,
        bot: inbound.bot().clone(),
        session: inbound.session(),
        run_id: Some(run_id.to_owned()),
        inputs: Vec::new(),
        created_ms: now_ms(),
    };
    match engine.store().artifact_put(new).await {
        Ok(Put::Stored(artifact)) => Ok(*artifact),
        Ok(Put::UnknownInputs(_)) => Err("it could not be kept".into()),
        Err(err) => Err(format!("it could not be kept ({err})")),
    }
}

/// Why a file was not read, as the bot is told: `over the 25 MB limit`.
fn reason(err: &DownloadError) -> String {
    match err {
        DownloadError::TooLarge { limit, .. } => format!("over the {} limit", size_text(*limit)),
        other => other.to_string(),
    }
}

/// The files' names, each unique within the message (a second `image` is `image-2`), so a
/// replay can find each one's artifact by name.
fn unique_names(files: &[InboundFile]) -> Vec<String> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    files
        .iter()
        .map(|file| {
            let n = seen.entry(file.name.as_str()).or_default();
            *n += 1;
            if *n == 1 {
                return file.name.clone();
            }
            match file.name.rsplit_once('.') {
                Some((stem, ext)) if !stem.is_empty() => format!("{stem}-{n}.{ext}"),
                _ => format!("{}-{n}", file.name),
            }
        })
        .collect()
}

/// A size for people: `30 MB`, `1.5 MB`, `12 kB`, `300 bytes` (MB is 1024 × 1024 bytes, as
/// `[artifacts] max_bytes` counts its default of 25 MB).
fn size_text(bytes: u64) -> String {
    const KB: f64 = 1024.0;
    const MB: f64 = KB * KB;
    let n = bytes as f64;
    let (value, unit) = if n >= MB {
        (n / MB, "MB")
    } else if n >= KB {
        (n / KB, "kB")
    } else {
        return format!("{bytes} bytes");
    };
    if value < 10.0 && value.fract() >= 0.05 {
        format!("{value:.1} {unit}")
    } else {
        format!("{value:.0} {unit}")
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use baton_contract::{AccountId, ChatKey, Downloaded, FileRef, Platform, StubAdapter};

    use super::super::speaker::Speaker;
    use super::super::testing::to_bot;
    use super::*;
    use crate::gateway::testing::{echo_config, parts};
    use crate::pen::Arrival;
    use crate::roster::Account;

    /// The same event taken in twice in one run (a replay after a restart) downloads its file
    /// once and keeps one artifact, which the second intake gives the turn again.
    #[tokio::test]
    async fn a_replay_finds_what_the_first_run_kept_and_downloads_nothing() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let roster = gw.engine.roster();
        // An account that serves every file as `notes.txt`'s bytes and counts its downloads.
        let adapter = Arc::new(
            StubAdapter::new(Platform::Local, "alpha").serving(Downloaded {
                bytes: b"deploy at five".to_vec(),
                media_type: Some("text/plain".into()),
            }),
        );
        let account = Account {
            platform: Platform::Local,
            id: AccountId::from("alpha"),
            bot: Arc::clone(&roster.bots()[0]),
            adapter: adapter.clone(),
        };
        let mut event = to_bot("alpha", 1, "room", "ann", "@alpha read this");
        event.files = vec![file("notes.txt")];
        let inbound = Inbound {
            speaker: Speaker::of(&event, roster),
            policy: gw.engine.chat_rules().resolve(Platform::Local, "room"),
            chat_key: ChatKey::new(Platform::Local, &event.chat, None),
            settings_key: ChatKey::new(Platform::Local, &event.chat, None),
            event,
            account: &account,
            arrival: Arrival::Fresh,
            filed: None,
            began: gw.engine.store().write_epoch(),
        };
        let first = take_in(&gw.engine, &inbound, "in:local:alpha:m1").await;
        let again = take_in(&gw.engine, &inbound, "in:local:alpha:m1").await;
        assert_eq!(adapter.downloads(), 1);
        assert_eq!(first.files, again.files);
        assert_eq!(first.text, again.text);
        assert!(
            first
                .text
                .contains("posted by ann):\ndeploy at five\n(end of art-"),
            "{}",
            first.text
        );
        let kept = gw
            .engine
            .store()
            .artifacts(ArtifactQuery::Run("in:local:alpha:m1".into()), 10)
            .await
            .unwrap();
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(kept[0].bot, "alpha");
    }

    fn file(name: &str) -> InboundFile {
        InboundFile {
            name: name.into(),
            media_type: None,
            size: None,
            source: FileRef(String::new()),
        }
    }

    #[test]
    fn names_are_made_unique_within_a_message() {
        let files = [file("image"), file("image"), file("a.png"), file("a.png")];
        assert_eq!(
            unique_names(&files),
            ["image", "image-2", "a.png", "a-2.png"]
        );
    }

    #[test]
    fn sizes_read_as_people_say_them() {
        assert_eq!(size_text(30 * 1024 * 1024), "30 MB");
        assert_eq!(size_text(25 * 1024 * 1024), "25 MB");
        assert_eq!(size_text(1536 * 1024), "1.5 MB");
        assert_eq!(size_text(12 * 1024), "12 kB");
        assert_eq!(size_text(300), "300 bytes");
        let over = DownloadError::TooLarge {
            size: None,
            limit: 25 * 1024 * 1024,
        };
        assert_eq!(reason(&over), "over the 25 MB limit");
    }
}
