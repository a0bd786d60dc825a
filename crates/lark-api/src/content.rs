//! Message content as text, for the Lark channel (what a person wrote, as the agent reads it)
//! and the Lark tools (a chat's history): `post` rich text (paragraphs of `text`, `a`, `at`,
//! `img`, `code_block`, `md`, … elements) becomes Markdown-ish text; `@_user_N` placeholders are
//! resolved from the message's `mentions[]` (the bot's own mention is removed and reported);
//! a message that is not text stands as a short placeholder (`[video: trip.mp4]`).
//!
//! Source: the `im.message.receive_v1` event and the message content docs of open.feishu.cn
//! (PROTOCOLS §3).

use serde::Deserialize;
use serde_json::Value;

/// A mention in `message.mentions[]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Mention {
    /// The placeholder in the text, e.g. `@_user_1`.
    pub key: String,
    pub id: UserId,
    pub name: String,
    /// `user` or `bot` (may be absent).
    pub mentioned_type: String,
}

/// The ids of a user (`user_id` may be null without the scope).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct UserId {
    pub open_id: Option<String>,
    pub union_id: Option<String>,
    pub user_id: Option<String>,
}

/// Is this mention the bot?
fn is_bot_mention(m: &Mention, bot_open_id: Option<&str>) -> bool {
    match bot_open_id {
        Some(b) => m.id.open_id.as_deref() == Some(b),
        None => m.mentioned_type == "bot",
    }
}

/// Replace `@_user_N` placeholders: the bot's own mention is removed, others become `@Name`;
/// `@_all` becomes `@all`. Returns the text (trimmed) and whether the bot was mentioned.
pub fn resolve_mentions(
    raw: &str,
    mentions: &[Mention],
    bot_open_id: Option<&str>,
) -> (String, bool) {
    let mut sorted: Vec<&Mention> = mentions.iter().filter(|m| !m.key.is_empty()).collect();
    // Longest keys first, so `@_user_1` does not eat the front of `@_user_10`.
    ethan_core::sort::sort_by_key(&mut sorted, |m| std::cmp::Reverse(m.key.len()));
    let mut text = raw.to_string();
    let mut mentioned = false;
    for m in sorted {
        if !text.contains(&m.key) {
            continue;
        }
        let with = if is_bot_mention(m, bot_open_id) {
            mentioned = true;
            String::new()
        } else {
            format!("@{}", m.name)
        };
        text = text.replace(&m.key, &with);
    }
    let text = text.replace("@_all", "@all");
    (tidy(&text), mentioned)
}

/// Trim, and collapse the double spaces a removed mention leaves inside a line (not inside
/// code fences, where spacing matters).
fn tidy(s: &str) -> String {
    let mut in_fence = false;
    let lines: Vec<String> = s
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("```") {
                in_fence = !in_fence;
                return l.trim_end().to_string();
            }
            if in_fence {
                return l.to_string();
            }
            let mut out = String::with_capacity(l.len());
            let mut prev_space = false;
            for (i, ch) in l.char_indices() {
                let space = ch == ' ';
                // Keep leading indentation (lists) as it is.
                if space && prev_space && !l[..i].trim().is_empty() {
                    continue;
                }
                out.push(ch);
                prev_space = space;
            }
            out.trim_end().to_string()
        })
        .collect();
    lines.join("\n").trim().to_string()
}

/// `post` content → Markdown-ish text. Received posts have no locale wrapper; a wrapped one
/// (`{"zh_cn":{...}}`) is unwrapped too.
pub fn post_to_text(
    content: &Value,
    mentions: &[Mention],
    bot_open_id: Option<&str>,
) -> (String, bool) {
    let body = if content.get("content").is_some() {
        content
    } else {
        content
            .as_object()
            .and_then(|o| o.values().find(|v| v.get("content").is_some()))
            .unwrap_or(content)
    };
    let mut mentioned = false;
    let mut out: Vec<String> = Vec::new();
    if let Some(title) = body.get("title").and_then(Value::as_str) {
        if !title.trim().is_empty() {
            out.push(format!("**{}**", title.trim()));
            out.push(String::new());
        }
    }
    let paragraphs = body
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for para in paragraphs {
        let mut line = String::new();
        for el in para.as_array().map(Vec::as_slice).unwrap_or(&[]) {
            let s = |k: &str| el.get(k).and_then(Value::as_str).unwrap_or("");
            match s("tag") {
                "text" => line.push_str(&styled(s("text"), el.get("style"))),
                "a" => {
                    let label = if s("text").is_empty() {
                        s("href")
                    } else {
                        s("text")
                    };
                    if s("href").is_empty() {
                        line.push_str(label);
                    } else {
                        line.push_str(&format!("[{label}]({})", s("href")));
                    }
                }
                "at" => {
                    let uid = s("user_id");
                    if uid == "all" || uid == "@_all" {
                        line.push_str("@all");
                        continue;
                    }
                    let m = mentions.iter().find(|m| m.key == uid);
                    let is_bot = match m {
                        Some(m) => is_bot_mention(m, bot_open_id),
                        None => bot_open_id.is_some_and(|b| b == uid),
                    };
                    if is_bot {
                        mentioned = true;
                    } else {
                        let name = m
                            .map(|m| m.name.as_str())
                            .filter(|n| !n.is_empty())
                            .unwrap_or(s("user_name"));
                        line.push_str(&format!("@{name}"));
                    }
                }
                "img" => line.push_str("[image]"),
                "media" => line.push_str("[video]"),
                "emotion" => line.push_str(&format!(":{}:", s("emoji_type"))),
                "hr" => line.push_str("---"),
                "code_block" => {
                    line.push_str(&format!(
                        "\n```{}\n{}\n```\n",
                        s("language").to_lowercase(),
                        s("text").trim_end_matches('\n')
                    ));
                }
                "md" => line.push_str(s("text")),
                _ => line.push_str(s("text")),
            }
        }
        out.push(line);
    }
    (tidy(&out.join("\n")), mentioned)
}

