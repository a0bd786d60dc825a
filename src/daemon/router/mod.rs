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
//!
//! Three parts: [`intake`] records and deduplicates an event and routes it to its session's
//! worker (or answers `/stop`, `/approve`, `/deny`, `/claim` at once); [`worker`] runs one
//! session's queue and its turns; [`replies`] delivers answers, drafts and cards with one retry
//! policy. The chat commands are [`super::commands`]' table, shared with the terminal.

mod intake;
mod replies;
mod worker;

pub use intake::{RouterSink, RouterTurns};

use super::access::{self, Access};
use super::replica::Replica;
use crate::agent::Agent;
use crate::config::Loaded;
use crate::consent::Consent;
use crate::store::DaemonStoreRef;
use ethan_channels::{Channel, ChannelKind, InboundEvent};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// A turn in flight: how to cancel it, and who started it (for `/stop` in groups).
struct RunningTurn {
    cancel: CancellationToken,
    sender_id: String,
}

/// The reply to a group member who is not the owner and tries `/new`.
pub const NEW_OWNER_ONLY: &str = "Only the bot's owner can start a fresh conversation in a group.";
/// The reply to anyone but the owner who asks for `/usage`.
pub const USAGE_OWNER_ONLY: &str = "Only the bot's owner can see the token usage.";
/// The reply to a group member who tries to `/stop` someone else's turn.
pub const STOP_NOT_YOURS: &str =
    "Only the bot's owner or the person who asked can stop this answer.";

/// What the router is built from.
pub struct Parts {
    pub store: DaemonStoreRef,
    pub config: Arc<Loaded>,
    pub agent: Arc<Agent>,
    pub consent: Arc<Consent>,
    pub channels: HashMap<ChannelKind, Arc<dyn Channel>>,
    /// The global cap on turns in flight.
    pub max_turns: usize,
    /// The daemon's metrics registry.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// What the daemon's egress guards share (media downloads, transcription).
    pub egress: crate::egress::Egress,
    /// The slots of the child processes that parse files, shared with the page reader.
    pub readers: Arc<Semaphore>,
}

pub struct Router {
    store: DaemonStoreRef,
    config: Arc<Loaded>,
    agent: Arc<Agent>,
    consent: Arc<Consent>,
    channels: HashMap<ChannelKind, Arc<dyn Channel>>,
    workers: Mutex<HashMap<String, worker::SessionWorker>>,
    running: Mutex<HashMap<String, RunningTurn>>,
    turn_slots: Arc<Semaphore>,
    /// Set when the store is shared with other replicas.
    replica: Option<Arc<Replica>>,
    /// Pictures, voice notes and files of inbound messages ([`crate::media`]).
    media: crate::media::Media,
    /// Giving freed memory back after workers exit.
    trim: crate::daemon::trim::Trim,
    /// Where messages and turns are counted.
    metrics: Arc<crate::metrics::Metrics>,
}

impl Router {
    pub fn new(parts: Parts) -> Arc<Self> {
        Self::build(parts, None)
    }

    /// A router whose sessions are shared with other replicas through `replica`'s leases.
    pub fn replicated(parts: Parts, replica: Arc<Replica>) -> Arc<Self> {
        Self::build(parts, Some(replica))
    }

    fn build(parts: Parts, replica: Option<Arc<Replica>>) -> Arc<Self> {
        let media =
            crate::media::Media::new(parts.config.clone(), &parts.egress, parts.readers.clone());
        Arc::new(Self {
            store: parts.store,
            config: parts.config,
            agent: parts.agent,
            consent: parts.consent,
            channels: parts.channels,
            workers: Mutex::new(HashMap::new()),
            running: Mutex::new(HashMap::new()),
            turn_slots: Arc::new(Semaphore::new(parts.max_turns.max(1))),
            media,
            replica,
            trim: Default::default(),
            metrics: parts.metrics,
        })
    }

    /// Set `ev`'s state in the store, without waiting for the write where the store keeps its
    /// calls in order (every later call of the store sees it; a failure is logged). The
    /// attempt `processing` counts is queued before the turn's own store calls, and a reply's
    /// `done` is written before the daemon's last store call at shutdown.
    async fn mark(&self, ev: &InboundEvent, state: &str) {
        self.store
            .queue_inbound_state(ev.channel.as_str(), &ev.event_id, state)
            .await;
    }

    /// [`Router::mark`] for a reply's end: the event's last state and its draft handle
    /// forgotten ([`crate::daemon::stream::draft_key`]), queued as one write.
    async fn settle(&self, ev: &InboundEvent, state: &str) {
        self.store
            .queue_reply_settled(
                ev.channel.as_str(),
                &ev.event_id,
                state,
                &crate::daemon::stream::draft_key(ev),
            )
            .await;
    }

    async fn access(&self, ev: &InboundEvent) -> Access {
        let owner = self
            .consent
            .owners
            .is_owner(ev.channel, &ev.sender.id)
            .await;
        access::check(&self.config.config, ev, owner)
    }

    /// How many turns are running now.
    pub fn turns_in_flight(&self) -> usize {
        self.running.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// The idempotency key of the reply to an inbound event: `reply:{channel}:{event_id}`.
pub fn reply_key(ev: &InboundEvent) -> String {
    format!("reply:{}:{}", ev.channel, ev.event_id)
}
