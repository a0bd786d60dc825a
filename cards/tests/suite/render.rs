//! Every template × every renderer, compared with the snapshots in `tests/snapshots/`, plus
//! shape checks: Lark output against `schema/lark_card_v2.schema.json`, A2UI output against
//! `schema/a2ui_v0_9.schema.json`, Telegram parts against the 4096-unit limit and the HTML
//! subset, and a serde round trip of every `Ui`.
//!
//! After an intended change: `UPDATE_SNAPSHOTS=1 cargo test -p ethan-cards`, then review the
//! diff of `tests/snapshots/`.

use crate::common::*;
use ethan_cards::{render_a2ui, render_lark, render_telegram, render_text, Ui};
use serde_json::{json, Value};

/// (name, `ui_card` arguments)
fn cases() -> Vec<(&'static str, Value)> {
    let fifty: Vec<Value> = (1..=50)
        .map(|i| json!({"values": [format!("item-{i:02}"), i * 7 % 13, format!("{}.{}", i, i % 10), if i % 3 == 0 { "yes" } else { "no" }]}))
        .collect();
    vec![
        (
            "compare_basic",
            json!({"card": {"type": "compare", "title": "LLM APIs",
            "columns": ["Model", "Input $/M", "Context", "Notes"],
            "rows": [
                {"values": ["gpt-4o-mini", 0.15, "128k", "cheap | fast"]},
                {"values": ["deepseek-chat", 0.27, "64k", "line one\\nline two"]},
                {"values": ["qwen-max", "1.6", 32768, "<at id=all></at> & more"]}
            ]}}),
        ),
        (
            "compare_label_form",
            json!({"card": {"type": "compare", "title": "Rust vs Go",
            "columns": ["Rust", "Go"],
            "rows": [
                {"label": "Memory safety", "values": ["compile time", "GC"]},
                {"label": "Generics", "values": ["yes", "since 1.18"]},
                {"label": "Async", "values": ["async/await"]}
            ]}}),
        ),
        (
            "compare_empty_rows",
            json!({"card": {"type": "compare", "title": "Nothing found", "columns": ["Name", "Size"], "rows": []}}),
        ),
        (
            "compare_ragged",
            json!({"card": {"type": "compare", "title": "Ragged",
                "columns": ["A", "B", "C"],
                "rows": [{"values": ["only one"]}, {"values": [1, 2, 3, 4, 5]}, ["x", null, true]]}}),
        ),
        (
            "compare_cjk_emoji",
            json!({"card": {"type": "compare", "title": "城市对比 🏙️",
            "columns": ["城市", "人口", "天气"],
            "rows": [
                {"values": ["北京", "2189万", "☀️ 晴"]},
                {"values": ["上海", "2487万", "🌧️ 小雨"]},
                {"values": ["Shenzhen 深圳", "1768万", "⛅ cloudy"]}
            ]}}),
        ),
        (
            "compare_50_rows",
            json!({"card": {"type": "compare", "title": "Fifty rows",
                "columns": ["Name", "Score", "Version", "Done"], "rows": fifty}}),
        ),
        (
            "rank_basic",
            json!({"card": {"type": "rank", "title": "Best editors", "subtitle": "by votes, 2026",
            "items": [
                {"name": "Helix", "score": 9.4, "desc": "modal, batteries included"},
                {"name": "Neovim", "score": "9.1", "desc": "Lua everywhere\\nhuge plugin ecosystem"},
                {"name": "Zed", "score": 8.7},
                {"name": "VS Code <insiders>", "desc": "the default & the baseline"},
                "Emacs"
            ]}}),
        ),
        (
            "rank_cjk_emoji",
            json!({"card": {"type": "rank", "title": "热门话题 🔥",
                "items": [{"name": "人工智能 🤖", "score": "98万"}, {"name": "新能源汽车", "score": "76万"}, {"name": "春节档电影 🎬", "score": "51万"}]}}),
        ),
        (
            "rank_empty",
            json!({"card": {"type": "rank", "title": "No votes yet", "items": []}}),
        ),
        (
            "stats_basic",
            json!({"card": {"type": "stats", "title": "This week",
            "metrics": [
                {"label": "Active users", "value": 1204, "trend": "+12%"},
                {"label": "Revenue", "value": "$3.4k", "trend": "↓ 2%"},
                {"label": "Churn", "value": "1.9%", "trend": "-0.3 pt"},
                {"label": "NPS", "value": 61, "trend": "flat"},
                {"label": "Tickets", "value": 37}
            ]}}),
        ),
        (
            "stats_untitled",
            json!({"card": {"type": "stats", "metrics": [{"label": "延迟", "value": "42 ms"}, {"label": "Uptime", "value": "99.98%", "trend": "▲ 0.01"}]}}),
        ),
        (
            "timeline_basic",
            json!({"card": {"type": "timeline", "title": "Release 1.4",
            "nodes": [
                {"title": "Mon · freeze", "body": "Branch cut at 10:00.\\nOnly fixes after this."},
                {"title": "Tue · QA", "body": ["- smoke tests", "* upgrade path", "• rollback drill"]},
                {"title": "Wed · ship", "body": "ignored because items win", "items": ["+ tag v1.4.0", "publish crates", "announce"]},
                {"title": "Thu", "body": "- write post-mortem\\n- close milestone"},
                "Fri · rest"
            ]}}),
        ),
        (
            "timeline_cjk_emoji",
            json!({"card": {"type": "timeline", "title": "行程 ✈️",
                "nodes": [{"title": "第一天 · 东京", "items": ["浅草寺 ⛩️", "晴空塔"]}, {"title": "第二天 · 京都", "body": "伏见稻荷大社，早上去人少。"}]}}),
        ),
        (
            "a2ui_custom",
            json!({"messages": [
                {"updateComponents": {"surfaceId": "weather", "components": [
                    {"id": "root", "component": "Card", "child": "col"},
                    {"id": "col", "component": "Column", "children": ["h", "row", "div", "note"]},
                    {"id": "h", "component": "Text", "text": "Weather · Berlin", "variant": "h3"},
                    {"id": "row", "component": "Row", "children": ["t1", "t2"], "justify": "spaceBetween"},
                    {"id": "t1", "component": "Text", "text": "Today\\n12°C", "weight": 1},
                    {"id": "t2", "component": "Text", "text": "Tomorrow\\n9°C", "weight": 1},
                    {"id": "div", "component": "Divider"},
                    {"id": "note", "component": "Text", "text": "Rain <after> 18:00 & wind", "variant": "caption"}
                ]}}
            ]}),
        ),
    ]
}

