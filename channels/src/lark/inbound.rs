//! What both transports (long connection, webhook) do with a decoded event: route it by
//! `header.event_type`, normalise messages and hand them to the daemon, and answer approval
//! button presses.
//!
//! Sources: PROTOCOLS §1.6–1.7 (ACK within 3 s, at-least-once delivery), §3
//! (`im.message.receive_v1`), §6.2 (`card.action.trigger`, doc "卡片回传交互回调").
//!
//! Messages go through one ordered queue (so a chat's messages reach the daemon in arrival
//! order, across reconnects) processed by a single task; the transport waits at most
//! [`RECORD_WAIT`] for the event to be recorded before it acknowledges, so the ACK is always
//! in time and normally comes after the event is durable. A recording that fails before the
//! ACK is answered as a failure (Lark redelivers); one that fails after it is retried here with
//! a growing delay for up to [`RECORD_RETRY_FOR`], since Lark will not send it again. Card callbacks are answered directly
//! (the answer goes into the ACK).
//!
//! Per message, in order:
//! 1. normalise ([`super::normalize`]); the bot's own messages are dropped;
//! 2. a group message that is not a mention but replies (`parent_id`) to a message the bot sent
//!    is marked addressed (known sent ids, else `GET /open-apis/im/v1/messages/{id}`);
//! 3. the stale rule: a message whose `create_time` is older than `stale_after_secs` is skipped
//!    (logged) — *unless* the state store has `lark.seen:<message_id>`, i.e. it was already
//!    published once (stored, maybe still unanswered); then it is published again and the
//!    daemon's dedupe decides;
//! 4. publish to the sink, which records it keyed by `(lark, message_id)` and answers
//!    `Duplicate` for a redelivery (also after a restart); on `Accepted`,
//!    `lark.seen:<message_id>` is recorded.

use super::normalize::{normalize_message, Envelope};
use super::render::{callback_response, CallbackResponse, APPROVAL_KEY, CHOICE_KEY};
use super::{seen_key, unix_now, LarkChannel, LAST_EVENT_AT_KEY};
use crate::channel::{InboundSink, PublishOutcome, StateStore};
use crate::model::{ApprovalChoice, ApprovalDecision, ChannelKind, ChatKind};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Longest wait for a message to be recorded before the transport acknowledges anyway.
pub const RECORD_WAIT: Duration = Duration::from_millis(1500);

/// How long a message already acknowledged to Lark is retried when recording it fails (a
/// locked or briefly unwritable database): nobody else has it any more.
pub const RECORD_RETRY_FOR: Duration = Duration::from_secs(30 * 60);

/// Event type of a message.
pub const MESSAGE_RECEIVE: &str = "im.message.receive_v1";
/// Event type of a card button press.
pub const CARD_ACTION: &str = "card.action.trigger";

/// How the transport should answer the platform.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Acknowledge (`{"code":200}` / HTTP 200).
    Ack,
    /// The event could not be recorded; answer with an error so that Lark delivers it again
    /// (`{"code":500}` / HTTP 500).
    Failed,
    /// A card callback's answer (base64 `data` of the ACK / the HTTP body).
    Callback(CallbackResponse),
}

struct Job {
    event: Value,
    header_create_ms: Option<i64>,
    done: oneshot::Sender<bool>,
}

/// The shared event handler of one channel (see the module docs).
pub struct Inbound {
    chan: Arc<LarkChannel>,
    sink: Arc<dyn InboundSink>,
    state: Arc<dyn StateStore>,
    queue: mpsc::UnboundedSender<Job>,
}

