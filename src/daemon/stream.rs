//! Showing a chat turn while it runs: the [`Presenter`] turns the turn's [`TurnEvent`]s (answer
//! text as the model writes it, tool calls starting and ending) into a [`DraftView`] and hands it
//! to the channel's [`Draft`] (a Telegram draft or edited message, a Lark streaming card) at most
//! once per [`Draft::interval`]: a first tool line right away, first text after
//! [`FIRST_SETTLE`] (an answer that arrives whole is not drafted), later changes coalesced. A
//! group is shown less than a direct chat ([`super::group_view`]): no text before the final
//! answer, and tool lines that name real tools only.
//!
//! The draft's platform handle is recorded in the store ([`StoreDraftLog`], kv key
//! [`draft_key`]) by the adapter before it first edits a message it created, so a turn re-run
//! after a crash continues in the same message, and a reply a crash caught while it was being
//! sent is finished there ([`super::router`]).

pub use super::group_view::Shown;
use crate::store::DaemonStoreRef;
use async_trait::async_trait;
use ethan_channels::{
    ChannelError, Draft, DraftHandle, DraftLog, DraftView, InboundEvent, ToolLine, ToolState,
};
use ethan_core::event::{EventSink, TurnEvent};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The kv key under which the draft handle of the reply to `ev` is kept:
/// `draft:{channel}:{event_id}`.
pub fn draft_key(ev: &InboundEvent) -> String {
    format!("draft:{}:{}", ev.channel, ev.event_id)
}

/// The draft handle recorded for the reply to `ev`, if any (a store error is logged and counts
/// as none).
pub async fn recorded_handle(store: &DaemonStoreRef, ev: &InboundEvent) -> Option<DraftHandle> {
    match store.kv_get(&draft_key(ev)).await {
        Ok(Some(json)) => match serde_json::from_str(&json) {
            Ok(v) => Some(DraftHandle(v)),
            Err(e) => {
                tracing::warn!(
                    "the draft handle of event {} is unreadable: {e}",
                    ev.event_id
                );
                None
            }
        },
        Ok(None) => None,
        Err(e) => {
            tracing::warn!("cannot read the draft handle of event {}: {e}", ev.event_id);
            None
        }
    }
}

/// Forget the draft handle of `ev`'s reply (the reply is delivered or given up). Best effort.
/// Queued where the store keeps its calls in order ([`crate::store::InboundStore::queue_kv_delete`]).
pub async fn forget_handle(store: &DaemonStoreRef, ev: &InboundEvent) {
    store.queue_kv_delete(&draft_key(ev)).await;
}

/// A [`DraftLog`] writing to the store under one event's [`draft_key`].
pub struct StoreDraftLog {
    pub store: DaemonStoreRef,
    pub key: String,
}

#[async_trait]
impl DraftLog for StoreDraftLog {
    async fn record(&self, handle: &DraftHandle) -> Result<(), ChannelError> {
        self.store
            .kv_set(&self.key, &handle.0.to_string())
            .await
            .map_err(|e| ChannelError::Storage(e.to_string()))
    }
}

/// A draft being fed from a turn's events, by a task of its own.
pub struct Presenter {
    /// Cancelled by [`Presenter::stop`], or when the presenter is dropped (the turn panicked):
    /// the task never outlives its turn.
    done: tokio_util::sync::DropGuard,
    task: JoinHandle<(Box<dyn Draft>, DraftView)>,
}

impl Presenter {
    /// Start feeding `draft` with the events `shown` admits; the returned sink is the turn's
    /// [`crate::agent::TurnInput::events`].
    pub fn start(draft: Box<dyn Draft>, shown: Shown) -> (Presenter, EventSink) {
        Self::start_fenced(draft, shown, None, Default::default())
    }

    /// [`Presenter::start`], each update first asking `fence` (replicas: a turn whose replica
    /// lost the session changes the draft no more — the replica that took the session over
    /// answers in it); the first refusal ends the updates. Each update's duration is counted
    /// in `metrics`.
    pub fn start_fenced(
        draft: Box<dyn Draft>,
        shown: Shown,
        fence: Option<Arc<dyn ethan_core::tool::Fence>>,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> (Presenter, EventSink) {
        let (tx, rx) = mpsc::unbounded_channel();
        let done = CancellationToken::new();
        let feed = Feed {
            rx,
            done: done.clone(),
            settle: FIRST_SETTLE,
        };
        let task = ethan_core::task::spawn(present(draft, shown, feed, fence, metrics));
        (
            Presenter {
                done: done.drop_guard(),
                task,
            },
            tx,
        )
    }

    /// Stop updating (events still queued are dropped: the final answer replaces them) and give
    /// back the draft with what it last showed. `None` when the task panicked (the draft is
    /// lost; the caller sends the reply as an ordinary message).
    pub async fn stop(self) -> Option<(Box<dyn Draft>, DraftView)> {
        drop(self.done);
        match self.task.await {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::error!("the draft of a streamed reply failed: {e}");
                None
            }
        }
    }

