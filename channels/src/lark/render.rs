//! Rendering for Lark: replies as card JSON 2.0, their `post`/text fallbacks, and the approval
//! cards with their callback answers. Pure functions, no I/O.
//!
//! Sources: PROTOCOLS §5–6 (open.feishu.cn "卡片 JSON 2.0 结构", the rich-text (markdown)
//! component, "卡片回传交互回调"; Go SDK `service/im/v1` content shapes).
//!
//! Reply cards (`{"schema":"2.0","config":{…},"body":{"elements":[{"tag":"markdown",…}]}}`):
//! - the model's Markdown goes into one `markdown` element. The JSON 2.0 markdown component
//!   follows standard Markdown, where a lone newline is a soft break (a space); so a single
//!   newline outside code blocks and tables becomes a hard break (two trailing spaces);
//! - at most [`MAX_TABLES_PER_CARD`] Markdown tables per card; further tables are shown as code
//!   blocks (the component refuses more);
//! - a long answer is split into several cards of at most [`CARD_TEXT_LIMIT`] bytes of
//!   JSON-escaped Markdown each (Lark allows 30 KB per card), between lines; a code block cut by a
//!   split is closed and reopened with its language, a table cut by a split repeats its header.
//!
//! When Lark refuses a card, the same Markdown goes out as a `post` with one `md` element
//! ([`post_content`]), and failing that as plain `text` ([`text_content`]).
//!
//! Approvals: [`approval_card`] has the buttons *Approve once*, *Approve for session* (left out
//! for `always` requests) and *Deny*, each with `behaviors: [{type: callback, value:
//! {"ethan_approval": request_id, "choice": "o"|"s"|"d"}}]`, under the call's description as
//! `plain_text` (shown as sent, nothing read as Markdown; the `post` fallback puts it in a code
//! block fenced longer than any backtick run inside); [`outcome_card`] replaces the
//! buttons with the outcome once a press counted (or the request ended otherwise);
//! [`callback_response`] is the body answering a `card.action.trigger`.

use crate::model::{ApprovalAck, ApprovalChoice, ApprovalRequest};
use serde::Serialize;
use serde_json::{json, Value};

/// Most JSON-escaped bytes of Markdown per card (Lark's card limit is 30 KB).
pub const CARD_TEXT_LIMIT: usize = 28 * 1024;
/// Most Markdown tables per card; the rest become code blocks.
pub const MAX_TABLES_PER_CARD: usize = 3;
/// Key of the request id in an approval button's callback `value`.
pub const APPROVAL_KEY: &str = "ethan_approval";
/// Key of the choice code (`o`, `s`, `d`) in an approval button's callback `value`.
pub const CHOICE_KEY: &str = "choice";

/// Card JSON 2.0 for one part of a reply.
pub fn reply_card(markdown: &str) -> Value {
    let mut config = json!({"update_multi": true});
    let preview = summary(markdown);
    if !preview.is_empty() {
        config["summary"] = json!({ "content": preview });
    }
    json!({
        "schema": "2.0",
        "config": config,
        "body": {
            "elements": [
                {"tag": "markdown", "content": markdown},
            ],
        },
    })
}

/// The reply as card JSON 2.0 values, one per part (see the module docs). Empty input gives no
/// card.
pub fn reply_cards(markdown: &str) -> Vec<Value> {
    split_markdown(markdown, CARD_TEXT_LIMIT)
        .into_iter()
        .map(|part| reply_card(&hard_breaks(&part)))
        .collect()
}

/// The chat-list preview of a card: the first non-empty line, without Markdown markers, at most
/// 60 characters.
pub(crate) fn summary(markdown: &str) -> String {
    let line = markdown
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("```"))
        .unwrap_or("");
    let plain: String = line
        .trim_start_matches(['#', '>', '-', '*', ' '])
        .chars()
        .filter(|c| !matches!(c, '*' | '`' | '_' | '~' | '|'))
        .collect();
    let plain = plain.trim();
    if plain.chars().count() > 60 {
        let cut: String = plain.chars().take(59).collect();
        format!("{cut}…")
    } else {
        plain.to_string()
    }
}

