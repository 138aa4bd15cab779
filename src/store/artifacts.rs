//! Artifacts: immutable blobs bots hand each other (`artifact_put`), kept in the database.
//!
//! The bytes live in `artifact_blobs`, once per content, keyed by their SHA-256; each artifact
//! row names its blob and says what it is (name, media type, size), who made it (bot, session,
//! run) and what it was made from (`inputs`). Keeping the bytes in SQLite rather than in files
//! beside it keeps an artifact and its index in one transaction (no file without a row, no row
//! without a file after a crash), works for `":memory:"` stores, and leaves one file to back up.
//! The cost, a large blob passing through the WAL, is bounded by `[artifacts] max_bytes` and
//! the WAL bound (`checkpoint.rs`).
//!
//! An artifact's id derives from its content and its making (see [`artifact_id`]), so a turn
//! replayed after a crash, putting the same thing again, finds the artifact it made the first
//! time instead of making a second.

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::sessions::session_column;
use super::sql::{Db, DbError, OptionalRow, Row, args};
use super::{Store, StoreError};
use crate::bot_id::BotId;
use crate::session::SessionKey;

/// An artifact about to be stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewArtifact {
    /// A file name (`competitors.json`).
    pub name: String,
    /// The media type (`application/json`).
    pub media_type: String,
    /// The bytes.
    pub content: Vec<u8>,
    /// The bot that made it.
    pub bot: BotId,
    /// The session it was made in.
    pub session: SessionKey,
    /// The run (turn) that made it; `None` for a call from outside any turn (an MCP client).
    pub run_id: Option<String>,
    /// The artifacts it was made from.
    pub inputs: Vec<String>,
    /// When, in milliseconds since the Unix epoch.
    pub created_ms: i64,
}

/// A stored artifact's record (its bytes are read with [`Store::artifact_content`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Artifact {
    /// `art-` and 24 hex digits.
    pub id: String,
    /// The file name.
    pub name: String,
    /// The media type.
    pub media_type: String,
    /// Size of the content in bytes.
    pub bytes: u64,
    /// SHA-256 of the content, hex.
    pub sha256: String,
    /// The bot that made it.
    pub bot: BotId,
    /// The session it was made in.
    pub session: SessionKey,
    /// The run that made it.
    pub run_id: Option<String>,
    /// The artifacts it was made from.
    pub inputs: Vec<String>,
    /// When it was made, milliseconds since the Unix epoch.
    pub created_ms: i64,
}

/// What [`Store::artifact_put`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Put {
    /// Stored (or found: the same put was made before in the same run).
    Stored(Box<Artifact>),
    /// Some `inputs` name no artifact; nothing was stored.
    UnknownInputs(Vec<String>),
}

/// Which artifacts to list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArtifactQuery {
    /// Made in this session.
    Session(SessionKey),
    /// Made by this run.
    Run(String),
    /// Every one.
    All,
}

/// Where the HTTP listener serves an artifact's bytes (under the `/api` access rule).
pub fn content_path(id: &str) -> String {
    format!("/api/artifacts/{id}/content")
}

/// The hex SHA-256 of `content`.
pub fn sha256_hex(content: &[u8]) -> String {
    hex(&Sha256::digest(content))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The id of an artifact: a digest of its content's hash, name, media type, run and inputs.
/// The same put in the same run gets the same id; anything else made differently does not.
fn artifact_id(new: &NewArtifact, sha256: &str) -> String {
    let mut digest = Sha256::new();
    let session = new.session.render();
    for part in [
        sha256,
        &new.name,
        &new.media_type,
        new.bot.as_str(),
        &session,
    ] {
        digest.update(part.as_bytes());
        digest.update([0]);
    }
    digest.update(new.run_id.as_deref().unwrap_or("").as_bytes());
    for input in &new.inputs {
        digest.update([0]);
        digest.update(input.as_bytes());
    }
    format!("art-{}", &hex(&digest.finalize())[..24])
}

/// The artifact ids (`art-` and 24 hex digits, as [`artifact_id`] makes them) that `text`
/// names, each once, in the order named.
pub(super) fn ids_named_in(text: &str) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for (at, _) in text.match_indices("art-") {
        let starts_word = !text[..at]
            .chars()
            .next_back()
            .is_some_and(char::is_alphanumeric);
        let Some(id) = text.get(at..at + 28) else {
            continue;
        };
        let hex_tail = id[4..]
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        let ends_word = !text[at + 28..]
            .chars()
            .next()
            .is_some_and(char::is_alphanumeric);
        if starts_word && hex_tail && ends_word && !ids.iter().any(|known| known == id) {
            ids.push(id.to_owned());
        }
    }
    ids
}

