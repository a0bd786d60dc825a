//! Telegram splitting: every part within 4096 UTF-16 units with balanced tags, tables split
//! between rows with the header repeated, oversized text cut with a note.

use crate::common::*;
use ethan_cards::{render_telegram, Ui, TELEGRAM_LIMIT, TELEGRAM_MAX_PARTS};
use serde_json::{json, Value};

fn units(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

#[test]
fn long_tables_split_between_rows_with_the_header_repeated() {
    let rows: Vec<Value> = (0..400)
        .map(|i| json!({"values": [format!("名前-{i}"), "値 🚀", i]}))
        .collect();
    let ui = Ui::from_tool_args(&json!({"card": {"type": "compare", "title": "Long",
        "columns": ["Name", "Value", "N"], "rows": rows}}))
    .unwrap();
    let parts = render_telegram(&ui);
    assert!(
        parts.len() > 1 && parts.len() <= TELEGRAM_MAX_PARTS,
        "{}",
        parts.len()
    );
    let mut seen_rows = 0;
    for (i, p) in parts.iter().enumerate() {
        assert_telegram_part(p, &format!("part {i}"));
        let pre = p.find("<pre>").expect("each part has its table");
        assert!(
            p[pre..].starts_with("<pre>Name"),
            "header repeated in part {i}"
        );
        seen_rows += p.lines().filter(|l| l.contains("名前-")).count();
    }
    assert_eq!(seen_rows, 400, "no row lost or duplicated");
    assert!(parts[0].starts_with("<b>Long</b>"));
}

#[test]
fn a_huge_paragraph_is_cut_within_the_limit() {
    let body = "word & <tag> ".repeat(1200);
    let ui = Ui::from_tool_args(&json!({"card": {"type": "timeline", "title": "T",
        "nodes": [{"title": "one", "body": body}]}}))
    .unwrap();
    let parts = render_telegram(&ui);
    for (i, p) in parts.iter().enumerate() {
        assert_telegram_part(p, &format!("part {i}"));
    }
    assert!(parts.iter().any(|p| p.contains('…')), "cut marked");
}

#[test]
fn too_many_parts_end_with_a_note() {
    let items: Vec<Value> = (0..3000)
        .map(|i| json!({"name": format!("entry {i}"), "desc": "a description long enough to take room"}))
        .collect();
    let ui =
        Ui::from_tool_args(&json!({"card": {"type": "rank", "title": "Many", "items": items}}))
            .unwrap();
    let parts = render_telegram(&ui);
    assert_eq!(parts.len(), TELEGRAM_MAX_PARTS);
    for (i, p) in parts.iter().enumerate() {
        assert_telegram_part(p, &format!("part {i}"));
        assert!(units(p) <= TELEGRAM_LIMIT);
    }
    assert!(parts
        .last()
        .unwrap()
        .ends_with("<i>… (cut: the card is too long for Telegram)</i>"));
}
