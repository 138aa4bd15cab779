//! Turn-level helpers shared by the backend tests: a canonical turn, a recording tool executor,
//! and loopback servers (a tiny axum app, or a port with nothing listening).

use std::sync::Mutex;

use async_trait::async_trait;
use axum::Router;
use baton::backend::{
    ChatLine, Role, TURN_SCHEMA_VERSION, ToolCall, ToolExecutor, Trigger, TriggerOrigin, TurnChat,
    TurnRequest, session_id,
};
use serde_json::Value;

/// A tool executor that records every call and answers with a fixed result.
pub struct RecordingTools {
    calls: Mutex<Vec<ToolCall>>,
    result: Value,
}

impl RecordingTools {
    pub fn answering(result: Value) -> Self {
        Self {
            calls: Mutex::new(Vec::new()),
            result,
        }
    }

    pub fn calls(&self) -> Vec<ToolCall> {
        self.calls.lock().unwrap().clone()
    }
}

#[async_trait]
impl ToolExecutor for RecordingTools {
    async fn call(&self, call: &ToolCall) -> Value {
        self.calls.lock().unwrap().push(call.clone());
        self.result.clone()
    }
}

pub fn turn(model: &str, text: &str) -> TurnRequest {
    let session = "bot:snark:local:snark:c1";
    TurnRequest {
        version: TURN_SCHEMA_VERSION,
        bot: "snark".parse().unwrap(),
        model: model.into(),
        messages: vec![
            ChatLine::new(Role::System, "You are Snark."),
            ChatLine::new(Role::User, text),
        ],
        tools: Vec::new().into(),
        session: session.into(),
        session_id: session_id(session, 0),
        chat: TurnChat {
            platform: "local".into(),
            account: "snark".into(),
            id: "c1".into(),
            thread: None,
        },
        trigger: Trigger {
            origin: TriggerOrigin::Human,
            from: "alice".into(),
            message_id: Some("m1".into()),
        },
        access: None,
        files: Vec::new(),
    }
}

/// A loopback port with nothing listening on it.
pub async fn closed_port_url() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

/// Serves `app` on 127.0.0.1:0 in the background; returns its base URL.
pub async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}
