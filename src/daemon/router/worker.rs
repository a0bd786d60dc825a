//! A session's worker: one chat's queue, run in order — its events' turns (with the draft that
//! shows them being written), the chat commands that wait their turn, web turns, re-sends a crash
//! cut off, and with replicas the pump that runs the session's events from the store while this
//! replica holds its lease. An idle worker exits after [`WORKER_IDLE`].

use super::{Router, RunningTurn, NEW_OWNER_ONLY, USAGE_OWNER_ONLY};
use crate::agent::agents::Place;
use crate::agent::{KeptWindow, TurnInput, TurnOutcome, TurnReply};
use crate::daemon::access::Access;
use crate::daemon::commands::{self, Command};
use crate::daemon::fence::{self, LeaseFence};
use crate::daemon::stream::{self, Presenter};
use crate::daemon::typing::Typing;
use crate::store::inbound::UnconfirmedReply;
use crate::store::{Pending, SharedStorage};
use crate::tools::builtin::memory::Visible;
use ethan_channels::{ChatKind, Draft, DraftView, InboundEvent, OutboundBody, OutboundMessage};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::{CancellationToken, DropGuard};

/// Replicas: how long a web turn waits for its session to be free on the other replicas.
const WEB_LEASE_WAIT: Duration = Duration::from_secs(120);
/// A worker with nothing to do for this long exits.
const WORKER_IDLE: Duration = Duration::from_secs(300);

/// Work for a session's worker, done in queue order.
///
/// The payloads are boxed: a tokio queue allocates room for 32 jobs when it is made, and every
/// chat that spoke in the last five minutes has one, so a `Job` is kept to two words (an
/// inbound event inline made each idle chat's empty queue ~8 KB).
pub(super) enum Job {
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
    /// in the platform's order (see [`crate::daemon::replica`]).
    Pump,
}

/// A web turn waiting in its session's queue.
pub(super) struct WebTurn {
    pub(super) input: TurnInput,
    pub(super) cancel: CancellationToken,
    pub(super) done: oneshot::Sender<TurnReply>,
}

pub(super) struct SessionWorker {
    pub(super) tx: mpsc::UnboundedSender<Job>,
}

