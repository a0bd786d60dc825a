//! The bus: adapters publish inbound events here; each session key gets one worker that handles
//! its events in order, while different sessions run concurrently; a semaphore caps the turns
//! in flight across all sessions.
//!
//! An event is recorded in the store (deduplicated by the platform's event id) before `publish`
//! returns. Its reply is stored with the state `sending` just before it is sent, and the event is
//! marked `done` once the platform confirms it. At start, [`Router::resume_unfinished`]:
//! - re-queues events whose turn never produced a reply (a crash or stop mid-turn);
//! - does *not* re-run events caught in `sending` (the turn finished; its answer is in the
//!   history). On a channel with idempotent sends (Lark, see
//!   [`Channel::idempotent_send_window`]) the stored reply is sent again with the same
//!   idempotency key, so the platform shows it once; elsewhere (Telegram) a warning is logged and
//!   the event is marked `unconfirmed`, because a second send could show the reply twice.
//!
//! Every reply to an inbound event carries the idempotency key `reply:{channel}:{event_id}`.
//! Replies and `ui_card` cards are delivered with retries ([`ethan_channels::delivery`]): a
//! retry sends only the parts of a split message that were not shown yet.
//! `/stop` bypasses the queue and cancels the session's running turn.
//!
//! Streamed replies ([`super::stream`]): when the channel offers a draft for the chat
//! ([`Channel::open_draft`]), the turn's events feed it while the model writes, and the answer
//! is delivered by [`ethan_channels::Draft::finish`] in the same message instead of a new one.
//! The draft's handle is in the store before its message is first edited, so a turn re-run after
//! a crash continues in that message, and a reply caught in `sending` with a recorded handle is
//! finished there (on every channel: finishing a draft twice shows the answer once).
//!
//! The intake never waits on a chat: `publish` records the event and hands it to its session's
//! queue, which is unbounded (the event is already durable, so the queue holds nothing the
//! store does not), and returns. Replies to `/approve`, `/deny`, `/claim` and a refused `/stop`
//! are sent from a task of their own, so a slow or failing send delays nobody else's events.
//!
//! Web turns (`POST /api/chat`, [`crate::gateway::TurnQueue`]) go through the same session
//! queues and the same cap: a second request on a busy session waits for the first to end.
//!
//! In a group chat, `/new` (which wipes the group's history and session grants) is for the bot's
//! owner only, and `/stop` for the owner or the sender of the running turn; anyone else gets a
//! short refusal and nothing changes. In a DM the sender is the conversation's only user.
//! `/usage` (today's tokens against the budgets, [`crate::usage::summary_for_chat`]) is for the
//! owner only, in any chat; a group is shown its own counts only.

use super::access::{self, Access};
use super::commands::{self, Command};
use super::replica::{Replica, Want};
use super::stream::{self, Presenter};
use super::typing::Typing;
use crate::agent::{Agent, TurnInput, TurnOutcome, TurnReply};
use crate::consent::Consent;
use crate::store::inbound::UnconfirmedReply;
use crate::store::{DaemonStoreRef, Pending};
use async_trait::async_trait;
use ethan_channels::delivery::{retryable, send_with_retry, DeliveryError, RetryPolicy};
use ethan_channels::{
    ApprovalAck, ApprovalChoice, ApprovalDecision, Channel, ChannelError, ChannelKind, ChatKind,
    Draft, DraftHandle, DraftTarget, DraftView, InboundEvent, InboundSink, OutboundBody,
    OutboundMessage, PublishOutcome, ToolLine,
};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio_util::sync::CancellationToken;

/// Replicas: how long a web turn waits for its session to be free on the other replicas.
const WEB_LEASE_WAIT: Duration = Duration::from_secs(120);
/// A worker with nothing to do for this long exits.
const WORKER_IDLE: Duration = Duration::from_secs(300);
/// An unconfirmed reply is re-sent only if this much of the platform's idempotency window is
/// still left (the re-send itself may take retries).
const RESEND_MARGIN: Duration = Duration::from_secs(300);
/// Replies and cards: three tries, 1 s then 2 s apart.
const DELIVERY_RETRY: RetryPolicy = RetryPolicy {
    attempts: 3,
    first_delay: Duration::from_secs(1),
    max_delay: Duration::from_secs(4),
};

/// Work for a session's worker, done in queue order.
///
/// The payloads are boxed: a tokio queue allocates room for 32 jobs when it is made, and every
/// chat that spoke in the last five minutes has one, so a `Job` is kept to two words (an
/// inbound event inline made each idle chat's empty queue ~8 KB).
enum Job {
    /// Handle an inbound event: run its turn or command and deliver the reply. `resumed`: it
    /// was recorded before a restart, so its streamed reply may have a draft to continue.
    Event {
        ev: Box<InboundEvent>,
        resumed: bool,
    },
    /// Send again a reply whose first send a crash cut off (idempotent channels only).
    Resend(Box<UnconfirmedReply>),
    /// Run a web turn and hand its reply back to the gateway.
    Web(Box<WebTurn>),
    /// Replicas only: take the session's lease and run its unfinished events from the store,
    /// in the platform's order (see [`super::replica`]).
    Pump,
}

/// A web turn waiting in its session's queue.
struct WebTurn {
    input: TurnInput,
    cancel: CancellationToken,
    done: oneshot::Sender<TurnReply>,
}

struct SessionWorker {
    tx: mpsc::UnboundedSender<Job>,
}

/// A turn in flight: how to cancel it, and who started it (for `/stop` in groups).
struct RunningTurn {
    cancel: CancellationToken,
    sender_id: String,
}

/// What `/stop` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopOutcome {
    Stopped,
    /// A turn is running, but this sender may not stop it.
    NotAllowed,
    NothingRunning,
}

/// The reply to a group member who is not the owner and tries `/new`.
pub const NEW_OWNER_ONLY: &str = "Only the bot's owner can start a fresh conversation in a group.";
/// The reply to anyone but the owner who asks for `/usage`.
pub const USAGE_OWNER_ONLY: &str = "Only the bot's owner can see the token usage.";
/// The reply to a group member who tries to `/stop` someone else's turn.
pub const STOP_NOT_YOURS: &str =
    "Only the bot's owner or the person who asked can stop this answer.";

