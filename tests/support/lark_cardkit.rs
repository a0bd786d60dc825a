//! The CardKit v1 part of [`super::FakeLark`] (PROTOCOLS §5.2): card entities created,
//! element contents written and settings patched, with the checks Lark makes.
//!
//! - `POST /open-apis/cardkit/v1/cards` `{"type":"card_json","data":"<card JSON>"}` → a new
//!   `card_id` (`7355372766134157NNN`); the parsed card is recorded ([`Card::created`]). Code
//!   99991672 (missing `cardkit:card:write`, HTTP 400) while [`FakeLark::refuse_cardkit`] is on.
//! - `PUT …/cards/{card_id}/elements/{element_id}/content` `{"content","sequence","uuid"}` →
//!   recorded ([`CardWrite`], with its outcome and receive time); 300317 when `sequence` is not
//!   strictly greater than the card's last one (content writes and settings count alike),
//!   300309 when the card's streaming mode is closed, 200740 for an unknown card or element.
//! - `PATCH …/cards/{card_id}/settings` `{"settings":"<{\"config\":…} string>","sequence","uuid"}`
//!   → recorded ([`CardSettings`]); applies `config.streaming_mode`; 300317 as above.
//!
//! [`FakeLark::refuse_cardkit`]: super::FakeLark::refuse_cardkit

use serde_json::{json, Value};
use std::collections::HashMap;
use tokio::time::Instant;

/// A card entity created through CardKit.
#[derive(Debug, Clone)]
pub struct Card {
    pub card_id: String,
    /// The card JSON the client sent (parsed from `data`).
    pub created: Value,
    pub created_at: Instant,
    /// Whether streaming mode is on now.
    pub streaming: bool,
    /// The last accepted sequence (0: none).
    pub last_sequence: i64,
    /// Current content per element_id.
    pub contents: HashMap<String, String>,
}

impl Card {
    /// The card JSON as it is now: as created, with each element's current content and the
    /// current streaming mode.
    pub fn current(&self) -> Value {
        let mut card = self.created.clone();
        if let Some(elements) = card
            .pointer_mut("/body/elements")
            .and_then(Value::as_array_mut)
        {
            for e in elements {
                let id = e["element_id"].as_str().map(str::to_string);
                if let Some(text) = id.and_then(|id| self.contents.get(&id)) {
                    e["content"] = json!(text);
                }
            }
        }
        card["config"]["streaming_mode"] = json!(self.streaming);
        card
    }
}

/// One element content `PUT`.
#[derive(Debug, Clone)]
pub struct CardWrite {
    pub card_id: String,
    pub element_id: String,
    pub content: String,
    pub sequence: i64,
    pub uuid: String,
    pub at: Instant,
    /// The code answered (0: accepted).
    pub code: i64,
}

/// One settings `PATCH`.
#[derive(Debug, Clone)]
pub struct CardSettings {
    pub card_id: String,
    /// `settings`, parsed from its JSON string.
    pub settings: Value,
    pub sequence: i64,
    pub at: Instant,
    pub code: i64,
}

impl CardSettings {
    /// Whether this patch was accepted and turned the card's streaming mode off: the streamed
    /// reply was finished.
    pub fn closes_streaming(&self) -> bool {
        self.code == 0 && self.settings["config"]["streaming_mode"] == false
    }
}

/// The CardKit state of the fake.
#[derive(Debug, Default)]
pub struct CardKit {
    pub refuse: bool,
    pub cards: Vec<Card>,
    pub writes: Vec<CardWrite>,
    pub settings: Vec<CardSettings>,
}

/// The route name of a CardKit request, if it is one.
pub fn route_of(method: &str, path: &str) -> Option<&'static str> {
    let rest = path.strip_prefix("/open-apis/cardkit/v1/cards")?;
    match (method, rest) {
        ("POST", "") => Some("card_create"),
        ("PUT", r) if r.ends_with("/content") && r.contains("/elements/") => Some("card_content"),
        ("PATCH", r) if r.ends_with("/settings") => Some("card_settings"),
        _ => None,
    }
}

fn code(code: i64, msg: &str) -> (u16, Value) {
    (200, json!({"code": code, "msg": msg}))
}

