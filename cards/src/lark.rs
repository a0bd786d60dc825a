//! Lark / Feishu interactive cards, card JSON 2.0.
//!
//! Shape (Lark doc "卡片 JSON 2.0 结构"): `{"schema": "2.0", "config": {...}, "header": {...},
//! "body": {"elements": [...]}}`; unknown properties are errors on Lark's side (200621), so we
//! emit only the subset described by `schema/lark_card_v2.schema.json`: `markdown`,
//! `column_set` / `column`, `hr`. The card goes out as the `content` string of an
//! `interactive` message (`POST /open-apis/im/v1/messages`, or `.../{message_id}/reply`), which
//! Lark limits to 30 KB ([`LARK_CARD_LIMIT`]).
//!
//! The header carries the title and a colour per template ([`header_template`]); an untitled
//! `stats` card has no header. `config.summary` (the chat-list preview) is the title.
//!
//! Layout per template:
//! - `compare` → one markdown table, first column bold, cells on one line (`|` escaped);
//! - `rank` → one markdown element of numbered entries, the description in grey under each;
//! - `stats` → `column_set`s of at most three weighted columns: grey label, big value, trend in
//!   green (up), red (down) or grey;
//! - `timeline` → one markdown section per node: bold title, then the body or a `- ` list.
//!
//! Text from the model keeps its markdown (`**bold**`, links) but `<` and `>` are escaped as
//! `&#60;` / `&#62;`, so it cannot smuggle `<at id=all>` or `<font>` tags in. Newlines are kept:
//! Lark's markdown component shows a single `\n` as a line break.

use crate::error::CardError;
use crate::model::{Card, Compare, Rank, Stats, Timeline, Trend};
use crate::normalize::one_line;
use serde_json::{json, Value};

/// Lark's limit on an interactive message's card JSON, in bytes (error 230025 above it).
pub const LARK_CARD_LIMIT: usize = 30 * 1024;

/// The header colour (`header.template`) of each template.
pub fn header_template(card: &Card) -> &'static str {
    match card {
        Card::Compare(_) => "blue",
        Card::Rank(_) => "orange",
        Card::Stats(_) => "green",
        Card::Timeline(_) => "purple",
    }
}

/// Renders `card` as a card JSON 2.0 object, or [`CardError::TooLarge`] when its JSON is over
/// [`LARK_CARD_LIMIT`] bytes.
pub(crate) fn card_to_lark(card: &Card) -> Result<Value, CardError> {
    let elements = match card {
        Card::Compare(c) => compare(c),
        Card::Rank(r) => rank(r),
        Card::Stats(s) => stats(s),
        Card::Timeline(t) => timeline(t),
    };
    let mut config = json!({"update_multi": true, "summary": {"content": summary(card)}});
    if matches!(card, Card::Compare(_)) {
        config["width_mode"] = json!("fill");
    }
    let mut out = json!({"schema": "2.0", "config": config});
    if let Some(title) = card.title() {
        let mut header = json!({
            "title": {"tag": "plain_text", "content": one_line(title)},
            "template": header_template(card),
        });
        if let Card::Rank(Rank {
            subtitle: Some(s), ..
        }) = card
        {
            header["subtitle"] = json!({"tag": "plain_text", "content": one_line(s)});
        }
        out["header"] = header;
    }
    out["body"] = json!({ "elements": elements });
    let bytes = serde_json::to_string(&out).map(|s| s.len()).unwrap_or(0);
    if bytes > LARK_CARD_LIMIT {
        return Err(CardError::TooLarge {
            platform: "Lark",
            bytes,
            limit: LARK_CARD_LIMIT,
        });
    }
    Ok(out)
}

/// The chat-list preview (`config.summary.content`).
fn summary(card: &Card) -> String {
    match (card, card.title()) {
        (_, Some(t)) => one_line(t),
        (Card::Stats(s), None) => s
            .metrics
            .iter()
            .take(3)
            .map(|m| format!("{}: {}", one_line(&m.label), one_line(&m.value)))
            .collect::<Vec<_>>()
            .join(" · "),
        _ => String::new(),
    }
}

/// Escapes what Lark's markdown would read as tags.
pub(crate) fn md(s: &str) -> String {
    s.replace('<', "&#60;").replace('>', "&#62;")
}

