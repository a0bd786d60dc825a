//! Custom A2UI `messages`: the checks and repairs of `Ui::from_tool_args`, the errors the model
//! reads, and our A2UI schema (`schema/a2ui_v0_9.schema.json`) accepting what we accept and
//! refusing what the specification forbids.

use crate::common::*;
use ethan_cards::{render_a2ui, render_lark, CardError, Ui, A2UI_VERSION, BASIC_CATALOG_ID};
use serde_json::{json, Value};

fn comps(list: Value) -> Value {
    json!({"messages": [
        {"version": "v0.9", "createSurface": {"surfaceId": "s", "catalogId": BASIC_CATALOG_ID}},
        {"version": "v0.9", "updateComponents": {"surfaceId": "s", "components": list}}
    ]})
}

fn err(args: Value) -> CardError {
    Ui::from_tool_args(&args).expect_err("should be refused")
}

#[test]
fn valid_messages_pass_unchanged_and_validate() {
    let args = comps(json!([
        {"id": "root", "component": "Column", "children": ["t", "list"]},
        {"id": "t", "component": "Text", "text": "Hi", "variant": "h2"},
        {"id": "list", "component": "List", "children": {"componentId": "item", "path": "/items"}},
        {"id": "item", "component": "Text", "text": {"path": "name"}}
    ]));
    let ui = Ui::from_tool_args(&args).unwrap();
    let Ui::A2ui(messages) = &ui else { panic!() };
    assert_eq!(messages, args["messages"].as_array().unwrap());
    assert_a2ui_valid(&render_a2ui(&ui), "valid");
}

#[test]
fn repairs_version_catalog_create_surface_and_literal_newlines() {
    let ui = Ui::from_tool_args(&json!({"messages": [
        {"updateComponents": {"surfaceId": "s", "components": [
            {"id": "root", "component": "Text", "text": "a\\nb"}]}},
        {"updateDataModel": {"surfaceId": "s", "path": "/x", "value": {"note": "c\\nd"}}}
    ]}))
    .unwrap();
    let messages = render_a2ui(&ui);
    assert_eq!(messages.len(), 3, "createSurface inserted: {messages:#?}");
    assert_eq!(
        messages[0],
        json!({"version": A2UI_VERSION, "createSurface": {"surfaceId": "s", "catalogId": BASIC_CATALOG_ID}})
    );
    assert_eq!(messages[1]["version"], "v0.9");
    assert_eq!(
        messages[1]["updateComponents"]["components"][0]["text"],
        "a\nb"
    );
    assert_eq!(messages[2]["updateDataModel"]["value"]["note"], "c\nd");
    assert_a2ui_valid(&messages, "repaired");
}

#[test]
fn orphans_are_reported_by_id() {
    let e = err(comps(json!([
        {"id": "root", "component": "Column", "children": ["a"]},
        {"id": "a", "component": "Text", "text": "A"},
        {"id": "lost", "component": "Text", "text": "L"},
        {"id": "lost_too", "component": "Row", "children": ["lost"]}
    ])));
    assert_eq!(
        e,
        CardError::Orphans {
            path: "messages[1].updateComponents".into(),
            ids: vec!["lost".into(), "lost_too".into()]
        }
    );
    let text = e.to_string();
    assert!(text.contains("lost, lost_too"), "{text}");
    assert!(text.contains("children"), "{text}");
}

#[test]
fn root_is_required() {
    let e = err(comps(
        json!([{"id": "main", "component": "Text", "text": "x"}]),
    ))
    .to_string();
    assert!(
        e.starts_with("messages[1].updateComponents.components: no component has \"id\": \"root\""),
        "{e}"
    );
    assert!(e.contains("ids sent: main"), "{e}");
}

#[test]
fn exactly_one_message_kind() {
    let e = err(json!({"messages": [{"createSurface": {"surfaceId": "s"}, "deleteSurface": {"surfaceId": "s"}}]}))
        .to_string();
    assert!(
        e.starts_with(
            "messages[0]: has createSurface and deleteSurface; each message must have exactly one"
        ),
        "{e}"
    );
    let e = err(json!({"messages": [{"beginRendering": {"surfaceId": "s"}}]})).to_string();
    assert!(
        e.contains("has none of createSurface, updateComponents, updateDataModel, deleteSurface"),
        "{e}"
    );
    assert!(e.contains("(it has: beginRendering)"), "{e}");
}

