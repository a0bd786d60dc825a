//! The answer of a `tools/call` (MCP spec 2025-06-18, "Tools › Tool Result") as a
//! [`ToolResult`]: the `content` items in order, one text block each:
//! - `text` → its text;
//! - `image` → `[image returned: <mime>, <n> bytes]` (`<n>`: the decoded size of the base64
//!   `data`; the picture itself is saved and shown to a vision model by [`super::pictures`]);
//! - `audio` → `[audio returned: <mime>, <n> bytes; this model cannot hear audio]`;
//! - `resource_link` → `[resource link: <name> <uri> (<mime>)]`;
//! - `resource` (embedded) → `[resource: <uri> (<mime>)]` followed by its text when it has
//!   text, or `<n> bytes` of blob;
//! - anything else → `[unsupported content type <type>]`.
//!
//! `structuredContent` is given as JSON text when there is no text item. A `resources/read`
//! answer is text the same way ([`contents_text`]). `isError: true` makes
//! an error result of kind `dependency` carrying the server's text. Nothing here panics on any
//! input: the answer is read as plain JSON, a missing or mistyped field is treated as absent.

use crate::tools::ErrorKind;
use crate::tools::{ToolError, ToolOutput};
use serde_json::{json, Value};

fn s<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Decoded size of base64 text (padding and whitespace ignored).
fn b64_len(data: &str) -> usize {
    let n = data
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b'=')
        .count();
    n * 3 / 4
}

fn item_text(item: &Value) -> (String, bool) {
    let kind = s(item, "type").unwrap_or("");
    let mime = s(item, "mimeType").unwrap_or("unknown type");
    match kind {
        "text" => (s(item, "text").unwrap_or("").to_string(), true),
        "image" => (
            format!(
                "[image returned: {mime}, {} bytes]",
                b64_len(s(item, "data").unwrap_or(""))
            ),
            false,
        ),
        "audio" => (
            format!(
                "[audio returned: {mime}, {} bytes; this model cannot hear audio]",
                b64_len(s(item, "data").unwrap_or(""))
            ),
            false,
        ),
        "resource_link" => (
            format!(
                "[resource link: {} {} ({mime})]",
                s(item, "name").unwrap_or("(no name)"),
                s(item, "uri").unwrap_or("(no uri)")
            ),
            false,
        ),
        "resource" => {
            let r = item.get("resource").unwrap_or(&Value::Null);
            let mime = s(r, "mimeType").unwrap_or("unknown type");
            let head = format!("[resource: {} ({mime})]", s(r, "uri").unwrap_or("(no uri)"));
            match (s(r, "text"), s(r, "blob")) {
                (Some(t), _) => (format!("{head}\n{t}"), true),
                (None, Some(b)) => (format!("{head} {} bytes", b64_len(b)), false),
                _ => (head, false),
            }
        }
        other => (format!("[unsupported content type {other:?}]"), false),
    }
}

/// Convert the JSON of a `CallToolResult` (`server` names the server in error texts).
pub fn convert(server: &str, result: &Value) -> Result<ToolOutput, ToolError> {
    let mut parts = Vec::new();
    let mut any_text = false;
    let mut kinds = Vec::new();
    if let Some(items) = result.get("content").and_then(Value::as_array) {
        for item in items {
            let (text, is_text) = item_text(item);
            any_text |= is_text;
            kinds.push(s(item, "type").unwrap_or("").to_string());
            parts.push(text);
        }
    }
    if !any_text {
        if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
            parts.push(serde_json::to_string_pretty(structured).unwrap_or_default());
        }
    }
    let text = parts.join("\n");
    let meta = json!({ "mcp_server": server, "content_types": kinds });
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let message = if text.trim().is_empty() {
            format!("the MCP server {server} reported an error without a message")
        } else {
            format!("the MCP server {server} reported an error: {text}")
        };
        return Err(ToolError::new(ErrorKind::Dependency, message).with_metadata(meta));
    }
    Ok(ToolOutput::new(text).with_metadata(meta))
}