pub struct Router {
    store: DaemonStoreRef,
    agent: Arc<Agent>,
    consent: Arc<Consent>,
    channels: HashMap<ChannelKind, Arc<dyn Channel>>,
    workers: Mutex<HashMap<String, SessionWorker>>,
    running: Mutex<HashMap<String, RunningTurn>>,
    turn_slots: Arc<Semaphore>,
    /// Set when the store is shared with other replicas.
    replica: Option<Arc<Replica>>,
    /// Pictures, voice notes and files of inbound messages ([`crate::media`]).
    media: crate::media::Media,
}

impl Router {
    /// `max_turns`: the global cap on turns in flight.
    pub fn new(
        store: DaemonStoreRef,
        agent: Arc<Agent>,
        consent: Arc<Consent>,
        channels: HashMap<ChannelKind, Arc<dyn Channel>>,
        max_turns: usize,
    ) -> Arc<Self> {
        let media = crate::media::Media::new(agent.config.clone());
        Arc::new(Self {
            store,
            agent,
            consent,
            channels,
            workers: Mutex::new(HashMap::new()),
            running: Mutex::new(HashMap::new()),
            turn_slots: Arc::new(Semaphore::new(max_turns.max(1))),
            media,
            replica: None,
        })
    }

    /// A router whose sessions are shared with other replicas through `replica`'s leases.
    pub fn replicated(
        store: DaemonStoreRef,
        agent: Arc<Agent>,
        consent: Arc<Consent>,
        channels: HashMap<ChannelKind, Arc<dyn Channel>>,
        max_turns: usize,
        replica: Arc<Replica>,
    ) -> Arc<Self> {
        let media = crate::media::Media::new(agent.config.clone());
        Arc::new(Self {
            store,
            agent,
            consent,
            channels,
            workers: Mutex::new(HashMap::new()),
            running: Mutex::new(HashMap::new()),
            turn_slots: Arc::new(Semaphore::new(max_turns.max(1))),
            media,
            replica: Some(replica),
        })
    }

