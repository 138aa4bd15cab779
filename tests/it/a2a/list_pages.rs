//! `ListTasks` a page at a time (SPEC 14), read by the official SDK client: a small page size
//! across several tasks lists every task exactly once, newest first, and a page token that is
//! not one is refused saying what to do.

use serde_json::{Value, json};

use super::{A2A_ON, listed, sdk};
use crate::support::fake_openai::FakeOpenAi;
use crate::support::gateway::{TestGateway, config_text, temp_db};

#[tokio::test]
async fn the_sdk_pages_through_every_task_once_newest_first() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha"], A2A_ON), &db).await;
    let rpc = |method: &'static str, params: Value| {
        super::rpc(&gw.http, &gw.base, "alpha", method, params)
    };
    let mut sent = Vec::new();
    for n in 0..5 {
        let message = json!({"message": {"messageId": format!("m-{n}"), "role": "ROLE_USER",
                                         "parts": [{"text": format!("job {n}")}]}});
        let answered = rpc("SendMessage", message).await;
        let id = answered["result"]["task"]["id"].as_str();
        sent.push(id.expect("a task").to_owned());
    }

    let out = sdk(&gw, "list", "2", "unused").await;
    let pages = out["pages"].as_array().unwrap();
    assert_eq!(pages.len(), 3, "{out}");
    sent.reverse();
    assert_eq!(listed(&out), sent, "every task once, newest first");
    for page in pages {
        assert_eq!(page["totalSize"], 5, "{page}");
        assert_eq!(page["pageSize"], 2, "{page}");
    }
    assert!(
        pages[0]["nextPageToken"]
            .as_str()
            .is_some_and(|t| !t.is_empty())
    );
    assert!(pages[2].get("nextPageToken").is_none_or(|t| t == ""));

    let bad = rpc("ListTasks", json!({"pageToken": "page-2"})).await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    let said = bad["error"]["message"].as_str().unwrap();
    assert!(said.contains("leave pageToken out"), "{said}");
    let clamped = rpc("ListTasks", json!({"pageSize": 1000})).await;
    assert_eq!(clamped["result"]["pageSize"], 100, "{clamped}");
    assert_eq!(clamped["result"]["tasks"].as_array().unwrap().len(), 5);
    gw.stop().await;
}
