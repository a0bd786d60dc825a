//! Posting a run's result: the digest (a bold title line, then the model's final answer, as
//! Markdown that each adapter renders — Telegram HTML, a Lark card), sent with retries.
//!
//! Only the final answer is posted: tool calls and their results (raw JSON, "sent, message id
//! …" confirmations) stay in the job's session. An answer that is nothing but a JSON document is
//! treated as such noise and not posted. Transient failures (network, 429, 5xx) are retried
//! with a doubling delay; rejected credentials or a refused request are not. The outcome is
//! recorded with the run by the caller.
//!
//! [`send_channels`] builds the adapters from the config for sending only, so `ethan jobs run`
//! can deliver without a running daemon.

use crate::config::Loaded;
use anyhow::Context;
use ethan_channels::lark::LarkChannel;
use ethan_channels::telegram::TelegramChannel;
use ethan_channels::{Channel, ChannelError, ChannelKind, OutboundMessage, SentRef};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// How often and how patiently a digest is retried.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Tries in all (at least 1).
    pub attempts: u32,
    /// Delay after the first failure; doubles each time.
    pub first_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    /// 6 tries over about a minute (2, 4, 8, 16, 32 s).
    fn default() -> Self {
        Self {
            attempts: 6,
            first_delay: Duration::from_secs(2),
            max_delay: Duration::from_secs(60),
        }
    }
}

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

/// Whether trying again may help.
pub fn retryable(e: &ChannelError) -> bool {
    match e {
        ChannelError::Transport { .. } => true,
        ChannelError::Api { code, .. } => *code == 429 || *code >= 500,
        ChannelError::Unauthorized { .. } | ChannelError::Storage(_) => false,
    }
}

/// A failed delivery: how many tries, and the last error.
#[derive(Debug)]
pub struct DeliveryError {
    pub attempts: u32,
    pub error: String,
}

/// Send `msg`, retrying transient failures by `policy`. `Ok((tries, sent))`.
pub async fn send_with_retry(
    channel: &dyn Channel,
    msg: &OutboundMessage,
    policy: &RetryPolicy,
) -> Result<(u32, SentRef), DeliveryError> {
    let attempts = policy.attempts.max(1);
    let mut delay = policy.first_delay;
    let mut tries = 0;
    loop {
        tries += 1;
        match channel.send(msg).await {
            Ok(sent) => return Ok((tries, sent)),
            Err(e) if retryable(&e) && tries < attempts => {
                tracing::warn!(
                    "digest delivery to {}:{} failed (try {tries} of {attempts}): {e}; retrying in {delay:?}",
                    channel.kind(),
                    msg.chat.id
                );
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(policy.max_delay);
            }
            Err(e) => {
                return Err(DeliveryError {
                    attempts: tries,
                    error: e.to_string(),
                })
            }
        }
    }
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
    use async_trait::async_trait;
    use ethan_channels::{ChatKind, ChatRef, InboundSink, OutboundBody, StateStore};
    use std::sync::Mutex;

    /// Fails with the queued errors, then succeeds.
    struct Flaky(Mutex<Vec<ChannelError>>, Mutex<u32>);

    #[async_trait]
    impl Channel for Flaky {
        fn kind(&self) -> ChannelKind {
            ChannelKind::Telegram
        }
        async fn probe(&self) -> Result<String, ChannelError> {
            Ok(String::new())
        }
        async fn run(
            self: Arc<Self>,
            _: Arc<dyn InboundSink>,
            _: Arc<dyn StateStore>,
            _: tokio::sync::watch::Receiver<bool>,
        ) -> Result<(), ChannelError> {
            Ok(())
        }
        async fn send(&self, _: &OutboundMessage) -> Result<SentRef, ChannelError> {
            *self.1.lock().unwrap() += 1;
            match self.0.lock().unwrap().pop() {
                Some(e) => Err(e),
                None => Ok(SentRef {
                    message_ids: vec!["7".into()],
                }),
            }
        }
    }

    fn msg() -> OutboundMessage {
        OutboundMessage {
            chat: ChatRef {
                id: "1".into(),
                kind: ChatKind::Direct,
                thread: None,
            },
            reply_to: None,
            body: OutboundBody::Text("x".into()),
            idempotency_key: None,
        }
    }

    fn fast(attempts: u32) -> RetryPolicy {
        RetryPolicy {
            attempts,
            first_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(4),
        }
    }

    fn transport() -> ChannelError {
        ChannelError::Transport {
            platform: "telegram",
            message: "connection reset".into(),
        }
    }

    #[tokio::test]
    async fn transient_failures_are_retried_permanent_ones_are_not() {
        let ch = Flaky(Mutex::new(vec![transport(), transport()]), Mutex::new(0));
        let (tries, sent) = send_with_retry(&ch, &msg(), &fast(5)).await.unwrap();
        assert_eq!(tries, 3);
        assert_eq!(sent.message_ids, ["7"]);

        let ch = Flaky(
            Mutex::new(vec![transport(), transport(), transport()]),
            Mutex::new(0),
        );
        let e = send_with_retry(&ch, &msg(), &fast(2)).await.unwrap_err();
        assert_eq!(e.attempts, 2);

        let refused = ChannelError::Api {
            platform: "telegram",
            code: 400,
            description: "chat not found".into(),
        };
        let ch = Flaky(Mutex::new(vec![refused]), Mutex::new(0));
        let e = send_with_retry(&ch, &msg(), &fast(5)).await.unwrap_err();
        assert_eq!((e.attempts, *ch.1.lock().unwrap()), (1, 1));
        assert!(e.error.contains("chat not found"));
    }

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
