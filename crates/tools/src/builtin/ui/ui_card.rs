//! `ui_card{card | messages}`: shows the user a card — a table (`compare`), a ranking
//! (`rank`), headline numbers (`stats`) or a `timeline` — or, for the web, a custom A2UI v0.9
//! layout (`messages`).
//!
//! The tool only builds and checks the card ([`ethan_cards::Ui`]); it travels in
//! [`ToolResult::ui`] as JSON (`{"card": {...}}` or `{"messages": [...]}`) and the channel
//! adapter renders it as its own message: a Lark interactive card replying to the user's
//! message, a Telegram HTML message, printed text in the terminal. The model is told the card
//! is already shown so that it does not repeat it. Bad input is a validation error naming the
//! field to fix. On Lark the card is also rendered here, so a card Lark cannot show (custom
//! A2UI, over 30 KB) is refused to the model instead of failing later in the adapter.

use crate::{ErrorKind, Risk, Tool, ToolContext};
use crate::{ToolDecl, ToolError, ToolOutput};
use async_trait::async_trait;
use ethan_cards::Ui;
use ethan_core::ChannelKind;
use serde_json::{json, Value};
use std::sync::LazyLock;

/// The result text on success.
pub const SHOWN: &str = "The card is already shown to the user; do not repeat its content.";

pub struct UiCard;

/// The arguments' schema (JSON text: as a `json!` literal it was some 18 KB of code).
const SCHEMA: &str = r#"{
    "type": "object",
    "properties": {
        "card": {
            "type": "object",
            "description": "A template card. compare: title, columns, rows. rank: title, subtitle?, items (best first; numbers are added). stats: title?, metrics. timeline: title, nodes. Values may be text or numbers; use \\n for line breaks.",
            "properties": {
                "type": {"type": "string", "enum": ["compare", "rank", "stats", "timeline"]},
                "title": {"type": ["string", "number"]},
                "subtitle": {"type": "string", "description": "rank only"},
                "columns": {
                    "type": "array",
                    "description": "compare: column names; the first column labels each row",
                    "items": {"type": ["string", "number"]}
                },
                "rows": {
                    "type": "array",
                    "description": "compare: one entry per row, cells in column order",
                    "items": {
                        "type": "object",
                        "properties": {
                            "values": {"type": "array", "items": {"type": ["string", "number", "boolean", "null"]}},
                            "label": {"type": ["string", "number"], "description": "older form: becomes the first cell"}
                        }
                    }
                },
                "items": {
                    "type": "array",
                    "description": "rank: entries, best first",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": ["string", "number"]},
                            "score": {"type": ["string", "number"]},
                            "desc": {"type": "string"}
                        },
                        "required": ["name"]
                    }
                },
                "metrics": {
                    "type": "array",
                    "description": "stats: the numbers; trend like \"+12%\" or \"↓ 3\"",
                    "items": {
                        "type": "object",
                        "properties": {
                            "label": {"type": ["string", "number"]},
                            "value": {"type": ["string", "number"]},
                            "trend": {"type": ["string", "number"]}
                        },
                        "required": ["label", "value"]
                    }
                },
                "nodes": {
                    "type": "array",
                    "description": "timeline: sections in order; items win over body",
                    "items": {
                        "type": "object",
                        "properties": {
                            "title": {"type": ["string", "number"]},
                            "body": {"type": ["string", "array"], "items": {"type": "string"}},
                            "items": {"type": "array", "items": {"type": "string"}}
                        },
                        "required": ["title"]
                    }
                }
            },
            "required": ["type"]
        },
        "messages": {
            "type": "array",
            "description": "Instead of card, web only: A2UI v0.9 messages, e.g. createSurface then updateComponents whose flat components list includes \"id\": \"root\" and reaches every other component through child/children.",
            "items": {"type": "object"}
        }
    }
}"#;

