//! HTML for the web page: a card as a small fragment of plain HTML elements, every text
//! escaped, no attribute but `class`, no script, style, link or URL of any kind.
//!
//! Layout per template (class names are the page's stylesheet's hooks):
//! - `compare` → `<table class="card-table">` with a `<thead>` of the columns (`<th
//!   scope="col">`) and one `<tr>` per row, its first cell a row header (`<th scope="row">`);
//! - `rank` → `<ol class="card-rank">`, one `<li>` per item: the name in `<strong>`, the score in
//!   `<span class="score">`, the description in `<p>`;
//! - `stats` → `<dl class="card-stats">`, a `<div class="metric">` per metric with its label
//!   (`<dt>`), value (`<dd class="value">`) and trend (`<dd class="trend up|down|flat">`);
//! - `timeline` → `<ol class="card-timeline">`, one `<li>` per node: its title in `<h4>`, then
//!   its body in `<p>`s (one per line) or its items in a `<ul>`.
//!
//! The whole is wrapped in `<section class="card card-<type>">` with the title in `<h3>` (and a
//! rank's subtitle in `<p class="subtitle">`). Custom A2UI becomes its texts in reading order:
//! headings in `<h4>`, other texts in `<p>`, dividers as `<hr>`.
//!
//! Nothing is cut: the page scrolls, so unlike Telegram and Lark there is no size limit.

use crate::a2ui::OutlineLine;
use crate::model::{Card, Compare, Rank, Stats, Timeline, Trend};
use crate::normalize::one_line;
use std::fmt::Write;

/// Escapes text for an HTML text node or a double-quoted attribute value: `& < > " '`.
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// One line of model text, escaped.
fn line(s: &str) -> String {
    escape_html(&one_line(s))
}

/// Each non-empty line of `text` as an escaped `<p>`.
fn paragraphs(out: &mut String, text: &str) {
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        let _ = write!(out, "<p>{}</p>", escape_html(l.trim_end()));
    }
}

pub(crate) fn card_to_html(card: &Card) -> String {
    let mut out = format!("<section class=\"card card-{}\">", card.kind());
    if let Some(t) = card.title().filter(|t| !t.trim().is_empty()) {
        let _ = write!(out, "<h3>{}</h3>", line(t));
    }
    match card {
        Card::Compare(c) => compare(&mut out, c),
        Card::Rank(r) => rank(&mut out, r),
        Card::Stats(s) => stats(&mut out, s),
        Card::Timeline(t) => timeline(&mut out, t),
    }
    out.push_str("</section>");
    out
}

pub(crate) fn outline_to_html(lines: &[OutlineLine]) -> String {
    let mut out = String::from("<section class=\"card card-custom\">");
    for l in lines {
        match l {
            OutlineLine::Text {
                text,
                heading: true,
            } => {
                let _ = write!(out, "<h4>{}</h4>", line(text));
            }
            OutlineLine::Text { text, .. } => paragraphs(&mut out, text),
            OutlineLine::Rule => out.push_str("<hr>"),
        }
    }
    if lines.is_empty() {
        out.push_str("<p class=\"empty\">(empty card)</p>");
    }
    out.push_str("</section>");
    out
}

