//! `ethan-cards`: the card model and its renderers. Pure data and pure functions, no I/O.
//!
//! # The model
//!
//! When an answer is better shown than written — options side by side, a ranking, a few
//! headline numbers, a sequence of events — the agent calls the `ui_card` tool. Its arguments
//! become a [`Ui`]:
//!
//! - a [`Card`], one of four **templates** the model fills with data, never layout:
//!   - [`Compare`] — a table: `columns` and `rows` of cells, the first column being each row's
//!     label;
//!   - [`Rank`] — a numbered list, best first: `items` with `name`, optional `score`, `desc`;
//!   - [`Stats`] — headline numbers: `metrics` with `label`, `value`, optional `trend`;
//!   - [`Timeline`] — `nodes` in order, each a `title` with a `body` paragraph or `items`;
//! - or raw **A2UI v0.9** messages ([`Ui::A2ui`]) for a layout no template fits; only the web
//!   interface draws those natively.
//!
//! Parsing is lenient about form and exact about errors. Models send numbers where text is
//! expected, double-escape newlines (`\\n`), use an older `rows: [{label, values}]` form, or
//! give ragged rows; all of that is repaired (see [`parse`]). What cannot be repaired is a
//! [`CardError`] whose message names the field (`card.rows[2].values`) and the shape to send, so
//! the model can retry.
//!
//! # Renderers
//!
//! The tool does not know where the card will appear; the channel adapter picks a renderer.
//! Each is a pure function of the [`Ui`]:
//!
//! | function | for | output |
//! |---|---|---|
//! | [`render_lark`] | Lark / Feishu | card JSON 2.0 object, ≤ 30 KB, else [`CardError::TooLarge`]; A2UI refused |
//! | [`render_a2ui`] | web | A2UI v0.9 messages: `createSurface`, `updateComponents` (root `Card` → `Column`) |
//! | [`render_telegram`] | Telegram | HTML (`parse_mode: "HTML"`) parts, each ≤ 4096 UTF-16 units |
//! | [`render_html`] | the gateway's web page | one HTML fragment, every text escaped, no attribute but `class` |
//! | [`render_text`] | terminal | plain text, CJK-aware column alignment |
//!
//! A [`Ui`] serialises to the tool's argument form (`{"card": {...}}` / `{"messages": [...]}`)
//! and deserialises through the same checks, so it travels in `ToolResult.ui` as JSON.
//!
//! # What this crate does not do
//!
//! It sends nothing: no HTTP, no Lark `content` string encoding, no Telegram API calls, no
//! chunking policy beyond returning message parts. Those belong to the channel adapters in
//! `ethan-channels`. It knows nothing of channels either: the caller picks the renderer.
//!
//! ```
//! use ethan_cards::{render_telegram, render_text, Ui};
//! use serde_json::json;
//!
//! let ui = Ui::from_tool_args(&json!({"card": {
//!     "type": "compare", "title": "Plans",
//!     "columns": ["Plan", "Price"],
//!     "rows": [{"values": ["Free", 0]}, {"values": ["Pro", "$8"]}]
//! }})).unwrap();
//! assert!(render_text(&ui).contains("Pro  │ $8"));
//! assert!(render_telegram(&ui)[0].starts_with("<b>Plans</b>"));
//! ```

#![warn(missing_docs)]

pub mod a2ui;
pub mod error;
pub mod html;
pub mod lark;
pub mod model;
pub mod normalize;
pub mod parse;
pub mod telegram;
mod text;
mod ui;
pub mod width;

pub use a2ui::{A2UI_VERSION, BASIC_CATALOG_ID};
pub use error::CardError;
pub use lark::LARK_CARD_LIMIT;
pub use model::{Card, Compare, Metric, Rank, RankItem, Stats, Timeline, TimelineNode, Trend};
pub use telegram::{TELEGRAM_LIMIT, TELEGRAM_MAX_PARTS};
pub use ui::Ui;

use serde_json::Value;

/// The Lark / Feishu interactive card (card JSON 2.0) for `ui`, to be sent as the `content`
/// string of a `msg_type: "interactive"` message.
///
/// Errors: [`CardError::A2uiUnsupported`] for custom A2UI (the model should send a template
/// `card`), [`CardError::TooLarge`] when the JSON is over [`LARK_CARD_LIMIT`] bytes.
pub fn render_lark(ui: &Ui) -> Result<Value, CardError> {
    match ui {
        Ui::Card(c) => lark::card_to_lark(c),
        Ui::A2ui(_) => Err(CardError::A2uiUnsupported { platform: "Lark" }),
    }
}

/// A2UI v0.9 messages for the web interface: for a template, `createSurface` (basic catalog)
/// then `updateComponents` with a root `Card` → `Column`; the surface id is
/// `ethan-<type>-<hash of the card>`, stable for the same content. Custom messages are returned
/// as checked.
pub fn render_a2ui(ui: &Ui) -> Vec<Value> {
    match ui {
        Ui::Card(c) => a2ui::card_messages(c, &a2ui::surface_for(c)),
        Ui::A2ui(m) => m.clone(),
    }
}

/// Like [`render_a2ui`], with the caller's surface id for a template card (custom messages
/// keep their own).
pub fn render_a2ui_on(ui: &Ui, surface_id: &str) -> Vec<Value> {
    match ui {
        Ui::Card(c) => a2ui::card_messages(c, surface_id),
        Ui::A2ui(m) => m.clone(),
    }
}

/// Telegram HTML messages for `ui`: one or more parts, each at most [`TELEGRAM_LIMIT`] UTF-16
/// code units with balanced tags, to be sent in order with `parse_mode: "HTML"`. At most
/// [`TELEGRAM_MAX_PARTS`]; a longer card is cut with a note. Custom A2UI becomes its texts in
/// reading order.
pub fn render_telegram(ui: &Ui) -> Vec<String> {
    match ui {
        Ui::Card(c) => telegram::card_to_telegram(c),
        Ui::A2ui(m) => telegram::outline_to_telegram(&a2ui::outline(m)),
    }
}

/// An HTML fragment for the web page (see [`html`]): a table, a list or stat blocks, every
/// text escaped. Custom A2UI becomes its texts in reading order.
pub fn render_html(ui: &Ui) -> String {
    match ui {
        Ui::Card(c) => html::card_to_html(c),
        Ui::A2ui(m) => html::outline_to_html(&a2ui::outline(m)),
    }
}

/// Plain text for the terminal, ending in a newline. Custom A2UI becomes its texts in reading
/// order.
pub fn render_text(ui: &Ui) -> String {
    match ui {
        Ui::Card(c) => text::card_to_text(c),
        Ui::A2ui(m) => text::outline_to_text(&a2ui::outline(m)),
    }
}
