//! Telegram messages in `parse_mode: "HTML"`, split into parts that each fit one message.
//!
//! Telegram (Bot API `sendMessage`) accepts at most 4096 characters of text, counted in UTF-16
//! code units, and a small HTML subset; we use only `<b>`, `<i>` and `<pre>` and escape `&`,
//! `<`, `>` in all text. Every tag opens and closes on the same line, so a card can be cut at
//! any line.
//!
//! Layout per template:
//! - `compare` → a monospace `<pre>` table, columns aligned by display width (CJK and emoji
//!   count two columns);
//! - `rank` → `1. <b>name</b> — score`, the description in italics under it;
//! - `stats` → `label: <b>value</b> · trend`, one metric per line;
//! - `timeline` → a section per node: bold title, then the body or `•` items.
//!
//! Splitting: blocks (title, table, section) are packed into parts of at most
//! [`TELEGRAM_LIMIT`] units; a block that does not fit is moved to the next part whole, and a
//! block larger than a part is split between lines — a table between rows, its header repeated
//! in every part. At most [`TELEGRAM_MAX_PARTS`] parts are returned; beyond that the last one
//! ends with a note that the card was cut.

use crate::a2ui::OutlineLine;
use crate::model::{Card, Compare, Rank, Stats, Timeline};
use crate::normalize::one_line;
use crate::width::{display_width, pad_to};

/// Telegram's limit on one message's text, in UTF-16 code units.
pub const TELEGRAM_LIMIT: usize = 4096;
/// The most messages one card becomes.
pub const TELEGRAM_MAX_PARTS: usize = 10;

const TRUNCATED_NOTE: &str = "<i>… (cut: the card is too long for Telegram)</i>";

/// Escapes text for Telegram HTML.
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// Length of `s` in UTF-16 code units, the unit of Telegram's limits.
pub fn utf16_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// A unit of layout. Lines are complete HTML (balanced tags).
enum Block {
    Lines(Vec<String>),
    /// A `<pre>` table: `head` lines repeated in each part, `rows` split between parts.
    Pre {
        head: Vec<String>,
        rows: Vec<String>,
    },
}

impl Block {
    fn render(&self) -> String {
        match self {
            Block::Lines(l) => l.join("\n"),
            Block::Pre { head, rows } => pre(head, rows),
        }
    }
}

fn pre<S: AsRef<str>>(head: &[String], rows: &[S]) -> String {
    let mut s = String::from("<pre>");
    let mut first = true;
    for l in head
        .iter()
        .map(String::as_str)
        .chain(rows.iter().map(AsRef::as_ref))
    {
        if !first {
            s.push('\n');
        }
        first = false;
        s.push_str(l);
    }
    s.push_str("</pre>");
    s
}

/// Each line of `text` escaped and wrapped in `<tag>` (empty lines stay empty).
fn wrap(tag: &str, text: &str) -> Vec<String> {
    text.lines()
        .map(|l| {
            if l.trim().is_empty() {
                String::new()
            } else {
                format!("<{tag}>{}</{tag}>", escape_html(l))
            }
        })
        .collect()
}

fn plain(text: &str) -> Vec<String> {
    text.lines().map(escape_html).collect()
}

pub(crate) fn card_to_telegram(card: &Card) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut head = Vec::new();
    if let Some(t) = card.title() {
        head.extend(wrap("b", t));
    }
    if let Card::Rank(Rank {
        subtitle: Some(s), ..
    }) = card
    {
        head.extend(wrap("i", s));
    }
    if !head.is_empty() {
        blocks.push(Block::Lines(head));
    }
    match card {
        Card::Compare(c) => compare(c, &mut blocks),
        Card::Rank(r) => rank(r, &mut blocks),
        Card::Stats(s) => stats(s, &mut blocks),
        Card::Timeline(t) => timeline(t, &mut blocks),
    }
    pack(&blocks)
}

pub(crate) fn outline_to_telegram(lines: &[OutlineLine]) -> Vec<String> {
    let mut out = Vec::new();
    for l in lines {
        match l {
            OutlineLine::Text {
                text,
                heading: true,
            } => out.extend(wrap("b", text)),
            OutlineLine::Text { text, .. } => out.extend(plain(text)),
            OutlineLine::Rule => out.push("——————".into()),
        }
    }
    if out.is_empty() {
        out.push("<i>(empty card)</i>".into());
    }
    pack(&[Block::Lines(out)])
}

