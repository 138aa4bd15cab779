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

#[cfg(test)]
mod tests {
    use super::super::testing::{error_of, in_room, refused};
    use super::*;
    use crate::gateway::testing::{echo_config, parts};

    /// `alpha`'s tools in its turn `run-1`, with `extra` config.
    async fn alpha(extra: &str) -> AgentTools {
        in_room(
            &parts(&echo_config(&["alpha", "beta"], extra)).await.relay,
            "alpha",
            Some("run-1"),
        )
    }

    async fn kept(tools: &AgentTools, args: Value) -> String {
        let result = put(tools, args).await;
        assert_eq!(result["status"], "ok", "{result}");
        result["id"].as_str().unwrap().to_owned()
    }

    #[tokio::test]
    async fn put_takes_a_name_and_its_content_in_text_or_base64() {
        let tools = alpha("").await;
        let cases = [
            (json!({"name": " ", "text": "x"}), "`name` is empty"),
            (json!({"name": "a.txt"}), "no content"),
            (
                json!({"name": "a.txt", "text": "x", "base64": "eA=="}),
                "not both",
            ),
            (
                json!({"name": "a.bin", "base64": "not base64!"}),
                "not valid base64",
            ),
            (
                json!({"name": "a.txt", "text": "x", "path": "/etc"}),
                "unknown field",
            ),
            (
                json!({"name": "a.txt", "text": "x", "inputs": ["art-nope"]}),
                "art-nope",
            ),
        ];
        for (args, says) in cases {
            let result = put(&tools, args.clone()).await;
            assert!(error_of(&result).contains(says), "{args}: {result}");
        }
    }

    #[tokio::test]
    async fn an_artifact_over_the_cap_is_refused_with_the_limit() {
        let tools = alpha("\n[artifacts]\nmax_bytes = 4\n").await;
        let result = put(&tools, json!({"name": "a.txt", "text": "12345"})).await;
        assert_eq!(refused(&result), "too_large");
        let message = result["message"].as_str().unwrap();
        assert!(
            message.contains("5 bytes, over the limit of 4 bytes"),
            "{message}"
        );
        assert!(
            kept(&tools, json!({"name": "a.txt", "text": "1234"}))
                .await
                .starts_with("art-")
        );
    }

    /// Text comes back as text and anything else as base64; the record says who made it, in
    /// which run, from what, and a media type guessed from the name unless given.
    #[tokio::test]
    async fn what_is_put_is_got_back_with_its_record() {
        let tools = alpha("").await;
        let notes = kept(&tools, json!({"name": "notes.md", "text": "# hi"})).await;
        let blob = kept(
            &tools,
            json!({"name": "x.bin", "base64": "AJ+Slg==", "inputs": [notes]}),
        )
        .await;
        let bad_text = kept(
            &tools,
            json!({"name": "y.txt", "base64": "AJ+Slg==", "media_type": "text/plain"}),
        )
        .await;

        let got = get(&tools, json!({"id": notes})).await;
        assert_eq!(got["text"], "# hi", "{got}");
        let record = &got["artifact"];
        assert_eq!(record["media_type"], "text/markdown");
        assert_eq!(
            (&record["bot"], &record["run_id"]),
            (&json!("alpha"), &json!("run-1"))
        );
        let got = get(&tools, json!({"id": blob})).await;
        assert_eq!(got["base64"], "AJ+Slg==", "{got}");
        assert_eq!(got["artifact"]["media_type"], "application/octet-stream");
        assert_eq!(got["artifact"]["inputs"], json!([notes]));
        let got = get(&tools, json!({"id": bad_text})).await;
        assert_eq!(got["base64"], "AJ+Slg==", "bytes that are not UTF-8: {got}");
        let unknown = get(&tools, json!({"id": "art-nope"})).await;
        assert!(error_of(&unknown).contains("no artifact `art-nope`"));
    }

    /// A model's context is the limit: past it the content is a URL, not the result.
    #[tokio::test]
    async fn a_large_artifact_comes_as_a_url() {
        let tools = alpha("").await;
        let text = "x".repeat(usize::try_from(INLINE_BYTES).unwrap() + 1);
        let id = kept(&tools, json!({"name": "big.txt", "text": text})).await;
        let got = get(&tools, json!({"id": id})).await;
        assert_eq!(got["url"], json!(content_path(&id)), "{got}");
        assert!(got.get("text").is_none() && got.get("base64").is_none());
    }

    #[tokio::test]
    async fn list_shows_the_callers_session_by_default_or_a_session_or_a_run() {
        let gw = parts(&echo_config(&["alpha", "beta"], "")).await;
        let tools = in_room(&gw.relay, "alpha", Some("run-1"));
        let id = kept(&tools, json!({"name": "a.txt", "text": "x"})).await;
        let ids = |result: Value| -> Vec<String> {
            assert_eq!(result["status"], "ok", "{result}");
            let found = result["artifacts"].as_array().unwrap();
            found
                .iter()
                .map(|a| a["id"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(ids(list(&tools, json!({})).await), [id.as_str()]);
        assert_eq!(
            ids(list(&tools, json!({"run_id": "run-1"})).await),
            [id.as_str()]
        );
        assert_eq!(
            ids(list(&tools, json!({"run_id": "run-2"})).await),
            [] as [String; 0]
        );
        let session = "bot:alpha:local:alpha:room";
        assert_eq!(ids(list(&tools, json!({"session": session})).await), [id]);
        let betas = in_room(&gw.relay, "beta", None);
        assert_eq!(ids(list(&betas, json!({})).await), [] as [String; 0]);

        let both = list(&tools, json!({"session": session, "run_id": "run-1"})).await;
        assert!(error_of(&both).contains("not both"));
        let neither = list(&tools, json!({"session": "no such thing"})).await;
        assert!(error_of(&neither).contains("neither a session key"));
    }
}
