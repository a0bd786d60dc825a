//! [`Ui`]: what the `ui_card` tool produces and a channel adapter renders — a template
//! [`Card`] or custom A2UI messages.

use crate::a2ui::parse_messages;
use crate::error::CardError;
use crate::model::Card;
use crate::parse::{parse_card, type_name};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{json, Value};

/// A card to show: one of the four templates, or a custom A2UI v0.9 layout.
///
/// Serialised exactly like the tool's arguments — `{"card": {"type": "compare", ...}}` or
/// `{"messages": [...]}` — and deserialised through [`Ui::from_tool_args`], so the value in a
/// `ToolResult.ui` field parses back in a channel adapter with the same checks.
#[derive(Debug, Clone, PartialEq)]
pub enum Ui {
    /// A template card; every renderer supports it.
    Card(Card),
    /// Checked and repaired A2UI v0.9 messages (`createSurface`, `updateComponents`, …), in
    /// order. Native on the web; Telegram and the terminal get the texts in reading order;
    /// Lark refuses them ([`CardError::A2uiUnsupported`]).
    A2ui(Vec<Value>),
}

impl Ui {
    /// Parses the `ui_card` tool's arguments: `{"card": {...}}` or `{"messages": [...]}`.
    ///
    /// Lenient where intent is clear: a card or message list sent as a JSON string is
    /// decoded, a card sent without the `card` wrapper (`{"type": "rank", ...}`) is accepted,
    /// one message not wrapped in an array is accepted. Errors say which field to fix; see
    /// [`Card::from_json`] and the [`a2ui`](crate::a2ui) module for the checks.
    pub fn from_tool_args(args: &Value) -> Result<Ui, CardError> {
        let Some(o) = args.as_object() else {
            return Err(CardError::invalid(
                "arguments",
                format!(
                    "expected an object with `card` or `messages`, got {}",
                    type_name(args)
                ),
            ));
        };
        let card = o.get("card").filter(|v| !v.is_null());
        let messages = o.get("messages").filter(|v| !v.is_null());
        match (card, messages) {
            (Some(_), Some(_)) => Err(CardError::invalid(
                "arguments",
                "give either `card` (a template) or `messages` (custom A2UI), not both",
            )),
            (Some(c), None) => parse_card(&decoded(c, "card")?, "card").map(Ui::Card),
            (None, Some(m)) => parse_messages(&decoded(m, "messages")?, "messages").map(Ui::A2ui),
            (None, None) if o.contains_key("type") => parse_card(args, "arguments").map(Ui::Card),
            (None, None) => Err(CardError::invalid(
                "arguments",
                "missing `card`; send {\"card\": {\"type\": \"compare\" | \"rank\" | \"stats\" | \
                 \"timeline\", ...}} (or `messages` with A2UI v0.9 for a custom layout)",
            )),
        }
    }

    /// `compare`, `rank`, `stats`, `timeline`, or `a2ui`.
    pub fn kind(&self) -> &'static str {
        match self {
            Ui::Card(c) => c.kind(),
            Ui::A2ui(_) => "a2ui",
        }
    }
}

impl From<Card> for Ui {
    fn from(c: Card) -> Self {
        Ui::Card(c)
    }
}

/// A JSON string holding an object or array is decoded (models sometimes double-encode).
fn decoded(v: &Value, path: &str) -> Result<Value, CardError> {
    match v {
        Value::String(s) if s.trim_start().starts_with(['{', '[']) => serde_json::from_str(s)
            .map_err(|e| {
                CardError::invalid(
                    path,
                    format!("got a string that is not valid JSON ({e}); send a JSON value, not a string"),
                )
            }),
        other => Ok(other.clone()),
    }
}

impl Serialize for Ui {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Ui::Card(c) => json!({ "card": c }).serialize(s),
            Ui::A2ui(m) => json!({ "messages": m }).serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Ui {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Ui::from_tool_args(&v).map_err(D::Error::custom)
    }
}

impl<'de> Deserialize<'de> for Card {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Card::from_json(&v).map_err(D::Error::custom)
    }
}