/// Aligned table lines: header, rule, rows (not escaped).
pub(crate) fn table_lines(
    columns: &[String],
    rows: &[Vec<String>],
    sep: &str,
    rule_sep: &str,
    rule: char,
) -> (Vec<String>, Vec<String>) {
    let cols: Vec<String> = columns.iter().map(|c| one_line(c)).collect();
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| one_line(c)).collect())
        .collect();
    let mut widths: Vec<usize> = cols.iter().map(|c| display_width(c)).collect();
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(display_width(c));
        }
    }
    let line = |cells: &[String]| -> String {
        cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| pad_to(c, *w))
            .collect::<Vec<_>>()
            .join(sep)
            .trim_end()
            .to_string()
    };
    let rule_line = widths
        .iter()
        .map(|w| rule.to_string().repeat(*w))
        .collect::<Vec<_>>()
        .join(rule_sep);
    let head = vec![line(&cols), rule_line];
    let body = rows.iter().map(|r| line(r)).collect();
    (head, body)
}

fn compare(c: &Compare, blocks: &mut Vec<Block>) {
    let (head, rows) = table_lines(&c.columns, &c.rows, "  ", "  ", '-');
    blocks.push(Block::Pre {
        head: head.iter().map(|l| escape_html(l)).collect(),
        rows: rows.iter().map(|l| escape_html(l)).collect(),
    });
    if c.rows.is_empty() {
        blocks.push(Block::Lines(vec!["<i>(no rows)</i>".into()]));
    }
}

fn rank(r: &Rank, blocks: &mut Vec<Block>) {
    if r.items.is_empty() {
        blocks.push(Block::Lines(vec!["<i>(no items)</i>".into()]));
        return;
    }
    let has_desc = r.items.iter().any(|i| i.desc.is_some());
    let mut lines = Vec::new();
    for (i, it) in r.items.iter().enumerate() {
        if i > 0 && has_desc {
            lines.push(String::new());
        }
        let mut l = format!("{}. <b>{}</b>", i + 1, escape_html(&one_line(&it.name)));
        if let Some(s) = &it.score {
            l.push_str(&format!(" — {}", escape_html(&one_line(s))));
        }
        lines.push(l);
        if let Some(d) = &it.desc {
            lines.extend(wrap("i", d).into_iter().map(|l| {
                if l.is_empty() {
                    l
                } else {
                    format!("    {l}")
                }
            }));
        }
    }
    blocks.push(Block::Lines(lines));
}

fn stats(s: &Stats, blocks: &mut Vec<Block>) {
    if s.metrics.is_empty() {
        blocks.push(Block::Lines(vec!["<i>(no metrics)</i>".into()]));
        return;
    }
    let lines = s
        .metrics
        .iter()
        .map(|m| {
            let mut l = format!(
                "{}: <b>{}</b>",
                escape_html(&one_line(&m.label)),
                escape_html(&one_line(&m.value))
            );
            if let Some(t) = &m.trend {
                l.push_str(&format!(" · {}", escape_html(&one_line(t))));
            }
            l
        })
        .collect();
    blocks.push(Block::Lines(lines));
}

fn timeline(t: &Timeline, blocks: &mut Vec<Block>) {
    if t.nodes.is_empty() {
        blocks.push(Block::Lines(vec!["<i>(nothing yet)</i>".into()]));
        return;
    }
    for n in &t.nodes {
        let mut lines = vec![format!("<b>{}</b>", escape_html(&one_line(&n.title)))];
        if let Some(b) = &n.body {
            lines.extend(plain(b));
        }
        lines.extend(
            n.items
                .iter()
                .map(|i| format!("• {}", escape_html(&one_line(i)))),
        );
        blocks.push(Block::Lines(lines));
    }
}

// --- packing ------------------------------------------------------------------------------

struct Packer {
    parts: Vec<String>,
    cur: String,
}

impl Packer {
    fn fits(&self, sep: &str, piece: &str) -> bool {
        let sep = if self.cur.is_empty() {
            0
        } else {
            utf16_len(sep)
        };
        utf16_len(&self.cur) + sep + utf16_len(piece) <= TELEGRAM_LIMIT
    }

    fn flush(&mut self) {
        if !self.cur.is_empty() {
            self.parts.push(std::mem::take(&mut self.cur));
        }
    }

    /// Appends `piece` (balanced HTML) to the current part, or starts a new part with it.
    fn push(&mut self, sep: &str, piece: &str) {
        if !self.fits(sep, piece) {
            self.flush();
        }
        if !self.cur.is_empty() {
            self.cur.push_str(sep);
        }
        if utf16_len(piece) <= TELEGRAM_LIMIT {
            self.cur.push_str(piece);
        } else {
            self.cur.push_str(&cut_html(piece, TELEGRAM_LIMIT));
        }
    }

