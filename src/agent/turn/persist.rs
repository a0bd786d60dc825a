//! Persist: the end of a turn in the store, in one step
//! ([`ethan_core::store::SessionStore::end_turn`], one transaction). Its messages — the question,
//! every step and result, and a closing line when it ended without an answer — are appended
//! together, so the history never holds a tool call without its result; with them the model
//! calls not in the usage ledger yet (the last one's: those before tool calls were recorded as
//! they ran) and the session's marks, each recorded once: the first outside text it saw
//! ([`provenance::mark_key`]) and the first source of private data (kv
//! [`TAINT_PREFIX`]`<session id>`), which later turns read with their start.

use super::Session;
use crate::agent::{Agent, TurnInput, TurnOutcome, TAINT_PREFIX};
use crate::memory::provenance;
use crate::tools::Taint;
use ethan_core::message::ChatMessage;
use ethan_core::store::{TurnEnd, UsageRecord};

/// What a turn ends with.
pub(super) struct End<'a> {
    /// The turn's messages.
    pub turn: Vec<ChatMessage>,
    /// Its model calls not in the usage ledger yet.
    pub unrecorded: Vec<UsageRecord>,
    pub taint: &'a Taint,
    pub outcome: &'a TurnOutcome,
}

/// Store the turn's messages, closed as its outcome says, its unrecorded usage and the marks the
/// session did not have yet, in one store step. A store failure is logged; the turn's outcome
/// stands.
pub(super) async fn persist(agent: &Agent, input: &TurnInput, session: &Session, end: End<'_>) {
    let End {
        mut turn,
        unrecorded,
        taint,
        outcome,
    } = end;
    if let TurnOutcome::Failed { detail, .. } = outcome {
        tracing::error!("turn in {} failed: {detail}", input.session_key);
    }
    turn.extend(closing(outcome));
    let end = TurnEnd {
        session_id: session.id.clone(),
        messages: turn,
        usage: unrecorded,
        marks: marks(session, taint),
    };
    if let Err(e) = agent.store.end_turn(&end).await {
        tracing::error!("cannot store the turn of {}: {e}", input.session_key);
    }
}

/// The kv marks of the session that it had not recorded before this turn: what first brought
/// outside text into it, and the first source of private data (as the tool's own name).
fn marks(session: &Session, taint: &Taint) -> Vec<(String, String)> {
    let marks = &session.marks;
    let mut out = Vec::new();
    if !marks.outside_recorded {
        if let Some(source) = marks.outside.clone().or_else(|| taint.untrusted()) {
            out.push((provenance::mark_key(&session.id), source));
        }
    }
    if !marks.earlier_recorded {
        if let Some(source) = marks.earlier.clone().or_else(|| taint.source()) {
            out.push((format!("{TAINT_PREFIX}{}", session.id), source));
        }
    }
    out
}

/// The assistant's line closing a turn that ended without an answer: the iteration cap's
/// text, a stop, or a failed model (the question and every call that ran before it stay, so
/// the next turn knows their effects; no answer is recorded). An answer is in the turn already.
fn closing(outcome: &TurnOutcome) -> Option<ChatMessage> {
    match outcome {
        TurnOutcome::IterationCap(t) => Some(ChatMessage::assistant(t.clone())),
        TurnOutcome::Stopped => Some(ChatMessage::assistant("(Stopped by the user.)")),
        TurnOutcome::Failed { .. } => Some(ChatMessage::assistant(
            "(No answer: the model endpoint failed.)",
        )),
        TurnOutcome::Answer(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_without_an_answer_is_closed_in_the_history() {
        let text = |o: &TurnOutcome| closing(o).and_then(|m| m.content);
        assert_eq!(text(&TurnOutcome::Answer("hi".into())), None);
        assert_eq!(
            text(&TurnOutcome::IterationCap(
                "I stopped after 3 tool steps".into()
            ))
            .as_deref(),
            Some("I stopped after 3 tool steps")
        );
        assert_eq!(
            text(&TurnOutcome::Stopped).as_deref(),
            Some("(Stopped by the user.)")
        );
        let failed = TurnOutcome::Failed {
            user_message: "The model is unavailable.".into(),
            detail: "HTTP 503".into(),
        };
        assert_eq!(
            text(&failed).as_deref(),
            Some("(No answer: the model endpoint failed.)")
        );
        let closed = closing(&TurnOutcome::Stopped).unwrap();
        assert_eq!(closed.role, ethan_core::message::Role::Assistant);
    }
}
