//! The live events of one web session as a Server-Sent Events stream: each event with its id
//! ([`super::hub`]), from the one after the page's `Last-Event-ID` (none: from now). When those
//! events are gone (a restart, or too many to keep) the stream sends `reset` and ends: the
//! page reloads the conversation and follows again from the id it gets with it. The stream also
//! ends when the daemon stops, so it does not hold the shutdown up.

use super::hub::{Gap, Stored};
use super::PageState;
use axum::response::sse::Event;
use futures::Stream;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::watch;

struct Follow {
    s: Arc<PageState>,
    session: String,
    last: u64,
    queue: VecDeque<Stored>,
    shutdown: watch::Receiver<bool>,
    done: bool,
}

fn reset() -> Event {
    Event::default().event("reset").data("{}")
}

/// The events of `session` after `last` (`None`: from now; `Some(Err)`: a `reset` at once).
pub fn follow(
    s: Arc<PageState>,
    session: String,
    last: Option<Result<u64, Gap>>,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let shutdown = s.shutdown.clone();
    let (start, gap) = match last {
        Some(Ok(n)) => (n, false),
        Some(Err(Gap)) => (0, true),
        None => {
            let (_, cursor) = s.hub.snapshot(&session);
            (s.hub.parse_id(&cursor).unwrap_or(0), false)
        }
    };
    let st = Follow {
        s,
        session,
        last: start,
        queue: VecDeque::new(),
        shutdown,
        done: false,
    };
    futures::stream::unfold((st, gap), |(mut st, gap)| async move {
        if gap {
            st.done = true;
            return Some((Ok(reset()), (st, false)));
        }
        next(&mut st).await.map(|e| (Ok(e), (st, false)))
    })
}

async fn next(st: &mut Follow) -> Option<Event> {
    loop {
        if st.done || *st.shutdown.borrow() {
            return None;
        }
        if let Some(e) = st.queue.pop_front() {
            st.last = e.seq;
            return Some(
                Event::default()
                    .id(st.s.hub.id(e.seq))
                    .event(e.name)
                    .data(e.data.to_string()),
            );
        }
        let mut rx = match st.s.hub.since(&st.session, st.last) {
            Err(Gap) => {
                st.done = true;
                return Some(reset());
            }
            Ok((events, rx)) if events.is_empty() => rx,
            Ok((events, _)) => {
                st.queue.extend(events);
                continue;
            }
        };
        tokio::select! {
            changed = rx.changed() => {
                if changed.is_err() {
                    st.done = true;
                }
            }
            _ = st.shutdown.changed() => st.done = true,
        }
    }
}
