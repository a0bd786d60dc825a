//! What the web page sees of a session while its turn runs: every event gets an id, is kept in
//! a ring per session ([`RING`] events) and folded into a snapshot of the turn in flight
//! ([`Live`]: the answer so far, the tool lines, the approvals waiting, the cards).
//!
//! An event id is `<boot>-<seq>`: `boot` is random per daemon process, `seq` grows across all
//! sessions. A page that reconnects sends the last id it saw (`Last-Event-ID`) and gets the
//! events after it; when that is impossible — the id is from before a restart, or its events
//! left the ring — it gets `reset` and reloads the conversation (stored history plus the
//! snapshot, which comes with the id to continue from, taken under the same lock).
//!
//! Events: `start` (a turn begins), `delta` {text}, `delta_reset`, `tool_start` {id, name,
//! summary}, `tool_end` {id, name, ms, ok, denied}, `consent_request` {request_id, tool,
//! description, always}, `consent_resolved` {request_id, outcome}, `card` {html}, `answer`
//! {html} (the final answer, or a reply such as `/help`'s; the turn is over), `end` (a turn
//! ended without an answer to show).

use super::render;
use crate::consent::display;
use ethan_core::event::TurnEvent;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Events kept per session for a reconnecting page.
pub const RING: usize = 4096;
/// A session's log with no turn running is forgotten after this long without events.
const IDLE: Duration = Duration::from_secs(3600);

/// One event as sent: its sequence number, name and JSON data.
#[derive(Debug, Clone)]
pub struct Stored {
    pub seq: u64,
    pub name: &'static str,
    pub data: Value,
}

/// A tool call of the turn in flight.
#[derive(Debug, Clone, Serialize)]
pub struct ToolView {
    pub id: String,
    pub name: String,
    pub summary: String,
    /// `running`, `done`, `failed` or `denied`.
    pub state: &'static str,
    pub ms: Option<u64>,
}

/// An approval the turn in flight waits for.
#[derive(Debug, Clone, Serialize)]
pub struct ConsentView {
    pub request_id: String,
    pub tool: String,
    pub description: String,
    pub always: bool,
}

/// The turn in flight, as a page that (re)loads it shows it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Live {
    /// The answer so far (since the last `delta_reset`), as the model wrote it.
    pub text: String,
    pub tools: Vec<ToolView>,
    pub consents: Vec<ConsentView>,
    /// Sanitised card HTML.
    pub cards: Vec<String>,
}

struct Log {
    events: VecDeque<Stored>,
    /// Every event of this session with a larger seq is in `events`.
    floor: u64,
    live: Option<Live>,
    tx: watch::Sender<u64>,
    touched: Instant,
}

/// The live events of every web session of this process.
pub struct Hub {
    boot: String,
    seq: AtomicU64,
    logs: Mutex<HashMap<String, Log>>,
}

/// What a reconnecting page asked for cannot be given: it must reload.
#[derive(Debug, PartialEq, Eq)]
pub struct Gap;

impl Default for Hub {
    fn default() -> Self {
        Self::new()
    }
}

impl Hub {
    pub fn new() -> Hub {
        Hub {
            boot: uuid::Uuid::new_v4().simple().to_string()[..8].to_string(),
            seq: AtomicU64::new(0),
            logs: Mutex::new(HashMap::new()),
        }
    }

    fn logs(&self) -> std::sync::MutexGuard<'_, HashMap<String, Log>> {
        self.logs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The id of event `seq`.
    pub fn id(&self, seq: u64) -> String {
        format!("{}-{seq}", self.boot)
    }

    /// The seq of an id this process gave, else [`Gap`].
    pub fn parse_id(&self, id: &str) -> Result<u64, Gap> {
        let (boot, seq) = id.trim().split_once('-').ok_or(Gap)?;
        if boot != self.boot {
            return Err(Gap);
        }
        seq.parse().map_err(|_| Gap)
    }

