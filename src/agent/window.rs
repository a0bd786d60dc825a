//! The history window a session's worker keeps between the session's turns ([`KeptWindow`]):
//! the decoded messages a turn's requests carry (those since the compaction point, at most
//! `model.history_messages`, from a user message on), so that the next turn reads only what
//! was stored after them — with its start, in the same store step
//! ([`ethan_core::store::SessionStore::start_turn`]) — instead of the whole window.
//!
//! The kept window is the store's view as the turn started (after any compaction of the turn
//! the kept window is dropped); the turn's own messages come back with the next turn's delta,
//! so what a turn sends is what a fresh load gives. It is dropped (the next turn loads the
//! whole window) when it cannot be trusted: another session (`/new`), another compaction
//! point, another window size, a count of stored messages in its range that differs from its
//! own, a turn that ended early; the worker drops it on a chat command, when its replica takes
//! the session's lease, and when it exits at idle.
//!
//! Each message of the window carries what the requests derive from it ([`derive`]: its
//! character count, its time stamp, its Chat Completions JSON), made as it enters the window
//! and dropped with it, so a request copies the bytes of the kept messages and works only on
//! the new ones.

mod derive;
#[cfg(test)]
mod tests;

pub(crate) use derive::{derive, Wanted};

use ethan_core::message::{ChatMessage, Role};
use ethan_core::store::{HeldWindow, WindowDelta};

/// A session's window kept by its worker between turns; empty until a turn ends.
#[derive(Debug, Default)]
pub struct KeptWindow(Option<Box<Held>>);

#[derive(Debug)]
struct Held {
    session_id: String,
    /// The compaction point the window starts after ([`crate::memory::compact::State::upto`]).
    upto: i64,
    /// `model.history_messages` when it was read.
    limit: usize,
    /// Oldest first, with the messages' ids; starts at a user message, never empty.
    history: Vec<(i64, ChatMessage)>,
}

impl KeptWindow {
    /// Forget the window: the next turn loads it whole.
    pub fn clear(&mut self) {
        self.0 = None;
    }

    /// Whether a window is kept.
    pub fn is_kept(&self) -> bool {
        self.0.is_some()
    }

    /// What the store is told of the kept window, to read what followed it.
    pub(crate) fn mark(&self) -> Option<HeldWindow> {
        let held = self.0.as_deref()?;
        Some(HeldWindow {
            session_id: held.session_id.clone(),
            first_id: held.history.first()?.0,
            last_id: held.history.last()?.0,
            len: held.history.len() as u64,
        })
    }

    /// The window of a turn of `session_id` whose compaction point is `upto`: the kept one,
    /// taken out, with `delta` appended and its front cut to `limit` messages and a user
    /// message, as a fresh load of the store would give it; `None` (and nothing kept) when it
    /// cannot be trusted and the whole window must be loaded.
    pub(crate) fn resume(
        &mut self,
        session_id: &str,
        upto: i64,
        limit: usize,
        delta: Option<WindowDelta>,
    ) -> Option<Vec<(i64, ChatMessage)>> {
        let held = self.0.take()?;
        let delta = delta?;
        let same = held.session_id == session_id && held.upto == upto && held.limit == limit;
        if !same || delta.held_now != held.history.len() as u64 {
            tracing::debug!("the kept window of {session_id} is stale; loading it whole");
            return None;
        }
        let mut history = held.history;
        history.extend(delta.after);
        let over = history.len().saturating_sub(limit);
        history.drain(..over);
        let first_user = history.iter().position(|(_, m)| m.role == Role::User);
        history.drain(..first_user.unwrap_or(history.len()));
        Some(history)
    }

    /// Keep `history` (the window as the turn read it, whole: not narrowed for the asker) for
    /// the session's next turn; an empty one is not kept.
    pub(crate) fn keep(
        &mut self,
        session_id: String,
        upto: i64,
        limit: usize,
        history: Vec<(i64, ChatMessage)>,
    ) {
        self.0 = (!history.is_empty()).then(|| {
            Box::new(Held {
                session_id,
                upto,
                limit,
                history,
            })
        });
    }
}