    /// Stop at once, without a last update of the draft (the turn's replica lost the session:
    /// another replica answers).
    pub fn abort(self) {
        self.task.abort();
    }
}

/// A tool name as the model wrote it, made safe to show in a chat: only `[A-Za-z0-9_.-]` kept
/// (a name is the model's text, and an injected one must not become a mention, a link or markup
/// in a group's card), at most 64 characters; `tool` when nothing is left.
fn shown_tool_name(name: &str) -> String {
    let kept: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        .take(64)
        .collect();
    if kept.is_empty() {
        "tool".into()
    } else {
        kept
    }
}

/// Apply one event to the view; whether it changed what is shown.
fn apply(view: &mut DraftView, calls: &mut HashMap<String, usize>, e: TurnEvent) -> bool {
    match e {
        TurnEvent::Delta(t) if !t.is_empty() => {
            view.text.push_str(&t);
            true
        }
        TurnEvent::DeltaReset if !view.text.is_empty() => {
            view.text.clear();
            true
        }
        TurnEvent::ToolStart { id, name, .. } => {
            calls.insert(id, view.tools.len());
            view.tools.push(ToolLine {
                name: shown_tool_name(&name),
                state: ToolState::Running,
            });
            true
        }
        TurnEvent::ToolEnd { id, ok, denied, .. } => {
            match calls.get(&id).and_then(|&i| view.tools.get_mut(i)) {
                Some(line) => {
                    line.state = if denied {
                        ToolState::Denied
                    } else if ok {
                        ToolState::Done
                    } else {
                        ToolState::Failed
                    };
                    true
                }
                None => false,
            }
        }
        _ => false,
    }
}

/// How long a draft's first text waits before it is shown (a tool line is shown at once). A
/// model's first chunk comes after hundreds of milliseconds and its next ones tens of
/// milliseconds apart, so the preview is this much later than its text; an answer that arrives
/// whole within it (a short one, a provider that does not stream) is sent as the reply without
/// a platform request showing it as a draft just before.
pub const FIRST_SETTLE: Duration = Duration::from_millis(5);

/// `tokio::time::sleep_until(at)`, never when `at` is `None`.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What the presenter's loop is fed: the turn's events, the turn's end, and how long the first
/// change waits ([`FIRST_SETTLE`]).
struct Feed {
    rx: mpsc::UnboundedReceiver<TurnEvent>,
    done: CancellationToken,
    settle: Duration,
}