const SELECT: &str = "SELECT id, name, media_type, bytes, sha256, bot, session, run_id, inputs,
        created_ms
    FROM artifacts";

fn from_row(row: &Row<'_>) -> Result<Artifact, DbError> {
    let bytes: i64 = row.get(3)?;
    let inputs: String = row.get(8)?;
    Ok(Artifact {
        id: row.get(0)?,
        name: row.get(1)?,
        media_type: row.get(2)?,
        bytes: u64::try_from(bytes)
            .map_err(|_| row.column_error(3, format!("{bytes} is not a size")))?,
        sha256: row.get(4)?,
        bot: row.get(5)?,
        session: session_column(row, 6)?,
        run_id: row.get(7)?,
        inputs: serde_json::from_str(&inputs)
            .map_err(|e| row.column_error(8, format!("not a JSON list of ids: {e}")))?,
        created_ms: row.get(9)?,
    })
}

/// The artifacts run `run_id` made, oldest first: a delivery's output, for its lineage.
pub(super) fn made_by<'c>(db: impl Into<Db<'c>>, run_id: &str) -> Result<Vec<Artifact>, DbError> {
    db.into().query_map(
        &format!("{SELECT} WHERE run_id = ?1 ORDER BY created_ms, id"),
        args![run_id],
        from_row,
    )
}

/// The artifacts made by any run whose id starts with `prefix`, oldest first: a chain's turns
/// (`chain:<id>:t<turn>`), for its lineage.
pub(super) fn made_by_runs_under<'c>(
    db: impl Into<Db<'c>>,
    prefix: &str,
) -> Result<Vec<Artifact>, DbError> {
    // The length is counted here (in characters, as both engines' `substr` counts): in
    // `length(?1)` PostgreSQL could not tell which `length` the parameter is for.
    let chars = i64::try_from(prefix.chars().count()).unwrap_or(i64::MAX);
    db.into().query_map(
        &format!("{SELECT} WHERE substr(run_id, 1, ?2) = ?1 ORDER BY created_ms, id"),
        args![prefix, chars],
        from_row,
    )
}

pub(super) fn by_id<'c>(db: impl Into<Db<'c>>, id: &str) -> Result<Option<Artifact>, DbError> {
    db.into()
        .query_row(&format!("{SELECT} WHERE id = ?1"), args![id], from_row)
        .optional()
}