fn telegram_snapshot(parts: &[String]) -> String {
    let n = parts.len();
    let mut s = String::new();
    for (i, p) in parts.iter().enumerate() {
        let units: usize = p.chars().map(char::len_utf16).sum();
        s.push_str(&format!(
            "<!-- part {}/{n}, {units} UTF-16 units -->\n",
            i + 1
        ));
        s.push_str(p);
        s.push('\n');
    }
    s
}

#[test]
fn every_template_on_every_renderer_matches_its_snapshot() {
    let mut failures = Vec::new();
    for (name, args) in cases() {
        let ui = Ui::from_tool_args(&args).unwrap_or_else(|e| panic!("{name}: {e}"));

        // Lark: valid against our schema, or a clear error.
        match render_lark(&ui) {
            Ok(card) => {
                assert_lark_valid(&card, name);
                let pretty = serde_json::to_string_pretty(&card).unwrap() + "\n";
                failures.extend(snapshot(&format!("{name}.lark.json"), &pretty).err());
            }
            Err(e) => failures
                .extend(snapshot(&format!("{name}.lark.error.txt"), &format!("{e}\n")).err()),
        }

        // A2UI: createSurface first, every message valid against the A2UI schema.
        let messages = render_a2ui(&ui);
        assert!(
            messages[0].get("createSurface").is_some(),
            "{name}: {messages:?}"
        );
        assert_a2ui_valid(&messages, name);
        let pretty = serde_json::to_string_pretty(&messages).unwrap() + "\n";
        failures.extend(snapshot(&format!("{name}.a2ui.json"), &pretty).err());

        // Telegram: parts within the limit, allowed tags only.
        let parts = render_telegram(&ui);
        assert!(!parts.is_empty(), "{name}: no Telegram parts");
        for (i, p) in parts.iter().enumerate() {
            assert_telegram_part(p, &format!("{name} part {i}"));
        }
        failures
            .extend(snapshot(&format!("{name}.telegram.html"), &telegram_snapshot(&parts)).err());

        // Terminal text.
        let text = render_text(&ui);
        assert!(text.ends_with('\n'), "{name}");
        failures.extend(snapshot(&format!("{name}.txt"), &text).err());

        // The tool result carries the Ui as JSON; adapters parse it back unchanged.
        let back: Ui = serde_json::from_value(serde_json::to_value(&ui).unwrap())
            .unwrap_or_else(|e| panic!("{name}: round trip: {e}"));
        assert_eq!(back, ui, "{name}: serde round trip");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn compare_lark_is_one_markdown_table_with_bold_first_column_and_one_line_cells() {
    let ui = Ui::from_tool_args(&cases()[0].1).unwrap();
    let card = render_lark(&ui).unwrap();
    assert_eq!(card["schema"], "2.0");
    assert_eq!(card["header"]["title"]["content"], "LLM APIs");
    assert_eq!(card["header"]["template"], "blue");
    let elements = card["body"]["elements"].as_array().unwrap();
    assert_eq!(elements.len(), 1);
    let md = elements[0]["content"].as_str().unwrap();
    let lines: Vec<&str> = md.lines().collect();
    assert_eq!(lines.len(), 2 + 3, "header, rule, three rows: {md}");
    assert!(lines[2].starts_with("| **gpt-4o-mini** |"), "{md}");
    assert!(
        lines[3].contains("line one line two"),
        "no newline inside a cell: {md}"
    );
    assert!(lines[2].contains("cheap \\| fast"), "pipes escaped: {md}");
    assert!(
        lines[4].contains("&#60;at id=all&#62;"),
        "tags escaped: {md}"
    );
}

#[test]
fn lark_keeps_newlines_outside_tables() {
    let ui = Ui::from_tool_args(&json!({"card": {"type": "timeline", "title": "T",
        "nodes": [{"title": "a", "body": "one\\ntwo"}]}}))
    .unwrap();
    let card = render_lark(&ui).unwrap();
    assert_eq!(card["body"]["elements"][0]["content"], "**a**\none\ntwo");
}

#[test]
fn stats_lark_is_weighted_columns_with_label_value_trend() {
    let ui = Ui::from_tool_args(&json!({"card": {"type": "stats", "title": "S", "metrics": [
        {"label": "Up", "value": 1, "trend": "+1"},
        {"label": "Down", "value": 2, "trend": "-1"}]}}))
    .unwrap();
    let card = render_lark(&ui).unwrap();
    let set = &card["body"]["elements"][0];
    assert_eq!(set["tag"], "column_set");
    let cols = set["columns"].as_array().unwrap();
    assert_eq!(cols.len(), 2);
    for c in cols {
        assert_eq!(c["width"], "weighted");
        assert_eq!(c["elements"].as_array().unwrap().len(), 3);
    }
    assert!(cols[0]["elements"][2]["content"]
        .as_str()
        .unwrap()
        .contains("green"));
    assert!(cols[1]["elements"][2]["content"]
        .as_str()
        .unwrap()
        .contains("red"));
    assert_eq!(cols[1]["elements"][1]["text_size"], "heading");
}

#[test]
fn text_tables_align_cjk_and_emoji_by_display_width() {
    let (_, args) = cases()
        .into_iter()
        .find(|(n, _)| *n == "compare_cjk_emoji")
        .unwrap();
    let text = render_text(&Ui::from_tool_args(&args).unwrap());
    let table: Vec<&str> = text.lines().skip(2).collect();
    let cols = |l: &str| -> Vec<usize> {
        let mut width = 0;
        let mut out = Vec::new();
        for c in l.chars() {
            if c == '│' || c == '┼' {
                out.push(width);
            }
            width += unicode_width_of(c);
        }
        out
    };
    let first = cols(table[0]);
    assert_eq!(first.len(), 2, "{text}");
    for l in &table {
        assert_eq!(cols(l), first, "misaligned line {l:?} in\n{text}");
    }
}

/// Column width of one char as the renderer counts it (via a one-char card cell).
fn unicode_width_of(c: char) -> usize {
    ethan_cards::width::display_width(c.encode_utf8(&mut [0; 4]))
}