    /// Replicas: every [`super::replica::SWEEP_EVERY`], pump the sessions that have unfinished
    /// events and no live lease (their replica died, or their event came in while the session
    /// was being let go), until `shutdown`. Does nothing without replicas.
    pub async fn sweep_loop(self: Arc<Self>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        let Some(replica) = self.replica.clone() else {
            return;
        };
        loop {
            let mut full = false;
            match self.store.unleased_sessions().await {
                Ok(keys) => {
                    for key in keys {
                        match replica.want(&key) {
                            Want::Queue => self.enqueue_job(key, Job::Pump),
                            Want::Already => {}
                            Want::Full => {
                                full = true;
                                break;
                            }
                        }
                    }
                }
                Err(e) => tracing::warn!("cannot look for sessions without a replica: {e}"),
            }
            let pause = if full {
                super::replica::SWEEP_BUSY
            } else {
                super::replica::SWEEP_EVERY
            };
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = shutdown.changed() => return,
            }
        }
    }

    /// Replicas: take `key`'s lease and run its unfinished events in the platform's order; let
    /// the lease go when none is left, then look once more (an event recorded by another
    /// replica while this one held the lease is found here). An event still unfinished after
    /// this replica handled it (a store write that failed) is not run again by this pump.
    async fn pump(self: &Arc<Self>, key: &str) {
        let Some(replica) = self.replica.clone() else {
            return;
        };
        let lease = crate::store::session_lease(key);
        let mut handled = std::collections::HashSet::new();
        if !replica.take(&lease).await {
            return;
        }
        loop {
            let pending = match self.store.pending_inbound(key).await {
                Ok(p) => p,
                Err(e) => {
                    tracing::error!("cannot read the unfinished events of {key}: {e}");
                    replica.give_up(&lease).await;
                    return;
                }
            };
            let mut ran = false;
            for p in pending {
                if !replica.holds(&lease) {
                    tracing::warn!(
                        "this replica lost the lease of {key}; its events are left to the \
                         replica that took it"
                    );
                    return;
                }
                if !handled.insert(p.event().event_id.clone()) {
                    continue;
                }
                ran = true;
                match p {
                    Pending::Turn { event, resumed } => {
                        tracing::debug!(
                            "replica {} runs {} event {} in {key}",
                            replica.id,
                            event.channel,
                            event.event_id
                        );
                        if resumed {
                            tracing::info!(
                                "taking over unfinished {} event {} in {key}",
                                event.channel,
                                event.event_id
                            );
                        }
                        self.handle(event, resumed).await;
                    }
                    Pending::Reply(r) => {
                        if let Some(r) = self.settle_unconfirmed(r).await {
                            self.resend(r).await;
                        }
                    }
                }
            }
            if ran {
                // More may have come in meanwhile: keep the lease and look again.
                continue;
            }
            replica.give_up(&lease).await;
            // An event recorded by a replica that found the lease held just before it was let
            // go is found here.
            let left = match self.store.pending_inbound(key).await {
                Ok(p) => p.iter().any(|p| !handled.contains(&p.event().event_id)),
                Err(_) => false,
            };
            if !left || !replica.take(&lease).await {
                return;
            }
        }
    }

    /// At start: re-send (or report) replies a crash caught mid-send, then re-queue events that
    /// were recorded but never answered (a crash or a stop mid-turn); see the module docs.
    /// Returns how many events were queued (re-sends included). Errors are logged.
    pub async fn resume_unfinished(self: &Arc<Self>) -> usize {
        if self.replica.is_some() {
            // Other replicas may be running these right now: the sweep takes over only the
            // sessions nobody holds.
            return 0;
        }
        let mut queued = self.resume_unconfirmed_replies().await;
        let events = match self.store.unfinished_inbound().await {
            Ok(e) => e,
            Err(e) => {
                tracing::error!("cannot read unfinished events: {e}");
                return queued;
            }
        };
        for ev in events {
            tracing::info!("resuming unfinished {} event {}", ev.channel, ev.event_id);
            self.enqueue_job(
                ev.session_key(),
                Job::Event {
                    ev: Box::new(ev),
                    resumed: true,
                },
            );
            queued += 1;
        }
        queued
    }

    /// Events left in `sending`: queue a re-send where the channel's sends are idempotent and
    /// its window has not passed; otherwise log a warning and mark them `unconfirmed`.
    async fn resume_unconfirmed_replies(self: &Arc<Self>) -> usize {
        let replies = match self.store.unconfirmed_replies().await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!("cannot read replies that were being sent: {e}");
                return 0;
            }
        };
        let mut queued = 0;
        for r in replies {
            if let Some(r) = self.settle_unconfirmed(r).await {
                self.enqueue_job(r.event.session_key(), Job::Resend(Box::new(r)));
                queued += 1;
            }
        }
        queued
    }

    /// A reply caught in `sending` by a crash: `Some` when it is to be sent again (finished in
    /// its recorded draft, or re-sent with the same idempotency key inside the channel's
    /// window); otherwise it is marked `unconfirmed` with a warning saying why, and `None`.
    async fn settle_unconfirmed(&self, r: UnconfirmedReply) -> Option<UnconfirmedReply> {
        let now = crate::store::now();
        let ev = &r.event;
        let what = format!(
            "the reply ({} characters) to {} event {} in {}",
            r.reply.chars().count(),
            ev.channel,
            ev.event_id,
            ev.session_key()
        );
        let platform = platform_name(ev.channel);
        let age = Duration::from_secs(u64::try_from(now - r.since).unwrap_or(0));
        let window = self
            .channels
            .get(&ev.channel)
            .map(|ch| ch.idempotent_send_window());
        if window.is_some() && stream::recorded_handle(&self.store, ev).await.is_some() {
            tracing::info!(
                "{what} was being sent when the daemon stopped; finishing it in the \
                 message it was streamed into"
            );
            return Some(r);
        }
        match window {
            Some(Some(w)) if age + RESEND_MARGIN < w => {
                tracing::info!(
                    "{what} was being sent when the daemon stopped; sending it again with \
                     the same idempotency key, so {platform} shows it once"
                );
                return Some(r);
            }
            Some(Some(w)) => {
                tracing::warn!(
                    "{what} was being sent when the daemon stopped {} s ago, longer than \
                     {platform} recognises a repeated send ({} s); it is not sent again, so \
                     it may be missing",
                    age.as_secs(),
                    w.as_secs()
                );
            }
            Some(None) => {
                tracing::warn!(
                    "{what} was being sent when the daemon stopped; {platform} has no \
                     idempotent send, so it is not sent again (it may or may not have \
                     arrived)"
                );
            }
            None => {
                tracing::warn!(
                    "{what} was being sent when the daemon stopped; no {} channel is \
                     running now, so it is not sent again",
                    ev.channel
                );
            }
        }
        self.mark(ev, "unconfirmed").await;
        None
    }

    fn enqueue(self: &Arc<Self>, ev: InboundEvent) {
        if let Some(replica) = &self.replica {
            // The event is in the store; whichever replica takes the session runs it: this one
            // unless it is full (then a sweep, here or elsewhere, finds it).
            let key = ev.session_key();
            if replica.want(&key) == Want::Queue {
                self.enqueue_job(key, Job::Pump);
            }
            return;
        }
        self.enqueue_job(
            ev.session_key(),
            Job::Event {
                ev: Box::new(ev),
                resumed: false,
            },
        );
    }

    /// Put `job` at the end of `key`'s queue, starting its worker when there is none. Never
    /// waits: the queue is unbounded, and the send happens under the workers' lock, which an
    /// idle worker also takes before it exits, so a job never lands in a queue nobody reads.
    fn enqueue_job(self: &Arc<Self>, key: String, job: Job) {
        let mut job = job;
        // A second round only if a worker ended without taking its lock (it panicked).
        for _ in 0..2 {
            let mut workers = self.workers.lock().unwrap_or_else(|p| p.into_inner());
            let tx = workers
                .entry(key.clone())
                .or_insert_with(|| self.spawn_worker(key.clone()))
                .tx
                .clone();
            match tx.send(job) {
                Ok(()) => return,
                Err(mpsc::error::SendError(back)) => {
                    job = back;
                    workers.remove(&key);
                }
            }
        }
        match &job {
            Job::Event { ev, .. } => {
                tracing::error!("could not queue event {} for {key}", ev.event_id)
            }
            Job::Resend(r) => {
                tracing::error!(
                    "could not queue the re-send of {} for {key}",
                    r.event.event_id
                )
            }
            Job::Web(_) => tracing::error!("could not queue a web turn for {key}"),
            Job::Pump => {
                // Not queued after all: free its place (a sweep finds the session again).
                drop(self.replica.as_ref().map(|r| r.started(&key)));
                tracing::error!("could not queue the events of {key}")
            }
        }
    }

    fn spawn_worker(self: &Arc<Self>, key: String) -> SessionWorker {
        let (tx, rx) = mpsc::unbounded_channel::<Job>();
        tokio::spawn(Arc::clone(self).work(key, rx, tx.clone()));
        SessionWorker { tx }
    }

    /// A session's worker: runs `key`'s jobs in queue order, and exits after [`WORKER_IDLE`]
    /// with nothing to do. `my_tx` is its own queue's sender, to tell its map entry from a newer
    /// worker's.
    ///
    /// Each job's future is boxed: a tokio task holds its whole future for as long as it lives,
    /// and an unboxed one would carry the state of the deepest turn (tens of KB) through every
    /// idle minute, in every chat that spoke in the last five. Boxed, an idle worker is a few
    /// hundred bytes, and the turn's state exists only while the turn runs.
    async fn work(
        self: Arc<Self>,
        key: String,
        mut rx: mpsc::UnboundedReceiver<Job>,
        my_tx: mpsc::UnboundedSender<Job>,
    ) {
        loop {
            match tokio::time::timeout(WORKER_IDLE, rx.recv()).await {
                Ok(Some(Job::Event { ev, resumed })) => Box::pin(self.handle(*ev, resumed)).await,
                Ok(Some(Job::Resend(r))) => Box::pin(self.resend(*r)).await,
                Ok(Some(Job::Web(turn))) => Box::pin(self.run_web_turn(*turn)).await,
                Ok(Some(Job::Pump)) => {
                    let _running = self.replica.as_ref().map(|r| r.started(&key));
                    Box::pin(self.pump(&key)).await;
                }
                Ok(None) => break,
                Err(_) => {
                    let mut workers = self.workers.lock().unwrap_or_else(|p| p.into_inner());
                    if rx.is_empty() {
                        if workers.get(&key).is_some_and(|w| w.tx.same_channel(&my_tx)) {
                            workers.remove(&key);
                        }
                        let none_left = workers.is_empty();
                        drop(workers);
                        super::trim::after_worker_exit(none_left);
                        break;
                    }
                }
            }
        }
    }

    async fn mark(&self, ev: &InboundEvent, state: &str) {
        if let Err(e) = self
            .store
            .set_inbound_state(ev.channel.as_str(), &ev.event_id, state)
            .await
        {
            tracing::error!("cannot mark event {} {state}: {e}", ev.event_id);
        }
    }

    /// Record `text` as the reply to `ev` being sent (state `sending`, one write; a failure is
    /// logged).
    async fn record_sending(&self, ev: &InboundEvent, text: &str) {
        if let Err(e) = self
            .store
            .set_inbound_sending(ev.channel.as_str(), &ev.event_id, text)
            .await
        {
            tracing::error!(
                "cannot record the reply to event {} as being sent: {e}",
                ev.event_id
            );
        }
    }

    /// The state of an event answered outside its session's queue (`/approve`, `/claim`, a
    /// refused `/stop`): `processing` (re-run after a crash) with one process; with replicas
    /// `answering`, which no other replica takes over — it holds no session lease, so another
    /// replica would otherwise run it a second time while this one answers.
    fn out_of_band_state(&self) -> &'static str {
        if self.replica.is_some() {
            "answering"
        } else {
            "processing"
        }
    }

    /// [`Router::answer`] for an event answered outside its session's queue: with replicas the
    /// reply is not recorded as `sending` (another replica would take that over), only the
    /// final state.
    async fn answer_out_of_band(&self, ev: &InboundEvent, text: &str) {
        if self.replica.is_none() {
            return self.answer(ev, text).await;
        }
        self.deliver_and_mark(ev, text).await;
    }

    /// Send `text` as the reply and mark the event `done` (or `failed`, logged).
    async fn deliver_and_mark(&self, ev: &InboundEvent, text: &str) {
        let state = match self.reply(ev, text).await {
            Ok(()) => "done",
            Err(e) => {
                tracing::error!(
                    "could not deliver the reply in {} ({} tries): {}",
                    ev.session_key(),
                    e.attempts,
                    e.error
                );
                "failed"
            }
        };
        self.mark(ev, state).await;
    }

    /// Deliver `text` as the reply to `ev`: first record it as being sent (state `sending`, one
    /// write), then send, then mark the event `done` once the platform confirmed it, or `failed`
    /// when it refused or could not be reached (logged).
    async fn answer(&self, ev: &InboundEvent, text: &str) {
        self.record_sending(ev, text).await;
        self.deliver_and_mark(ev, text).await;
    }

    /// Send again a reply a crash caught mid-send: finish it in the message it was streamed
    /// into when a draft handle was recorded, else send it with the same idempotency key as the
    /// first send.
    async fn resend(&self, r: UnconfirmedReply) {
        let ev = &r.event;
        // Only a draft that was recorded: a new one would show the reply a second time.
        if let Some(handle) = stream::recorded_handle(&self.store, ev).await {
            if let Some(draft) = self.draft_for(ev, Some(handle)) {
                self.answer_in_draft(ev, &r.reply, draft, &[]).await;
                return;
            }
        }
        let state = match self.reply(ev, &r.reply).await {
            Ok(()) => {
                tracing::info!(
                    "re-sent the reply to {} event {} in {}",
                    ev.channel,
                    ev.event_id,
                    ev.session_key()
                );
                "done"
            }
            Err(e) => {
                tracing::error!(
                    "could not re-send the reply to {} event {} in {} ({} tries): {}",
                    ev.channel,
                    ev.event_id,
                    ev.session_key(),
                    e.attempts,
                    e.error
                );
                "failed"
            }
        };
        self.mark(ev, state).await;
    }

    /// Send `text` as the reply to `ev` (key [`reply_key`]), through [`Router::deliver`].
    async fn reply(&self, ev: &InboundEvent, text: &str) -> Result<(), DeliveryError> {
        self.deliver(
            ev,
            OutboundBody::Text(text.to_string()),
            Some(reply_key(ev)),
        )
        .await
    }

    /// Send `body` into `ev`'s chat as an answer to it, retrying transient failures
    /// ([`DELIVERY_RETRY`]); a retry sends only the parts not shown yet, so a long answer whose
    /// third part failed does not show its first two twice.
    async fn deliver(
        &self,
        ev: &InboundEvent,
        body: OutboundBody,
        idempotency_key: Option<String>,
    ) -> Result<(), DeliveryError> {
        let Some(ch) = self.channels.get(&ev.channel) else {
            return Err(DeliveryError {
                attempts: 0,
                error: format!("no {} channel is running", ev.channel),
            });
        };
        let msg = OutboundMessage {
            chat: ev.chat.clone(),
            reply_to: ev.message_id.clone(),
            body,
            idempotency_key,
        };
        send_with_retry(ch.as_ref(), &msg, &DELIVERY_RETRY).await?;
        crate::metrics::METRICS
            .messages_out
            .with_label_values(&[ev.channel.as_str()])
            .inc();
        Ok(())
    }

    async fn access(&self, ev: &InboundEvent) -> Access {
        let owner = self
            .consent
            .owners
            .is_owner(ev.channel, &ev.sender.id)
            .await;
        access::check(&self.agent.config.config, ev, owner)
    }

    /// Handle one event of a session (called by its worker, in order).
    async fn handle(self: &Arc<Self>, ev: InboundEvent, resumed: bool) {
        self.mark(&ev, "processing").await;
        let is_owner = match self.access(&ev).await {
            Access::Ignore => {
                self.mark(&ev, "ignored").await;
                return;
            }
            Access::Refused(note) => {
                tracing::info!(
                    "{} user {} is not allowed; sent a note",
                    ev.channel,
                    ev.sender.id
                );
                self.answer(&ev, note).await;
                return;
            }
            Access::Allowed { is_owner } => is_owner,
        };
        let key = ev.session_key();
        let reply_text = match commands::parse(&ev.text) {
            Some(Command::Help) => Some(commands::HELP.to_string()),
            Some(Command::New) if ev.chat.kind == ChatKind::Group && !is_owner => {
                tracing::info!(
                    "{} user {} is not the owner; refused /new in {key}",
                    ev.channel,
                    ev.sender.id
                );
                Some(NEW_OWNER_ONLY.to_string())
            }
            Some(Command::New) => Some(match self.store.new_session(&key).await {
                Ok(_) => {
                    self.consent.grants.clear(&key).await;
                    "Started a fresh conversation.".to_string()
                }
                Err(e) => {
                    tracing::error!("/new failed: {e}");
                    "I couldn't start a new conversation (database error).".to_string()
                }
            }),
            Some(Command::Stop) => Some("Nothing is running.".to_string()),
            Some(Command::Agent) => Some(crate::agent::agents::answer_for(
                &self.agent.agents,
                crate::agent::agents::Place {
                    channel: ev.channel.as_str(),
                    chat_id: &ev.chat.id,
                    thread: ev.chat.thread.as_deref(),
                    sender: &ev.sender.id,
                },
            )),
            Some(Command::Memory) => {
                let visible = crate::tools::builtin::memory::Visible::of(
                    ev.channel,
                    ev.chat.kind == ChatKind::Group,
                    &ev.chat.id,
                    &ev.sender.id,
                    is_owner,
                );
                Some(
                    crate::memory::listing(
                        &self.agent.store,
                        &visible,
                        &self.agent.config.config.memory,
                    )
                    .await,
                )
            }
            Some(Command::Usage) if !is_owner => {
                tracing::info!(
                    "{} user {} is not the owner; refused /usage in {key}",
                    ev.channel,
                    ev.sender.id
                );
                Some(USAGE_OWNER_ONLY.to_string())
            }
            Some(Command::Usage) => Some(
                match crate::usage::summary_for_chat(
                    &*self.store,
                    &self.agent.config.config,
                    (ev.channel.as_str(), &ev.chat),
                    chrono::Utc::now(),
                )
                .await
                {
                    Ok(text) => text,
                    Err(e) => {
                        tracing::error!("/usage failed: {e}");
                        "I couldn't read the token usage (database error).".to_string()
                    }
                },
            ),
            Some(c @ (Command::Approve(_) | Command::Deny(_) | Command::Claim(_))) => {
                Some(self.out_of_band(&ev, &c).await)
            }
            None => {
                let Some((text, draft)) = self.run_turn(&ev, is_owner, resumed).await else {
                    return;
                };
                if let Some((mut draft, view)) = draft {
                    match text {
                        Some(text) => {
                            self.answer_in_draft(&ev, &text, draft, &view.tools).await;
                        }
                        None => {
                            draft.abandon().await;
                            self.mark(&ev, "done").await;
                            stream::forget_handle(&self.store, &ev).await;
                        }
                    }
                    return;
                }
                text
            }
        };
        match reply_text {
            Some(text) => self.answer(&ev, &text).await,
            None => self.mark(&ev, "done").await,
        }
    }

    /// The channel's draft for the reply to `ev` (see [`stream`]), continuing the one a
    /// previous run recorded when `resumed`; `None` when the channel does not stream here.
    async fn open_draft(&self, ev: &InboundEvent, resumed: bool) -> Option<Box<dyn Draft>> {
        let resume = if resumed {
            stream::recorded_handle(&self.store, ev).await
        } else {
            None
        };
        self.draft_for(ev, resume)
    }

    /// The channel's draft for the reply to `ev`, continuing `resume` when given.
    fn draft_for(&self, ev: &InboundEvent, resume: Option<DraftHandle>) -> Option<Box<dyn Draft>> {
        let ch = self.channels.get(&ev.channel)?;
        ch.open_draft(
            DraftTarget {
                chat: ev.chat.clone(),
                reply_to: ev.message_id.clone(),
                idempotency_key: Some(reply_key(ev)),
                resume,
            },
            Arc::new(stream::StoreDraftLog {
                store: self.store.clone(),
                key: stream::draft_key(ev),
            }),
        )
    }

    /// Deliver `text` as the reply to `ev` in the draft that showed it being written: record it
    /// as being sent, [`Draft::finish`] it (retried as [`DELIVERY_RETRY`] on transient failures;
    /// a draft's finish is safe to repeat), then mark the event `done` or `failed` and forget the
    /// draft's handle.
    async fn answer_in_draft(
        &self,
        ev: &InboundEvent,
        text: &str,
        mut draft: Box<dyn Draft>,
        tools: &[ToolLine],
    ) {
        self.record_sending(ev, text).await;
        let mut attempt = 1;
        let mut delay = DELIVERY_RETRY.first_delay;
        let state = loop {
            match draft.finish(text, tools).await {
                Ok(_) => {
                    crate::metrics::METRICS
                        .messages_out
                        .with_label_values(&[ev.channel.as_str()])
                        .inc();
                    break "done";
                }
                Err(e) if retryable(&e) && attempt < DELIVERY_RETRY.attempts => {
                    tracing::warn!(
                        "could not finish the streamed reply in {} (try {attempt}): {e}; \
                         retrying in {} ms",
                        ev.session_key(),
                        delay.as_millis()
                    );
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(DELIVERY_RETRY.max_delay);
                    attempt += 1;
                }
                Err(e) => {
                    tracing::error!(
                        "could not deliver the streamed reply in {} ({attempt} tries): {e}",
                        ev.session_key()
                    );
                    break "failed";
                }
            }
        };
        self.mark(ev, state).await;
        stream::forget_handle(&self.store, ev).await;
    }

    /// Run the turn of `ev`; the reply text (`None`: nothing to say), and the draft that showed
    /// it being written with what it showed last, when the channel streams.
    async fn run_turn(
        self: &Arc<Self>,
        ev: &InboundEvent,
        is_owner: bool,
        resumed: bool,
    ) -> Option<(Option<String>, Option<(Box<dyn Draft>, DraftView)>)> {
        let key = ev.session_key();
        let Ok(_slot) = self.turn_slots.clone().acquire_owned().await else {
            return Some((None, None));
        };
        let cancel = CancellationToken::new();
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                key.clone(),
                RunningTurn {
                    cancel: cancel.clone(),
                    sender_id: ev.sender.id.clone(),
                },
            );
        // Replicas: a /stop taken in by another replica reaches this turn through the store.
        let stop_watch = CancellationToken::new();
        if self.replica.is_some() {
            use super::replica::remote_stop;
            remote_stop::clear(&*self.store, &key).await;
            let (store, key, cancel, done) = (
                self.store.clone(),
                key.clone(),
                cancel.clone(),
                stop_watch.clone(),
            );
            let (group, sender) = (ev.chat.kind == ChatKind::Group, ev.sender.id.clone());
            tokio::spawn(async move {
                let may_stop =
                    |r: &remote_stop::StopRequest| !group || r.owner || r.sender_id == sender;
                remote_stop::watch(&*store, &key, may_stop, cancel, done).await;
            });
        }
        let _stop_watch = stop_watch.drop_guard();
        // Replicas: the turn acts and sends only while this replica holds the session.
        let fence = self.fence_for(&key, &cancel);
        let _fence_watch = fence.as_ref().map(|f| {
            let done = CancellationToken::new();
            f.watch(done.clone());
            done.drop_guard()
        });
        let typing = self.spawn_typing(ev, fence.clone());
        let (presenter, events) = match self.open_draft(ev, resumed).await {
            Some(draft) => {
                let shown = stream::Shown::for_chat(ev.chat.kind, self.agent.executor.registry());
                let (p, events) = Presenter::start(draft, shown);
                (Some(p), Some(events))
            }
            None => (None, None),
        };
        // The message's files: fetched, kept (a non-owner's only until this function returns)
        // and turned into text and pictures; a file too large to fetch is announced first.
        let channel = self.channels.get(&ev.channel).cloned();
        let mut media = self.media.prepare(channel.as_deref(), ev, is_owner).await;
        for notice in &media.notices {
            if let Err(e) = self
                .deliver(ev, OutboundBody::Text(notice.clone()), None)
                .await
            {
                tracing::warn!(
                    "could not tell {key} about a file ({} tries): {}",
                    e.attempts,
                    e.error
                );
            }
        }
        let input = TurnInput {
            session_key: key.clone(),
            channel: ev.channel,
            chat_id: ev.chat.id.clone(),
            user_id: ev.sender.id.clone(),
            is_owner,
            text: std::mem::take(&mut media.text),
            trace_id: trace_id_for(ev),
            chat: Some(ev.chat.clone()),
            unattended: false,
            allowed_tools: None,
            events,
            model: None,
            job_id: None,
            images: std::mem::take(&mut media.images),
            private_input: media
                .private
                .then(|| "a file the owner sent in the chat".to_string()),
            outside_input: media.outside.take(),
            child: None,
            fence: fence
                .clone()
                .map(|f| Arc::new(f) as Arc<dyn ethan_core::tool::Fence>),
        };
        let reply = self.agent.run_turn_with_cards(&input, &cancel).await;
        drop(input);
        if let Some(f) = &fence {
            if !f.holds().await {
                // Another replica runs this event now: nothing of this turn is sent (the draft
                // stays as it was), and the event's state is left to that replica.
                if let Some(p) = presenter {
                    p.abort();
                }
                self.running
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&key);
                tracing::warn!(
                    "the turn of {} event {} in {key} ended after this replica lost the \
                     session; nothing of it is sent",
                    ev.channel,
                    ev.event_id
                );
                return None;
            }
        }
        let draft = match presenter {
            Some(p) => {
                let draft = p.stop().await;
                if draft.is_none() {
                    // The draft is lost: the reply goes out as a new message, so a crash must
                    // not finish the old one as well.
                    stream::forget_handle(&self.store, ev).await;
                }
                draft
            }
            None => None,
        };
        let outcome = reply.outcome;
        crate::metrics::METRICS
            .turns
            .with_label_values(&[ev.channel.as_str(), outcome.label()])
            .inc();
        // Cards go out as their own messages, before the answer.
        for ui in reply.cards {
            if let Err(e) = self.deliver(ev, OutboundBody::Ui(ui), None).await {
                tracing::warn!(
                    "could not show a card in {key} ({} tries): {}",
                    e.attempts,
                    e.error
                );
            }
        }
        typing.stop().await;
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&key);
        let text = match outcome {
            // What was shown stays, marked as stopped.
            TurnOutcome::Stopped => Some(match &draft {
                Some((_, view)) if !view.text.trim().is_empty() => {
                    format!("{}\n\n⏹ Stopped.", view.text.trim_end())
                }
                _ => "Stopped.".to_string(),
            }),
            other => other.reply_text().map(str::to_string),
        };
        // `media.echo_transcript`: what the bot heard, first.
        let text = match text {
            Some(t) if self.agent.config.config.media.echo_transcript => {
                Some(crate::media::with_transcripts(&media.transcripts, t))
            }
            other => other,
        };
        drop(media);
        Some((text, draft))
    }

    /// Replicas: the fence of a turn of `key` run under its session's lease (`None` without
    /// replicas, or when the lease is not held here: a turn outside the session's queue).
    fn fence_for(&self, key: &str, cancel: &CancellationToken) -> Option<super::fence::LeaseFence> {
        let replica = self.replica.as_ref()?;
        let lease = crate::store::session_lease(key);
        replica
            .holds(&lease)
            .then(|| super::fence::LeaseFence::new(replica.clone(), lease, cancel.clone()))
    }

    /// Run a queued web turn (called by its session's worker, in order) under the cap on turns
    /// in flight; skipped when its client went away while it waited.
    async fn run_web_turn(&self, turn: WebTurn) {
        let WebTurn {
            mut input,
            cancel,
            done,
        } = turn;
        if cancel.is_cancelled() || done.is_closed() {
            return;
        }
        let Ok(_slot) = self.turn_slots.clone().acquire_owned().await else {
            return;
        };
        let key = input.session_key.clone();
        // Replicas: one turn of a web session at a time across them (two requests of one
        // session may reach two replicas behind a load balancer).
        let lease = self
            .replica
            .clone()
            .map(|r| (r, crate::store::session_lease(&key)));
        if let Some((replica, name)) = &lease {
            let deadline = tokio::time::Instant::now() + WEB_LEASE_WAIT;
            while !replica.take(name).await {
                if cancel.is_cancelled() || done.is_closed() {
                    return;
                }
                if tokio::time::Instant::now() >= deadline {
                    tracing::warn!(
                        "{key} is busy on another replica for {} s; this turn is not run",
                        WEB_LEASE_WAIT.as_secs()
                    );
                    let _ = done.send(busy_elsewhere());
                    return;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                key.clone(),
                RunningTurn {
                    cancel: cancel.clone(),
                    sender_id: input.user_id.clone(),
                },
            );
        // Held for the whole turn, fenced like a chat turn.
        let fence = self.fence_for(&key, &cancel);
        let _fence_watch = fence.as_ref().map(|f| {
            let done = CancellationToken::new();
            f.watch(done.clone());
            done.drop_guard()
        });
        input.fence = fence
            .clone()
            .map(|f| Arc::new(f) as Arc<dyn ethan_core::tool::Fence>);
        let mut reply = self.agent.run_turn_with_cards(&input, &cancel).await;
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&key);
        if let Some(f) = &fence {
            if !f.holds().await {
                reply = taken_over();
            }
        }
        if let Some((replica, name)) = &lease {
            replica.give_up(name).await;
        }
        let _ = done.send(reply);
    }

    fn spawn_typing(&self, ev: &InboundEvent, fence: Option<super::fence::LeaseFence>) -> Typing {
        let msg = OutboundMessage {
            chat: ev.chat.clone(),
            reply_to: None,
            body: OutboundBody::Typing,
            idempotency_key: None,
        };
        Typing::start_fenced(
            self.channels.get(&ev.channel).cloned(),
            msg,
            fence.map(|f| Arc::new(f) as Arc<dyn ethan_core::tool::Fence>),
        )
    }

    /// `/approve`, `/deny`, `/claim`: handled at once (a turn may be waiting for them); the reply.
    async fn out_of_band(&self, ev: &InboundEvent, cmd: &Command) -> String {
        match cmd {
            Command::Claim(code) => {
                if ev.chat.kind != ChatKind::Direct {
                    return "Send /claim <code> to me in a direct message.".into();
                }
                self.consent
                    .owners
                    .claim(ev.channel, &ev.sender.id, code)
                    .await
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
                        // In a direct chat, also the requests sent there in private.
                        let direct = (ev.chat.kind == ChatKind::Direct).then_some(&*ev.sender.id);
                        let waiting = self
                            .consent
                            .waiting_for(ev.channel, &ev.chat.id, direct)
                            .await;
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
                let ack = self
                    .consent
                    .decide(&ApprovalDecision {
                        channel: ev.channel,
                        request_id: id.clone(),
                        choice,
                        user_id: ev.sender.id.clone(),
                        chat_id: ev.chat.id.clone(),
                    })
                    .await;
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
                        idempotency_key: None,
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

    /// `/stop` from `ev`'s sender: cancel the running turn of its session when there is one and
    /// the sender may stop it (in a group: the owner or the turn's sender; in a DM: always).
    /// Replicas: when another replica holds `ev`'s session (its turn runs there), ask it to stop
    /// that turn through the store; true when asked.
    async fn stop_elsewhere(&self, ev: &InboundEvent, is_owner: bool) -> bool {
        let Some(replica) = &self.replica else {
            return false;
        };
        let key = ev.session_key();
        let lease = crate::store::session_lease(&key);
        let held_elsewhere = match self.store.lease_holders().await {
            Ok(h) => h
                .iter()
                .any(|(n, holder)| *n == lease && *holder != replica.id),
            Err(e) => {
                tracing::warn!("cannot read the leases: {e}");
                false
            }
        };
        if !held_elsewhere {
            return false;
        }
        let req = super::replica::remote_stop::StopRequest {
            sender_id: ev.sender.id.clone(),
            owner: is_owner,
        };
        match super::replica::remote_stop::request(&*self.store, &key, &req).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!("cannot pass /stop for {key} to the replica running it: {e}");
                false
            }
        }
    }

    fn stop(&self, ev: &InboundEvent, is_owner: bool) -> StopOutcome {
        let key = ev.session_key();
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let Some(turn) = running.get(&key) else {
            return StopOutcome::NothingRunning;
        };
        let allowed = ev.chat.kind != ChatKind::Group || is_owner || turn.sender_id == ev.sender.id;
        if !allowed {
            tracing::info!(
                "{} user {} may not stop the turn of {} in {key}; refused",
                ev.channel,
                ev.sender.id,
                turn.sender_id
            );
            return StopOutcome::NotAllowed;
        }
        turn.cancel.cancel();
        StopOutcome::Stopped
    }
}

/// The idempotency key of the reply to an inbound event: `reply:{channel}:{event_id}`.
pub fn reply_key(ev: &InboundEvent) -> String {
    format!("reply:{}:{}", ev.channel, ev.event_id)
}

/// The platform's name for people (log lines).
fn platform_name(kind: ChannelKind) -> &'static str {
    match kind {
        ChannelKind::Telegram => "Telegram",
        ChannelKind::Lark => "Lark",
        ChannelKind::Terminal => "the terminal",
        ChannelKind::Web => "the web gateway",
    }
}

