//! The router's intake: an inbound event is checked (who may speak here), recorded in the store
//! (deduplicated by the platform's event id) and routed to its session's worker; with replicas,
//! to whichever replica takes the session's lease. `/stop`, `/approve`, `/deny` and `/claim` do
//! not wait behind the turn they act on: they are answered here. At start (and, with replicas,
//! every sweep), events recorded but never answered are routed again.

use super::worker::{Job, SessionWorker, WebTurn};
use super::{Router, STOP_NOT_YOURS};
use crate::agent::{TurnInput, TurnReply};
use crate::daemon::access::Access;
use crate::daemon::commands::{self, Command};
use crate::daemon::replica::{self, Want};
use async_trait::async_trait;
use ethan_channels::{
    ApprovalAck, ApprovalChoice, ApprovalDecision, ChannelError, ChatKind, InboundEvent,
    InboundSink, OutboundBody, OutboundMessage, PublishOutcome,
};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// What `/stop` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopOutcome {
    Stopped,
    /// A turn is running, but this sender may not stop it.
    NotAllowed,
    NothingRunning,
}

impl Router {
    /// Replicas: every [`replica::SWEEP_EVERY`], pump the sessions that have unfinished
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
                replica::SWEEP_BUSY
            } else {
                replica::SWEEP_EVERY
            };
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = shutdown.changed() => return,
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
        ethan_core::task::spawn(Arc::clone(self).work(key, rx, tx.clone()));
        SessionWorker { tx }
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

    /// `/approve`, `/deny`, `/claim`: handled at once (a turn may be waiting for them); the reply.
    pub(super) async fn out_of_band(&self, ev: &InboundEvent, cmd: &Command) -> String {
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
                    ethan_core::task::spawn(async move {
                        let _ = ch.send(&msg).await;
                    });
                }
                ack.toast
            }
            _ => String::new(),
        }
    }

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
        let req = replica::remote_stop::StopRequest {
            sender_id: ev.sender.id.clone(),
            owner: is_owner,
        };
        match replica::remote_stop::request(&*self.store, &key, &req).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!("cannot pass /stop for {key} to the replica running it: {e}");
                false
            }
        }
    }

    /// `/stop` from `ev`'s sender: cancel the running turn of its session when there is one and
    /// the sender may stop it (in a group: the owner or the turn's sender; in a DM: always).
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
                        ethan_core::task::spawn(async move {
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
                    ethan_core::task::spawn(
                        async move { router.answer_out_of_band(&ev, &reply).await },
                    );
                } else {
                    ethan_core::task::spawn(async move {
                        let reply = router.out_of_band(&ev, &cmd).await;
                        router.answer_out_of_band(&ev, &reply).await;
                    });
                }
                return Ok(PublishOutcome::Accepted);
            }
            _ => {}
        }
        router
            .metrics
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