/// Wrap text in Markdown for its `style` list (`bold`, `italic`, `lineThrough`; `underline`
/// has no Markdown form), keeping surrounding spaces outside the markers.
fn styled(text: &str, style: Option<&Value>) -> String {
    let styles: Vec<&str> = style
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let core = text.trim();
    if styles.is_empty() || core.is_empty() {
        return text.to_string();
    }
    let mut marker = String::new();
    if styles.contains(&"bold") {
        marker.push_str("**");
    }
    if styles.contains(&"italic") {
        marker.push('*');
    }
    let strike = styles.contains(&"lineThrough");
    let lead = &text[..text.len() - text.trim_start().len()];
    let trail = &text[text.trim_end().len()..];
    let mut inner = format!("{marker}{core}{}", marker.chars().rev().collect::<String>());
    if strike {
        inner = format!("~~{inner}~~");
    }
    format!("{lead}{inner}{trail}")
}

/// A short text standing for a message of `message_type` in a chat's history as a tool reads it
/// (`[video: trip.mp4]`, `[sticker]`); a message the bot receives is described by the channel's
/// `normalize::unfetched`.
pub fn placeholder(message_type: &str, content: &Value) -> String {
    let name = content
        .get("file_name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty());
    match (message_type, name) {
        ("image", _) => "[image]".into(),
        ("file", Some(n)) => format!("[file: {n}]"),
        ("file", None) => "[file]".into(),
        ("audio", _) => "[audio]".into(),
        ("media", Some(n)) => format!("[video: {n}]"),
        ("media", None) => "[video]".into(),
        ("sticker", _) => "[sticker]".into(),
        ("interactive", _) => "[card]".into(),
        ("share_chat", _) => "[shared chat]".into(),
        ("share_user", _) => "[shared contact]".into(),
        ("merge_forward", _) => "[forwarded messages]".into(),
        ("location", _) => "[location]".into(),
        ("", _) => "[message]".into(),
        (other, _) => format!("[{other} message]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const BOT: &str = "ou_27ade7346f1dc5a485d4de0c5944dd13";

    #[test]
    fn mentions_resolve_longest_key_first_and_all() {
        let m = |key: &str, open: &str, name: &str| Mention {
            key: key.into(),
            id: UserId {
                open_id: Some(open.into()),
                ..UserId::default()
            },
            name: name.into(),
            mentioned_type: "user".into(),
        };
        let ms = vec![m("@_user_1", "ou_a", "Ann"), m("@_user_10", BOT, "Ethan")];
        let (t, hit) = resolve_mentions("@_user_10 ask @_user_1 and  @_all", &ms, Some(BOT));
        assert!(hit);
        assert_eq!(t, "ask @Ann and @all");
    }

    #[test]
    fn post_elements_render() {
        let content = json!({"title": "Plan", "content": [
            [{"tag": "text", "text": "bold ", "style": ["bold"]}, {"tag": "a", "text": "link", "href": "https://x.y"}],
            [{"tag": "code_block", "language": "RUST", "text": "fn main() {}\n"}],
            [{"tag": "emotion", "emoji_type": "SMILE"}, {"tag": "at", "user_id": "@_all"}],
            [{"tag": "md", "text": "- item"}]
        ]});
        let (t, hit) = post_to_text(&content, &[], Some(BOT));
        assert!(!hit);
        assert_eq!(
            t,
            "**Plan**\n\n**bold** [link](https://x.y)\n\n```rust\nfn main() {}\n```\n\n:SMILE:@all\n- item"
        );
        // A locale wrapper is unwrapped.
        let wrapped = json!({"zh_cn": {"title": "", "content": [[{"tag": "text", "text": "hi"}]]}});
        assert_eq!(post_to_text(&wrapped, &[], None).0, "hi");
    }
}