/// The presenter's loop: apply events as they come; show the view when it changed and the
/// interval since the last update has passed (else when it passes).
async fn present(
    mut draft: Box<dyn Draft>,
    shown: Shown,
    feed: Feed,
    fence: Option<Arc<dyn ethan_core::tool::Fence>>,
    metrics: Arc<crate::metrics::Metrics>,
) -> (Box<dyn Draft>, DraftView) {
    let Feed {
        mut rx,
        done,
        settle,
    } = feed;
    let interval = draft.interval();
    let mut view = DraftView::default();
    let mut calls = HashMap::new();
    let mut dirty = false;
    // The first text waits [`FIRST_SETTLE`]: an answer that arrives whole within it is sent as
    // the reply without a draft of itself first.
    let mut next_at = None;
    let mut updated = false;
    let mut open = true;
    loop {
        tokio::select! {
            biased;
            _ = done.cancelled() => break,
            e = rx.recv(), if open => match e {
                Some(e) => {
                    if let Some(e) = shown.admit(e) {
                        draft.observe(&e);
                        dirty |= apply(&mut view, &mut calls, e);
                    }
                }
                None => open = false,
            },
            _ = sleep_until(next_at), if dirty => {}
        }
        if dirty && !updated {
            // A tool line is shown at once (a group sees nothing else while the turn runs);
            // text alone waits for the settle.
            let settle = if view.tools.is_empty() {
                settle
            } else {
                Duration::ZERO
            };
            let due = Instant::now() + settle;
            next_at = Some(next_at.map_or(due, |t| t.min(due)));
        }
        if !open && !dirty {
            // Nothing more will come; wait for the turn to end.
            done.cancelled().await;
            break;
        }
        let empty = view.text.trim().is_empty() && view.tools.is_empty();
        if dirty && !empty && next_at.is_some_and(|t| Instant::now() >= t) {
            dirty = false;
            if let Some(fence) = &fence {
                if let Err(why) = fence.check().await {
                    tracing::info!("the streamed reply is left as it was: {why}");
                    done.cancelled().await;
                    break;
                }
            }
            let started = Instant::now();
            if let Err(e) = draft.update(&view).await {
                tracing::warn!("could not update the streamed reply: {e}");
            }
            metrics
                .draft_update
                .observe(started.elapsed().as_secs_f64());
            next_at = Some(Instant::now() + interval);
            updated = true;
        } else if empty {
            dirty = false;
        }
    }
    (draft, view)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    /// A draft that remembers what it was shown and when.
    struct Recorder {
        shown: Arc<Mutex<Vec<(Instant, DraftView)>>>,
        interval: Duration,
    }

    #[async_trait]
    impl Draft for Recorder {
        fn interval(&self) -> Duration {
            self.interval
        }
        async fn update(&mut self, view: &DraftView) -> Result<(), ChannelError> {
            self.shown
                .lock()
                .unwrap()
                .push((Instant::now(), view.clone()));
            Ok(())
        }
        async fn finish(
            &mut self,
            _markdown: &str,
            _tools: &[ToolLine],
        ) -> Result<ethan_channels::SentRef, ChannelError> {
            Ok(Default::default())
        }
    }

    #[tokio::test]
    async fn updates_are_coalesced_to_one_per_interval_and_the_first_after_a_short_settle() {
        let shown = Arc::new(Mutex::new(Vec::new()));
        let draft = Recorder {
            shown: shown.clone(),
            interval: Duration::from_millis(200),
        };
        let (p, tx) = Presenter::start(Box::new(draft), Shown::All);
        tx.send(TurnEvent::Delta("Hel".into())).unwrap();
        // The first piece is shown after FIRST_SETTLE, long before the interval has passed.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(shown.lock().unwrap().len(), 1, "the first piece at once");
        // 20 pieces 25 ms apart: half a second of text.
        for i in 0..20 {
            tx.send(TurnEvent::Delta(format!(" {i}"))).unwrap();
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (_, view) = p.stop().await.unwrap();
        let shown = shown.lock().unwrap().clone();
        assert_eq!(shown[0].1.text, "Hel");
        for w in shown.windows(2) {
            let gap = w[1].0 - w[0].0;
            assert!(gap >= Duration::from_millis(200), "{gap:?}");
            assert!(w[1].1.text.starts_with(&w[0].1.text), "text only grows");
        }
        // 21 changes in 0.6 s, shown at most once per 200 ms.
        assert!(
            shown.len() >= 2 && shown.len() <= 5,
            "{} updates",
            shown.len()
        );
        assert_eq!(shown.last().unwrap().1, view, "the last change was shown");
        assert!(view.text.ends_with(" 19"));
    }

    #[tokio::test]
    async fn tool_lines_follow_their_calls_and_a_reset_drops_the_preamble() {
        let shown = Arc::new(Mutex::new(Vec::new()));
        let draft = Recorder {
            shown: shown.clone(),
            interval: Duration::from_millis(100),
        };
        let (p, tx) = Presenter::start(Box::new(draft), Shown::All);
        tx.send(TurnEvent::Delta("Let me look.".into())).unwrap();
        tx.send(TurnEvent::DeltaReset).unwrap();
        for (id, name) in [("a", "shell"), ("b", "file_read"), ("c", "web_fetch")] {
            tx.send(TurnEvent::ToolStart {
                id: id.into(),
                name: name.into(),
                summary: String::new(),
            })
            .unwrap();
        }
        let end = |id: &str, ok, denied| TurnEvent::ToolEnd {
            id: id.into(),
            name: String::new(),
            ms: 1,
            ok,
            denied,
        };
        tx.send(end("a", true, false)).unwrap();
        tx.send(end("b", false, false)).unwrap();
        tx.send(end("c", false, true)).unwrap();
        // An end without a start changes nothing.
        tx.send(end("zz", true, false)).unwrap();
        tx.send(TurnEvent::Delta("Done.".into())).unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (_, view) = p.stop().await.unwrap();
        assert_eq!(view.text, "Done.");
        let states: Vec<_> = view
            .tools
            .iter()
            .map(|t| (t.name.as_str(), t.state))
            .collect();
        assert_eq!(
            states,
            [
                ("shell", ToolState::Done),
                ("file_read", ToolState::Failed),
                ("web_fetch", ToolState::Denied)
            ]
        );
        assert_eq!(shown.lock().unwrap().last().unwrap().1, view);
    }

    #[test]
    fn a_tool_name_from_the_model_cannot_carry_markup_into_the_chat() {
        let mut view = DraftView::default();
        let mut calls = HashMap::new();
        for (id, name) in [
            ("a", "<at id=all></at>`](https://evil.example)"),
            ("b", "\u{202e}<b>"),
            ("c", "file_read"),
        ] {
            apply(
                &mut view,
                &mut calls,
                TurnEvent::ToolStart {
                    id: id.into(),
                    name: name.into(),
                    summary: String::new(),
                },
            );
        }
        let names: Vec<_> = view.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["atidallathttpsevil.example", "b", "file_read"]);
        let md = view.progress_markdown();
        assert!(
            !md.contains('<') && !md.contains("](") && !md.contains('\u{202e}'),
            "{md}"
        );
        assert_eq!(shown_tool_name("<>`"), "tool");
    }

    /// A presenter with a settle no test machine outlasts, fed by hand: (events, turn's end,
    /// what it showed, its task).
    #[allow(clippy::type_complexity)]
    fn long_settle() -> (
        mpsc::UnboundedSender<TurnEvent>,
        CancellationToken,
        Arc<Mutex<Vec<(Instant, DraftView)>>>,
        JoinHandle<(Box<dyn Draft>, DraftView)>,
    ) {
        let shown = Arc::new(Mutex::new(Vec::new()));
        let draft = Recorder {
            shown: shown.clone(),
            interval: Duration::from_millis(100),
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let done = CancellationToken::new();
        let feed = Feed {
            rx,
            done: done.clone(),
            settle: Duration::from_secs(600),
        };
        let metrics = Arc::new(crate::metrics::Metrics::new());
        let task = tokio::spawn(present(Box::new(draft), Shown::All, feed, None, metrics));
        (tx, done, shown, task)
    }

    /// Let the presenter run (one thread: it runs while this task yields).
    async fn let_it_run() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn an_answer_that_arrives_whole_within_the_settle_is_not_drafted() {
        let (tx, done, shown, task) = long_settle();
        tx.send(TurnEvent::Delta("the whole ".into())).unwrap();
        tx.send(TurnEvent::Delta("answer".into())).unwrap();
        let_it_run().await;
        done.cancel();
        let (_, view) = task.await.unwrap();
        // It took the text (what the reply finishes with) and showed nothing.
        assert_eq!(view.text, "the whole answer");
        assert!(
            shown.lock().unwrap().is_empty(),
            "no draft before the reply"
        );
    }

    #[tokio::test]
    async fn a_tool_line_is_shown_at_once_whatever_the_settle() {
        let (tx, done, shown, task) = long_settle();
        tx.send(TurnEvent::Delta("Let me look.".into())).unwrap();
        tx.send(TurnEvent::ToolStart {
            id: "a".into(),
            name: "file_read".into(),
            summary: String::new(),
        })
        .unwrap();
        let_it_run().await;
        let first = shown.lock().unwrap().first().map(|(_, v)| v.clone());
        done.cancel();
        task.await.unwrap();
        let first = first.expect("the tool line was shown without waiting for the settle");
        assert_eq!(first.tools[0].name, "file_read");
        assert_eq!(first.tools[0].state, ToolState::Running);
    }

    #[tokio::test]
    async fn nothing_is_shown_for_a_turn_without_text_or_tools() {
        let shown = Arc::new(Mutex::new(Vec::new()));
        let draft = Recorder {
            shown: shown.clone(),
            interval: Duration::from_millis(100),
        };
        let (p, tx) = Presenter::start(Box::new(draft), Shown::All);
        tx.send(TurnEvent::Delta(String::new())).unwrap();
        tx.send(TurnEvent::DeltaReset).unwrap();
        tx.send(TurnEvent::Text("final".into())).unwrap();
        drop(tx);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (_, view) = p.stop().await.unwrap();
        assert_eq!(view, DraftView::default());
        assert!(shown.lock().unwrap().is_empty());
    }
}