/// The text of a `ReadResourceResult` (as JSON): each content's text, or a line describing it.
pub fn contents_text(result: &Value) -> String {
    let items = result.get("contents").and_then(Value::as_array);
    let parts: Vec<String> = items
        .into_iter()
        .flatten()
        .map(|c| {
            let s = |k: &str| c.get(k).and_then(Value::as_str);
            match (s("text"), s("blob")) {
                (Some(t), _) => t.to_string(),
                (None, Some(b)) => format!(
                    "[blob: {} ({}), {} bytes]",
                    s("uri").unwrap_or("(no uri)"),
                    s("mimeType").unwrap_or("unknown type"),
                    b.len() * 3 / 4
                ),
                _ => format!("[empty content: {}]", s("uri").unwrap_or("(no uri)")),
            }
        })
        .collect();
    parts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_items_are_the_output() {
        let r: crate::tools::ToolResult = convert(
            "e",
            &json!({"content": [{"type": "text", "text": "Echo: hi"}, {"type": "text", "text": "two"}]}),
        ).into();
        assert!(r.ok);
        assert_eq!(r.output, "Echo: hi\ntwo");
    }

    #[test]
    fn is_error_is_a_dependency_error_with_the_text() {
        let r: crate::tools::ToolResult = convert(
            "e",
            &json!({"content": [{"type": "text", "text": "bad input"}], "isError": true}),
        )
        .into();
        assert!(!r.ok);
        assert_eq!(r.error_kind, Some(ErrorKind::Dependency));
        assert!(r.error.unwrap().contains("bad input"));
        let r: crate::tools::ToolResult = convert("e", &json!({"isError": true})).into();
        assert!(r.error.unwrap().contains("without a message"));
    }

    #[test]
    fn images_links_and_resources_are_described() {
        let r: crate::tools::ToolResult = convert(
            "e",
            &json!({"content": [
                {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
                {"type": "resource_link", "name": "note.txt.gz", "uri": "demo://r/note.txt.gz", "mimeType": "application/gzip"},
                {"type": "resource", "resource": {"uri": "demo://r/x", "mimeType": "text/plain", "text": "inside"}},
                {"type": "resource", "resource": {"uri": "demo://r/y", "blob": "aGVsbG8="}},
                {"type": "weird"}
            ]}),
        ).into();
        assert!(r.ok);
        let o = &r.output;
        assert!(o.contains("[image returned: image/png, 5 bytes]"), "{o}");
        assert!(
            o.contains("[resource link: note.txt.gz demo://r/note.txt.gz (application/gzip)]"),
            "{o}"
        );
        assert!(
            o.contains("[resource: demo://r/x (text/plain)]\ninside"),
            "{o}"
        );
        assert!(
            o.contains("[resource: demo://r/y (unknown type)] 5 bytes"),
            "{o}"
        );
        assert!(o.contains("unsupported content type \"weird\""), "{o}");
    }

    #[test]
    fn structured_content_only_without_text() {
        let r: crate::tools::ToolResult =
            convert("t", &json!({"content": [], "structuredContent": {"a": 1}})).into();
        assert!(r.output.contains("\"a\": 1"));
        let r: crate::tools::ToolResult = convert(
            "t",
            &json!({"content": [{"type": "text", "text": "x"}], "structuredContent": {"a": 1}}),
        )
        .into();
        assert_eq!(r.output, "x");
    }

    #[test]
    fn garbage_does_not_panic() {
        for v in [
            json!(null),
            json!(5),
            json!({"content": 3}),
            json!({"content": [1, null, {"type": 2}]}),
        ] {
            let _ = convert("x", &v);
        }
    }
    #[test]
    fn contents_are_text_or_described() {
        let v = json!({"contents": [
            {"uri": "a://1", "text": "one"},
            {"uri": "a://2", "mimeType": "image/png", "blob": "aGVsbG8h"},
            {"uri": "a://3"}
        ]});
        assert_eq!(
            contents_text(&v),
            "one\n[blob: a://2 (image/png), 6 bytes]\n[empty content: a://3]"
        );
        assert_eq!(contents_text(&json!(5)), "");
    }
}
