//! The system prompt: `model.system_prompt` from the config, then the built-in text that tells
//! the model where it is, how to answer, and how to reach the tools it was not sent (the agent
//! adds the session's memory snapshot after it); and the time shown in front of each person's
//! message ([`stamped`]).
//!
//! Nothing here changes from one turn to the next: the time is not in the system prompt but in
//! each user message, written once from when it was sent, so a request starts with the same
//! bytes as the one before it and a provider's prompt cache keeps matching (OpenAI's automatic
//! prefix cache, Anthropic's `cache_control` breakpoints).

use crate::config::Loaded;
use ethan_channels::ChannelKind;
use ethan_core::message::{ChatMessage, Role};
use std::borrow::Cow;

/// The system prompt of a turn in `channel` that may use the tools in `allowed`.
/// `custom` is the agent's own prompt (else `model.system_prompt`).
pub fn system_prompt(
    config: &Loaded,
    custom: &str,
    channel: ChannelKind,
    allowed: &std::collections::BTreeSet<String>,
) -> String {
    let has_tools = !allowed.is_empty();
    let mut s = String::new();
    let custom = custom.trim();
    if !custom.is_empty() {
        s.push_str(custom);
        s.push_str("\n\n");
    }
    let place = match channel {
        ChannelKind::Telegram => "a Telegram chat",
        ChannelKind::Lark => "a Lark/Feishu chat",
        ChannelKind::Terminal => "a terminal session",
        ChannelKind::Web => "a web chat",
    };
    s.push_str(&format!(
        "You are Ethan, an assistant that answers people in {place}.\n\
         Each message from a person starts with the time it was sent, in square brackets.\n\
         Answer concisely in Markdown. Use the tools when they help; a tool result that starts with \
         \"Error\" explains what to fix, so correct the call or tell the person what went wrong.\n\
         Relative file paths are resolved in the workspace {}.",
        config.workspace().display()
    ));
    if has_tools {
        s.push_str(
            "\nOnly some tools are listed up front; call find_tools with what you need to get more.",
        );
        if allowed.contains("memory_save") {
            s.push_str(
                "\nWhen the person tells you something worth remembering in later conversations \
                 (a preference, a name, a decision), save it with memory_save.",
            );
        }
        if allowed.contains("history_search") {
            s.push_str("\nEarlier messages no longer shown here can be found with history_search.");
        }
    } else {
        s.push_str("\nNo tools are available in this chat.");
    }
    s
}

/// `m` as the model sees it: a user message with its [`ChatMessage::sent_at`] gets the time, in
/// `zone`, in front of its text — `[Sat 2026-12-05 09:14 CST] …`. Other messages are unchanged.
/// A message of the kept window carries its stamp in its memo ([`crate::agent::window`]); any
/// other is stamped here, field by field ([`stamp`]), not through a format string.
pub fn stamped(mut m: ChatMessage, zone: chrono_tz::Tz) -> ChatMessage {
    if let Some(text) = shown_text(&m, zone) {
        m.content = Some(text);
    }
    m
}

/// [`stamped`] for a message that stays where it is (the kept window's): borrowed when shown
/// as it is or when its memo holds its shown copy, else a copy with the stamped text (the
/// message's own text is not copied first).
pub fn shown(m: &ChatMessage, zone: chrono_tz::Tz) -> Cow<'_, ChatMessage> {
    let text_len = m.content.as_ref().map_or(0, String::len);
    let kept = m.derived.get().filter(|d| d.zone == zone.name());
    if let Some(shown) = kept.and_then(|d| d.shown(text_len)) {
        return Cow::Borrowed(shown);
    }
    match shown_text(m, zone) {
        None => Cow::Borrowed(m),
        Some(text) => Cow::Owned(ChatMessage {
            role: m.role,
            content: Some(text),
            tool_calls: m.tool_calls.clone(),
            tool_call_id: m.tool_call_id.clone(),
            opaque: m.opaque.clone(),
            is_error: m.is_error,
            images: m.images.clone(),
            sent_at: m.sent_at,
            derived: m.derived.clone(),
        }),
    }
}

