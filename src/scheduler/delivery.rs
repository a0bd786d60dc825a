//! Posting a run's result: the digest (a bold title line, then the model's final answer, as
//! Markdown that each adapter renders — Telegram HTML, a Lark card), sent with retries.
//!
//! Only the final answer is posted: tool calls and their results (raw JSON, "sent, message id
//! …" confirmations) stay in the job's session. An answer that is nothing but a JSON document is
//! treated as such noise and not posted. Sending and its retries are
//! [`ethan_channels::delivery`]'s (transient failures retried with a doubling delay, a split
//! digest resumed at the part that failed). The outcome is recorded with the run by the caller.
//!
//! [`send_channels`] builds the adapters from the config for sending only, so `ethan jobs run`
//! can deliver without a running daemon.

use crate::config::Loaded;
use anyhow::Context;
use ethan_channels::lark::LarkChannel;
use ethan_channels::telegram::TelegramChannel;
use ethan_channels::{Channel, ChannelKind};
use std::collections::HashMap;
use std::sync::Arc;

pub use ethan_channels::delivery::{
    send_with_retry, send_with_retry_fenced, DeliveryError, RetryPolicy,
};

/// The digest text for a final answer, or `None` when there is nothing worth posting.
pub fn digest(title: &str, answer: &str) -> Option<String> {
    let answer = answer.trim();
    if answer.is_empty() || is_raw_json(answer) {
        return None;
    }
    let title = title.replace('*', "").replace('\n', " ");
    let title = title.trim();
    Some(if title.is_empty() {
        answer.to_string()
    } else {
        format!("**{title}**\n\n{answer}")
    })
}

/// A whole answer that is a JSON object or array (a tool result echoed, not a summary).
fn is_raw_json(s: &str) -> bool {
    let s = s
        .trim()
        .trim_start_matches("```json")
        .trim_start_matches("```")
        .trim_end_matches("```")
        .trim();
    (s.starts_with('{') || s.starts_with('['))
        && serde_json::from_str::<serde_json::Value>(s).is_ok()
}

/// The configured chat adapters, built for sending only (no polling, no websocket).
pub fn send_channels(loaded: &Loaded) -> anyhow::Result<HashMap<ChannelKind, Arc<dyn Channel>>> {
    let mut out: HashMap<ChannelKind, Arc<dyn Channel>> = HashMap::new();
    if !loaded.config.channels.telegram.token.is_empty() {
        let ch = TelegramChannel::new(crate::config::telegram_config(&loaded.config))
            .context("the Telegram channel")?;
        out.insert(ChannelKind::Telegram, Arc::new(ch));
    }
    let lk = &loaded.config.channels.lark;
    if !lk.app_id.trim().is_empty() && !lk.app_secret.is_empty() {
        let ch = LarkChannel::new(crate::config::lark_config(&loaded.config))
            .context("the Lark channel")?;
        out.insert(ChannelKind::Lark, Arc::new(ch));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_have_a_title_and_skip_raw_json() {
        assert_eq!(
            digest("Morning *news*", "All quiet.").unwrap(),
            "**Morning news**\n\nAll quiet."
        );
        let d = digest("Morning news", "All quiet.").unwrap();
        assert_eq!(d, "**Morning news**\n\nAll quiet.");
        assert_eq!(digest("t", "  "), None);
        assert_eq!(digest("t", r#"{"ok": true, "message_id": "om_1"}"#), None);
        assert_eq!(digest("t", "```json\n[1, 2]\n```"), None);
        assert!(digest("t", "{not json} but prose").is_some());
    }
}
