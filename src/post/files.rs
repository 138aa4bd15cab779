//! Pipeline step 12 for files: the artifacts a run attached to its reply are uploaded after its
//! text, each as its own post in the same place (thread, reply), exactly once.
//!
//! Each file is a begun send like a chunk of text, under the key `<run id>#file:<artifact id>`:
//! recorded as begun before the platform is called and as delivered (a transcript entry naming
//! the artifact) after. A replay after a restart, or the same run posting again, finds the key
//! and does not upload the file a second time; a begun upload never confirmed (cut off by a
//! crash) is recorded as a failure, not risked twice. A 429 is retried after its `Retry-After`
//! with the same key, as for text. The key names the artifact, not its position, so a replayed
//! turn that attaches the same files in another order still posts each once.

use baton_contract::{Adapter, MessageId, OutboundFile};
use bytes::Bytes;

use super::attempt::{DeliveryFailed, Target, Undelivered, with_retry};
use crate::pen::Pen;
use crate::store::{Artifact, SendStart, StoreError};
use crate::timing::now_ms;

/// Upload every file attached to the run, in the order attached, to `target`.
/// `posted` is how many text posts came before (for the error's count). Returns the platform
/// ids of the files' posts.
pub(super) async fn post_files(
    adapter: &dyn Adapter,
    target: &Target,
    pen: &Pen,
    posted: usize,
) -> Result<Vec<MessageId>, DeliveryFailed> {
    let failed =
        |n: usize, total: usize, file: Option<&Artifact>, cause: Undelivered| DeliveryFailed {
            chunk: posted + n,
            total: posted + total,
            file: file.map(|f| f.name.clone()),
            cause,
        };
    let files = pen
        .reply_files()
        .await
        .map_err(|err| failed(0, 1, None, err.into()))?;
    let total = files.len();
    let mut ids = Vec::with_capacity(total);
    for (n, file) in files.iter().enumerate() {
        let id = post_file(adapter, target, pen, file)
            .await
            .map_err(|cause| failed(n, total, Some(file), cause))?;
        ids.push(id);
    }
    Ok(ids)
}

/// Upload one attached artifact once (see the module doc for the key and the record).
async fn post_file(
    adapter: &dyn Adapter,
    target: &Target,
    pen: &Pen,
    file: &Artifact,
) -> Result<MessageId, Undelivered> {
    let key = format!("{}#file:{}", pen.run_id(), file.id);
    let store = pen.store();
    match store.send_begin(&key, now_ms()).await? {
        SendStart::Go => {}
        SendStart::Delivered(id) => return Ok(MessageId(id)),
        SendStart::Interrupted => return Err(Undelivered::Interrupted),
    }
    let Some((_, content)) = store.artifact_content(&file.id).await? else {
        return Err(Undelivered::Store(StoreError::Internal(format!(
            "the artifact {} was removed before it was posted",
            file.id
        ))));
    };
    let upload = OutboundFile {
        chat: target.chat.clone(),
        thread: target.thread.clone(),
        reply_to: target.reply_to.clone(),
        artifact: file.id.clone(),
        name: file.name.clone(),
        media_type: file.media_type.clone(),
        content: Bytes::from(content),
        idempotency_key: key,
    };
    let sent = with_retry(|| adapter.upload(&upload)).await?;
    pen.delivered_file(file, sent.message_id.as_str(), &upload.idempotency_key)
        .await;
    Ok(sent.message_id)
}