    fn log_of<'a>(&self, logs: &'a mut HashMap<String, Log>, session: &str) -> &'a mut Log {
        if !logs.contains_key(session) && logs.len() >= 64 {
            logs.retain(|_, l| l.live.is_some() || l.touched.elapsed() < IDLE);
        }
        let floor = self.seq.load(Ordering::SeqCst);
        logs.entry(session.to_string()).or_insert_with(|| Log {
            events: VecDeque::new(),
            floor,
            live: None,
            tx: watch::channel(floor).0,
            touched: Instant::now(),
        })
    }

    /// Record event `name` of `session`, after `fold` updated its snapshot.
    fn push(&self, session: &str, name: &'static str, data: Value, fold: impl FnOnce(&mut Log)) {
        let mut logs = self.logs();
        let log = self.log_of(&mut logs, session);
        fold(log);
        let seq = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        if log.events.len() >= RING {
            if let Some(old) = log.events.pop_front() {
                log.floor = old.seq;
            }
        }
        log.events.push_back(Stored { seq, name, data });
        log.touched = Instant::now();
        log.tx.send_replace(seq);
    }

    /// A turn of `session` starts.
    pub fn start(&self, session: &str) {
        self.push(session, "start", json!({}), |l| {
            l.live = Some(Live::default())
        });
    }

    /// An event of the turn running in `session` (see the module docs for what is sent).
    pub fn turn_event(&self, session: &str, e: &TurnEvent) {
        match e {
            TurnEvent::Delta(t) if !t.is_empty() => {
                self.push(session, "delta", json!({ "text": t }), |l| {
                    l.live.get_or_insert_with(Live::default).text.push_str(t)
                });
            }
            TurnEvent::DeltaReset => self.push(session, "delta_reset", json!({}), |l| {
                l.live.get_or_insert_with(Live::default).text.clear()
            }),
            TurnEvent::ToolStart { id, name, summary } => {
                let view = ToolView {
                    id: id.clone(),
                    name: display::visible(name),
                    summary: display::visible(summary),
                    state: "running",
                    ms: None,
                };
                let data = json!({"id": view.id, "name": view.name, "summary": view.summary});
                self.push(session, "tool_start", data, move |l| {
                    l.live.get_or_insert_with(Live::default).tools.push(view)
                });
            }
            TurnEvent::ToolEnd {
                id,
                name,
                ms,
                ok,
                denied,
            } => {
                let state = if *denied {
                    "denied"
                } else if *ok {
                    "done"
                } else {
                    "failed"
                };
                let data = json!({"id": id, "name": display::visible(name), "ms": ms, "ok": ok, "denied": denied});
                let (id, ms) = (id.clone(), *ms);
                self.push(session, "tool_end", data, move |l| {
                    let live = l.live.get_or_insert_with(Live::default);
                    if let Some(t) = live.tools.iter_mut().find(|t| t.id == id) {
                        t.state = state;
                        t.ms = Some(ms);
                    }
                });
            }
            TurnEvent::ConsentRequest {
                request_id,
                tool,
                description,
                always,
            } => {
                let view = ConsentView {
                    request_id: request_id.clone(),
                    tool: tool.clone(),
                    description: description.clone(),
                    always: *always,
                };
                let data = json!(view);
                self.push(session, "consent_request", data, move |l| {
                    l.live.get_or_insert_with(Live::default).consents.push(view)
                });
            }
            // Cards come as messages of their own after the tool ran ([`Hub::card`]); the
            // final answer comes with the draft's finish ([`Hub::answer`]).
            TurnEvent::Delta(_) | TurnEvent::Text(_) | TurnEvent::Ui(_) => {}
        }
    }

    /// An approval was answered here: resolved in the session whose turn asked for it (none
    /// when no turn of this process waits for it).
    pub fn consent_resolved(&self, request_id: &str, outcome: &str) {
        let asked = self.logs().iter().find_map(|(session, l)| {
            l.live
                .as_ref()
                .filter(|live| live.consents.iter().any(|c| c.request_id == request_id))
                .map(|_| session.clone())
        });
        let Some(session) = asked else {
            return;
        };
        let id = request_id.to_string();
        self.push(
            &session,
            "consent_resolved",
            json!({"request_id": request_id, "outcome": outcome}),
            move |l| {
                if let Some(live) = &mut l.live {
                    live.consents.retain(|c| c.request_id != id);
                }
            },
        );
    }

    /// A card for `session` (HTML, sanitised here).
    pub fn card(&self, session: &str, html: &str) {
        let html = render::clean(html);
        let h2 = html.clone();
        self.push(session, "card", json!({ "html": html }), move |l| {
            l.live.get_or_insert_with(Live::default).cards.push(h2)
        });
    }

    /// The answer (Markdown) for `session`: the turn in flight is over.
    pub fn answer(&self, session: &str, markdown: &str) {
        let html = render::markdown(markdown);
        self.push(session, "answer", json!({ "html": html }), |l| {
            l.live = None
        });
    }

    /// The turn of `session` ended without an answer to show.
    pub fn end(&self, session: &str) {
        self.push(session, "end", json!({}), |l| l.live = None);
    }

    /// The turn in flight in `session`, if any, and the id to follow its events from.
    pub fn snapshot(&self, session: &str) -> (Option<Live>, String) {
        let logs = self.logs();
        let seq = self.seq.load(Ordering::SeqCst);
        let live = logs.get(session).and_then(|l| l.live.clone());
        (live, self.id(seq))
    }

    /// The events of `session` after `after`, and a receiver that changes when more come; a
    /// [`Gap`] when some of them are gone.
    pub fn since(
        &self,
        session: &str,
        after: u64,
    ) -> Result<(Vec<Stored>, watch::Receiver<u64>), Gap> {
        let mut logs = self.logs();
        let log = self.log_of(&mut logs, session);
        if after < log.floor {
            return Err(Gap);
        }
        let mut rx = log.tx.subscribe();
        rx.borrow_and_update();
        let events = log
            .events
            .iter()
            .filter(|e| e.seq > after)
            .cloned()
            .collect();
        Ok((events, rx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_resume_after_an_id_and_fold_into_the_snapshot() {
        let hub = Hub::new();
        let (_, cursor) = hub.snapshot("s");
        let from = hub.parse_id(&cursor).unwrap();
        hub.start("s");
        hub.turn_event("s", &TurnEvent::Delta("Hel".into()));
        hub.turn_event("s", &TurnEvent::Delta("lo".into()));
        hub.turn_event(
            "s",
            &TurnEvent::ToolStart {
                id: "c1".into(),
                name: "shell".into(),
                summary: "ls\u{202e}".into(),
            },
        );
        let (events, _) = hub.since("s", from).unwrap();
        let names: Vec<_> = events.iter().map(|e| e.name).collect();
        assert_eq!(names, ["start", "delta", "delta", "tool_start"]);
        let (events, _) = hub.since("s", events[1].seq).unwrap();
        assert_eq!(events.len(), 2);
        let (live, _) = hub.snapshot("s");
        let live = live.unwrap();
        assert_eq!(live.text, "Hello");
        assert_eq!(live.tools[0].summary, "ls\\u202e", "escapes visible");
        hub.answer("s", "**done**");
        assert!(hub.snapshot("s").0.is_none());
        // Another process's id, or one whose events left the ring, asks for a reload.
        assert_eq!(hub.parse_id("other-3"), Err(Gap));
        for _ in 0..RING + 1 {
            hub.turn_event("s", &TurnEvent::Delta("x".into()));
        }
        assert!(hub.since("s", from).is_err());
    }
}