/// `post` content (`msg_type: post`) carrying the Markdown in one `md` element.
pub fn post_content(markdown: &str) -> String {
    json!({"zh_cn": {"title": "", "content": [[{"tag": "md", "text": markdown}]]}}).to_string()
}

/// Plain `text` content (`msg_type: text`).
pub fn text_content(text: &str) -> String {
    json!({ "text": text }).to_string()
}

/// Length of `s` once escaped inside a JSON string.
fn escaped_len(s: &str) -> usize {
    s.chars()
        .map(|c| match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{08}' | '\u{0c}' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        })
        .sum()
}

fn fence_marker(line: &str) -> Option<&str> {
    let t = line.trim_start();
    if t.starts_with("```") {
        Some("```")
    } else if t.starts_with("~~~") {
        Some("~~~")
    } else {
        None
    }
}

/// A GFM delimiter row such as `| --- | :-: |` (it must contain a pipe).
fn is_delimiter_row(line: &str) -> bool {
    let t = line.trim();
    if !t.contains('|') || !t.contains('-') {
        return false;
    }
    let inner = t.trim_start_matches('|').trim_end_matches('|');
    inner.split('|').all(|cell| {
        let c = cell.trim();
        let c = c.strip_prefix(':').unwrap_or(c);
        let c = c.strip_suffix(':').unwrap_or(c);
        !c.is_empty() && c.chars().all(|ch| ch == '-')
    })
}

fn is_table_row(line: &str) -> bool {
    !line.trim().is_empty() && line.contains('|')
}

/// A block of Markdown lines that is never split carelessly.
#[derive(Debug, Clone, PartialEq)]
enum Block {
    /// One ordinary line.
    Line(String),
    /// A fenced code block: its opening line, body lines, and closing line (if any).
    Fence {
        open: String,
        body: Vec<String>,
        close: Option<String>,
    },
    /// A GFM table: header row, delimiter row, body rows.
    Table {
        header: String,
        delim: String,
        rows: Vec<String>,
    },
}

fn parse_blocks(md: &str) -> Vec<Block> {
    let lines: Vec<&str> = md.split('\n').map(|l| l.trim_end_matches('\r')).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(marker) = fence_marker(line) {
            let mut body = Vec::new();
            let mut close = None;
            i += 1;
            while i < lines.len() {
                if lines[i].trim_start().starts_with(marker) && lines[i].trim() == marker {
                    close = Some(lines[i].to_string());
                    i += 1;
                    break;
                }
                body.push(lines[i].to_string());
                i += 1;
            }
            out.push(Block::Fence {
                open: line.to_string(),
                body,
                close,
            });
            continue;
        }
        if is_table_row(line) && i + 1 < lines.len() && is_delimiter_row(lines[i + 1]) {
            let mut rows = Vec::new();
            let (header, delim) = (line.to_string(), lines[i + 1].to_string());
            i += 2;
            while i < lines.len() && is_table_row(lines[i]) && fence_marker(lines[i]).is_none() {
                rows.push(lines[i].to_string());
                i += 1;
            }
            out.push(Block::Table {
                header,
                delim,
                rows,
            });
            continue;
        }
        out.push(Block::Line(line.to_string()));
        i += 1;
    }
    out
}

struct Parts {
    limit: usize,
    parts: Vec<String>,
    cur: Vec<String>,
    size: usize,
    tables: usize,
}

impl Parts {
    fn lines_size(lines: &[String]) -> usize {
        lines.iter().map(|l| escaped_len(l) + 2).sum()
    }

    fn flush(&mut self) {
        if !self.cur.is_empty() {
            let text = self.cur.join("\n");
            if !text.trim().is_empty() {
                self.parts.push(text.trim_matches('\n').to_string());
            }
        }
        self.cur.clear();
        self.size = 0;
        self.tables = 0;
    }