impl Inbound {
    /// Start the processing task and return the handler. The task ends when the handler is
    /// dropped.
    pub fn start(
        chan: Arc<LarkChannel>,
        sink: Arc<dyn InboundSink>,
        state: Arc<dyn StateStore>,
    ) -> Arc<Inbound> {
        let (tx, mut rx) = mpsc::unbounded_channel::<Job>();
        let worker = Worker {
            chan: Arc::clone(&chan),
            sink: Arc::clone(&sink),
            state: Arc::clone(&state),
        };
        ethan_core::task::spawn(async move {
            while let Some(job) = rx.recv().await {
                let mut delay = Duration::from_secs(1);
                let given_up = tokio::time::Instant::now() + RECORD_RETRY_FOR;
                loop {
                    let ok = worker.process(&job.event, job.header_create_ms).await;
                    // Not recorded, but the handler stopped waiting and Lark was told "received"
                    // (see `handle`): Lark will not redeliver, so the retries are ours.
                    if ok || !job.done.is_closed() {
                        let _ = job.done.send(ok);
                        break;
                    }
                    if tokio::time::Instant::now() + delay > given_up {
                        tracing::error!(
                            target: "ethan_channels::lark",
                            "gave up recording an acknowledged lark message after {} min; it is lost",
                            RECORD_RETRY_FOR.as_secs() / 60
                        );
                        break;
                    }
                    tracing::warn!(
                        target: "ethan_channels::lark",
                        "an acknowledged lark message is not recorded yet; trying again in {}s",
                        delay.as_secs()
                    );
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(60));
                }
            }
        });
        Arc::new(Inbound {
            chan,
            sink,
            state,
            queue: tx,
        })
    }

    /// Handle one event envelope; returns how to answer the platform. Never panics on odd
    /// input: unknown event types and malformed bodies are logged and acknowledged.
    pub async fn handle(&self, env: Envelope) -> Reply {
        // For `ethan doctor` only: written beside the handling, never in its way (a busy
        // database must not hold an event past its ACK deadline).
        let state = Arc::clone(&self.state);
        ethan_core::task::spawn(async move {
            if let Err(e) = state.set(LAST_EVENT_AT_KEY, &unix_now().to_string()).await {
                tracing::debug!(target: "ethan_channels::lark", "cannot record the event time: {e}");
            }
        });
        let event_type = env.event_type().to_string();
        let header_create_ms = env
            .header
            .as_ref()
            .and_then(|h| h.create_time.trim().parse::<i64>().ok());
        match event_type.as_str() {
            MESSAGE_RECEIVE => {
                let (done, wait) = oneshot::channel();
                let job = Job {
                    event: env.event,
                    header_create_ms,
                    done,
                };
                if self.queue.send(job).is_err() {
                    tracing::error!(target: "ethan_channels::lark", "the lark event queue is closed");
                    return Reply::Failed;
                }
                match tokio::time::timeout(RECORD_WAIT, wait).await {
                    Ok(Ok(false)) => Reply::Failed,
                    // Recorded, or still in the queue: acknowledge in time either way.
                    _ => Reply::Ack,
                }
            }
            CARD_ACTION => Reply::Callback(self.card_action(&env.event).await),
            "" => {
                tracing::warn!(
                    target: "ethan_channels::lark",
                    "lark payload without an event type (schema {:?}, type {:?}); acknowledged and skipped",
                    env.schema,
                    env.kind
                );
                Reply::Ack
            }
            other => {
                tracing::debug!(target: "ethan_channels::lark", "ignoring lark event type {other}");
                Reply::Ack
            }
        }
    }

    /// A `card.action.trigger`: an approval press goes to [`InboundSink::decide`]; anything
    /// else is answered with `{}` (no UI change).
    async fn card_action(&self, event: &Value) -> CallbackResponse {
        let mut value = event
            .pointer("/action/value")
            .cloned()
            .unwrap_or(Value::Null);
        // Some clients send the value as a JSON string.
        if let Some(s) = value.as_str() {
            value = serde_json::from_str(s).unwrap_or(Value::Null);
        }
        let request_id = value.get(APPROVAL_KEY).and_then(Value::as_str);
        let choice = value
            .get(CHOICE_KEY)
            .and_then(Value::as_str)
            .and_then(ApprovalChoice::from_code);
        let (Some(request_id), Some(choice)) = (request_id, choice) else {
            tracing::debug!(target: "ethan_channels::lark", "card action that is not an approval: {value}");
            return CallbackResponse::default();
        };
        let str_at = |p: &str| {
            event
                .pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let decision = ApprovalDecision {
            channel: ChannelKind::Lark,
            request_id: request_id.to_string(),
            choice,
            user_id: str_at("/operator/open_id"),
            chat_id: str_at("/context/open_chat_id"),
        };
        tracing::info!(
            target: "ethan_channels::lark",
            "approval button {:?} pressed for {} by {} in {}",
            choice,
            decision.request_id,
            decision.user_id,
            decision.chat_id
        );
        let ack = self.sink.decide(decision).await;
        tracing::info!(
            target: "ethan_channels::lark",
            "approval {request_id}: accepted={} ({})",
            ack.accepted,
            ack.toast
        );
        let req = self.chan.approval(request_id).map(|(r, _)| r);
        callback_response(&ack, req.as_ref(), choice)
    }
}

struct Worker {
    chan: Arc<LarkChannel>,
    sink: Arc<dyn InboundSink>,
    state: Arc<dyn StateStore>,
}

