//! Our Lark card JSON 2.0 schema: it accepts the sample cards from the shared fixtures, refuses
//! unknown properties (Lark does: error 200621), and the renderer refuses cards over 30 KB.

use crate::common::*;
use ethan_cards::{render_lark, CardError, Ui, LARK_CARD_LIMIT};
use serde_json::{json, Value};

#[test]
fn schema_accepts_the_fixture_cards() {
    for name in [
        "card_v2_agenda_table_buttons.json",
        "card_v2_streaming_reply.json",
    ] {
        assert_lark_valid(&lark_fixture(name), name);
    }
    // The card inside the callback response sample, and the one inside the send request.
    let resp = lark_fixture("card_action_trigger_response.json");
    assert_lark_valid(&resp["card"]["data"], "card_action_trigger_response.json");
    let req = lark_fixture("send_message_interactive_request.json");
    let content: Value = serde_json::from_str(req["content"].as_str().unwrap()).unwrap();
    assert_lark_valid(&content, "send_message_interactive_request.json");
}

#[test]
fn schema_refuses_unknown_properties_everywhere() {
    let base = lark_fixture("card_v2_agenda_table_buttons.json");
    let pointers = [
        "",
        "/config",
        "/header",
        "/header/title",
        "/body",
        "/body/elements/0",
        "/body/elements/1",
        "/body/elements/1/columns/0",
        "/body/elements/3",
        "/body/elements/3/columns/0",
        "/body/elements/3/header_style",
        "/body/elements/4/columns/0/elements/0",
        "/body/elements/4/columns/0/elements/0/behaviors/0",
        "/body/elements/4/columns/1/elements/0/confirm",
        "/body/elements/4/columns/2/elements/0/behaviors/0",
    ];
    for p in pointers {
        let mut card = base.clone();
        card.pointer_mut(p)
            .unwrap_or_else(|| panic!("no {p} in the fixture"))
            .as_object_mut()
            .unwrap()
            .insert("unknown_field".into(), json!(1));
        let errs = violations(lark_schema(), &card);
        assert!(!errs.is_empty(), "an unknown field at {p:?} was accepted");
    }
}

#[test]
fn schema_refuses_wrong_shapes() {
    let bad = [
        json!({"schema": "1.0", "body": {"elements": []}}),
        json!({"schema": "2.0", "elements": []}),
        json!({"schema": "2.0", "body": {"elements": [{"tag": "action", "actions": []}]}}),
        json!({"schema": "2.0", "body": {"elements": [{"tag": "markdown"}]}}),
        json!({"schema": "2.0", "header": {"title": {"tag": "plain_text", "content": "x"}, "template": "pink"}, "body": {"elements": []}}),
        json!({"schema": "2.0", "body": {"elements": [{"tag": "column_set", "columns": [{"tag": "column", "elements": [{"tag": "table", "columns": [], "rows": []}]}]}]}}),
        json!({"schema": "2.0", "body": {"elements": [{"tag": "button", "text": {"tag": "plain_text", "content": "x"}, "behaviors": [{"type": "callback", "value": "string"}]}]}}),
    ];
    for b in bad {
        assert!(
            !violations(lark_schema(), &b).is_empty(),
            "schema accepted {b}"
        );
    }
}

#[test]
fn cards_over_30_kb_are_refused_with_advice() {
    let rows: Vec<Value> = (0..400)
        .map(|i| json!({"values": [format!("row {i}"), "x".repeat(60), "y".repeat(20)]}))
        .collect();
    let ui = Ui::from_tool_args(&json!({"card": {"type": "compare", "title": "Big",
        "columns": ["a", "b", "c"], "rows": rows}}))
    .unwrap();
    let e = render_lark(&ui).unwrap_err();
    let CardError::TooLarge { bytes, limit, .. } = e else {
        panic!("{e:?}")
    };
    assert_eq!(limit, LARK_CARD_LIMIT);
    assert!(bytes > limit);
    let text = e.to_string();
    assert!(text.contains("30720-byte limit"), "{text}");
    assert!(text.contains("split it into several cards"), "{text}");
}

#[test]
fn fifty_rows_fit_in_a_lark_card() {
    let rows: Vec<Value> = (0..50)
        .map(|i| json!({"values": [format!("row {i}"), "some text here", 12.5]}))
        .collect();
    let ui = Ui::from_tool_args(&json!({"card": {"type": "compare", "title": "Fifty",
        "columns": ["a", "b", "c"], "rows": rows}}))
    .unwrap();
    let card = render_lark(&ui).unwrap();
    assert!(serde_json::to_string(&card).unwrap().len() <= LARK_CARD_LIMIT);
    assert_lark_valid(&card, "fifty");
}