    fn append(&mut self, lines: Vec<String>) {
        self.size += Self::lines_size(&lines);
        self.cur.extend(lines);
    }

    /// Lines of `block` as they would be written into the current part.
    fn render(&self, block: &Block) -> Vec<String> {
        match block {
            Block::Line(l) => vec![l.clone()],
            Block::Fence { open, body, close } => {
                let mut v = vec![open.clone()];
                v.extend(body.iter().cloned());
                v.push(
                    close
                        .clone()
                        .unwrap_or_else(|| fence_marker(open).unwrap_or("```").to_string()),
                );
                v
            }
            Block::Table {
                header,
                delim,
                rows,
            } => {
                let mut v = Vec::with_capacity(rows.len() + 4);
                let as_code = self.tables >= MAX_TABLES_PER_CARD;
                if as_code {
                    v.push("```".to_string());
                }
                v.push(header.clone());
                v.push(delim.clone());
                v.extend(rows.iter().cloned());
                if as_code {
                    v.push("```".to_string());
                }
                v
            }
        }
    }

    fn push(&mut self, block: Block) {
        let lines = self.render(&block);
        let size = Self::lines_size(&lines);
        if self.size + size > self.limit && !self.cur.is_empty() {
            self.flush();
            return self.push(block);
        }
        if size <= self.limit {
            if matches!(block, Block::Table { .. }) && self.tables < MAX_TABLES_PER_CARD {
                self.tables += 1;
            }
            self.append(lines);
            return;
        }
        // The block alone is larger than a part (and the current part is empty): cut it
        // between its lines.
        match block {
            Block::Line(l) => {
                for piece in cut_line(&l, self.limit.saturating_sub(8).max(64)) {
                    self.push(Block::Line(piece));
                }
            }
            Block::Fence { open, body, close } => {
                let close =
                    close.unwrap_or_else(|| fence_marker(&open).unwrap_or("```").to_string());
                self.push_chunked(vec![open], body, vec![close]);
            }
            Block::Table {
                header,
                delim,
                rows,
            } => {
                self.push_chunked(vec![header, delim], rows, vec![]);
                self.tables = 1;
            }
        }
    }

    /// Write `body` into as many parts as needed, each wrapped in `head` … `tail`. The last
    /// piece stays open in the current part so that what follows may join it.
    fn push_chunked(&mut self, head: Vec<String>, body: Vec<String>, tail: Vec<String>) {
        let frame = Self::lines_size(&head) + Self::lines_size(&tail);
        let room = self.limit.saturating_sub(frame).max(64);
        let mut chunk: Vec<String> = Vec::new();
        let mut chunk_size = 0;
        for line in body {
            let pieces = if escaped_len(&line) + 2 > room {
                cut_line(&line, room.saturating_sub(8).max(32))
            } else {
                vec![line]
            };
            for piece in pieces {
                let s = escaped_len(&piece) + 2;
                if chunk_size + s > room && !chunk.is_empty() {
                    let mut lines = head.clone();
                    lines.append(&mut chunk);
                    lines.extend(tail.iter().cloned());
                    self.append(lines);
                    self.flush();
                    chunk_size = 0;
                }
                chunk_size += s;
                chunk.push(piece);
            }
        }
        let mut lines = head;
        lines.append(&mut chunk);
        lines.extend(tail);
        self.append(lines);
    }
}

/// Cut one long line into pieces of at most `max` escaped bytes, at character boundaries
/// (preferring a space in the last quarter of a piece).
fn cut_line(line: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while escaped_len(rest) > max {
        let mut size = 0;
        let mut end = 0;
        let mut last_space = None;
        for (i, c) in rest.char_indices() {
            let s = escaped_len(c.encode_utf8(&mut [0; 4]));
            if size + s > max {
                break;
            }
            size += s;
            end = i + c.len_utf8();
            if c == ' ' && size > max * 3 / 4 {
                last_space = Some(end);
            }
        }
        let end = last_space
            .unwrap_or(end)
            .max(rest.chars().next().map_or(1, char::len_utf8));
        out.push(rest[..end].to_string());
        rest = &rest[end..];
    }
    if !rest.is_empty() {
        out.push(rest.to_string());
    }
    out
}