impl Worker {
    /// Process one `im.message.receive_v1` event; false when it could not be recorded.
    async fn process(&self, event: &Value, header_create_ms: Option<i64>) -> bool {
        let bot = match self.chan.fetch_bot_info().await {
            Ok(b) => Some(b.open_id),
            Err(e) => {
                tracing::warn!(target: "ethan_channels::lark", "bot info unavailable ({e}); recognising mentions by type");
                None
            }
        };
        let mut ev = match normalize_message(event, bot.as_deref(), header_create_ms) {
            Ok(ev) => ev,
            Err(e) => {
                tracing::warn!(target: "ethan_channels::lark", "skipping an unreadable lark message: {e}");
                return true;
            }
        };
        if ev.sender.is_bot {
            tracing::debug!(target: "ethan_channels::lark", "ignoring a message sent by a bot ({})", ev.event_id);
            return true;
        }
        if !ev.addressed && ev.chat.kind == ChatKind::Group {
            if let Some(parent) = ev.reply_to.clone() {
                ev.addressed = self.is_bot_message(&parent).await;
            }
        }
        let id = ev.event_id.clone();
        let stale_after = self.chan.config().stale_after_secs;
        let age = unix_now() - ev.sent_at;
        if stale_after > 0 && ev.sent_at > 0 && age > stale_after as i64 {
            match self.state.get(&seen_key(&id)).await {
                Ok(Some(_)) => {
                    tracing::debug!(target: "ethan_channels::lark", "stale message {id} was seen before; letting the daemon decide");
                }
                Ok(None) => {
                    tracing::info!(
                        target: "ethan_channels::lark",
                        "skipping lark message {id}: it is {age}s old (channels.lark.stale_after_secs = {stale_after})"
                    );
                    return true;
                }
                Err(e) => {
                    tracing::error!(target: "ethan_channels::lark", "cannot read the state store: {e}");
                    return false;
                }
            }
        }
        match self.sink.publish(ev).await {
            Ok(PublishOutcome::Accepted) => {
                if let Err(e) = self
                    .state
                    .set(&seen_key(&id), &unix_now().to_string())
                    .await
                {
                    tracing::warn!(target: "ethan_channels::lark", "cannot mark {id} as seen: {e}");
                }
                true
            }
            Ok(PublishOutcome::Duplicate) => {
                tracing::debug!(target: "ethan_channels::lark", "lark message {id} already handled; skipping");
                true
            }
            Ok(PublishOutcome::Ignored) => {
                tracing::debug!(target: "ethan_channels::lark", "lark message {id} is not for the agent");
                true
            }
            Err(e) => {
                tracing::error!(target: "ethan_channels::lark", "could not record lark message {id}: {e}");
                false
            }
        }
    }