/// A trace id stable for an inbound event, so a turn re-run after a crash keeps its trace (and
/// its replay keys). The send time is part of it: a platform event id reused later (Telegram
/// restarts `update_id` numbering after a week without updates) gets a trace of its own.
pub fn trace_id_for(ev: &InboundEvent) -> String {
    let digest =
        Sha256::digest(format!("{}:{}:{}", ev.channel, ev.event_id, ev.sent_at).as_bytes());
    hex::encode(&digest[..12])
}

/// The sink adapters publish to.
pub struct RouterSink(pub Arc<Router>);

#[async_trait]
impl InboundSink for RouterSink {
    async fn publish(&self, ev: InboundEvent) -> Result<PublishOutcome, ChannelError> {
        let router = &self.0;
        if !ev.addressed && matches!(router.access(&ev).await, Access::Ignore) {
            return Ok(PublishOutcome::Ignored);
        }
        let new = router
            .store
            .record_inbound(&ev)
            .await
            .map_err(|e| ChannelError::Storage(e.to_string()))?;
        if !new {
            return Ok(PublishOutcome::Duplicate);
        }
        // These must not wait behind the turn they act on.
        let command = commands::parse(&ev.text);
        if command == Some(Command::Stop) {
            if let Access::Allowed { is_owner } = router.access(&ev).await {
                match router.stop(&ev, is_owner) {
                    StopOutcome::Stopped => {
                        router.mark(&ev, "done").await;
                        return Ok(PublishOutcome::Accepted);
                    }
                    StopOutcome::NotAllowed => {
                        router.mark(&ev, router.out_of_band_state()).await;
                        let router = Arc::clone(router);
                        tokio::spawn(async move {
                            router.answer_out_of_band(&ev, STOP_NOT_YOURS).await
                        });
                        return Ok(PublishOutcome::Accepted);
                    }
                    StopOutcome::NothingRunning => {
                        if router.stop_elsewhere(&ev, is_owner).await {
                            router.mark(&ev, "done").await;
                            return Ok(PublishOutcome::Accepted);
                        }
                    }
                }
            }
        }
        match command {
            Some(cmd) if cmd.bypasses_queue() => {
                // /claim works for people not yet allowed; /approve and /deny check the owner.
                // The reply goes out from a task of its own: the intake never waits on a send.
                router.mark(&ev, router.out_of_band_state()).await;
                let router = Arc::clone(router);
                if matches!(cmd, Command::Claim(_)) {
                    // Settled before the next event is taken in: it decides who that sender is
                    // (one local write). Only its reply goes out from a task.
                    let reply = router.out_of_band(&ev, &cmd).await;
                    tokio::spawn(async move { router.answer_out_of_band(&ev, &reply).await });
                } else {
                    tokio::spawn(async move {
                        let reply = router.out_of_band(&ev, &cmd).await;
                        router.answer_out_of_band(&ev, &reply).await;
                    });
                }
                return Ok(PublishOutcome::Accepted);
            }
            _ => {}
        }
        crate::metrics::METRICS
            .messages_in
            .with_label_values(&[ev.channel.as_str()])
            .inc();
        router.enqueue(ev);
        Ok(PublishOutcome::Accepted)
    }