impl Store {
    /// Store `new` (its bytes once per content), unless an input is unknown. Putting the same
    /// thing again in the same run returns the first artifact.
    pub async fn artifact_put(&self, new: NewArtifact) -> Result<Put, StoreError> {
        // Hashing 25 MB takes a while: off the async workers, and off the writer thread.
        let (new, sha256) = tokio::task::spawn_blocking(move || {
            let sha = sha256_hex(&new.content);
            (new, sha)
        })
        .await
        .map_err(|e| StoreError::Internal(format!("hashing an artifact: {e}")))?;
        let id = artifact_id(&new, &sha256);
        self.write(move |db| {
            let mut unknown = Vec::new();
            for input in &new.inputs {
                if by_id(db, input)?.is_none() {
                    unknown.push(input.clone());
                }
            }
            if !unknown.is_empty() {
                return Ok(Put::UnknownInputs(unknown));
            }
            if let Some(found) = by_id(db, &id)? {
                return Ok(Put::Stored(Box::new(found)));
            }
            let bytes = new.content.len() as u64;
            let size = i64::try_from(bytes).unwrap_or(i64::MAX);
            db.execute(
                "INSERT INTO artifact_blobs (sha256, bytes, content) VALUES (?1, ?2, ?3)
                 ON CONFLICT DO NOTHING",
                args![&sha256, size, new.content.as_slice()],
            )?;
            let inputs = serde_json::Value::from(new.inputs.clone()).to_string();
            // Another instance sharing the database may have made the same put since the look
            // above (one run replayed on two instances): then its artifact is the one.
            let made = db.execute(
                "INSERT INTO artifacts (id, sha256, name, media_type, bytes, bot, session, run_id,
                    inputs, created_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
                 ON CONFLICT (id) DO NOTHING",
                args![
                    &id,
                    &sha256,
                    &new.name,
                    &new.media_type,
                    size,
                    &new.bot,
                    new.session.render().as_str(),
                    &new.run_id,
                    inputs.as_str(),
                    new.created_ms,
                ],
            )?;
            if made == 0 {
                let found = by_id(db, &id)?.ok_or(DbError::NoRows)?;
                return Ok(Put::Stored(Box::new(found)));
            }
            Ok(Put::Stored(Box::new(Artifact {
                id: id.clone(),
                name: new.name.clone(),
                media_type: new.media_type.clone(),
                bytes,
                sha256: sha256.clone(),
                bot: new.bot.clone(),
                session: new.session.clone(),
                run_id: new.run_id.clone(),
                inputs: new.inputs.clone(),
                created_ms: new.created_ms,
            })))
        })
        .await
    }

    /// The artifact `id`, if the store holds it.
    pub async fn artifact(&self, id: &str) -> Result<Option<Artifact>, StoreError> {
        let id = id.to_owned();
        self.read(move |db| by_id(db, &id)).await
    }

    /// The artifact `id` and its bytes.
    pub async fn artifact_content(
        &self,
        id: &str,
    ) -> Result<Option<(Artifact, Vec<u8>)>, StoreError> {
        let id = id.to_owned();
        self.read(move |db| {
            let Some(artifact) = by_id(db, &id)? else {
                return Ok(None);
            };
            let content: Vec<u8> = db.query_row(
                "SELECT content FROM artifact_blobs WHERE sha256 = ?1",
                args![&artifact.sha256],
                |row| row.get(0),
            )?;
            Ok(Some((artifact, content)))
        })
        .await
    }

    /// The artifacts `query` selects, oldest first, at most `limit` (the newest ones).
    pub async fn artifacts(
        &self,
        query: ArtifactQuery,
        limit: usize,
    ) -> Result<Vec<Artifact>, StoreError> {
        let limit = i64::try_from(limit.clamp(1, 10_000)).unwrap_or(10_000);
        self.read(move |db| {
            let (filter, value) = match &query {
                ArtifactQuery::Session(s) => ("session = ?1", Some(s.render())),
                ArtifactQuery::Run(r) => ("run_id = ?1", Some(r.clone())),
                // Cast: a bare `?1 IS NULL` gives PostgreSQL no type for the parameter.
                ArtifactQuery::All => ("CAST(?1 AS TEXT) IS NULL", None),
            };
            let mut found = db.query_map(
                &format!("{SELECT} WHERE {filter} ORDER BY created_ms DESC, id LIMIT ?2"),
                args![&value, limit],
                from_row,
            )?;
            found.reverse();
            Ok(found)
        })
        .await
    }
}

