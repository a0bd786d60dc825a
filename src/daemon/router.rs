//! The bus: adapters publish inbound events here; each session key gets one worker that handles
//! its events in order, while different sessions run concurrently; a semaphore caps the turns
//! in flight across all sessions.
//!
//! An event is recorded in the store (deduplicated by the platform's event id) before `publish`
//! returns, and marked `done` once its reply is delivered; events left unfinished by a crash are
//! re-queued at start by [`Router::resume_unfinished`]. `/stop` bypasses the queue and cancels the
//! session's running turn.

use super::access::{self, Access};
use super::commands::{self, Command};
use crate::agent::{Agent, TurnInput, TurnOutcome};
use crate::consent::Consent;
use crate::store::Store;
use async_trait::async_trait;
use ethan_channels::{
    ApprovalAck, ApprovalChoice, ApprovalDecision, Channel, ChannelError, ChannelKind, ChatKind,
    InboundEvent, InboundSink, OutboundBody, OutboundMessage, PublishOutcome,
};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, Semaphore};
use tokio_util::sync::CancellationToken;

/// Events queued per session before `publish` waits (backpressure on the adapter).
const SESSION_QUEUE: usize = 64;
/// A worker with nothing to do for this long exits.
const WORKER_IDLE: Duration = Duration::from_secs(300);
/// Telegram shows "typing…" for about 5 s; refresh before it fades.
const TYPING_EVERY: Duration = Duration::from_secs(4);

struct SessionWorker {
    tx: mpsc::Sender<InboundEvent>,
}

pub struct Router {
    store: Store,
    agent: Arc<Agent>,
    consent: Arc<Consent>,
    channels: HashMap<ChannelKind, Arc<dyn Channel>>,
    workers: Mutex<HashMap<String, SessionWorker>>,
    running: Mutex<HashMap<String, CancellationToken>>,
    turn_slots: Arc<Semaphore>,
}

impl Router {
    /// `max_turns`: the global cap on turns in flight.
    pub fn new(
        store: Store,
        agent: Arc<Agent>,
        consent: Arc<Consent>,
        channels: HashMap<ChannelKind, Arc<dyn Channel>>,
        max_turns: usize,
    ) -> Arc<Self> {
        Arc::new(Self {
            store,
            agent,
            consent,
            channels,
            workers: Mutex::new(HashMap::new()),
            running: Mutex::new(HashMap::new()),
            turn_slots: Arc::new(Semaphore::new(max_turns.max(1))),
        })
    }

    /// Re-queue events that were recorded but never finished (a crash or a stop mid-turn).
    pub async fn resume_unfinished(self: &Arc<Self>) -> usize {
        let events = match self.store.unfinished_inbound() {
            Ok(e) => e,
            Err(e) => {
                tracing::error!("cannot read unfinished events: {e}");
                return 0;
            }
        };
        let n = events.len();
        for ev in events {
            tracing::info!("resuming unfinished {} event {}", ev.channel, ev.event_id);
            self.enqueue(ev).await;
        }
        n
    }

    async fn enqueue(self: &Arc<Self>, ev: InboundEvent) {
        let key = ev.session_key();
        let mut ev = ev;
        // At most two rounds: a worker may exit between taking its sender and sending.
        for _ in 0..2 {
            let tx = {
                let mut workers = self.workers.lock().unwrap_or_else(|p| p.into_inner());
                workers
                    .entry(key.clone())
                    .or_insert_with(|| self.spawn_worker(key.clone()))
                    .tx
                    .clone()
            };
            match tx.send(ev).await {
                Ok(()) => return,
                Err(mpsc::error::SendError(back)) => {
                    ev = back;
                    let mut workers = self.workers.lock().unwrap_or_else(|p| p.into_inner());
                    if workers.get(&key).is_some_and(|w| w.tx.same_channel(&tx)) {
                        workers.remove(&key);
                    }
                }
            }
        }
        tracing::error!("could not queue event {} for {key}", ev.event_id);
    }

    fn spawn_worker(self: &Arc<Self>, key: String) -> SessionWorker {
        let (tx, mut rx) = mpsc::channel::<InboundEvent>(SESSION_QUEUE);
        let me = Arc::clone(self);
        let my_tx = tx.clone();
        tokio::spawn(async move {
            loop {
                match tokio::time::timeout(WORKER_IDLE, rx.recv()).await {
                    Ok(Some(ev)) => me.handle(ev).await,
                    Ok(None) => break,
                    Err(_) => {
                        let mut workers = me.workers.lock().unwrap_or_else(|p| p.into_inner());
                        if rx.is_empty() {
                            if workers.get(&key).is_some_and(|w| w.tx.same_channel(&my_tx)) {
                                workers.remove(&key);
                            }
                            break;
                        }
                    }
                }
            }
        });
        SessionWorker { tx }
    }