    /// Whether `message_id` was sent by this bot.
    async fn is_bot_message(&self, message_id: &str) -> bool {
        if self.chan.sent_by_us(message_id) {
            return true;
        }
        match self.chan.api().message_sender(message_id).await {
            Ok(Some(s)) => s.sender_type == "app" && s.id == self.chan.api().app_id(),
            Ok(None) => false,
            Err(e) => {
                tracing::debug!(target: "ethan_channels::lark", "cannot look up message {message_id}: {e}");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::ChannelError;
    use crate::lark::{LarkConfig, LarkMode};
    use crate::model::{ApprovalAck, InboundEvent};
    use async_trait::async_trait;
    use serde_json::json;
    use std::collections::HashMap;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Sink {
        published: Mutex<Vec<InboundEvent>>,
        decided: Mutex<Vec<ApprovalDecision>>,
        /// This many publishes take 2 s and then fail, as with a locked database.
        slow_failures: std::sync::atomic::AtomicU32,
    }

    #[async_trait]
    impl InboundSink for Sink {
        async fn publish(&self, event: InboundEvent) -> Result<PublishOutcome, ChannelError> {
            use std::sync::atomic::Ordering::SeqCst;
            if self
                .slow_failures
                .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                tokio::time::sleep(Duration::from_secs(2)).await;
                return Err(ChannelError::Storage("database is locked".into()));
            }
            self.published.lock().unwrap().push(event);
            Ok(PublishOutcome::Accepted)
        }
        async fn decide(&self, decision: ApprovalDecision) -> ApprovalAck {
            self.decided.lock().unwrap().push(decision);
            ApprovalAck {
                accepted: true,
                toast: "Approved".into(),
                outcome: Some("✅ Approved once".into()),
            }
        }
    }

    #[derive(Default)]
    struct Mem(Mutex<HashMap<String, String>>);

    #[async_trait::async_trait]
    impl StateStore for Mem {
        async fn get(&self, key: &str) -> Result<Option<String>, ChannelError> {
            Ok(self.0.lock().unwrap().get(key).cloned())
        }
        async fn set(&self, key: &str, value: &str) -> Result<(), ChannelError> {
            self.0.lock().unwrap().insert(key.into(), value.into());
            Ok(())
        }
    }

    fn setup() -> (Arc<Inbound>, Arc<Sink>, Arc<Mem>) {
        let chan = Arc::new(
            LarkChannel::new(LarkConfig {
                app_id: "cli_x".into(),
                app_secret: "s".into(),
                // Nothing listens here: bot info fails and mentions are recognised by type.
                base_url: "http://127.0.0.1:9".into(),
                mode: LarkMode::Websocket,
                stale_after_secs: 900,
                ..LarkConfig::default()
            })
            .unwrap(),
        );
        let sink = Arc::new(Sink::default());
        let state = Arc::new(Mem::default());
        let inbound = Inbound::start(chan, sink.clone(), state.clone());
        (inbound, sink, state)
    }

    fn p2p(message_id: &str, secs_ago: i64) -> Envelope {
        let t = ((unix_now() - secs_ago) * 1000).to_string();
        let v = json!({
            "schema": "2.0",
            "header": {"event_id": "e", "event_type": MESSAGE_RECEIVE, "create_time": t},
            "event": {
                "sender": {"sender_id": {"open_id": "ou_u"}, "sender_type": "user"},
                "message": {"message_id": message_id, "chat_id": "oc_1", "chat_type": "p2p",
                            "message_type": "text", "content": "{\"text\":\"hi\"}", "create_time": t}
            }
        });
        serde_json::from_value(v).unwrap()
    }

    #[tokio::test]
    async fn fresh_messages_are_published_and_marked_seen() {
        let (inbound, sink, state) = setup();
        assert_eq!(inbound.handle(p2p("om_new", 5)).await, Reply::Ack);
        assert_eq!(sink.published.lock().unwrap().len(), 1);
        assert!(state.get(&seen_key("om_new")).await.unwrap().is_some());
        assert!(state
            .get(super::super::LAST_EVENT_AT_KEY)
            .await
            .unwrap()
            .is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn an_acknowledged_message_whose_recording_failed_is_retried_until_recorded() {
        let (inbound, sink, _) = setup();
        sink.slow_failures
            .store(2, std::sync::atomic::Ordering::SeqCst);
        // Acknowledged after RECORD_WAIT (1.5 s) while the first try is still under way.
        assert_eq!(inbound.handle(p2p("om_late", 5)).await, Reply::Ack);
        assert!(sink.published.lock().unwrap().is_empty());
        for _ in 0..60 {
            if !sink.published.lock().unwrap().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let published = sink.published.lock().unwrap();
        assert_eq!(published.len(), 1, "lost after two failed tries");
        assert_eq!(published[0].message_id.as_deref(), Some("om_late"));
    }

    #[tokio::test]
    async fn stale_messages_are_skipped_unless_seen_before() {
        let (inbound, sink, state) = setup();
        assert_eq!(inbound.handle(p2p("om_old", 3600)).await, Reply::Ack);
        assert!(sink.published.lock().unwrap().is_empty());
        assert!(state.get(&seen_key("om_old")).await.unwrap().is_none());
        // Published once before (stored, perhaps unanswered): the daemon decides.
        state.set(&seen_key("om_old"), "1").await.unwrap();
        assert_eq!(inbound.handle(p2p("om_old", 3600)).await, Reply::Ack);
        assert_eq!(sink.published.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn approval_presses_reach_decide_and_answer_with_the_outcome() {
        let (inbound, sink, _) = setup();
        let env: Envelope = serde_json::from_value(json!({
            "schema": "2.0",
            "header": {"event_type": CARD_ACTION, "create_time": "1603977298000000"},
            "event": {
                "operator": {"open_id": "ou_owner"},
                "action": {"value": {"ethan_approval": "r1", "choice": "s"}, "tag": "button"},
                "context": {"open_message_id": "om_card", "open_chat_id": "oc_9"}
            }
        }))
        .unwrap();
        let Reply::Callback(resp) = inbound.handle(env).await else {
            panic!("not a callback answer");
        };
        let d = sink.decided.lock().unwrap().clone();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].request_id, "r1");
        assert_eq!(d[0].choice, ApprovalChoice::Session);
        assert_eq!(d[0].user_id, "ou_owner");
        assert_eq!(d[0].chat_id, "oc_9");
        assert_eq!(d[0].channel, ChannelKind::Lark);
        let v: Value = serde_json::from_slice(&resp.to_bytes()).unwrap();
        assert_eq!(v["toast"]["type"], "success");
        assert_eq!(v["card"]["data"]["header"]["template"], "green");
    }

    #[tokio::test]
    async fn odd_payloads_are_acknowledged() {
        let (inbound, sink, _) = setup();
        for v in [
            json!({}),
            json!({"schema": "2.0", "header": {"event_type": "contact.user.created_v3"}, "event": {}}),
            json!({"schema": "2.0", "header": {"event_type": MESSAGE_RECEIVE}, "event": 5}),
        ] {
            let env: Envelope = serde_json::from_value(v).unwrap();
            assert_eq!(inbound.handle(env).await, Reply::Ack);
        }
        assert!(sink.published.lock().unwrap().is_empty());
    }
}
