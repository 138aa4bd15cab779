//! The fake Discord's gateway websocket: HELLO, IDENTIFY/READY, RESUME with replay,
//! heartbeats, and the dispatches each bot's session logs.

use super::*;

pub(super) async fn socket(
    State(inner): State<Arc<Mutex<Inner>>>,
    upgrade: WebSocketUpgrade,
) -> Response {
    upgrade.on_upgrade(move |ws| serve_socket(inner, ws))
}

/// One gateway connection: HELLO, then IDENTIFY or RESUME, then dispatches and heartbeats.
pub(super) async fn serve_socket(inner: Arc<Mutex<Inner>>, mut ws: WebSocket) {
    let hello =
        json!({ "op": 10, "d": { "heartbeat_interval": HEARTBEAT_MS }, "s": null, "t": null });
    if ws
        .send(Message::Text(hello.to_string().into()))
        .await
        .is_err()
    {
        return;
    }
    let (tx, mut rx) = mpsc::unbounded_channel::<Outgoing>();
    // Set once the socket has identified or resumed: (user id, session generation).
    let mut owner: Option<(String, u64)> = None;
    // This socket's span, from its first IDENTIFY or RESUME.
    let mut span = None;
    loop {
        tokio::select! {
            out = rx.recv() => {
                match out {
                    Some(Outgoing::Frame(text)) => {
                        if ws.send(Message::Text(text.into())).await.is_err() {
                            break;
                        }
                    }
                    Some(Outgoing::Close(code)) => {
                        let _ = ws.send(Message::Close(Some(CloseFrame { code, reason: "".into() }))).await;
                        break;
                    }
                    None => break,
                }
            }
            incoming = ws.recv() => {
                let text = match incoming {
                    Some(Ok(Message::Text(text))) => text,
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                    Some(Ok(_)) => continue,
                };
                let Ok(frame) = serde_json::from_str::<Value>(text.as_str()) else { continue };
                match frame["op"].as_u64() {
                    Some(1) => {
                        inner.lock().unwrap().heartbeats += 1;
                        let ack = json!({ "op": 11 }).to_string();
                        if ws.send(Message::Text(ack.into())).await.is_err() {
                            break;
                        }
                    }
                    Some(2) => match identify(&inner, &frame["d"], &tx) {
                        Some(who) => owner = Some(opened(&inner, who, &mut span)),
                        None => {
                            let _ = ws.send(Message::Close(Some(CloseFrame { code: 4004, reason: "Authentication failed.".into() }))).await;
                            break;
                        }
                    },
                    Some(6) => match resume(&inner, &frame["d"], &tx) {
                        Some(who) => owner = Some(opened(&inner, who, &mut span)),
                        None => {
                            let nine = json!({ "op": 9, "d": false }).to_string();
                            let _ = ws.send(Message::Text(nine.into())).await;
                        }
                    },
                    _ => {}
                }
            }
        }
    }
    if let Some(span) = span {
        inner.lock().unwrap().spans.close(span);
    }
    // Only the socket that still owns the session detaches it (a newer one may have taken over).
    if let Some((user, generation)) = owner {
        let mut inner = inner.lock().unwrap();
        if let Some(session) = inner.sessions.get_mut(&user)
            && session.generation == generation
        {
            session.socket = None;
        }
    }
}

/// `who` (user id, generation) identified or resumed on a socket: its span opens, unless it
/// already has (`span`).
fn opened(inner: &Mutex<Inner>, who: (String, u64), span: &mut Option<SpanId>) -> (String, u64) {
    if span.is_none() {
        *span = Some(inner.lock().unwrap().spans.open(&who.0));
    }
    who
}

pub(super) fn identify(
    inner: &Arc<Mutex<Inner>>,
    d: &Value,
    tx: &mpsc::UnboundedSender<Outgoing>,
) -> Option<(String, u64)> {
    let token = d["token"].as_str()?;
    let token = token.strip_prefix("Bot ").unwrap_or(token);
    let mut inner = inner.lock().unwrap();
    let bot = inner.bots.get(token)?.clone();
    *inner.identifies.entry(bot.user_id.clone()).or_default() += 1;
    let base = inner.base.replacen("http://", "ws://", 1);
    let session = inner.sessions.entry(bot.user_id.clone()).or_default();
    session.generation += 1;
    session.id = format!("session-{}-{}", bot.user_id, session.generation);
    session.seq = 0;
    session.log.clear();
    session.socket = Some(tx.clone());
    let generation = session.generation;
    let mut ready = fixture("gw_dispatch_ready")["d"].clone();
    ready["user"] = user(&bot.user_id, &bot.name, true);
    ready["user"]["verified"] = true.into();
    ready["user"]["mfa_enabled"] = false.into();
    ready["user"]["flags"] = 0.into();
    ready["guilds"] = json!([{ "id": GUILD, "unavailable": true }]);
    ready["session_id"] = session.id.clone().into();
    ready["resume_gateway_url"] = format!("{base}/gateway").into();
    ready["application"]["id"] = bot.user_id.clone().into();
    inner.dispatch(&bot.user_id, "READY", &ready);
    Some((bot.user_id, generation))
}

pub(super) fn resume(
    inner: &Arc<Mutex<Inner>>,
    d: &Value,
    tx: &mpsc::UnboundedSender<Outgoing>,
) -> Option<(String, u64)> {
    let token = d["token"].as_str()?;
    let token = token.strip_prefix("Bot ").unwrap_or(token);
    let seq = d["seq"].as_u64().unwrap_or(0);
    let mut inner = inner.lock().unwrap();
    let bot = inner.bots.get(token)?.clone();
    let session = inner.sessions.get_mut(&bot.user_id)?;
    if session.id.is_empty() || d["session_id"].as_str() != Some(session.id.as_str()) {
        return None;
    }
    session.socket = Some(tx.clone());
    session.generation += 1;
    for (s, frame) in &session.log {
        if *s > seq {
            let _ = tx.send(Outgoing::Frame(frame.clone()));
        }
    }
    let generation = session.generation;
    *inner.resumes.entry(bot.user_id.clone()).or_default() += 1;
    inner.dispatch(&bot.user_id, "RESUMED", &json!({ "_trace": ["fake"] }));
    Some((bot.user_id, generation))
}
