//! A message's parts as the bot's turn is given them: text and data parts as its text, a file
//! given by URL as a line naming it, an inline file (`raw`) kept as an artifact of the task's
//! session. Nothing is dropped: a part of no known kind is refused.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::Value;

use super::error::{A2aError, ErrorKind};
use crate::engine::Engine;
use crate::media_type;
use crate::session::SessionKey;
use crate::store::{NewArtifact, Put};
use crate::timing::now_ms;

/// A file part given inline (`raw`, base64): kept as an artifact the bot's turn is handed.
pub(super) struct InlineFile {
    name: String,
    media_type: Option<String>,
    content: Vec<u8>,
}

/// The message's text (its text parts, its data parts as JSON, and a line naming each file
/// given by URL, one per line) and its inline files. Nothing is dropped: a part of none of
/// these kinds, or undecodable bytes, is refused.
pub(super) fn read_message(message: &Value) -> Result<(String, Vec<InlineFile>), A2aError> {
    let parts = message
        .get("parts")
        .and_then(Value::as_array)
        .filter(|p| !p.is_empty())
        .ok_or_else(|| A2aError::invalid("message.parts is empty"))?;
    let mut lines = Vec::with_capacity(parts.len());
    let mut files = Vec::new();
    for part in parts {
        let name = part
            .get("filename")
            .and_then(Value::as_str)
            .unwrap_or("file");
        if let Some(text) = part.get("text").and_then(Value::as_str) {
            lines.push(text.to_owned());
        } else if let Some(data) = part.get("data") {
            lines.push(data.to_string());
        } else if let Some(raw) = part.get("raw").and_then(Value::as_str) {
            let content = BASE64.decode(raw).map_err(|err| {
                A2aError::new(
                    ErrorKind::ContentTypeNotSupported,
                    format!(
                        "file part `{name}`: `raw` is not base64 ({err}); send the bytes \
                     base64-encoded (standard alphabet, with padding)"
                    ),
                )
            })?;
            files.push(InlineFile {
                name: name.to_owned(),
                media_type: part
                    .get("mediaType")
                    .and_then(Value::as_str)
                    .filter(|m| !m.trim().is_empty())
                    .map(str::to_owned),
                content,
            });
        } else if let Some(url) = part.get("url").and_then(Value::as_str) {
            lines.push(format!("File `{name}` at {url}"));
        } else {
            return Err(A2aError::new(
                ErrorKind::ContentTypeNotSupported,
                "a part is neither text, data nor a file (`raw` or `url`)",
            ));
        }
    }
    Ok((lines.join("\n"), files))
}

/// Keep the caller's inline files as artifacts in the task's session, so the bot's turn is
/// handed them as a `sessions_send` with `artifacts` hands them: their ids, in order.
pub(super) async fn keep_files(
    engine: &Engine,
    session: &SessionKey,
    files: Vec<InlineFile>,
) -> Result<Vec<String>, A2aError> {
    let cap = engine.config().artifacts.max_bytes;
    let mut ids = Vec::with_capacity(files.len());
    for file in files {
        let bytes = file.content.len() as u64;
        if bytes > cap {
            return Err(A2aError::new(
                ErrorKind::ContentTypeNotSupported,
                format!(
                    "file part `{}` is {bytes} bytes, over this agent's limit of {cap} bytes; \
                     send a smaller file or give it by `url`",
                    file.name
                ),
            ));
        }
        let media_type = file.media_type.unwrap_or_else(|| {
            media_type::guess(&file.name, "application/octet-stream").to_owned()
        });
        let new = NewArtifact {
            name: file.name,
            media_type,
            content: file.content,
            bot: session.bot.clone(),
            session: session.clone(),
            run_id: None,
            inputs: Vec::new(),
            created_ms: now_ms(),
        };
        match engine.store().artifact_put(new).await {
            Ok(Put::Stored(artifact)) => ids.push(artifact.id),
            Ok(Put::UnknownInputs(_)) => {
                return Err(A2aError::internal(
                    "a file part named inputs it cannot have",
                ));
            }
            Err(err) => return Err(A2aError::internal(err)),
        }
    }
    Ok(ids)
}