    async fn decide(&self, decision: ApprovalDecision) -> ApprovalAck {
        self.0.consent.decide(&decision).await
    }
}

/// The answer to a web turn that could not have its session's lease (another replica ran a
/// turn of it for [`WEB_LEASE_WAIT`]).
fn busy_elsewhere() -> TurnReply {
    TurnReply {
        outcome: TurnOutcome::Failed {
            user_message: format!(
                "This conversation is busy on another replica (for over {} s); nothing was \
                 done. Send your message again in a moment.",
                WEB_LEASE_WAIT.as_secs()
            ),
            detail: "the session's lease is held by another replica".into(),
        },
        cards: Vec::new(),
        refused: false,
    }
}

/// The answer to a web turn whose replica lost its session's lease while it ran (paused or
/// cut off from the database): calls refused from then on did not run.
fn taken_over() -> TurnReply {
    TurnReply {
        outcome: TurnOutcome::Failed {
            user_message: "This replica lost this conversation while answering (it was paused \
                           or cut off from the database); what it had not done yet was not \
                           done. Send your message again."
                .into(),
            detail: "the session's lease was lost during the turn".into(),
        },
        cards: Vec::new(),
        refused: false,
    }
}

/// The gateway's way into the session queues: a web turn waits behind the turns of its
/// session and takes one of the router's turn slots, like a chat turn.
pub struct RouterTurns(pub Arc<Router>);