impl CardKit {
    /// Answer a CardKit `route` (from [`route_of`]): (HTTP status, body).
    pub fn answer(&mut self, route: &str, path: &str, body: &Value) -> (u16, Value) {
        let now = Instant::now();
        let segments: Vec<&str> = path
            .trim_start_matches("/open-apis/cardkit/v1/cards")
            .split('/')
            .filter(|s| !s.is_empty())
            .collect();
        match route {
            "card_create" => {
                if self.refuse {
                    return (
                        400,
                        json!({
                            "code": 99991672,
                            "msg": "Access denied. One of the following scopes is required: [cardkit:card:write]. \
                                    应用尚未开通所需的应用身份权限：[cardkit:card:write]"
                        }),
                    );
                }
                if body["type"] != "card_json" {
                    return code(230001, "type must be card_json");
                }
                let Some(card) = body["data"]
                    .as_str()
                    .and_then(|d| serde_json::from_str::<Value>(d).ok())
                else {
                    return code(11310, "card content could not be parsed");
                };
                if card["schema"] != "2.0" {
                    return code(200621, "card JSON 2.0 expected");
                }
                let card_id = format!("7355372766134157{:03}", self.cards.len() + 1);
                let mut contents = HashMap::new();
                for e in card["body"]["elements"].as_array().into_iter().flatten() {
                    if let Some(id) = e["element_id"].as_str() {
                        contents.insert(
                            id.to_string(),
                            e["content"].as_str().unwrap_or("").to_string(),
                        );
                    }
                }
                self.cards.push(Card {
                    card_id: card_id.clone(),
                    streaming: card["config"]["streaming_mode"] == true,
                    created: card,
                    created_at: now,
                    last_sequence: 0,
                    contents,
                });
                (
                    200,
                    json!({"code": 0, "msg": "", "data": {"card_id": card_id}}),
                )
            }
            "card_content" => {
                let card_id = segments.first().copied().unwrap_or("").to_string();
                let element_id = segments.get(2).copied().unwrap_or("").to_string();
                let content = body["content"].as_str().unwrap_or("").to_string();
                let sequence = body["sequence"].as_i64().unwrap_or(0);
                let (status, answer) = self.check(&card_id, sequence, true, |card| {
                    if !card.contents.contains_key(&element_id) {
                        return Some(code(200740, "element not found"));
                    }
                    card.contents.insert(element_id.clone(), content.clone());
                    None
                });
                self.writes.push(CardWrite {
                    card_id,
                    element_id,
                    content,
                    sequence,
                    uuid: body["uuid"].as_str().unwrap_or("").to_string(),
                    at: now,
                    code: answer["code"].as_i64().unwrap_or(-1),
                });
                (status, answer)
            }
            "card_settings" => {
                let card_id = segments.first().copied().unwrap_or("").to_string();
                let sequence = body["sequence"].as_i64().unwrap_or(0);
                let settings = body["settings"]
                    .as_str()
                    .and_then(|s| serde_json::from_str::<Value>(s).ok())
                    .unwrap_or(Value::Null);
                let (status, answer) = self.check(&card_id, sequence, false, |card| {
                    if let Some(on) = settings["config"]["streaming_mode"].as_bool() {
                        card.streaming = on;
                    }
                    None
                });
                self.settings.push(CardSettings {
                    card_id,
                    settings,
                    sequence,
                    at: now,
                    code: answer["code"].as_i64().unwrap_or(-1),
                });
                (status, answer)
            }
            _ => code(404, "unknown cardkit route"),
        }
    }

    /// The checks shared by writes: known card, streaming open (`needs_streaming`), sequence
    /// strictly increasing; then `apply`.
    fn check(
        &mut self,
        card_id: &str,
        sequence: i64,
        needs_streaming: bool,
        apply: impl FnOnce(&mut Card) -> Option<(u16, Value)>,
    ) -> (u16, Value) {
        let Some(card) = self.cards.iter_mut().find(|c| c.card_id == card_id) else {
            return code(200740, "card not found");
        };
        if sequence <= card.last_sequence {
            return code(300317, "sequence number compare failed");
        }
        if needs_streaming && !card.streaming {
            return code(300309, "streaming mode is closed");
        }
        if let Some(refusal) = apply(card) {
            return refusal;
        }
        card.last_sequence = sequence;
        (200, json!({"code": 0, "msg": "", "data": {}}))
    }
}