    fn mark(&self, ev: &InboundEvent, state: &str) {
        if let Err(e) = self
            .store
            .set_inbound_state(ev.channel.as_str(), &ev.event_id, state)
        {
            tracing::error!("cannot mark event {} {state}: {e}", ev.event_id);
        }
    }

    async fn reply(&self, ev: &InboundEvent, text: &str) -> Result<(), ChannelError> {
        let Some(ch) = self.channels.get(&ev.channel) else {
            return Err(ChannelError::Storage(format!(
                "no {} channel is running",
                ev.channel
            )));
        };
        let msg = OutboundMessage {
            chat: ev.chat.clone(),
            reply_to: ev.message_id.clone(),
            body: OutboundBody::Text(text.to_string()),
        };
        // A transient failure gets two more tries; the rest is logged.
        let mut last = None;
        for attempt in 0..3 {
            match ch.send(&msg).await {
                Ok(_) => {
                    crate::metrics::METRICS
                        .messages_out
                        .with_label_values(&[ev.channel.as_str()])
                        .inc();
                    return Ok(());
                }
                Err(e @ ChannelError::Transport { .. }) => {
                    tracing::warn!(
                        "reply to {} failed (try {}): {e}",
                        ev.session_key(),
                        attempt + 1
                    );
                    last = Some(e);
                    tokio::time::sleep(Duration::from_secs(1 << attempt)).await;
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| ChannelError::Storage("send failed".into())))
    }

    fn access(&self, ev: &InboundEvent) -> Access {
        let owner = self.consent.owners.is_owner(ev.channel, &ev.sender.id);
        access::check(&self.agent.config.config, ev, owner)
    }

    /// Handle one event of a session (called by its worker, in order).
    async fn handle(self: &Arc<Self>, ev: InboundEvent) {
        self.mark(&ev, "processing");
        let is_owner = match self.access(&ev) {
            Access::Ignore => {
                self.mark(&ev, "ignored");
                return;
            }
            Access::Refused(note) => {
                tracing::info!(
                    "{} user {} is not allowed; sent a note",
                    ev.channel,
                    ev.sender.id
                );
                let _ = self.reply(&ev, note).await;
                self.mark(&ev, "done");
                return;
            }
            Access::Allowed { is_owner } => is_owner,
        };
        let key = ev.session_key();
        let reply_text = match commands::parse(&ev.text) {
            Some(Command::Help) => Some(commands::HELP.to_string()),
            Some(Command::New) => Some(match self.store.new_session(&key) {
                Ok(_) => {
                    self.consent.grants.clear(&key);
                    "Started a fresh conversation.".to_string()
                }
                Err(e) => {
                    tracing::error!("/new failed: {e}");
                    "I couldn't start a new conversation (database error).".to_string()
                }
            }),
            Some(Command::Stop) => Some("Nothing is running.".to_string()),
            Some(c @ (Command::Approve(_) | Command::Deny(_) | Command::Claim(_))) => {
                Some(self.out_of_band(&ev, &c))
            }
            None => self.run_turn(&ev, is_owner).await,
        };
        let state = match reply_text {
            Some(text) => match self.reply(&ev, &text).await {
                Ok(()) => "done",
                Err(e) => {
                    tracing::error!("could not deliver the reply in {key}: {e}");
                    "failed"
                }
            },
            None => "done",
        };
        self.mark(&ev, state);
    }

    async fn run_turn(self: &Arc<Self>, ev: &InboundEvent, is_owner: bool) -> Option<String> {
        let key = ev.session_key();
        let _slot = self.turn_slots.clone().acquire_owned().await.ok()?;
        let cancel = CancellationToken::new();
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.clone(), cancel.clone());
        let typing = self.spawn_typing(ev);
        let input = TurnInput {
            session_key: key.clone(),
            channel: ev.channel,
            chat_id: ev.chat.id.clone(),
            user_id: ev.sender.id.clone(),
            is_owner,
            text: ev.text.clone(),
            trace_id: trace_id_for(ev),
            chat: Some(ev.chat.clone()),
            unattended: false,
            allowed_tools: None,
            events: None,
        };
        let reply = self.agent.run_turn_with_cards(&input, &cancel).await;
        let outcome = reply.outcome;
        crate::metrics::METRICS
            .turns
            .with_label_values(&[ev.channel.as_str(), outcome.label()])
            .inc();
        // Cards go out as their own messages, before the answer.
        if let Some(ch) = self.channels.get(&ev.channel) {
            for ui in reply.cards {
                let msg = OutboundMessage {
                    chat: ev.chat.clone(),
                    reply_to: ev.message_id.clone(),
                    body: OutboundBody::Ui(ui),
                };
                if let Err(e) = ch.send(&msg).await {
                    tracing::warn!("could not show a card in {key}: {e}");
                }
            }
        }
        typing.abort();
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&key);
        match outcome {
            TurnOutcome::Stopped => Some("Stopped.".to_string()),
            other => other.reply_text().map(str::to_string),
        }
    }

    fn spawn_typing(&self, ev: &InboundEvent) -> tokio::task::JoinHandle<()> {
        let ch = self.channels.get(&ev.channel).cloned();
        let msg = OutboundMessage {
            chat: ev.chat.clone(),
            reply_to: None,
            body: OutboundBody::Typing,
        };
        tokio::spawn(async move {
            let Some(ch) = ch else { return };
            loop {
                if let Err(e) = ch.send(&msg).await {
                    tracing::debug!("typing indicator failed: {e}");
                }
                tokio::time::sleep(TYPING_EVERY).await;
            }
        })
    }

    /// `/approve`, `/deny`, `/claim`: handled at once (a turn may be waiting for them); the reply.
    fn out_of_band(&self, ev: &InboundEvent, cmd: &Command) -> String {
        match cmd {
            Command::Claim(code) => {
                if ev.chat.kind != ChatKind::Direct {
                    return "Send /claim <code> to me in a direct message.".into();
                }
                self.consent.owners.claim(ev.channel, &ev.sender.id, code)
            }
            Command::Approve(id) | Command::Deny(id) => {
                let choice = if matches!(cmd, Command::Approve(_)) {
                    ApprovalChoice::Once
                } else {
                    ApprovalChoice::Deny
                };
                let id = match id {
                    Some(id) => id.clone(),
                    None => {
                        let waiting = self.consent.pending_in_chat(ev.channel, &ev.chat.id);
                        match waiting.as_slice() {
                            [one] => one.clone(),
                            [] => return "No approval is waiting here.".into(),
                            _ => {
                                return "Several approvals are waiting; give the id: /approve <id>."
                                    .into()
                            }
                        }
                    }
                };
                let ack = self.consent.decide(&ApprovalDecision {
                    channel: ev.channel,
                    request_id: id.clone(),
                    choice,
                    user_id: ev.sender.id.clone(),
                    chat_id: ev.chat.id.clone(),
                });
                if let (Some(outcome), Some(ch)) =
                    (&ack.outcome, self.channels.get(&ev.channel).cloned())
                {
                    let msg = OutboundMessage {
                        chat: ev.chat.clone(),
                        reply_to: None,
                        body: OutboundBody::ResolveApproval {
                            request_id: id,
                            outcome: outcome.clone(),
                        },
                    };
                    tokio::spawn(async move {
                        let _ = ch.send(&msg).await;
                    });
                }
                ack.toast
            }
            _ => String::new(),
        }
    }

    /// How many turns are running now.
    pub fn turns_in_flight(&self) -> usize {
        self.running.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Cancel the running turn of `key`; true when there was one.
    fn stop(&self, key: &str) -> bool {
        match self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
        {
            Some(c) => {
                c.cancel();
                true
            }
            None => false,
        }
    }
}