fn compare(out: &mut String, c: &Compare) {
    out.push_str("<div class=\"scroll\"><table class=\"card-table\"><thead><tr>");
    for col in &c.columns {
        let _ = write!(out, "<th scope=\"col\">{}</th>", line(col));
    }
    out.push_str("</tr></thead><tbody>");
    for row in &c.rows {
        out.push_str("<tr>");
        for (i, cell) in row.iter().enumerate() {
            if i == 0 {
                let _ = write!(out, "<th scope=\"row\">{}</th>", line(cell));
            } else {
                let _ = write!(out, "<td>{}</td>", line(cell));
            }
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div>");
    if c.rows.is_empty() {
        out.push_str("<p class=\"empty\">(no rows)</p>");
    }
}

fn rank(out: &mut String, r: &Rank) {
    if let Some(s) = r.subtitle.as_deref().filter(|s| !s.trim().is_empty()) {
        let _ = write!(out, "<p class=\"subtitle\">{}</p>", line(s));
    }
    if r.items.is_empty() {
        out.push_str("<p class=\"empty\">(no items)</p>");
        return;
    }
    out.push_str("<ol class=\"card-rank\">");
    for it in &r.items {
        let _ = write!(out, "<li><strong>{}</strong>", line(&it.name));
        if let Some(s) = &it.score {
            let _ = write!(out, " <span class=\"score\">{}</span>", line(s));
        }
        if let Some(d) = &it.desc {
            paragraphs(out, d);
        }
        out.push_str("</li>");
    }
    out.push_str("</ol>");
}

fn stats(out: &mut String, s: &Stats) {
    if s.metrics.is_empty() {
        out.push_str("<p class=\"empty\">(no metrics)</p>");
        return;
    }
    out.push_str("<dl class=\"card-stats\">");
    for m in &s.metrics {
        let _ = write!(
            out,
            "<div class=\"metric\"><dt>{}</dt><dd class=\"value\">{}</dd>",
            line(&m.label),
            line(&m.value)
        );
        if let Some(t) = &m.trend {
            let dir = match m.trend_direction() {
                Trend::Up => "up",
                Trend::Down => "down",
                Trend::Flat => "flat",
            };
            let _ = write!(out, "<dd class=\"trend {dir}\">{}</dd>", line(t));
        }
        out.push_str("</div>");
    }
    out.push_str("</dl>");
}

fn timeline(out: &mut String, t: &Timeline) {
    if t.nodes.is_empty() {
        out.push_str("<p class=\"empty\">(no entries)</p>");
        return;
    }
    out.push_str("<ol class=\"card-timeline\">");
    for n in &t.nodes {
        let _ = write!(out, "<li><h4>{}</h4>", line(&n.title));
        if !n.items.is_empty() {
            out.push_str("<ul>");
            for i in &n.items {
                let _ = write!(out, "<li>{}</li>", line(i));
            }
            out.push_str("</ul>");
        } else if let Some(b) = &n.body {
            paragraphs(out, b);
        }
        out.push_str("</li>");
    }
    out.push_str("</ol>");
}

#[cfg(test)]
mod tests {
    use crate::{render_html, Ui};
    use serde_json::json;

    fn ui(v: serde_json::Value) -> Ui {
        Ui::from_tool_args(&v).unwrap()
    }

    #[test]
    fn compare_is_a_table_with_column_and_row_headers() {
        let html = render_html(&ui(json!({"card": {
            "type": "compare", "title": "Plans",
            "columns": ["Plan", "Price", "Seats"],
            "rows": [{"values": ["Free", 0, 1]}, {"values": ["Pro", "$8"]}]
        }})));
        assert_eq!(
            html,
            "<section class=\"card card-compare\"><h3>Plans</h3><div class=\"scroll\">\
             <table class=\"card-table\"><thead><tr><th scope=\"col\">Plan</th>\
             <th scope=\"col\">Price</th><th scope=\"col\">Seats</th></tr></thead><tbody>\
             <tr><th scope=\"row\">Free</th><td>0</td><td>1</td></tr>\
             <tr><th scope=\"row\">Pro</th><td>$8</td><td></td></tr></tbody></table></div></section>"
        );
    }

    #[test]
    fn every_text_is_escaped() {
        let evil = "<script>alert(1)</script><img src=x onerror=alert(2)>\"'&";
        for card in [
            json!({"type": "compare", "title": evil, "columns": [evil], "rows": [{"values": [evil]}]}),
            json!({"type": "rank", "title": evil, "subtitle": evil, "items": [{"name": evil, "score": evil, "desc": evil}]}),
            json!({"type": "stats", "title": evil, "metrics": [{"label": evil, "value": evil, "trend": evil}]}),
            json!({"type": "timeline", "title": evil, "nodes": [{"title": evil, "body": evil}, {"title": evil, "items": [evil]}]}),
        ] {
            let html = render_html(&ui(json!({ "card": card })));
            assert!(!html.contains("<script"), "{html}");
            assert!(!html.contains("<img"), "{html}");
            assert!(!html.contains("\"'"), "{html}");
            assert!(html.contains("&lt;script&gt;"), "{html}");
        }
    }

    #[test]
    fn rank_stats_and_timeline_use_lists() {
        let html = render_html(&ui(json!({"card": {
            "type": "rank", "title": "Best", "items": [{"name": "A", "score": "9", "desc": "good"}]
        }})));
        assert!(html.contains(
            "<ol class=\"card-rank\"><li><strong>A</strong> <span class=\"score\">9</span><p>good</p></li></ol>"
        ));
        let html = render_html(&ui(json!({"card": {
            "type": "stats", "metrics": [{"label": "Users", "value": "1,204", "trend": "+12%"}]
        }})));
        assert!(html.contains(
            "<dt>Users</dt><dd class=\"value\">1,204</dd><dd class=\"trend up\">+12%</dd>"
        ));
        assert!(!html.contains("<h3>"), "no title: no heading");
        let html = render_html(&ui(json!({"card": {
            "type": "timeline", "title": "T", "nodes": [{"title": "Mon", "items": ["x", "y"]}]
        }})));
        assert!(html.contains("<li><h4>Mon</h4><ul><li>x</li><li>y</li></ul></li>"));
    }

    #[test]
    fn custom_a2ui_becomes_its_texts() {
        let msgs = json!({"messages": [
            {"version": "v0.9", "createSurface": {"surfaceId": "s", "catalogId": crate::BASIC_CATALOG_ID}},
            {"version": "v0.9", "updateComponents": {"surfaceId": "s", "components": [
                {"id": "root", "component": "Column", "children": ["h", "t"]},
                {"id": "h", "component": "Text", "text": "<b>Head</b>", "variant": "h2"},
                {"id": "t", "component": "Text", "text": "body"}
            ]}}
        ]});
        let html = render_html(&ui(msgs));
        assert_eq!(
            html,
            "<section class=\"card card-custom\"><h4>&lt;b&gt;Head&lt;/b&gt;</h4><p>body</p></section>"
        );
    }
}
