//! Delivering an [`OutboundMessage`] with retries, for every caller that must get a message
//! through (the daemon's replies and cards, scheduled digests).
//!
//! Transient failures (network, 429, 5xx) are retried with a doubling delay; rejected credentials
//! or a refused request are not. A message the adapter splits into parts is never sent twice
//! over: when a part fails after earlier ones were shown ([`ChannelError::Partial`]), the next
//! try sends only the parts from the failed one on ([`Channel::send_from`]).
//!
//! A sender that may lose the right to send while it waits (a replica whose lease lapses during
//! the backoff) passes a [`Fence`]: it is asked before every retry (the first try is covered by
//! the sender's own check), and a refusal ends the delivery with nothing more sent
//! ([`DeliveryError::fenced`]).

use crate::channel::{Channel, ChannelError};
use crate::model::{OutboundMessage, SentRef};
use ethan_core::tool::Fence;
use std::time::Duration;

/// How often and how patiently a message is retried.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Tries in all (at least 1).
    pub attempts: u32,
    /// Delay after the first failure; doubles each time.
    pub first_delay: Duration,
    /// The longest delay between two tries.
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

impl RetryPolicy {
    /// A run of tries by this policy, the first one being made.
    pub fn tries(&self) -> Tries<'_> {
        Tries {
            policy: self,
            made: 1,
            delay: self.first_delay,
        }
    }
}

/// Where a run of tries stands: every sender that retries (a message's parts here, a streamed
/// reply's finish in the daemon) asks it whether a failure is worth another try and how long to
/// wait first, so the rule is the same for each.
#[derive(Debug)]
pub struct Tries<'a> {
    policy: &'a RetryPolicy,
    made: u32,
    delay: Duration,
}

impl Tries<'_> {
    /// The tries made so far, the current one included.
    pub fn made(&self) -> u32 {
        self.made
    }

    /// The tries allowed in all.
    pub fn allowed(&self) -> u32 {
        self.policy.attempts.max(1)
    }

    /// After the current try failed with `e`: the pause before the next try (which is then
    /// counted), or `None` when `e` is not transient or no try is left.
    pub fn retry_after(&mut self, e: &ChannelError) -> Option<Duration> {
        if !(retryable(e) && self.made < self.allowed()) {
            return None;
        }
        let delay = self.delay;
        self.delay = (delay * 2).min(self.policy.max_delay);
        self.made += 1;
        Some(delay)
    }

    /// Wait `delay` (from [`Tries::retry_after`]), then ask `fence` (when given) whether the
    /// next try may go: `Err` with the fence's reason when the sender lost the right to send.
    /// Every sender that retries waits here, so none can retry without the fence's yes.
    pub async fn pause(&self, delay: Duration, fence: Option<&dyn Fence>) -> Result<(), String> {
        tokio::time::sleep(delay).await;
        match fence {
            Some(f) => f.check().await,
            None => Ok(()),
        }
    }
}

/// Whether trying again may help: a transport failure, or an API answer 429 or ≥ 500 (for a
/// [`ChannelError::Partial`], its cause).
pub fn retryable(e: &ChannelError) -> bool {
    match e.cause() {
        ChannelError::Transport { .. } => true,
        // HTTP-range codes only: Lark's business codes (230002 "bot not in chat", 99991663
        // bad token, …) are all large numbers and never transient.
        ChannelError::Api { code, .. } => *code == 429 || (500..600).contains(code),
        ChannelError::Unauthorized { .. }
        | ChannelError::Storage(_)
        | ChannelError::Partial { .. } => false,
    }
}

/// A failed delivery: how many tries, and the last error (for logs; it says how many parts
/// were shown when some were).
#[derive(Debug)]
pub struct DeliveryError {
    pub attempts: u32,
    pub error: String,
    /// The fence refused a retry: the sender lost the right to send, so the caller records
    /// nothing (whoever holds that right now settles the message).
    pub fenced: bool,
}

/// Send `msg` through `channel`, retrying transient failures by `policy`; each retry resumes at
/// the first part not yet shown. `Ok((tries, sent))`: `sent` holds the ids of every part, in
/// order, across the tries.
///
/// # Errors
/// [`DeliveryError`] when a failure is not transient or the tries are used up.
pub async fn send_with_retry(
    channel: &dyn Channel,
    msg: &OutboundMessage,
    policy: &RetryPolicy,
) -> Result<(u32, SentRef), DeliveryError> {
    send_with_retry_fenced(channel, msg, policy, None).await
}

