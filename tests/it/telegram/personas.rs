//! Per-chat model and persona: a `[[chats]]` entry gives every bot there another model, and one
//! bot (`bots = { caid = { ... } }`) its own model and system prompt; the transcript records the
//! model each reply came from. Elsewhere the bots are as configured.

use super::*;

#[tokio::test]
async fn a_chat_gives_its_bots_another_model_and_one_bot_another_persona() {
    let dir = tempfile::tempdir().unwrap();
    let prompt = dir.path().join("caid-in-the-group.md");
    std::fs::write(&prompt, "You are caid, terse, in the release room.").unwrap();
    let extra = format!(
        "\n[[chats]]\nplatform = \"telegram\"\nid = \"{GROUP}\"\nmodel = \"big-model\"\n\
         bots = {{ caid = {{ model = \"caid-model\", system_prompt_file = \"{}\" }} }}\n",
        prompt.display()
    );
    let w = world(&extra).await;
    w.model
        .script("big-model", Step::reply("From the big model."));
    w.model
        .script("caid-model", Step::reply("From caid's model."));
    w.model
        .script("snark", Step::reply("From snark's own model."));
    w.say(Some(SNARK.1), "which model?", None);
    w.telegram.wait_for(|t| t.posts().len() == 1).await;
    w.say(Some(CAID.1), "and you?", None);
    w.telegram.wait_for(|t| t.posts().len() == 2).await;
    // In a private chat snark is itself again.
    w.telegram.say(
        HUMAN.0,
        HUMAN,
        "hello",
        Value::Array(vec![]),
        None,
        Some("snark"),
    );
    w.telegram.wait_for(|t| t.posts().len() == 3).await;
    w.settle().await;

    let texts: Vec<String> = w.telegram.posts().into_iter().map(|p| p.text).collect();
    assert_eq!(
        texts,
        [
            "From the big model.",
            "From caid's model.",
            "From snark's own model."
        ]
    );
    let caid = &w.model.requests_for("caid-model")[0];
    assert_eq!(caid["messages"][0]["role"], "system");
    assert_eq!(
        caid["messages"][0]["content"],
        "You are caid, terse, in the release room."
    );
    // The transcript says which model each reply came from.
    let sessions = w.gateway.get("/api/sessions").await;
    let mut models = Vec::new();
    for session in sessions.as_array().unwrap() {
        let key = session["key"].as_str().unwrap();
        for entry in w.gateway.transcript(key).await {
            if entry["kind"] == "reply" {
                models.push((entry["text"].clone(), entry["meta"]["model"].clone()));
            }
        }
    }
    models.sort_by_key(|(text, _)| text.to_string());
    assert_eq!(
        models,
        [
            ("From caid's model.".into(), "caid-model".into()),
            ("From snark's own model.".into(), "snark".into()),
            ("From the big model.".into(), "big-model".into()),
        ]
    );
}

#[tokio::test]
async fn a_chat_gives_a_bot_another_backend_with_its_own_settings_for_it() {
    // The bots run on the model; in Ada's private chat, on their `command` agent.
    let agent = "command = [\"sh\", \"-c\", \"cat >/dev/null; echo From the agent.\"]";
    let extra = format!(
        "\n[[chats]]\nplatform = \"telegram\"\nid = \"{}\"\nbackend = \"command\"\n",
        HUMAN.0
    );
    let w = world_in("polling", agent, &extra).await;
    w.model
        .script("snark", Step::reply("From snark's own model."));
    w.say(Some(SNARK.1), "which backend?", None);
    w.telegram.wait_for(|t| t.posts().len() == 1).await;
    w.telegram.say(
        HUMAN.0,
        HUMAN,
        "and here?",
        Value::Array(vec![]),
        None,
        Some("snark"),
    );
    w.telegram.wait_for(|t| t.posts().len() == 2).await;
    w.settle().await;

    let posts: Vec<(i64, String)> = w
        .telegram
        .posts()
        .into_iter()
        .map(|p| (p.chat, p.text))
        .collect();
    assert_eq!(
        posts,
        [
            (GROUP, "From snark's own model.".to_owned()),
            (HUMAN.0, "From the agent.".to_owned())
        ]
    );
    assert_eq!(
        w.model.requests_for("snark").len(),
        1,
        "the agent's turn asks no model"
    );
    // The transcript says which backend each reply came from.
    let sessions = w.gateway.get("/api/sessions").await;
    let mut backends = Vec::new();
    for session in sessions.as_array().unwrap() {
        let key = session["key"].as_str().unwrap();
        for entry in w.gateway.transcript(key).await {
            if entry["kind"] == "reply" {
                backends.push((entry["text"].clone(), entry["meta"]["backend"].clone()));
            }
        }
    }
    backends.sort_by_key(|(text, _)| text.to_string());
    assert_eq!(
        backends,
        [
            ("From snark's own model.".into(), "openai".into()),
            ("From the agent.".into(), "command".into()),
        ]
    );
}