    fn block(&mut self, b: &Block) {
        let whole = b.render();
        if self.fits("\n\n", &whole) || utf16_len(&whole) <= TELEGRAM_LIMIT {
            // Whole, in this part or at the top of the next one.
            self.push("\n\n", &whole);
            return;
        }
        match b {
            Block::Lines(lines) => {
                for (k, l) in lines.iter().enumerate() {
                    self.push(if k == 0 { "\n\n" } else { "\n" }, l);
                }
            }
            Block::Pre { head, rows } => {
                let fixed =
                    utf16_len("<pre></pre>") + head.iter().map(|h| utf16_len(h) + 1).sum::<usize>();
                let mut chunk: Vec<&String> = Vec::new();
                let mut len = fixed;
                for r in rows {
                    let add = utf16_len(r) + 1;
                    if len + add > TELEGRAM_LIMIT && !chunk.is_empty() {
                        self.push("\n\n", &pre(head, &chunk));
                        chunk.clear();
                        len = fixed;
                    }
                    chunk.push(r);
                    len += add;
                }
                if !chunk.is_empty() || rows.is_empty() {
                    self.push("\n\n", &pre(head, &chunk));
                }
            }
        }
    }
}

fn pack(blocks: &[Block]) -> Vec<String> {
    let mut p = Packer {
        parts: Vec::new(),
        cur: String::new(),
    };
    for b in blocks {
        p.block(b);
    }
    p.flush();
    if p.parts.len() > TELEGRAM_MAX_PARTS {
        p.parts.truncate(TELEGRAM_MAX_PARTS);
        if let Some(last) = p.parts.last_mut() {
            let room = TELEGRAM_LIMIT - utf16_len(TRUNCATED_NOTE) - 1;
            if utf16_len(last) > room {
                *last = cut_html(last, room);
            }
            last.push('\n');
            last.push_str(TRUNCATED_NOTE);
        }
    }
    p.parts
}

/// The longest prefix of `html` that, with `…` and the closing tags of whatever is still open,
/// fits in `max` UTF-16 units. Never cuts inside a tag or an entity.
pub(crate) fn cut_html(html: &str, max: usize) -> String {
    if utf16_len(html) <= max {
        return html.to_string();
    }
    let closing = |stack: &[&str]| -> usize { stack.iter().map(|t| t.len() + 3).sum() };
    let mut stack: Vec<&str> = Vec::new();
    let mut best: (usize, Vec<&str>) = (0, Vec::new());
    let mut used = 0usize;
    let mut i = 0usize;
    while i < html.len() {
        if used + 1 + closing(&stack) <= max {
            best = (i, stack.clone());
        }
        let rest = &html[i..];
        let token_end = if rest.starts_with('<') {
            rest.find('>').map(|e| e + 1)
        } else if rest.starts_with('&') {
            // `;` is ASCII, so its byte position is a char boundary.
            rest.bytes().take(12).position(|b| b == b';').map(|e| e + 1)
        } else {
            None
        };
        match token_end {
            Some(end) => {
                let tag = &rest[..end];
                if let Some(name) = tag.strip_prefix("</") {
                    let name = name.trim_end_matches('>');
                    if let Some(pos) = stack.iter().rposition(|t| *t == name) {
                        stack.truncate(pos);
                    }
                } else if tag.starts_with('<') {
                    let name = tag[1..end - 1]
                        .split(|c: char| c.is_whitespace())
                        .next()
                        .unwrap_or("");
                    stack.push(name);
                }
                used += utf16_len(tag);
                i += end;
            }
            None => {
                let c = rest.chars().next().unwrap_or(' ');
                used += c.len_utf16();
                i += c.len_utf8().max(1);
            }
        }
    }
    let (end, open) = best;
    let mut out = html[..end].trim_end().to_string();
    out.push('…');
    for t in open.iter().rev() {
        out.push_str(&format!("</{t}>"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_keeps_tags_balanced_and_entities_whole() {
        let s = "<b>ab&amp;cd</b> tail text";
        let cut = cut_html(s, 12);
        assert!(utf16_len(&cut) <= 12, "{cut}");
        assert_eq!(cut, "<b>ab…</b>");
        // 5 + 4 + 1 + 6 units
        let cut = cut_html("<pre>0123456789</pre>", 16);
        assert_eq!(cut, "<pre>0123…</pre>");
    }

    #[test]
    fn cut_handles_bare_ampersands_before_wide_chars() {
        // Not our output (we escape `&`), but must not panic on a char boundary.
        let s = format!("<i>&{}</i>", "中文字符".repeat(20));
        let cut = cut_html(&s, 20);
        assert!(utf16_len(&cut) <= 20, "{cut}");
        assert!(cut.ends_with("…</i>"), "{cut}");
    }

    #[test]
    fn utf16_counts_astral_as_two() {
        assert_eq!(utf16_len("a🚀中"), 4);
    }
}