/// Split Markdown into parts of at most `limit` JSON-escaped bytes (see the module docs),
/// converting tables beyond [`MAX_TABLES_PER_CARD`] per part into code blocks.
pub fn split_markdown(md: &str, limit: usize) -> Vec<String> {
    let mut parts = Parts {
        limit: limit.max(256),
        parts: Vec::new(),
        cur: Vec::new(),
        size: 0,
        tables: 0,
    };
    for block in parse_blocks(md) {
        parts.push(block);
    }
    parts.flush();
    parts.parts
}

/// Make every single newline outside code blocks and tables a hard break (two trailing
/// spaces), so that the card shows the lines as the model wrote them.
pub fn hard_breaks(md: &str) -> String {
    let blocks = parse_blocks(md);
    let mut out: Vec<String> = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        match block {
            Block::Line(l) => {
                let next_is_text =
                    matches!(blocks.get(i + 1), Some(Block::Line(n)) if !n.trim().is_empty());
                if next_is_text && !l.trim().is_empty() && !l.ends_with("  ") && !l.ends_with('\\')
                {
                    out.push(format!("{l}  "));
                } else {
                    out.push(l.clone());
                }
            }
            Block::Fence { open, body, close } => {
                out.push(open.clone());
                out.extend(body.iter().cloned());
                if let Some(c) = close {
                    out.push(c.clone());
                }
            }
            Block::Table {
                header,
                delim,
                rows,
            } => {
                out.push(header.clone());
                out.push(delim.clone());
                out.extend(rows.iter().cloned());
            }
        }
    }
    out.join("\n")
}

/// A Markdown code block holding `text`, with a fence longer than any backtick run inside.
fn code_block(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}\n{text}\n{fence}")
}

/// The Markdown of an approval: the tool name in a code span and the whole description, never
/// cut, in a code block, so no character of it is read as Markdown. (The daemon sends
/// descriptions already made visible and short enough to show; see `consent::display`.)
fn approval_body(req: &ApprovalRequest) -> String {
    let mut s = format!(
        "The assistant wants to use `{}`:\n\n{}",
        req.tool.replace('`', "'"),
        code_block(&req.description)
    );
    if req.always {
        s.push_str(
            "\n\nThis kind of call is asked every time; it cannot be approved for the session.",
        );
    }
    s
}

fn button(label: &str, kind: &str, request_id: &str, choice: ApprovalChoice) -> Value {
    json!({
        "tag": "button",
        "text": {"tag": "plain_text", "content": label},
        "type": kind,
        "behaviors": [{
            "type": "callback",
            "value": {APPROVAL_KEY: request_id, CHOICE_KEY: choice.code()},
        }],
    })
}

/// The Markdown sent when Lark refuses the approval card (as a `post`, then as text).
pub fn approval_fallback(req: &ApprovalRequest) -> String {
    format!(
        "**Approval needed**\n\n{}\n\n(The buttons could not be shown.)",
        approval_body(req)
    )
}

/// The approval card for `req` (see the module docs).
pub fn approval_card(req: &ApprovalRequest) -> Value {
    let mut buttons = vec![button(
        "Approve once",
        "primary",
        &req.request_id,
        ApprovalChoice::Once,
    )];
    if !req.always {
        buttons.push(button(
            "Approve for session",
            "default",
            &req.request_id,
            ApprovalChoice::Session,
        ));
    }
    buttons.push(button(
        "Deny",
        "danger",
        &req.request_id,
        ApprovalChoice::Deny,
    ));
    let columns: Vec<Value> = buttons
        .into_iter()
        .map(|b| json!({"tag": "column", "width": "auto", "elements": [b]}))
        .collect();
    let mut elements = vec![
        described(req),
        json!({"tag": "column_set", "flex_mode": "flow", "horizontal_spacing": "8px", "columns": columns}),
    ];
    if req.always {
        elements.push(json!({"tag": "div", "text": {"tag": "plain_text", "content": ALWAYS_NOTE}}));
    }
    json!({
        "schema": "2.0",
        "config": {"update_multi": true, "summary": {"content": format!("Approval needed: {}", req.tool)}},
        "header": {
            "title": {"tag": "plain_text", "content": "Approval needed"},
            "subtitle": {"tag": "plain_text", "content": req.tool},
            "template": "orange",
        },
        "body": {"elements": elements},
    })
}