#[async_trait]
impl crate::gateway::TurnQueue for RouterTurns {
    fn in_flight(&self) -> usize {
        self.0.turns_in_flight()
    }

    async fn run(&self, input: TurnInput, cancel: CancellationToken) -> Option<TurnReply> {
        let (done, reply) = oneshot::channel();
        let key = input.session_key.clone();
        self.0.enqueue_job(
            key,
            Job::Web(Box::new(WebTurn {
                input,
                cancel,
                done,
            })),
        );
        reply.await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;

    /// The size of the future an `async fn` of the worker's shape returns, without calling it.
    fn worker_future_size<F, Fut>(_: &F) -> usize
    where
        F: FnOnce(
            Arc<Router>,
            String,
            mpsc::UnboundedReceiver<Job>,
            mpsc::UnboundedSender<Job>,
        ) -> Fut,
        Fut: Future,
    {
        std::mem::size_of::<Fut>()
    }

    /// The same for [`Router::handle`], which runs one event's turn.
    fn turn_future_size<F, Fut>(_: &F) -> usize
    where
        F: FnOnce(&'static Arc<Router>, InboundEvent, bool) -> Fut,
        Fut: Future,
    {
        std::mem::size_of::<Fut>()
    }

    /// Every chat that spoke in the last five minutes has a live worker; what it weighs while
    /// idle is what 10,000 chats weigh (BENCHMARKS.md, "RSS after 10,000 chats").
    #[test]
    fn an_idle_worker_is_small_and_does_not_carry_a_turns_state() {
        let worker = worker_future_size(&Router::work);
        let turn = turn_future_size(&Router::handle);
        let job = std::mem::size_of::<Job>();
        eprintln!(
            "worker future: {worker} B; one event's turn: {turn} B; a queued job: {job} B \
             (an inbound event: {} B)",
            std::mem::size_of::<InboundEvent>()
        );
        // Two words: the queue's first block of 32 slots is allocated with the queue.
        assert!(job <= 16, "a queued job is {job} B");
        assert!(worker <= 512, "a session worker's future is {worker} B");
        assert!(
            turn > 4 * worker,
            "a turn's future ({turn} B) is what boxing keeps out of the idle worker ({worker} B)"
        );
    }
}