/// A trace id stable for an inbound event, so a turn re-run after a crash keeps its trace.
pub fn trace_id_for(ev: &InboundEvent) -> String {
    let digest = Sha256::digest(format!("{}:{}", ev.channel, ev.event_id).as_bytes());
    hex::encode(&digest[..12])
}

/// The sink adapters publish to.
pub struct RouterSink(pub Arc<Router>);

#[async_trait]
impl InboundSink for RouterSink {
    async fn publish(&self, ev: InboundEvent) -> Result<PublishOutcome, ChannelError> {
        let router = &self.0;
        if !ev.addressed && matches!(router.access(&ev), Access::Ignore) {
            return Ok(PublishOutcome::Ignored);
        }
        let new = router
            .store
            .record_inbound(&ev)
            .map_err(|e| ChannelError::Storage(e.to_string()))?;
        if !new {
            return Ok(PublishOutcome::Duplicate);
        }
        // These must not wait behind the turn they act on.
        match commands::parse(&ev.text) {
            Some(Command::Stop)
                if matches!(router.access(&ev), Access::Allowed { .. })
                    && router.stop(&ev.session_key()) =>
            {
                router.mark(&ev, "done");
                return Ok(PublishOutcome::Accepted);
            }
            Some(cmd) if cmd.bypasses_queue() => {
                // /claim works for people not yet allowed; /approve and /deny check the owner.
                router.mark(&ev, "processing");
                let reply = router.out_of_band(&ev, &cmd);
                let state = match router.reply(&ev, &reply).await {
                    Ok(()) => "done",
                    Err(e) => {
                        tracing::error!("could not answer a command: {e}");
                        "failed"
                    }
                };
                router.mark(&ev, state);
                return Ok(PublishOutcome::Accepted);
            }
            _ => {}
        }
        crate::metrics::METRICS
            .messages_in
            .with_label_values(&[ev.channel.as_str()])
            .inc();
        router.enqueue(ev).await;
        Ok(PublishOutcome::Accepted)
    }

    async fn decide(&self, decision: ApprovalDecision) -> ApprovalAck {
        self.0.consent.decide(&decision)
    }
}
