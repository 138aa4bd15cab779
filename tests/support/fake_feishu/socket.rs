//! The fake Feishu's long connection: the endpoint call and the binary pbbp2 websocket, with
//! events pushed whole or in fragments.

use super::*;

/// [`FakeFeishu::push_fragments`], inside the lock.
pub(super) fn push(inner: &mut Inner, name: &str, event: &Value, parts: usize) -> String {
    if let (Some(id), Some(chat)) = (
        event
            .pointer("/event/message/message_id")
            .and_then(Value::as_str),
        event
            .pointer("/event/message/chat_id")
            .and_then(Value::as_str),
    ) {
        inner.chats.insert(id.to_owned(), chat.to_owned());
        if event
            .pointer("/event/message/chat_type")
            .and_then(Value::as_str)
            == Some("p2p")
        {
            inner.p2p.insert(chat.to_owned(), name.to_owned());
        }
    }
    let payload = event.to_string().into_bytes();
    inner.next += 1;
    let frame_id = format!("frame-{}", inner.next);
    let size = payload.len().div_ceil(parts);
    let chunks: Vec<&[u8]> = payload.chunks(size).collect();
    let sum = chunks.len();
    let (_, tx) = inner
        .sockets
        .get(name)
        .expect("app has a websocket")
        .clone();
    for (seq, chunk) in chunks.iter().enumerate().rev() {
        inner.next += 1;
        let frame = Frame {
            seq_id: inner.next,
            log_id: 1000 + inner.next,
            service: SERVICE,
            method: METHOD_DATA,
            headers: vec![
                header("type", "event"),
                header("message_id", &frame_id),
                header("sum", &sum.to_string()),
                header("seq", &seq.to_string()),
                header("trace_id", "trace"),
            ],
            payload_encoding: None,
            payload_type: None,
            payload: Some(chunk.to_vec()),
            log_id_new: None,
        };
        tx.send(Ctl::Frame(frame.to_bytes()))
            .expect("websocket open");
    }
    frame_id
}

pub(super) async fn endpoint(State(inner): Shared, Json(body): Json<Value>) -> Json<Value> {
    let mut inner = inner.lock().unwrap();
    let app_id = body["AppID"].as_str().unwrap_or("");
    let Some(app) = inner.apps.get(app_id) else {
        return Json(json!({ "code": 514, "msg": "auth failed" }));
    };
    if body["AppSecret"].as_str() != Some(&format!("secret-{}", app.name)) {
        return Json(json!({ "code": 514, "msg": "auth failed" }));
    }
    let (name, interval) = (app.name.clone(), app.ping_interval);
    *inner.endpoint_calls.entry(name.clone()).or_default() += 1;
    let ws = inner.base.replacen("http://", "ws://", 1);
    Json(json!({ "code": 0, "msg": "ok", "data": {
        "URL": format!("{ws}/ws/{name}?device_id=d1&service_id={SERVICE}"),
        "ClientConfig": { "PingInterval": interval, "ReconnectCount": -1,
                          "ReconnectInterval": 120, "ReconnectNonce": 30 } } }))
}

pub(super) async fn socket(
    State(inner): Shared,
    Path(app): Path<String>,
    upgrade: WebSocketUpgrade,
) -> Response {
    upgrade.on_upgrade(move |ws| serve_socket(inner, app, ws))
}

pub(super) async fn serve_socket(inner: Arc<Mutex<Inner>>, app: String, mut ws: WebSocket) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Ctl>();
    let (number, span) = {
        let mut inner = inner.lock().unwrap();
        inner.muted.remove(&app);
        let n = {
            let connects = inner.connects.entry(app.clone()).or_default();
            *connects += 1;
            *connects
        };
        inner.sockets.insert(app.clone(), (n, tx));
        (n, inner.spans.open(&app))
    };
    let forget = |inner: &Arc<Mutex<Inner>>| {
        let mut inner = inner.lock().unwrap();
        inner.spans.close(span);
        if inner.sockets.get(&app).is_some_and(|(n, _)| *n == number) {
            inner.sockets.remove(&app);
        }
    };
    loop {
        tokio::select! {
            ctl = rx.recv() => match ctl {
                Some(Ctl::Frame(bytes)) => {
                    if ws.send(Message::Binary(bytes.into())).await.is_err() {
                        forget(&inner);
                        return;
                    }
                }
                Some(Ctl::Drop) | None => {
                    let _ = ws.send(Message::Close(None)).await;
                    forget(&inner);
                    return;
                }
            },
            incoming = ws.recv() => {
                let bytes = match incoming {
                    Some(Ok(Message::Binary(bytes))) => bytes,
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => {
                        forget(&inner);
                        return;
                    }
                    Some(Ok(_)) => continue,
                };
                let frame = Frame::from_bytes(&bytes).expect("the client sends pbbp2 frames");
                assert_eq!(frame.service, SERVICE, "frames carry the URL's service_id");
                let pong = {
                    let mut guard = inner.lock().unwrap();
                    if guard.muted.contains(&app) {
                        continue;
                    }
                    match (frame.method, frame.kind()) {
                        (METHOD_CONTROL, "ping") => {
                            guard.pings.push((app.clone(), Instant::now()));
                            let interval = guard.apps.values().find(|a| a.name == app).unwrap().ping_interval;
                            let mut pong = Frame::ping(SERVICE);
                            pong.headers = vec![header("type", "pong")];
                            pong.payload = Some(json!({ "PingInterval": interval }).to_string().into_bytes());
                            Some(pong)
                        }
                        (METHOD_DATA, _) => {
                            let payload: Value = serde_json::from_slice(frame.payload.as_deref().unwrap_or(b"{}")).unwrap_or(Value::Null);
                            guard.acks.push(Ack {
                                app: app.clone(),
                                message_id: frame.header("message_id").unwrap_or("").to_owned(),
                                code: payload["code"].as_i64().unwrap_or(0),
                                seq_id: frame.seq_id,
                                biz_rt: frame.header("biz_rt").is_some(),
                            });
                            None
                        }
                        _ => None,
                    }
                };
                if let Some(pong) = pong
                    && ws.send(Message::Binary(pong.to_bytes().into())).await.is_err()
                {
                    forget(&inner);
                    return;
                }
            }
        }
    }
}
