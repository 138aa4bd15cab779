//! `artifact_put`, `artifact_get`, `artifacts_list`: files bots hand each other by id instead of
//! pasting them into messages. The store keeps them ([`crate::store::Store::artifact_put`]);
//! here the arguments are checked, the size cap applied and the content shaped for a model.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{AgentTools, ToolName, args, error, sessions};
use crate::media_type;
use crate::store::{Artifact, ArtifactQuery, NewArtifact, Put, content_path};
use crate::timing::now_ms;

/// The most content `artifact_get` puts in a tool result; a larger artifact comes as a URL.
/// A model's context is the limit here, not the store's cap.
pub(crate) const INLINE_BYTES: u64 = 64 * 1024;

/// The most artifacts `artifacts_list` returns.
const LIST_LIMIT: usize = 200;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PutArgs {
    name: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    base64: Option<String>,
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    inputs: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GetArgs {
    id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    #[serde(default)]
    session: Option<String>,
    #[serde(default)]
    run_id: Option<String>,
}

/// Keep the content as an artifact made by the caller's run.
pub(super) async fn put(tools: &AgentTools, raw: Value) -> Value {
    let a: PutArgs = match args(ToolName::ArtifactPut, raw) {
        Ok(a) => a,
        Err(result) => return result,
    };
    let name = a.name.trim();
    if name.is_empty() {
        return error("`name` is empty; give the artifact a file name such as report.json");
    }
    let (content, fallback) = match (a.text, a.base64) {
        (Some(text), None) => (text.into_bytes(), "text/plain"),
        (None, Some(encoded)) => match BASE64.decode(encoded.trim()) {
            Ok(bytes) => (bytes, "application/octet-stream"),
            Err(err) => {
                return error(format!(
                    "`base64` is not valid base64 ({err}); send binary content base64-encoded \
                     (standard alphabet, with padding), or text in `text`"
                ));
            }
        },
        (Some(_), Some(_)) => return error("give the content in `text` or in `base64`, not both"),
        (None, None) => return error("no content: give it in `text` (or `base64` for binary)"),
    };
    let max = tools.engine.config().artifacts.max_bytes;
    let size = content.len() as u64;
    if size > max {
        return json!({
            "status": "refused",
            "reason": "too_large",
            "message": format!(
                "the artifact is {size} bytes, over the limit of {max} bytes ([artifacts] \
                 max_bytes); split it into smaller artifacts or ask the operator to raise \
                 the limit"
            ),
        });
    }
    let media_type = match a.media_type.as_deref().map(str::trim) {
        Some(given) if !given.is_empty() => given.to_owned(),
        _ => media_type::guess(name, fallback).to_owned(),
    };
    let caller = &tools.caller;
    let new = NewArtifact {
        name: name.to_owned(),
        media_type,
        content,
        bot: caller.bot.clone(),
        session: caller.session.clone(),
        run_id: caller.run_id.clone(),
        inputs: a.inputs,
        created_ms: now_ms(),
    };
    match tools.engine.store().artifact_put(new).await {
        Ok(Put::Stored(artifact)) => {
            json!({"status": "ok", "id": artifact.id, "artifact": record(&artifact)})
        }
        Ok(Put::UnknownInputs(unknown)) => error(format!(
            "`inputs` names no artifact: {}; artifacts_list shows the ids there are",
            unknown.join(", ")
        )),
        Err(err) => error(format!("could not keep the artifact: {err}")),
    }
}

/// An artifact's record and its content: text inline, binary as base64, either only up to
/// [`INLINE_BYTES`] (beyond that, the URL to fetch it from).
pub(super) async fn get(tools: &AgentTools, raw: Value) -> Value {
    let a: GetArgs = match args(ToolName::ArtifactGet, raw) {
        Ok(a) => a,
        Err(result) => return result,
    };
    let store = tools.engine.store();
    let id = a.id.trim();
    let artifact = match store.artifact(id).await {
        Ok(Some(artifact)) => artifact,
        Ok(None) => return unknown(id),
        Err(err) => return error(format!("could not read the artifact: {err}")),
    };
    let mut value = json!({"status": "ok", "artifact": record(&artifact)});
    if artifact.bytes > INLINE_BYTES {
        value["url"] = json!(content_path(&artifact.id));
        value["note"] = json!(format!(
            "the content is {} bytes, more than the {INLINE_BYTES} given inline; fetch it \
             from the url on baton's HTTP listener",
            artifact.bytes
        ));
        return value;
    }
    let content = match store.artifact_content(id).await {
        Ok(Some((_, content))) => content,
        Ok(None) => return unknown(id),
        Err(err) => return error(format!("could not read the artifact: {err}")),
    };
    match content_value(&artifact, content) {
        Content::Text(text) => value["text"] = json!(text),
        Content::Base64(encoded) => value["base64"] = json!(encoded),
    }
    value
}

/// The artifacts made in a session (the caller's own by default) or by one run.
pub(super) async fn list(tools: &AgentTools, raw: Value) -> Value {
    let a: ListArgs = match args(ToolName::ArtifactsList, raw) {
        Ok(a) => a,
        Err(result) => return result,
    };
    let query = match (a.session, a.run_id) {
        (Some(_), Some(_)) => return error("give `session` or `run_id`, not both"),
        (None, Some(run)) => ArtifactQuery::Run(run.trim().to_owned()),
        (Some(session), None) => match sessions::resolve(tools, &session) {
            Some(session) => ArtifactQuery::Session(session),
            None => return sessions::unknown(&session),
        },
        (None, None) => ArtifactQuery::Session(tools.caller.session.clone()),
    };
    match tools.engine.store().artifacts(query, LIST_LIMIT).await {
        Ok(found) => {
            let artifacts: Vec<Value> = found.iter().map(record).collect();
            json!({"status": "ok", "artifacts": artifacts})
        }
        Err(err) => error(format!("could not read the artifacts: {err}")),
    }
}

/// An artifact as a tool result shows it.
pub(crate) fn record(a: &Artifact) -> Value {
    json!({
        "id": a.id,
        "name": a.name,
        "media_type": a.media_type,
        "bytes": a.bytes,
        "sha256": a.sha256,
        "bot": a.bot,
        "run_id": a.run_id,
        "inputs": a.inputs,
        "created_ms": a.created_ms,
    })
}

/// An artifact's bytes as a model can be given them.
pub(crate) enum Content {
    /// Text (a text media type, valid UTF-8).
    Text(String),
    /// Anything else, base64-encoded.
    Base64(String),
}

/// `content` as text when the artifact's media type is text and the bytes are UTF-8.
pub(crate) fn content_value(artifact: &Artifact, content: Vec<u8>) -> Content {
    if media_type::is_text(&artifact.media_type) {
        match String::from_utf8(content) {
            Ok(text) => Content::Text(text),
            Err(err) => Content::Base64(BASE64.encode(err.into_bytes())),
        }
    } else {
        Content::Base64(BASE64.encode(content))
    }
}

fn unknown(id: &str) -> Value {
    error(format!(
        "no artifact `{id}`; artifacts_list shows the ones in a session or a run"
    ))
}
