//! The fake Feishu's CardKit: card entities created from Card JSON 2.0, a card posted as an
//! `interactive` message (`{"type":"card","data":{"card_id":…}}`) and found again from that
//! message (`id_convert`), its elements' text replaced
//! in place while the card is in streaming mode, and its settings patched. Every update must
//! carry a `sequence` above the card's last one, as Feishu requires. What a posted card shows
//! goes to the timeline as edits of its message (they are not message edits: no cap).

use super::api::authorised;
use super::*;

/// One card entity.
#[derive(Debug, Clone, Default)]
pub(super) struct Card {
    /// element id -> its text
    elements: Vec<(String, String)>,
    streaming: bool,
    sequence: u64,
    /// The message showing it, once posted.
    message: Option<String>,
}

impl Card {
    fn text(&self) -> String {
        self.elements
            .iter()
            .map(|(_, t)| t.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn error(code: i64, msg: &str) -> Response {
    Json(json!({ "code": code, "msg": msg })).into_response()
}

/// `POST /open-apis/cardkit/v1/cards`.
pub(super) async fn create_card(
    State(inner): Shared,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let mut inner = inner.lock().unwrap();
    if let Err(refused) = authorised(&inner, &headers) {
        return refused.into_response();
    }
    if inner.no_cards {
        return error(
            99991672,
            "Access denied. One of the following scopes is required: [cardkit:card:write]",
        );
    }
    let card: Value = match (body["type"].as_str(), body["data"].as_str()) {
        (Some("card_json"), Some(data)) => serde_json::from_str(data).unwrap_or(Value::Null),
        _ => return error(99992402, "field validation failed: type, data"),
    };
    if card["schema"] != "2.0" {
        return error(200860, "card schema must be 2.0 for a card entity");
    }
    let elements = card["body"]["elements"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            Some((
                e["element_id"].as_str()?.to_owned(),
                e["content"].as_str().unwrap_or("").to_owned(),
            ))
        })
        .collect();
    inner.next += 1;
    let id = format!("card_{}", inner.next);
    inner.cards.insert(
        id.clone(),
        Card {
            elements,
            streaming: card["config"]["streaming_mode"] == true,
            ..Card::default()
        },
    );
    Json(json!({ "code": 0, "msg": "success", "data": { "card_id": id } })).into_response()
}

/// `POST /open-apis/cardkit/v1/cards/id_convert`: the card an `interactive` message shows.
pub(super) async fn id_convert(
    State(inner): Shared,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let inner = inner.lock().unwrap();
    if let Err(refused) = authorised(&inner, &headers) {
        return refused.into_response();
    }
    let Some(message) = body["message_id"].as_str() else {
        return error(99992402, "field validation failed: message_id");
    };
    let card = inner
        .cards
        .iter()
        .find(|(_, card)| card.message.as_deref() == Some(message));
    match card {
        Some((id, _)) => {
            Json(json!({ "code": 0, "msg": "success", "data": { "card_id": id } })).into_response()
        }
        None => error(300301, "card not found"),
    }
}

/// Take one update of card `id` with `sequence`: the card, or Feishu's refusal (code, msg).
fn sequenced<'a>(
    inner: &'a mut Inner,
    id: &str,
    sequence: Option<u64>,
) -> Result<&'a mut Card, (i64, &'static str)> {
    let Some(card) = inner.cards.get_mut(id) else {
        return Err((300301, "card not found"));
    };
    match sequence {
        Some(n) if n > card.sequence => {
            card.sequence = n;
            Ok(card)
        }
        _ => Err((300317, "sequence number compare failed")),
    }
}

/// `PUT /open-apis/cardkit/v1/cards/<card>/elements/<element>/content`.
pub(super) async fn card_text(
    State(inner): Shared,
    Path((id, element)): Path<(String, String)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let mut guard = inner.lock().unwrap();
    let inner = &mut *guard;
    if let Err(refused) = authorised(inner, &headers) {
        return refused.into_response();
    }
    let card = match sequenced(inner, &id, body["sequence"].as_u64()) {
        Ok(card) => card,
        Err((code, msg)) => return error(code, msg),
    };
    if !card.streaming {
        return error(300309, "streaming mode is closed");
    }
    let Some(slot) = card.elements.iter_mut().find(|(e, _)| *e == element) else {
        return error(300302, "element not found");
    };
    slot.1 = body["content"].as_str().unwrap_or("").to_owned();
    let (message, text) = (card.message.clone(), card.text());
    if let Some(message) = message {
        inner.card_updates += 1;
        inner.seen.push(Seen::Edit { id: message, text });
    }
    Json(json!({ "code": 0, "msg": "success", "data": {} })).into_response()
}

/// `PATCH /open-apis/cardkit/v1/cards/<card>/settings`.
pub(super) async fn card_settings(
    State(inner): Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let mut inner = inner.lock().unwrap();
    if let Err(refused) = authorised(&inner, &headers) {
        return refused.into_response();
    }
    let settings: Value =
        serde_json::from_str(body["settings"].as_str().unwrap_or("")).unwrap_or(Value::Null);
    let card = match sequenced(&mut inner, &id, body["sequence"].as_u64()) {
        Ok(card) => card,
        Err((code, msg)) => return error(code, msg),
    };
    if let Some(streaming) = settings["config"]["streaming_mode"].as_bool() {
        card.streaming = streaming;
    }
    Json(json!({ "code": 0, "msg": "success", "data": {} })).into_response()
}

/// The card an `interactive` message's content shows, if it names a known one.
pub(super) fn shown_card(inner: &Inner, content: &Value) -> Option<String> {
    let id = content["data"]["card_id"].as_str()?;
    (content["type"] == "card" && inner.cards.contains_key(id)).then(|| id.to_owned())
}

/// Card `card` is now shown by `message`: its text so far.
pub(super) fn posted_card(inner: &mut Inner, card: &str, message: &str) -> String {
    let card = inner.cards.get_mut(card).expect("a known card");
    card.message = Some(message.to_owned());
    card.text()
}

impl FakeFeishu {
    /// Creating a card answers 99991672 (the app lacks the CardKit scope).
    pub fn without_cards(&self) {
        self.inner.lock().unwrap().no_cards = true;
    }

    /// How many times a posted card's text was updated in place.
    pub fn card_updates(&self) -> usize {
        self.inner.lock().unwrap().card_updates
    }

    /// The posted cards still in streaming mode.
    pub fn streaming_cards(&self) -> usize {
        let inner = self.inner.lock().unwrap();
        inner
            .cards
            .values()
            .filter(|c| c.streaming && c.message.is_some())
            .count()
    }
}
