//! Plain text for the terminal (`ethan chat`): no markup, tables aligned by display width so
//! CJK and emoji line up (they count two columns), box-drawing rules.

use crate::a2ui::OutlineLine;
use crate::model::{Card, Compare, Rank, Stats, Timeline};
use crate::normalize::one_line;
use crate::telegram::table_lines;
use crate::width::{display_width, pad_to};

pub(crate) fn card_to_text(card: &Card) -> String {
    let mut out: Vec<String> = Vec::new();
    if let Some(t) = card.title() {
        let t = one_line(t);
        out.push(t.clone());
        out.push("─".repeat(display_width(&t).max(1)));
    }
    if let Card::Rank(Rank {
        subtitle: Some(s), ..
    }) = card
    {
        out.push(s.clone());
        out.push(String::new());
    }
    match card {
        Card::Compare(c) => compare(c, &mut out),
        Card::Rank(r) => rank(r, &mut out),
        Card::Stats(s) => stats(s, &mut out),
        Card::Timeline(t) => timeline(t, &mut out),
    }
    let mut s = out.join("\n");
    s.push('\n');
    s
}

pub(crate) fn outline_to_text(lines: &[OutlineLine]) -> String {
    let mut out = String::new();
    for l in lines {
        match l {
            OutlineLine::Text { text, heading } => {
                out.push_str(text);
                out.push('\n');
                if *heading {
                    let w = text.lines().map(display_width).max().unwrap_or(0);
                    out.push_str(&"─".repeat(w.max(1)));
                    out.push('\n');
                }
            }
            OutlineLine::Rule => out.push_str("────────\n"),
        }
    }
    if out.is_empty() {
        out.push_str("(empty card)\n");
    }
    out
}

fn compare(c: &Compare, out: &mut Vec<String>) {
    let (head, rows) = table_lines(&c.columns, &c.rows, " │ ", "─┼─", '─');
    out.extend(head);
    out.extend(rows);
    if c.rows.is_empty() {
        out.push("(no rows)".into());
    }
}

fn rank(r: &Rank, out: &mut Vec<String>) {
    if r.items.is_empty() {
        out.push("(no items)".into());
        return;
    }
    let w = r.items.len().to_string().len();
    for (i, it) in r.items.iter().enumerate() {
        let mut l = format!("{:>w$}. {}", i + 1, one_line(&it.name));
        if let Some(s) = &it.score {
            l.push_str(&format!(" — {}", one_line(s)));
        }
        out.push(l);
        if let Some(d) = &it.desc {
            out.extend(d.lines().map(|l| format!("{}{l}", " ".repeat(w + 2))));
        }
    }
}

fn stats(s: &Stats, out: &mut Vec<String>) {
    if s.metrics.is_empty() {
        out.push("(no metrics)".into());
        return;
    }
    let labels: Vec<String> = s.metrics.iter().map(|m| one_line(&m.label)).collect();
    let values: Vec<String> = s.metrics.iter().map(|m| one_line(&m.value)).collect();
    let lw = labels.iter().map(|l| display_width(l)).max().unwrap_or(0);
    let vw = values.iter().map(|v| display_width(v)).max().unwrap_or(0);
    for ((m, l), v) in s.metrics.iter().zip(&labels).zip(&values) {
        let line = match &m.trend {
            Some(t) => format!("{}  {}  {}", pad_to(l, lw), pad_to(v, vw), one_line(t)),
            None => format!("{}  {}", pad_to(l, lw), v),
        };
        out.push(line.trim_end().to_string());
    }
}

fn timeline(t: &Timeline, out: &mut Vec<String>) {
    if t.nodes.is_empty() {
        out.push("(nothing yet)".into());
        return;
    }
    for (i, n) in t.nodes.iter().enumerate() {
        if i > 0 {
            out.push(String::new());
        }
        out.push(format!("● {}", one_line(&n.title)));
        if let Some(b) = &n.body {
            out.extend(b.lines().map(|l| format!("  {l}").trim_end().to_string()));
        }
        out.extend(n.items.iter().map(|i| format!("  • {}", one_line(i))));
    }
}