/// Delete up to `chunk` artifacts made before `before` (none made by a delivery still queued or
/// running: its sender may still read them), then the blobs and reply attachments no artifact
/// names any more.
pub(super) fn prune_artifacts(db: Db<'_>, before: i64, chunk: i64) -> Result<usize, DbError> {
    let rows = db.execute(
        "DELETE FROM artifacts WHERE id IN
            (SELECT id FROM artifacts
             WHERE created_ms < ?1
               AND coalesce(run_id, '') NOT IN
                   (SELECT run_id FROM deliveries WHERE state IN ('queued', 'running'))
             LIMIT ?2)",
        args![before, chunk],
    )?;
    if rows == 0 {
        return Ok(0);
    }
    db.execute(
        "DELETE FROM artifact_blobs
         WHERE sha256 NOT IN (SELECT sha256 FROM artifacts)",
        &[],
    )?;
    // A reply's attachment of an artifact gone goes with it (`reply_files.rs`).
    db.execute(
        "DELETE FROM reply_files WHERE artifact_id NOT IN (SELECT id FROM artifacts)",
        &[],
    )?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    fn new(name: &str, content: &[u8], run: &str) -> NewArtifact {
        NewArtifact {
            name: name.into(),
            media_type: "application/json".into(),
            content: content.to_vec(),
            bot: "scout".parse().unwrap(),
            session: "bot:scout:local:local-scout:dm:x".parse().unwrap(),
            run_id: Some(run.into()),
            inputs: Vec::new(),
            created_ms: 1,
        }
    }

    fn stored(put: Put) -> Artifact {
        match put {
            Put::Stored(a) => *a,
            Put::UnknownInputs(u) => panic!("unknown inputs {u:?}"),
        }
    }

    async fn blobs(store: &Store) -> i64 {
        store
            .read(|db| db.query_row("SELECT count(*) FROM artifact_blobs", &[], |r| r.get(0)))
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn content_is_kept_once_and_a_replayed_put_finds_its_artifact() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            let a = stored(
                store
                    .artifact_put(new("a.json", b"[1]", "r1"))
                    .await
                    .unwrap(),
            );
            assert!(a.id.starts_with("art-") && a.id.len() == 28, "{}", a.id);
            assert_eq!(a.sha256, sha256_hex(b"[1]"), "{engine}");
            assert_eq!(a.bytes, 3, "{engine}");
            let again = stored(
                store
                    .artifact_put(new("a.json", b"[1]", "r1"))
                    .await
                    .unwrap(),
            );
            assert_eq!(
                again, a,
                "{engine}: the same put in the same run is the same artifact"
            );
            let other = stored(
                store
                    .artifact_put(new("b.json", b"[1]", "r2"))
                    .await
                    .unwrap(),
            );
            assert_ne!(other.id, a.id, "{engine}");
            assert_eq!(blobs(&store).await, 1, "{engine}: one blob for one content");
            let (meta, content) = store.artifact_content(&other.id).await.unwrap().unwrap();
            assert_eq!(
                (meta, content),
                (other.clone(), b"[1]".to_vec()),
                "{engine}"
            );
            let by_run = store
                .artifacts(ArtifactQuery::Run("r2".into()), 50)
                .await
                .unwrap();
            assert_eq!(by_run, vec![other.clone()], "{engine}");
            let by_session = store
                .artifacts(ArtifactQuery::Session(other.session.clone()), 1)
                .await
                .unwrap();
            assert_eq!(by_session.len(), 1, "{engine}: at most the limit");
            assert_eq!(
                store.artifacts(ArtifactQuery::All, 50).await.unwrap().len(),
                2,
                "{engine}"
            );
        }
    }

    #[tokio::test]
    async fn lineage_finds_what_a_run_and_the_runs_under_a_prefix_made() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            let mut made = Vec::new();
            for (at, (name, run)) in [
                ("t1", "chain:c_1:t1"),
                ("t2", "chain:c_1:t2"),
                ("other", "chain:c_10:t1"),
                ("direct", "r9"),
            ]
            .into_iter()
            .enumerate()
            {
                let mut made_now = new(name, name.as_bytes(), run);
                made_now.created_ms = at as i64;
                made.push(stored(store.artifact_put(made_now).await.unwrap()));
            }
            let names =
                |found: Vec<Artifact>| found.into_iter().map(|a| a.name).collect::<Vec<_>>();
            let under = store
                .read(|db| made_by_runs_under(db, "chain:c_1:t"))
                .await
                .unwrap();
            assert_eq!(names(under), ["t1", "t2"], "{engine}");
            let by = store.read(|db| made_by(db, "r9")).await.unwrap();
            assert_eq!(names(by), ["direct"], "{engine}");
            let id = made[0].id.clone();
            let found = store.read(move |db| by_id(db, &id)).await.unwrap();
            assert_eq!(found.as_ref(), Some(&made[0]), "{engine}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn the_same_put_from_two_instances_at_once_makes_one_artifact() {
        for db in testing::engines().await {
            let engine = db.engine();
            // Two stores on one database: two writers, as two gateway instances have. Each
            // makes the same puts in the same order, one at a time.
            let (one, two) = (db.open().await, db.open().await);
            let puts = |store: Store| {
                tokio::spawn(async move {
                    let mut ids = Vec::new();
                    for i in 0..20 {
                        let name = format!("n{i}");
                        let put = store.artifact_put(new(&name, name.as_bytes(), "r1")).await;
                        ids.push(stored(put.unwrap_or_else(|e| panic!("{e}"))).id);
                    }
                    ids
                })
            };
            let (a, b) = (puts(one.clone()), puts(two));
            let (a, b) = (a.await.unwrap(), b.await.unwrap());
            assert_eq!(a, b, "{engine}: both found the same artifacts");
            let all = one.artifacts(ArtifactQuery::All, 100).await.unwrap();
            assert_eq!(all.len(), 20, "{engine}: each put once");
        }
    }

    #[test]
    fn ids_are_found_in_text_whole_and_once() {
        let id = "art-0123456789abcdef01234567";
        let text = format!(
            "read {id}, then {id}; not xart-fedcba9876543210fedcba98, art-0123456789abcdef0123456 \
             (short), art-0123456789abcdef012345678 (long), art-0123456789ABCDEF01234567 (case)"
        );
        assert_eq!(ids_named_in(&text), [id]);
        assert!(ids_named_in("art-").is_empty());
    }

    #[tokio::test]
    async fn unknown_inputs_store_nothing() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            let mut made = new("c.json", b"{}", "r1");
            made.inputs = vec!["art-nope".into()];
            assert_eq!(
                store.artifact_put(made).await.unwrap(),
                Put::UnknownInputs(vec!["art-nope".into()]),
                "{engine}"
            );
            assert!(
                store
                    .artifacts(ArtifactQuery::All, 50)
                    .await
                    .unwrap()
                    .is_empty(),
                "{engine}"
            );
        }
    }

    #[tokio::test]
    async fn pruning_takes_old_artifacts_and_their_orphaned_blobs() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            let old = stored(store.artifact_put(new("old", b"old", "r1")).await.unwrap());
            let mut young = new("young", b"young", "r2");
            young.created_ms = 10;
            let young = stored(store.artifact_put(young).await.unwrap());
            let ids = vec![old.id.clone(), young.id.clone()];
            store.reply_attach("r3", ids, 20).await.unwrap();
            let gone = store.write(|db| prune_artifacts(db, 5, 100)).await.unwrap();
            assert_eq!(gone, 1, "{engine}");
            assert!(store.artifact(&old.id).await.unwrap().is_none(), "{engine}");
            assert!(
                store.artifact_content(&young.id).await.unwrap().is_some(),
                "{engine}"
            );
            assert_eq!(blobs(&store).await, 1, "{engine}");
            let attached = store.reply_files("r3").await.unwrap();
            assert_eq!(attached, vec![young], "{engine}");
            let rows: i64 = store
                .read(|db| db.query_row("SELECT count(*) FROM reply_files", &[], |r| r.get(0)))
                .await
                .unwrap();
            assert_eq!(
                rows, 1,
                "{engine}: the pruned artifact's attachment went with it"
            );
        }
    }
}