fn cell(s: &str) -> String {
    md(&one_line(s)).replace('|', "\\|")
}

fn markdown(content: String) -> Value {
    json!({"tag": "markdown", "content": content})
}

fn note(text: &str) -> Value {
    json!({"tag": "markdown", "content": format!("<font color='grey'>{text}</font>"), "text_size": "notation"})
}

fn grey_lines(s: &str) -> String {
    s.lines()
        .map(|l| {
            if l.trim().is_empty() {
                String::new()
            } else {
                format!("<font color='grey'>{}</font>", md(l))
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn compare(c: &Compare) -> Vec<Value> {
    let mut lines = Vec::with_capacity(c.rows.len() + 2);
    let head: Vec<String> = c
        .columns
        .iter()
        .map(|n| if n.is_empty() { " ".into() } else { cell(n) })
        .collect();
    lines.push(format!("| {} |", head.join(" | ")));
    lines.push(format!("|{}", " --- |".repeat(c.columns.len())));
    for row in &c.rows {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(j, v)| {
                let v = cell(v);
                if j == 0 && !v.is_empty() {
                    format!("**{v}**")
                } else {
                    v
                }
            })
            .collect();
        lines.push(format!("| {} |", cells.join(" | ")));
    }
    let mut out = vec![markdown(lines.join("\n"))];
    if c.rows.is_empty() {
        out.push(note("(no rows)"));
    }
    out
}

fn rank(r: &Rank) -> Vec<Value> {
    if r.items.is_empty() {
        return vec![note("(no items)")];
    }
    let has_desc = r.items.iter().any(|i| i.desc.is_some());
    let entries: Vec<String> = r
        .items
        .iter()
        .enumerate()
        .map(|(i, it)| {
            let mut e = format!("**{}. {}**", i + 1, md(&one_line(&it.name)));
            if let Some(s) = &it.score {
                e.push_str(&format!(" · {}", md(&one_line(s))));
            }
            if let Some(d) = &it.desc {
                e.push('\n');
                e.push_str(&grey_lines(d));
            }
            e
        })
        .collect();
    let sep = if has_desc { "\n\n" } else { "\n" };
    vec![markdown(entries.join(sep))]
}

fn stats(s: &Stats) -> Vec<Value> {
    if s.metrics.is_empty() {
        return vec![note("(no metrics)")];
    }
    crate::a2ui::stat_rows(s.metrics.len())
        .into_iter()
        .map(|range| {
            let columns: Vec<Value> = s.metrics[range]
                .iter()
                .map(|m| {
                    let mut elements = vec![
                        json!({"tag": "markdown", "content": format!("<font color='grey'>{}</font>", md(&one_line(&m.label))), "text_align": "center", "text_size": "notation"}),
                        json!({"tag": "markdown", "content": format!("**{}**", md(&one_line(&m.value))), "text_align": "center", "text_size": "heading"}),
                    ];
                    if let Some(t) = &m.trend {
                        let colour = match m.trend_direction() {
                            Trend::Up => "green",
                            Trend::Down => "red",
                            Trend::Flat => "grey",
                        };
                        elements.push(json!({"tag": "markdown", "content": format!("<font color='{colour}'>{}</font>", md(&one_line(t))), "text_align": "center", "text_size": "notation"}));
                    }
                    json!({
                        "tag": "column", "width": "weighted", "weight": 1,
                        "background_style": "grey-50", "padding": "12px", "vertical_spacing": "2px",
                        "elements": elements,
                    })
                })
                .collect();
            json!({"tag": "column_set", "flex_mode": "none", "horizontal_spacing": "8px", "columns": columns})
        })
        .collect()
}

fn timeline(t: &Timeline) -> Vec<Value> {
    if t.nodes.is_empty() {
        return vec![note("(nothing yet)")];
    }
    t.nodes
        .iter()
        .map(|n| {
            let mut s = format!("**{}**", md(&one_line(&n.title)));
            if let Some(b) = &n.body {
                s.push('\n');
                s.push_str(&md(b));
            }
            for it in &n.items {
                s.push_str("\n- ");
                s.push_str(&md(&one_line(it)));
            }
            markdown(s)
        })
        .collect()
}