#[async_trait]
impl Tool for UiCard {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "ui_card",
                "Show the user a card when structure helps: `compare` (a table), `rank` (a numbered \
                 list), `stats` (headline numbers) or `timeline`, drawn natively in the chat. The card \
                 is shown at once, so do not repeat its content in your reply. `messages` (A2UI v0.9) \
                 is for custom layouts on the web only.",
                serde_json::from_str(SCHEMA).expect("SCHEMA is JSON (a unit test parses it)"),
            )
            .risk(Risk::ReadOnly)
            // It shows a card the model composed; it reads nothing.
            .not_private()
            .no_compress()
        });
        &DECL
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let ui = match Ui::from_tool_args(&args) {
            Ok(ui) => ui,
            Err(e) => return Err(ToolError::new(ErrorKind::Validation, e.to_string())),
        };
        if ctx.channel == ChannelKind::Lark {
            if let Err(e) = ethan_cards::render_lark(&ui) {
                return Err(ToolError::new(ErrorKind::Validation, e.to_string()));
            }
        }
        let value = match serde_json::to_value(&ui) {
            Ok(v) => v,
            Err(e) => {
                return Err(ToolError::new(
                    ErrorKind::Internal,
                    format!("cannot encode the card: {e}"),
                ))
            }
        };
        let output = ToolOutput::new(SHOWN).with_metadata(json!({"card": ui.kind()}));
        Ok(output.with_ui(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::tests::ctx_in;
    use crate::schema::{check_parameters, ArgsValidator};

    fn compare_args() -> Value {
        json!({"card": {"type": "compare", "title": "Plans", "columns": ["Plan", "Price"],
            "rows": [{"values": ["Free", 0]}, {"values": ["Pro", "$8"]}]}})
    }

    #[test]
    fn parameters_are_a_valid_schema_that_accepts_the_documented_forms() {
        let schema = UiCard.decl().parameters.clone();
        check_parameters(&schema).unwrap();
        let v = ArgsValidator::compile(&schema).unwrap();
        for args in [
            compare_args(),
            json!({"card": {"type": "compare", "title": "T", "columns": ["a", "b"],
                "rows": [{"label": "x", "values": [1]}]}}),
            json!({"card": {"type": "rank", "title": "T", "items": [{"name": "a", "score": 1}]}}),
            json!({"card": {"type": "stats", "metrics": [{"label": "a", "value": 1, "trend": "+1"}]}}),
            json!({"card": {"type": "timeline", "title": "T",
                "nodes": [{"title": "a", "body": ["x"]}, {"title": "b", "body": "y"}]}}),
            json!({"messages": [{"createSurface": {"surfaceId": "s"}}]}),
        ] {
            v.validate(&args).unwrap_or_else(|e| panic!("{args}: {e}"));
        }
    }

    #[tokio::test]
    async fn shows_the_card_and_tells_the_model_not_to_repeat_it() {
        let dir = tempfile::tempdir().unwrap();
        let r: crate::ToolResult = UiCard.run(compare_args(), &ctx_in(dir.path())).await.into();
        assert!(r.ok, "{r:?}");
        assert_eq!(r.output, SHOWN);
        assert_eq!(r.metadata["card"], "compare");
        let ui: Ui = serde_json::from_value(r.ui.clone().unwrap()).unwrap();
        assert_eq!(ui, Ui::from_tool_args(&compare_args()).unwrap());
        assert_eq!(r.ui.unwrap()["card"]["columns"], json!(["Plan", "Price"]));
    }

    #[tokio::test]
    async fn bad_input_is_a_validation_error_naming_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let r: crate::ToolResult = UiCard
            .run(
                json!({"card": {"type": "rank", "title": "T", "items": [{"score": 3}]}}),
                &ctx_in(dir.path()),
            )
            .await
            .into();
        assert!(!r.ok);
        assert_eq!(r.error_kind, Some(ErrorKind::Validation));
        let msg = r.error.unwrap();
        assert!(msg.starts_with("card.items[0].name: missing"), "{msg}");
        assert!(r.ui.is_none());
    }

    #[tokio::test]
    async fn custom_a2ui_is_refused_on_lark_only() {
        let dir = tempfile::tempdir().unwrap();
        let args = json!({"messages": [{"updateComponents": {"surfaceId": "s",
            "components": [{"id": "root", "component": "Text", "text": "hi"}]}}]});
        let r: crate::ToolResult = UiCard.run(args.clone(), &ctx_in(dir.path())).await.into();
        assert!(r.ok, "terminal: {r:?}");
        let mut lark = ctx_in(dir.path());
        lark.channel = ChannelKind::Lark;
        let r: crate::ToolResult = UiCard.run(args, &lark).await.into();
        assert_eq!(r.error_kind, Some(ErrorKind::Validation));
        assert!(r.error.unwrap().contains("send `card` instead"));
        let r: crate::ToolResult = UiCard.run(compare_args(), &lark).await.into();
        assert!(r.ok, "a template card is fine on Lark: {r:?}");
    }

    #[test]
    fn read_only_and_not_fast_path() {
        assert_eq!(UiCard.decl().risk, Risk::ReadOnly);
        assert!(!UiCard.decl().fast_path);
    }
}
