//! Reply files: the artifacts a run attached to its reply, for delivery to upload after the text.
//!
//! They are kept here, not only in the turn's memory, so that every flow that posts a run's
//! reply finds them by the run id alone, a run replayed after a restart delivers the same files
//! (each upload is a begun send of its own, so none is posted twice), and a delivery's lineage
//! lists them among its artifacts out.

use super::artifacts::{Artifact, by_id};
use super::sql::{Db, DbError, args};
use super::{Store, StoreError};

/// What [`Store::reply_attach`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attached {
    /// Every id names an artifact: these are the run's attachments now, in order.
    Done(Vec<Artifact>),
    /// These ids name no artifact; nothing was attached.
    Unknown(Vec<String>),
}

impl Store {
    /// Attach the artifacts `ids` to the reply of run `run_id` (each once, in the order first
    /// attached), unless one is unknown.
    pub async fn reply_attach(
        &self,
        run_id: &str,
        ids: Vec<String>,
        now_ms: i64,
    ) -> Result<Attached, StoreError> {
        let run_id = run_id.to_owned();
        self.write(move |db| {
            let mut unknown = Vec::new();
            for id in &ids {
                if by_id(db, id)?.is_none() && !unknown.contains(id) {
                    unknown.push(id.clone());
                }
            }
            if !unknown.is_empty() {
                return Ok(Attached::Unknown(unknown));
            }
            for id in &ids {
                db.execute(
                    "INSERT INTO reply_files (run_id, artifact_id, attached_ms) VALUES (?1, ?2, ?3)
                     ON CONFLICT DO NOTHING",
                    args![&run_id, id, now_ms],
                )?;
            }
            Ok(Attached::Done(attached_to(db, &run_id)?))
        })
        .await
    }

    /// The artifacts attached to run `run_id`'s reply, in the order attached.
    pub async fn reply_files(&self, run_id: &str) -> Result<Vec<Artifact>, StoreError> {
        let run_id = run_id.to_owned();
        self.read(move |db| attached_to(db, &run_id)).await
    }
}

/// The artifacts attached to `run_id`'s reply, in order (one pruned since is left out: its
/// row goes with it).
pub(super) fn attached_to<'c>(
    db: impl Into<Db<'c>>,
    run_id: &str,
) -> Result<Vec<Artifact>, DbError> {
    let db = db.into();
    let ids: Vec<String> = db.query_map(
        "SELECT artifact_id FROM reply_files WHERE run_id = ?1 ORDER BY id",
        args![run_id],
        |row| row.get(0),
    )?;
    let mut found = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(artifact) = by_id(db, &id)? {
            found.push(artifact);
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;
    use crate::store::{NewArtifact, Put};

    async fn artifact(store: &Store, name: &str) -> String {
        let new = NewArtifact {
            name: name.into(),
            media_type: "text/plain".into(),
            content: name.as_bytes().to_vec(),
            bot: "scout".parse().unwrap(),
            session: crate::session::test_key("s"),
            run_id: Some("r0".into()),
            inputs: Vec::new(),
            created_ms: 1,
        };
        match store.artifact_put(new).await.unwrap() {
            Put::Stored(a) => a.id,
            Put::UnknownInputs(u) => panic!("{u:?}"),
        }
    }

    #[tokio::test]
    async fn attachments_are_kept_once_in_order_and_unknown_ids_attach_nothing() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            let (a, b) = (artifact(&store, "a").await, artifact(&store, "b").await);
            let names = |attached: Attached| match attached {
                Attached::Done(found) => found.into_iter().map(|f| f.name).collect::<Vec<_>>(),
                Attached::Unknown(u) => panic!("{engine}: {u:?}"),
            };
            let first = store.reply_attach("r1", vec![b.clone()], 1).await.unwrap();
            assert_eq!(names(first), ["b"], "{engine}");
            let again = store
                .reply_attach("r1", vec![a.clone(), b.clone()], 2)
                .await
                .unwrap();
            assert_eq!(
                names(again),
                ["b", "a"],
                "{engine}: a retried attach adds nothing twice"
            );
            assert_eq!(
                store
                    .reply_attach("r1", vec![a.clone(), "art-nope".into()], 3)
                    .await
                    .unwrap(),
                Attached::Unknown(vec!["art-nope".into()]),
                "{engine}"
            );
            assert_eq!(store.reply_files("r1").await.unwrap().len(), 2, "{engine}");
            assert!(
                store.reply_files("r2").await.unwrap().is_empty(),
                "{engine}"
            );
        }
    }
}