/// [`send_with_retry`], asking `fence` (when given) before every retry; a refusal ends the
/// delivery without another send, as a [`DeliveryError`] with `fenced` set.
///
/// # Errors
/// As [`send_with_retry`], and when the fence refuses a retry.
pub async fn send_with_retry_fenced(
    channel: &dyn Channel,
    msg: &OutboundMessage,
    policy: &RetryPolicy,
    fence: Option<&dyn Fence>,
) -> Result<(u32, SentRef), DeliveryError> {
    let mut tries = policy.tries();
    let mut sent = SentRef::default();
    let mut next_part = 0;
    loop {
        let e = match channel.send_from(msg, next_part).await {
            Ok(rest) => {
                sent.message_ids.extend(rest.message_ids);
                return Ok((tries.made(), sent));
            }
            Err(e) => e,
        };
        let e = match e {
            ChannelError::Partial {
                delivered,
                total,
                sent: shown,
                cause,
            } => {
                sent.message_ids.extend(shown.message_ids);
                next_part = delivered;
                ChannelError::Partial {
                    delivered,
                    total,
                    sent: SentRef::default(),
                    cause,
                }
            }
            other => other,
        };
        let (made, attempts) = (tries.made(), tries.allowed());
        let Some(delay) = tries.retry_after(&e) else {
            let error = match &e {
                ChannelError::Partial { .. } => e.to_string(),
                _ if next_part > 0 => {
                    format!("{e} (the first {next_part} parts were delivered)")
                }
                _ => e.to_string(),
            };
            return Err(DeliveryError {
                attempts: made,
                error,
                fenced: false,
            });
        };
        let from = if next_part > 0 {
            format!(" from part {}", next_part + 1)
        } else {
            String::new()
        };
        tracing::warn!(
            "delivery to {}:{} failed (try {made} of {attempts}): {e}; retrying{from} in {delay:?}",
            channel.kind(),
            msg.chat.id
        );
        if let Err(why) = tries.pause(delay, fence).await {
            tracing::warn!(
                "delivery to {}:{} stopped before try {}: {why}",
                channel.kind(),
                msg.chat.id,
                made + 1
            );
            return Err(DeliveryError {
                attempts: made,
                error: why,
                fenced: true,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::{InboundSink, StateStore};
    use crate::model::{ChannelKind, ChatKind, ChatRef, OutboundBody};
    use async_trait::async_trait;
    use std::sync::{Arc, Mutex};

    #[test]
    fn only_http_range_codes_are_transient() {
        let api = |code| ChannelError::Api {
            platform: "lark",
            code,
            description: String::new(),
        };
        assert!(retryable(&api(429)) && retryable(&api(503)));
        // Lark business codes: the bot is not in the chat; a bad token. Never worth a retry.
        assert!(!retryable(&api(230002)) && !retryable(&api(99991663)));
        assert!(!retryable(&api(400)));
    }

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

    /// Sends a message of `parts` parts, one id per part; the part numbers in `fail` fail
    /// once each. Records every part it was asked to send.
    struct Parts {
        parts: usize,
        fail: Mutex<Vec<usize>>,
        asked: Mutex<Vec<usize>>,
    }

    #[async_trait]
    impl Channel for Parts {
        fn kind(&self) -> ChannelKind {
            ChannelKind::Lark
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
        async fn send(&self, msg: &OutboundMessage) -> Result<SentRef, ChannelError> {
            self.send_from(msg, 0).await
        }
        async fn send_from(
            &self,
            _: &OutboundMessage,
            first: usize,
        ) -> Result<SentRef, ChannelError> {
            let mut sent = SentRef::default();
            for i in first..self.parts {
                self.asked.lock().unwrap().push(i);
                let mut fail = self.fail.lock().unwrap();
                if let Some(at) = fail.iter().position(|&f| f == i) {
                    fail.remove(at);
                    return Err(ChannelError::stopped_at(
                        first,
                        i,
                        self.parts,
                        sent,
                        transport(),
                    ));
                }
                sent.message_ids.push(format!("m{i}"));
            }
            Ok(sent)
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

    /// A fence that refuses every check.
    #[derive(Debug)]
    struct Lost;

    #[async_trait]
    impl Fence for Lost {
        async fn check(&self) -> Result<(), String> {
            Err("the lease is lost".into())
        }
    }

    #[tokio::test]
    async fn a_fence_that_refuses_stops_the_retries_but_not_the_first_try() {
        let ch = Flaky(Mutex::new(vec![transport()]), Mutex::new(0));
        let e = send_with_retry_fenced(&ch, &msg(), &fast(5), Some(&Lost))
            .await
            .unwrap_err();
        assert!(e.fenced, "{e:?}");
        assert_eq!((e.attempts, *ch.1.lock().unwrap()), (1, 1));
        // Nothing to retry: the fence is not asked.
        let ch = Flaky(Mutex::new(Vec::new()), Mutex::new(0));
        let (tries, _) = send_with_retry_fenced(&ch, &msg(), &fast(5), Some(&Lost))
            .await
            .unwrap();
        assert_eq!(tries, 1);
    }

    #[tokio::test]
    async fn a_retry_resumes_at_the_part_that_failed() {
        let ch = Parts {
            parts: 4,
            fail: Mutex::new(vec![2, 3]),
            asked: Mutex::new(Vec::new()),
        };
        let (tries, sent) = send_with_retry(&ch, &msg(), &fast(5)).await.unwrap();
        assert_eq!(tries, 3);
        assert_eq!(sent.message_ids, ["m0", "m1", "m2", "m3"]);
        // Parts 0 and 1 once; 2 and 3 once more after their failure.
        assert_eq!(*ch.asked.lock().unwrap(), [0, 1, 2, 2, 3, 3]);

        // Out of tries: the error says how much was shown.
        let ch = Parts {
            parts: 3,
            fail: Mutex::new(vec![1]),
            asked: Mutex::new(Vec::new()),
        };
        let e = send_with_retry(&ch, &msg(), &fast(1)).await.unwrap_err();
        assert!(
            e.error.contains("the first 1 of 3 parts were delivered"),
            "{}",
            e.error
        );
    }
}