impl Router {
    /// Replicas: take `key`'s lease and run its unfinished events in the platform's order; let
    /// the lease go when none is left, then look once more (an event recorded by another
    /// replica while this one held the lease is found here). An event still unfinished after
    /// this replica handled it (a store write that failed) is not run again by this pump.
    /// Each step is one store statement: the lease is taken with the events to run, and let go
    /// only when no other came in. The kept window is dropped whenever the lease is taken (another
    /// replica may have held it meanwhile) or found lost.
    async fn pump(self: &Arc<Self>, key: &str, kept: &mut KeptWindow) {
        let Some(replica) = self.replica.clone() else {
            return;
        };
        let lease = crate::store::session_lease(key);
        let mut handled: Vec<String> = Vec::new();
        let Some(mut pending) = replica.claim(key, &handled).await else {
            return;
        };
        kept.clear();
        loop {
            for p in pending {
                if !replica.holds(&lease) {
                    kept.clear();
                    tracing::warn!(
                        "this replica lost the lease of {key}; its events are left to the \
                         replica that took it"
                    );
                    return;
                }
                if handled.contains(&p.event().event_id) {
                    continue;
                }
                handled.push(p.event().event_id.clone());
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
                        self.handle(event, resumed, kept).await;
                    }
                    Pending::Reply(r) => {
                        if let Some(r) = self.settle_unconfirmed(r).await {
                            self.resend(r).await;
                        }
                    }
                }
            }
            // More may have come in meanwhile: then the lease is kept for them. Once it is let
            // go, one more look (a new statement): an event recorded by a replica that found
            // the lease held just before it was let go is found here.
            pending = match replica.release_if_idle(key, &handled).await {
                Some(more) => more,
                None => match replica.claim(key, &handled).await {
                    Some(more) => {
                        kept.clear();
                        more
                    }
                    None => return,
                },
            };
        }
    }

    /// A session's worker: runs `key`'s jobs in queue order, and exits after [`WORKER_IDLE`]
    /// with nothing to do. `my_tx` is its own queue's sender, to tell its map entry from a newer
    /// worker's.
    ///
    /// Each job's future is boxed: a tokio task holds its whole future for as long as it lives,
    /// and an unboxed one would carry the state of the deepest turn (tens of KB) through every
    /// idle minute, in every chat that spoke in the last five. Boxed, an idle worker is a few
    /// hundred bytes, and the turn's state exists only while the turn runs. The session's
    /// window ([`KeptWindow`], boxed) lives here between turns and goes with the worker.
    pub(super) async fn work(
        self: Arc<Self>,
        key: String,
        mut rx: mpsc::UnboundedReceiver<Job>,
        my_tx: mpsc::UnboundedSender<Job>,
    ) {
        let mut kept = KeptWindow::default();
        loop {
            match tokio::time::timeout(WORKER_IDLE, rx.recv()).await {
                Ok(Some(Job::Event { ev, resumed })) => {
                    Box::pin(self.handle(*ev, resumed, &mut kept)).await
                }
                Ok(Some(Job::Resend(r))) => Box::pin(self.resend(*r)).await,
                Ok(Some(Job::Web(turn))) => Box::pin(self.run_web_turn(*turn, &mut kept)).await,
                Ok(Some(Job::Pump)) => {
                    let _running = self.replica.as_ref().map(|r| r.started(&key));
                    Box::pin(self.pump(&key, &mut kept)).await;
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
                        self.trim.after_worker_exit(none_left);
                        break;
                    }
                }
            }
        }
    }

    /// Handle one event of a session (called by its worker, in order), its turn starting from
    /// the session's `kept` window; a chat command drops it (`/new` starts another session).
    async fn handle(self: &Arc<Self>, ev: InboundEvent, resumed: bool, kept: &mut KeptWindow) {
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
        let (reply_text, unconfirmed) = match commands::parse(&ev.text) {
            Some(cmd) => {
                kept.clear();
                (Some(self.command_reply(&ev, &cmd, is_owner).await), None)
            }
            None => {
                let turn = self.run_turn(&ev, is_owner, resumed, kept);
                let Some((text, draft, unconfirmed)) = turn.await else {
                    // Fenced: another replica has the session now.
                    kept.clear();
                    return;
                };
                if let Some((mut draft, view)) = draft {
                    match text {
                        Some(text) => {
                            self.answer_in_draft(&ev, &text, draft, &view.tools).await;
                        }
                        None => {
                            draft.abandon().await;
                            self.settle(&ev, "done").await;
                        }
                    }
                    return;
                }
                (text, unconfirmed)
            }
        };
        if let Some(fence) = unconfirmed {
            if !self.answer_fenced(&ev, reply_text, &fence).await {
                kept.clear();
            }
            return;
        }
        match reply_text {
            Some(text) => self.answer(&ev, &text).await,
            None => self.mark(&ev, "done").await,
        }
    }

    /// The reply to a chat command taken in its session's queue: the owner-only checks of a
    /// group, `/usage`, then [`commands::answer`], the replies the terminal gives too.
    async fn command_reply(&self, ev: &InboundEvent, cmd: &Command, is_owner: bool) -> String {
        let key = ev.session_key();
        let group = ev.chat.kind == ChatKind::Group;
        match cmd {
            Command::New if group && !is_owner => {
                tracing::info!(
                    "{} user {} is not the owner; refused /new in {key}",
                    ev.channel,
                    ev.sender.id
                );
                return NEW_OWNER_ONLY.to_string();
            }
            Command::Usage if !is_owner => {
                tracing::info!(
                    "{} user {} is not the owner; refused /usage in {key}",
                    ev.channel,
                    ev.sender.id
                );
                return USAGE_OWNER_ONLY.to_string();
            }
            Command::Usage => return self.usage(ev).await,
            Command::Approve(_) | Command::Deny(_) | Command::Claim(_) => {
                return self.out_of_band(ev, cmd).await
            }
            _ => {}
        }
        let store = self.store.shared();
        let tools = self.agent.executor.registry();
        let here = commands::Here {
            store: &store,
            consent: &self.consent,
            tools: &tools,
            agents: &self.agent.agents,
            memory: &self.config.config.memory,
            session: &key,
            place: Place {
                channel: ev.channel.as_str(),
                chat_id: &ev.chat.id,
                thread: ev.chat.thread.as_deref(),
                sender: &ev.sender.id,
            },
            visible: Visible::of(ev.channel, group, &ev.chat.id, &ev.sender.id, is_owner),
        };
        commands::answer(cmd, &here).await.unwrap_or_default()
    }

    /// `/usage` from the owner: today's tokens in this chat against the budgets.
    async fn usage(&self, ev: &InboundEvent) -> String {
        let now = chrono::Utc::now();
        let chat = (ev.channel.as_str(), &ev.chat);
        match crate::usage::summary_for_chat(&*self.store, &self.config.config, chat, now).await {
            Ok(text) => text,
            Err(e) => {
                tracing::error!("/usage failed: {e}");
                "I couldn't read the token usage (database error).".to_string()
            }
        }
    }

    /// Run the turn of `ev`; the reply text (`None`: nothing to say), and the draft that showed
    /// it being written with what it showed last, when the channel streams.
    async fn run_turn(
        self: &Arc<Self>,
        ev: &InboundEvent,
        is_owner: bool,
        resumed: bool,
        kept: &mut KeptWindow,
    ) -> Option<TurnEnd> {
        let key = ev.session_key();
        let Ok(_slot) = self.turn_slots.clone().acquire_owned().await else {
            return Some((None, None, None));
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
        let _stop_watch = self.watch_remote_stop(ev, &cancel).await;
        // Replicas: the turn acts and sends only while this replica holds the session.
        let fence = LeaseFence::for_turn(self.replica.as_ref(), &key, &cancel);
        let _fence_watch = fence.as_ref().map(LeaseFence::watching);
        let typing = self.spawn_typing(ev, fence.as_ref());
        let (presenter, events) = match self.open_draft(ev, resumed).await {
            Some(draft) => {
                let shown = stream::Shown::for_chat(ev.chat.kind, self.agent.executor.registry());
                let fenced = fence.as_ref().map(LeaseFence::shared);
                let (p, events) =
                    Presenter::start_fenced(draft, shown, fenced, self.metrics.clone());
                (Some(p), Some(events))
            }
            None => (None, None),
        };
        // The message's files: fetched, kept (a non-owner's only until this function returns)
        // and turned into text and pictures; a file too large to fetch is announced first.
        let channel = self.channels.get(&ev.channel).cloned();
        let mut media = self.media.prepare(channel.as_deref(), ev, is_owner).await;
        for notice in &media.notices {
            let body = OutboundBody::Text(notice.clone());
            self.send_aside(ev, body, || format!("tell {key} about a file"))
                .await;
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
            fence: fence.as_ref().map(LeaseFence::shared),
        };
        let reply = self.agent.run_turn_kept(&input, &cancel, kept).await;
        drop(input);
        // Replicas: the lease is confirmed before anything of the turn goes out — here when a
        // draft or cards go out first, else with the answer's `sending` record (one statement).
        let unconfirmed = match &fence {
            Some(f) if presenter.is_some() || !reply.cards.is_empty() => {
                if !f.holds().await {
                    return self.fenced(ev, presenter);
                }
                None
            }
            other => other.clone(),
        };
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
        self.metrics
            .turns
            .with_label_values(&[ev.channel.as_str(), outcome.label()])
            .inc();
        // Cards go out as their own messages, before the answer.
        for ui in reply.cards {
            self.send_aside(ev, OutboundBody::Ui(ui), || format!("show a card in {key}"))
                .await;
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
            Some(t) if self.config.config.media.echo_transcript => {
                Some(crate::media::with_transcripts(&media.transcripts, t))
            }
            other => other,
        };
        drop(media);
        Some((text, draft, unconfirmed))
    }

    /// The end of a turn whose lease is confirmed with its answer ([`TurnEnd`]): the answer
    /// recorded as being sent in the same store step, then delivered; with nothing to say, the
    /// lease confirmed and the event marked `done`. A lost lease ends it as [`Router::fenced`].
    /// Returns whether the lease was still held.
    async fn answer_fenced(
        &self,
        ev: &InboundEvent,
        text: Option<String>,
        fence: &LeaseFence,
    ) -> bool {
        let held = match &text {
            Some(t) => fence.holds_sending(ev, t).await,
            None => fence.holds().await,
        };
        match text {
            _ if !held => {
                self.fenced(ev, None);
            }
            Some(t) => self.deliver_and_mark(ev, &t).await,
            None => self.mark(ev, "done").await,
        }
        held
    }

    /// The end of a turn whose replica lost the session (see [`LeaseFence`]): another replica
    /// runs its event now, so nothing of it is sent (a streamed draft stays as it was) and the
    /// event's state is left to that replica.
    fn fenced(&self, ev: &InboundEvent, presenter: Option<Presenter>) -> Option<TurnEnd> {
        if let Some(p) = presenter {
            p.abort();
        }
        let key = ev.session_key();
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&key);
        tracing::warn!(
            "the turn of {} event {} in {key} ended after this replica lost the session; \
             nothing of it is sent",
            ev.channel,
            ev.event_id
        );
        None
    }

    /// Replicas: a `/stop` taken in by another replica reaches the turn of `ev` through the
    /// store and cancels `cancel` (when its sender may stop it), until the guard is dropped.
    /// Without replicas, nothing to watch.
    async fn watch_remote_stop(&self, ev: &InboundEvent, cancel: &CancellationToken) -> DropGuard {
        let stop_watch = CancellationToken::new();
        if self.replica.is_some() {
            use crate::daemon::replica::remote_stop;
            // A request left from an earlier turn was forgotten when the session was claimed.
            let key = ev.session_key();
            let (store, cancel, done) = (self.store.clone(), cancel.clone(), stop_watch.clone());
            let (group, sender) = (ev.chat.kind == ChatKind::Group, ev.sender.id.clone());
            ethan_core::task::spawn(async move {
                let may_stop =
                    |r: &remote_stop::StopRequest| !group || r.owner || r.sender_id == sender;
                remote_stop::watch(&*store, &key, may_stop, cancel, done).await;
            });
        }
        stop_watch.drop_guard()
    }

    /// Run a queued web turn (called by its session's worker, in order) under the cap on turns
    /// in flight; skipped when its client went away while it waited.
    async fn run_web_turn(&self, turn: WebTurn, kept: &mut KeptWindow) {
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
                    let _ = done.send(fence::busy_elsewhere(WEB_LEASE_WAIT));
                    return;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            // Another replica may have run turns of the session meanwhile.
            kept.clear();
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
        let fence = LeaseFence::for_turn(self.replica.as_ref(), &key, &cancel);
        let _fence_watch = fence.as_ref().map(LeaseFence::watching);
        input.fence = fence.as_ref().map(LeaseFence::shared);
        let mut reply = self.agent.run_turn_kept(&input, &cancel, kept).await;
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&key);
        if let Some(f) = &fence {
            if !f.holds().await {
                kept.clear();
                reply = fence::taken_over();
            }
        }
        if let Some((replica, name)) = &lease {
            replica.give_up(name).await;
        }
        let _ = done.send(reply);
    }

    fn spawn_typing(&self, ev: &InboundEvent, fence: Option<&LeaseFence>) -> Typing {
        let msg = OutboundMessage {
            chat: ev.chat.clone(),
            reply_to: None,
            body: OutboundBody::Typing,
            idempotency_key: None,
        };
        Typing::start_fenced(
            self.channels.get(&ev.channel).cloned(),
            msg,
            fence.map(LeaseFence::shared),
        )
    }
}

/// What a turn ends with: the reply text (`None`: nothing to say), the streamed draft with
/// what it showed last, when the channel streams, and (replicas, no draft, no cards) the fence
/// still to be confirmed — with the answer's `sending` record — before anything goes out.
type TurnEnd = (
    Option<String>,
    Option<(Box<dyn Draft>, DraftView)>,
    Option<LeaseFence>,
);

/// A trace id stable for an inbound event, so a turn re-run after a crash keeps its trace (and
/// its replay keys). The send time is part of it: a platform event id reused later (Telegram
/// restarts `update_id` numbering after a week without updates) gets a trace of its own.
pub fn trace_id_for(ev: &InboundEvent) -> String {
    let digest =
        Sha256::digest(format!("{}:{}:{}", ev.channel, ev.event_id, ev.sent_at).as_bytes());
    hex::encode(&digest[..12])
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
        F: FnOnce(&'static Arc<Router>, InboundEvent, bool, &'static mut KeptWindow) -> Fut,
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