/// Under an always-asked request.
const ALWAYS_NOTE: &str =
    "This kind of call is asked every time; it cannot be approved for the session.";

/// The description of `req` in an approval card: a `plain_text` text, which Lark shows as it
/// is, every character and line break, with nothing read as Markdown. A Markdown code block
/// would depend on how Lark's renderer closes a fence around a description that holds
/// backtick runs itself (```` ``` ````, ```` ```` ````); plain text has no fence to escape
/// from. (The fenced Markdown of [`approval_body`] remains for the `post` fallback.)
fn described(req: &ApprovalRequest) -> Value {
    json!({"tag": "div", "text": {"tag": "plain_text", "content": req.description}})
}

/// The approval card once it is decided: the buttons replaced by `outcome`. `choice` is the
/// pressed button (`None` when the request ended otherwise, e.g. timed out). `req` may be
/// unknown (a restart since the card was sent); then only the outcome is shown.
pub fn outcome_card(
    req: Option<&ApprovalRequest>,
    choice: Option<ApprovalChoice>,
    outcome: &str,
) -> Value {
    let (title, template) = match choice {
        Some(ApprovalChoice::Deny) => ("Denied", "red"),
        Some(ApprovalChoice::Once | ApprovalChoice::Session) => ("Approved", "green"),
        None => ("Approval closed", "grey"),
    };
    let mut elements = Vec::new();
    if let Some(r) = req {
        elements.push(described(r));
        elements.push(json!({"tag": "hr"}));
    }
    // Plain text: the outcome line names the tool, and nothing in it is Markdown.
    elements.push(json!({"tag": "div", "text": {"tag": "plain_text", "content": outcome}}));
    let mut header = json!({
        "title": {"tag": "plain_text", "content": title},
        "template": template,
    });
    if let Some(r) = req {
        header["subtitle"] = json!({"tag": "plain_text", "content": r.tool});
    }
    json!({
        "schema": "2.0",
        "config": {"update_multi": true, "summary": {"content": outcome}},
        "header": header,
        "body": {"elements": elements},
    })
}

/// A callback toast (`type` is `info`, `success`, `error` or `warning`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Toast {
    #[serde(rename = "type")]
    pub kind: String,
    pub content: String,
}

/// A card replacing the clicked one (`{"type":"raw","data":<card JSON 2.0>}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CardUpdate {
    #[serde(rename = "type")]
    pub kind: String,
    pub data: Value,
}

/// The answer to a `card.action.trigger` (webhook response body; base64 `data` of the long
/// connection's ACK). `{}` when both are absent: ACK without UI change.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CallbackResponse {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub toast: Option<Toast>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub card: Option<CardUpdate>,
}

impl CallbackResponse {
    /// The JSON bytes of this response.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_else(|_| b"{}".to_vec())
    }
}