/// The text of `m` as shown, when it differs from its own: the stamp in front of a person's
/// text (from the memo when it has one for `zone`).
fn shown_text(m: &ChatMessage, zone: chrono_tz::Tz) -> Option<String> {
    if m.role != Role::User {
        return None;
    }
    let text = m.content.as_deref().unwrap_or_default();
    let kept = m.derived.get().filter(|d| d.zone == zone.name());
    let made;
    let stamp = match kept.and_then(|d| d.stamp(text.len())) {
        Some(stamp) => stamp,
        None => {
            made = stamp_of(m, zone);
            made.as_str()
        }
    };
    if stamp.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(text.len() + stamp.len());
    out.push_str(stamp);
    out.push_str(text);
    Some(out)
}

/// What [`stamped`] writes in front of `m`'s text in `zone`: empty for a message that is not
/// a person's or has no time.
pub fn stamp_of(m: &ChatMessage, zone: chrono_tz::Tz) -> String {
    let at = m
        .sent_at
        .filter(|_| m.role == Role::User)
        .and_then(|s| chrono::DateTime::from_timestamp(s, 0));
    let mut out = String::new();
    if let Some(at) = at {
        stamp(&mut out, &at.with_timezone(&zone));
    }
    out
}

/// `[%a %Y-%m-%d %H:%M %Z] ` of `local` into `out`.
fn stamp(out: &mut String, local: &chrono::DateTime<chrono_tz::Tz>) {
    use chrono::{Datelike, Timelike};
    use std::fmt::Write;
    const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
    let year = local.year();
    if !(0..=9999).contains(&year) {
        // Signed or wider years: chrono's own rendering of them.
        let _ = write!(out, "[{}] ", local.format("%a %Y-%m-%d %H:%M %Z"));
        return;
    }
    let day = DAYS[local.weekday().num_days_from_monday() as usize];
    let _ = write!(
        out,
        "[{day} {year:04}-{:02}-{:02} {:02}:{:02} {}] ",
        local.month(),
        local.day(),
        local.hour(),
        local.minute(),
        local.offset()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_message_shows_when_it_was_sent_and_nothing_else_changes() {
        let mut m = ChatMessage::user("hello");
        m.sent_at = Some(1_796_433_240); // 2026-12-05 01:14 UTC
        let shown = stamped(m.clone(), chrono_tz::Asia::Shanghai);
        assert_eq!(
            shown.content.as_deref(),
            Some("[Sat 2026-12-05 09:14 CST] hello")
        );
        assert_eq!(
            stamped(m, chrono_tz::UTC).content.as_deref(),
            Some("[Sat 2026-12-05 01:14 UTC] hello")
        );
        let plain = ChatMessage::user("no time");
        assert_eq!(stamped(plain.clone(), chrono_tz::UTC), plain);
        // As chrono's own format gives it, in zones with letters, numbers and odd offsets.
        let zones = [
            chrono_tz::UTC,
            chrono_tz::Asia::Shanghai,
            chrono_tz::America::New_York,
            chrono_tz::America::Sao_Paulo,
            chrono_tz::Asia::Kolkata,
            chrono_tz::Pacific::Chatham,
            chrono_tz::Europe::London,
        ];
        for zone in zones {
            for at in (0..400).map(|i| 1_700_000_000 + i * 977_777) {
                let mut m = ChatMessage::user("x");
                m.sent_at = Some(at);
                let local = chrono::DateTime::from_timestamp(at, 0)
                    .unwrap()
                    .with_timezone(&zone);
                let want = format!("[{}] x", local.format("%a %Y-%m-%d %H:%M %Z"));
                assert_eq!(stamped(m, zone).content.as_deref(), Some(want.as_str()));
            }
        }
        let mut answer = ChatMessage::assistant("hi");
        answer.sent_at = Some(1);
        assert_eq!(stamped(answer.clone(), chrono_tz::UTC), answer);
    }
}
