//! Scripting a chain's bots on the fake model: chain ids are random, so tool calls that name the
//! chain read its id from the request they answer (a tool result or the chain's context block).

use serde_json::{Value, json};

use super::fake_openai::Step;

/// The chain id (`ch-` and six characters) somewhere in a request.
pub fn chain_id(request: &Value) -> String {
    let text = request["messages"].to_string();
    let mut from = 0;
    while let Some(at) = text[from..].find("ch-").map(|i| i + from) {
        let id = &text[at..(at + 9).min(text.len())];
        let tail_ok = id.len() == 9 && id[3..].bytes().all(|b| b.is_ascii_alphanumeric());
        let starts_word = at == 0 || !text.as_bytes()[at - 1].is_ascii_alphanumeric();
        if tail_ok && starts_word {
            return id.to_owned();
        }
        from = at + 3;
    }
    panic!("no chain id in {text}")
}

/// A tool call with `args` plus `"chain"`: the chain the request is about.
pub fn on_chain(tool: &str, args: Value) -> Step {
    Step::tool_call_with(tool, move |request| {
        let mut args = args.clone();
        args["chain"] = json!(chain_id(request));
        args
    })
}