/// The callback answer for an approval press: a toast (`success` when the press counted,
/// `info` when it was noted without effect, `error` otherwise) and, when the daemon gave an
/// outcome, the card with its buttons replaced.
pub fn callback_response(
    ack: &ApprovalAck,
    req: Option<&ApprovalRequest>,
    choice: ApprovalChoice,
) -> CallbackResponse {
    let kind = if ack.accepted {
        "success"
    } else if ack.outcome.is_some() {
        "info"
    } else {
        "error"
    };
    CallbackResponse {
        toast: Some(Toast {
            kind: kind.into(),
            content: ack.toast.clone(),
        }),
        card: ack.outcome.as_deref().map(|o| CardUpdate {
            kind: "raw".into(),
            data: outcome_card(req, Some(choice), o),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md_of(card: &Value) -> &str {
        card["body"]["elements"][0]["content"].as_str().unwrap()
    }

    #[test]
    fn short_reply_is_one_card_with_hard_breaks() {
        let cards = reply_cards("Hello **world**\nsecond line\n\n- a\n- b\n\n```\nx\ny\n```");
        assert_eq!(cards.len(), 1);
        let c = &cards[0];
        assert_eq!(c["schema"], "2.0");
        assert_eq!(c["config"]["update_multi"], true);
        assert_eq!(c["config"]["summary"]["content"], "Hello world");
        assert_eq!(c["body"]["elements"][0]["tag"], "markdown");
        assert_eq!(
            md_of(c),
            "Hello **world**  \nsecond line\n\n- a  \n- b\n\n```\nx\ny\n```"
        );
    }

    #[test]
    fn empty_reply_gives_no_card() {
        assert!(reply_cards("").is_empty());
        assert!(reply_cards("\n\n").is_empty());
    }

    fn table(n: usize) -> String {
        format!("| t{n} | v |\n| --- | --- |\n| a | {n} |\n")
    }

    #[test]
    fn fourth_table_becomes_a_code_block() {
        let md: String = (1..=5)
            .map(|n| format!("{}\ntext {n}\n\n", table(n)))
            .collect();
        let parts = split_markdown(&md, CARD_TEXT_LIMIT);
        assert_eq!(parts.len(), 1);
        let p = &parts[0];
        assert_eq!(p.matches("```").count(), 4, "{p}");
        assert!(p.contains("```\n| t4 | v |"), "{p}");
        assert!(p.contains("```\n| t5 | v |"), "{p}");
        assert!(p.starts_with("| t1 | v |"), "{p}");
        // Each new card counts its tables afresh.
        let blocks = parse_blocks(&md);
        assert_eq!(
            blocks
                .iter()
                .filter(|b| matches!(b, Block::Table { .. }))
                .count(),
            5
        );
    }

    #[test]
    fn long_reply_splits_under_the_limit_and_keeps_everything() {
        let mut md = String::new();
        for i in 0..2000 {
            md.push_str(&format!("Line {i} with \"quotes\" and 中文 text.\n"));
        }
        let cards = reply_cards(&md);
        assert!(cards.len() >= 3, "{}", cards.len());
        let mut joined = String::new();
        for c in &cards {
            let json = serde_json::to_string(c).unwrap();
            assert!(json.len() < 30 * 1024, "{}", json.len());
            joined.push_str(&md_of(c).replace("  \n", "\n"));
            joined.push('\n');
        }
        for i in [0, 999, 1999] {
            assert!(joined.contains(&format!("Line {i} with")), "{i}");
        }
        assert_eq!(joined.lines().count(), 2000);
    }

    #[test]
    fn code_block_cut_by_a_split_is_reopened() {
        let mut md = String::from("Intro\n\n```rust\n");
        for i in 0..3000 {
            md.push_str(&format!("let x{i} = {i};\n"));
        }
        md.push_str("```\nDone.");
        let parts = split_markdown(&md, 8 * 1024);
        assert!(parts.len() >= 3);
        for p in &parts[..parts.len() - 1] {
            assert_eq!(
                p.matches("```").count() % 2,
                0,
                "unbalanced fences in a part"
            );
        }
        assert!(parts[1].starts_with("```rust\n"), "{}", &parts[1][..40]);
        assert!(parts.last().unwrap().ends_with("Done."));
        for p in &parts {
            assert!(escaped_len(p) <= 8 * 1024 + 16);
        }
    }

    #[test]
    fn table_cut_by_a_split_repeats_its_header() {
        let mut md = String::from("| name | value |\n|---|---|\n");
        for i in 0..800 {
            md.push_str(&format!("| row {i} | {} |\n", "x".repeat(20)));
        }
        let parts = split_markdown(&md, 8 * 1024);
        assert!(parts.len() >= 2);
        for p in &parts {
            assert!(p.starts_with("| name | value |\n|---|---|"), "{}", &p[..40]);
        }
    }

    #[test]
    fn one_enormous_line_is_cut() {
        let md = "x".repeat(70_000);
        let parts = split_markdown(&md, CARD_TEXT_LIMIT);
        assert!(parts.len() >= 3);
        assert_eq!(parts.iter().map(|p| p.len()).sum::<usize>(), 70_000);
    }

    #[test]
    fn fallback_contents() {
        let post: Value = serde_json::from_str(&post_content("**b**")).unwrap();
        assert_eq!(post["zh_cn"]["content"][0][0]["tag"], "md");
        assert_eq!(post["zh_cn"]["content"][0][0]["text"], "**b**");
        let text: Value = serde_json::from_str(&text_content("hi\nthere")).unwrap();
        assert_eq!(text["text"], "hi\nthere");
    }

    fn req(always: bool) -> ApprovalRequest {
        ApprovalRequest {
            request_id: "req42".into(),
            tool: "shell".into(),
            description: "rm -rf ```/tmp/x```".into(),
            always,
        }
    }

    fn buttons(card: &Value) -> Vec<Value> {
        card["body"]["elements"][1]["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["elements"][0].clone())
            .collect()
    }

    #[test]
    fn approval_card_has_three_buttons_with_callbacks() {
        let card = approval_card(&req(false));
        assert_eq!(card["schema"], "2.0");
        let b = buttons(&card);
        assert_eq!(b.len(), 3);
        let labels: Vec<&str> = b
            .iter()
            .map(|b| b["text"]["content"].as_str().unwrap())
            .collect();
        assert_eq!(labels, ["Approve once", "Approve for session", "Deny"]);
        let values: Vec<Value> = b
            .iter()
            .map(|b| b["behaviors"][0]["value"].clone())
            .collect();
        assert_eq!(values[0], json!({"ethan_approval": "req42", "choice": "o"}));
        assert_eq!(values[1], json!({"ethan_approval": "req42", "choice": "s"}));
        assert_eq!(values[2], json!({"ethan_approval": "req42", "choice": "d"}));
        assert!(b.iter().all(|b| b["behaviors"][0]["type"] == "callback"));
        // The description is plain text, shown as it is.
        assert_eq!(
            card["body"]["elements"][0],
            json!({"tag": "div", "text": {"tag": "plain_text", "content": "rm -rf ```/tmp/x```"}})
        );
    }

    /// The code blocks of `md` as a CommonMark renderer reads them (pulldown-cmark), and
    /// whether any other text is there besides `outside`.
    fn code_blocks(md: &str) -> (Vec<String>, String) {
        use pulldown_cmark::{Event, Parser, Tag, TagEnd};
        let (mut blocks, mut outside, mut inside) = (Vec::new(), String::new(), None);
        for e in Parser::new(md) {
            match e {
                Event::Start(Tag::CodeBlock(_)) => inside = Some(String::new()),
                Event::End(TagEnd::CodeBlock) => blocks.extend(inside.take()),
                Event::Text(t) | Event::Code(t) => match inside.as_mut() {
                    Some(b) => b.push_str(&t),
                    None => outside.push_str(&t),
                },
                _ => {}
            }
        }
        (blocks, outside)
    }

    #[test]
    fn backtick_runs_in_a_description_cannot_close_its_block() {
        // A description holding ``` and ```` (and a would-be Markdown link after them).
        let description =
            "echo ``` ; echo ````\n```` \n[click](https://evil.example) **bold** <at id=all></at>";
        let r = ApprovalRequest {
            description: description.into(),
            ..req(true)
        };
        // The card: plain text, every character as sent, in no Markdown element.
        let card = approval_card(&r);
        let elements = card["body"]["elements"].as_array().unwrap();
        assert_eq!(elements[0]["text"]["tag"], "plain_text");
        assert_eq!(elements[0]["text"]["content"], description);
        for e in elements {
            if e["tag"] == "markdown" {
                assert!(!e["content"].as_str().unwrap().contains('`'), "{e}");
            }
        }
        // The post fallback: read as CommonMark, the whole description is one code block
        // (its fence is longer than any run inside), and nothing of it is outside.
        let (blocks, outside) = code_blocks(&approval_fallback(&r));
        assert_eq!(blocks, [format!("{description}\n")]);
        assert!(
            !outside.contains("click") && !outside.contains("bold"),
            "{outside}"
        );
        assert!(approval_fallback(&r).contains("`````\necho"));
    }

    #[test]
    fn always_requests_have_no_session_button() {
        let b = buttons(&approval_card(&req(true)));
        assert_eq!(b.len(), 2);
        assert!(b
            .iter()
            .all(|b| b["behaviors"][0]["value"]["choice"] != "s"));
    }

    #[test]
    fn approvals_show_the_whole_description_and_drop_nothing() {
        let long = format!("{}; touch X", "a*b_c".repeat(1000));
        let r = ApprovalRequest {
            description: long.clone(),
            tool: "my__tool__".into(),
            ..req(false)
        };
        assert_eq!(
            approval_card(&r)["body"]["elements"][0]["text"]["content"],
            json!(long)
        );
        let md = approval_fallback(&r);
        assert!(md.contains(&format!("```\n{long}\n```")), "{md}");
        assert!(md.contains("`my__tool__`"), "{md}");
        let done = outcome_card(Some(&r), None, "❌ Denied: my__tool__");
        let last = done["body"]["elements"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        assert_eq!(
            last,
            json!({"tag": "div", "text": {"tag": "plain_text", "content": "❌ Denied: my__tool__"}})
        );
    }

    #[test]
    fn callback_response_with_outcome_replaces_the_buttons() {
        let ack = ApprovalAck {
            accepted: true,
            toast: "Approved".into(),
            outcome: Some("✅ Approved once by the owner".into()),
        };
        let r = callback_response(&ack, Some(&req(false)), ApprovalChoice::Once);
        let v: Value = serde_json::from_slice(&r.to_bytes()).unwrap();
        assert_eq!(
            v["toast"],
            json!({"type": "success", "content": "Approved"})
        );
        assert_eq!(v["card"]["type"], "raw");
        let card = &v["card"]["data"];
        assert_eq!(card["schema"], "2.0");
        assert_eq!(card["header"]["template"], "green");
        let s = card.to_string();
        assert!(s.contains("Approved once by the owner"));
        assert!(!s.contains("\"button\""), "{s}");
        // Field order matters to nobody but is stable: toast first.
        let raw = String::from_utf8(r.to_bytes()).unwrap();
        assert!(raw.starts_with("{\"toast\":{\"type\":\"success\""), "{raw}");
    }

    #[test]
    fn refused_press_is_an_error_toast_without_card() {
        let ack = ApprovalAck {
            accepted: false,
            toast: "Only the owner can approve.".into(),
            outcome: None,
        };
        let r = callback_response(&ack, None, ApprovalChoice::Deny);
        assert_eq!(
            String::from_utf8(r.to_bytes()).unwrap(),
            r#"{"toast":{"type":"error","content":"Only the owner can approve."}}"#
        );
        assert_eq!(CallbackResponse::default().to_bytes(), b"{}");
    }

    #[test]
    fn no_empty_summary() {
        let c = reply_card("---");
        assert!(c["config"].get("summary").is_none(), "{c}");
    }

    #[test]
    fn summary_is_short_plain_text() {
        assert_eq!(summary("# **Title** here\nmore"), "Title here");
        assert_eq!(summary(&"ab ".repeat(40)).chars().count(), 60);
    }
}
