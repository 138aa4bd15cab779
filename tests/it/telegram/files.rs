//! Files both ways: a document a person posts is fetched with `getFile` and read into the
//! mentioned bot's turn; the files a bot attaches to its reply reach the chat as a
//! `sendDocument` and a `sendPhoto`, each once, with their names and exact bytes, quoting the
//! message answered, even when the first of them is answered 429.

use base64::Engine as _;
use serde_json::json;

use crate::support::fake_telegram::mention;
use crate::support::uploads::Upload;

use super::*;

const CSV: &str = "name,price\nacme,10\n";
/// A 1×1 PNG.
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

#[tokio::test]
async fn a_document_a_person_posts_reaches_the_bots_turn() {
    let w = world("").await;
    w.model.script("snark", Step::reply("Five it is."));
    let caption = format!("@{} what does this say?", SNARK.1);
    let asked = w.telegram.say_document(
        GROUP,
        HUMAN,
        &caption,
        Value::Array(vec![mention(0, SNARK.1)]),
        ("notes.txt", "text/plain", b"deploy at five, not six"),
    );
    w.telegram.wait_for(|t| t.posts().len() == 1).await;
    w.settle().await;

    let request = w.model.requests_for("snark")[0].to_string();
    assert!(request.contains("what does this say?"), "{request}");
    assert!(
        request.contains("`notes.txt` (text/plain, 23 bytes, posted by"),
        "{request}"
    );
    assert!(
        request.contains("deploy at five, not six\\n(end of art-"),
        "the file's text is given inline: {request}"
    );
    let posts = w.telegram.posts();
    assert_eq!(posts.len(), 1, "only snark was mentioned: {posts:?}");
    assert_eq!(posts[0].quotes, Some(asked));
}

#[tokio::test]
async fn a_bots_attached_files_arrive_once_with_their_names_and_bytes() {
    let w = world_in(
        "polling",
        "tools = [\"artifact_put\", \"reply_attach\"]",
        "",
    )
    .await;
    w.model.script(
        "snark",
        Step::tool_call("artifact_put", json!({"name": "report.csv", "text": CSV})),
    );
    w.model.script(
        "snark",
        Step::tool_call(
            "artifact_put",
            json!({"name": "chart.png", "base64": PNG_B64}),
        ),
    );
    w.model.script(
        "snark",
        Step::tool_call_with("reply_attach", |request| json!({"ids": put_ids(request)})),
    );
    w.model
        .script("snark", Step::reply("The report and its chart."));
    w.telegram.rate_limit_posts(1, 1);
    let asked = w.say(Some(SNARK.1), "the report please", None);
    w.telegram
        .wait_for(|t| t.uploads().len() == 2 && t.posts().len() == 1)
        .await;
    w.settle().await;

    let png = base64::engine::general_purpose::STANDARD
        .decode(PNG_B64)
        .unwrap();
    let mut uploads = w.telegram.uploads();
    uploads.sort_by(|a, b| a.name.cmp(&b.name));
    let upload = |name: &str, bytes: Vec<u8>, kind: &str| Upload {
        channel: GROUP.to_string(),
        thread: Some(asked.to_string()),
        name: name.into(),
        bytes,
        kind: kind.into(),
    };
    assert_eq!(
        uploads,
        [
            upload("chart.png", png, "photo"),
            upload("report.csv", CSV.as_bytes().to_vec(), "document"),
        ],
        "each file once, quoting the message answered"
    );
    let posts = w.telegram.posts();
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0].text, "The report and its chart.");
    assert_eq!(posts[0].quotes, Some(asked));
    let calls = w.telegram.upload_calls() + w.telegram.all_posts().len();
    assert_eq!(
        calls, 4,
        "two files and a text, the one refused with 429 retried once"
    );
}

/// The ids in every `artifact_put` result the request carries, oldest first.
fn put_ids(request: &Value) -> Value {
    let lines = request["messages"].as_array().unwrap();
    let ids = lines
        .iter()
        .filter(|l| l["role"] == "tool")
        .filter_map(|l| {
            let parsed: Value = serde_json::from_str(l["content"].as_str()?).ok()?;
            Some(parsed.get("id")?.clone())
        });
    Value::Array(ids.collect())
}