#[test]
fn references_must_resolve_and_known_components_are_checked() {
    let e = err(comps(
        json!([{"id": "root", "component": "Card", "child": "nope"}]),
    ))
    .to_string();
    assert!(
        e.contains("refers to child \"nope\", which is not among the components"),
        "{e}"
    );
    let e = err(comps(
        json!([{"id": "root", "component": "Text", "text": "x", "color": "red"}]),
    ))
    .to_string();
    assert!(e.starts_with("messages[1].updateComponents.components[0] (\"root\").color: a Text has no property \"color\""), "{e}");
    let e = err(comps(
        json!([{"id": "root", "component": "Text", "text": "x", "variant": "huge"}]),
    ))
    .to_string();
    assert!(
        e.contains("must be one of h1, h2, h3, h4, h5, caption, body"),
        "{e}"
    );
    let e = err(comps(
        json!([{"id": "root", "Text": {"text": "v0.8 style"}}]),
    ))
    .to_string();
    assert!(e.contains(".component: missing"), "{e}");
    let e = err(comps(json!([
        {"id": "root", "component": "Column", "children": ["a"]},
        {"id": "a", "component": "Text", "text": "1"},
        {"id": "a", "component": "Text", "text": "2"}
    ])))
    .to_string();
    assert!(e.contains("duplicate id \"a\""), "{e}");
}

#[test]
fn unknown_components_pass_with_their_own_properties() {
    let ui = Ui::from_tool_args(&comps(json!([
        {"id": "root", "component": "Tabs", "tabs": [{"title": "One", "child": "one"}]},
        {"id": "one", "component": "Button", "child": "label", "action": {"event": {"name": "go"}}},
        {"id": "label", "component": "Text", "text": "Go"}
    ])))
    .unwrap();
    assert_a2ui_valid(&render_a2ui(&ui), "tabs");
}

#[test]
fn lark_refuses_custom_messages_and_points_to_card() {
    let ui = Ui::from_tool_args(&comps(
        json!([{"id": "root", "component": "Text", "text": "x"}]),
    ))
    .unwrap();
    let e = render_lark(&ui).unwrap_err();
    assert_eq!(e, CardError::A2uiUnsupported { platform: "Lark" });
    assert!(e.to_string().contains("send `card` instead"), "{e}");
}

#[test]
fn schema_refuses_what_the_specification_forbids() {
    let ok = json!({"version": "v0.9.1", "deleteSurface": {"surfaceId": "s"}});
    assert!(violations(a2ui_schema(), &ok).is_empty());
    let bad = [
        json!({"deleteSurface": {"surfaceId": "s"}}), // no version
        json!({"version": "v0.8", "deleteSurface": {"surfaceId": "s"}}),
        json!({"version": "v0.9", "deleteSurface": {"surfaceId": "s"}, "createSurface": {"surfaceId": "s", "catalogId": "c"}}),
        json!({"version": "v0.9", "createSurface": {"surfaceId": "s"}}), // no catalogId
        json!({"version": "v0.9", "updateComponents": {"surfaceId": "s", "components": [{"id": "a", "component": "Text", "text": "x"}]}}), // no root
        json!({"version": "v0.9", "updateComponents": {"surfaceId": "s", "components": [{"id": "root", "component": "Text", "text": "x", "color": "red"}]}}),
        json!({"version": "v0.9", "updateComponents": {"surfaceId": "s", "components": [{"id": "root", "component": "Card", "child": ["a", "b"]}]}}),
        json!({"version": "v0.9", "updateDataModel": {"surfaceId": "s", "extra": 1}}),
    ];
    for b in bad {
        assert!(
            !violations(a2ui_schema(), &b).is_empty(),
            "schema accepted {b}"
        );
    }
}
