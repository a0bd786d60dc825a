//! Persist: the end of a turn in the store. Its messages — the question, every step and result,
//! and a closing line when it ended without an answer — are appended in one transaction, so
//! the history never holds a tool call without its result; then the session's marks are
//! recorded once: the first outside text it saw ([`provenance::record`]) and the first source
//! of private data (kv [`TAINT_PREFIX`]`<session id>`), which later turns read with their start.

use super::Session;
use crate::agent::{Agent, TurnInput, TurnOutcome, TAINT_PREFIX};
use crate::memory::provenance;
use crate::tools::Taint;
use ethan_core::message::ChatMessage;

/// Store the turn's messages `turn`, closed as `outcome` says, and the marks the session did
/// not have yet. A store failure is logged; the turn's outcome stands.
pub(super) async fn persist(
    agent: &Agent,
    input: &TurnInput,
    session: &Session,
    mut turn: Vec<ChatMessage>,
    taint: &Taint,
    outcome: &TurnOutcome,
) {
    if let TurnOutcome::Failed { detail, .. } = outcome {
        tracing::error!("turn in {} failed: {detail}", input.session_key);
    }
    turn.extend(closing(outcome));
    if let Err(e) = agent.store.append_messages(&session.id, &turn).await {
        tracing::error!("cannot store the turn of {}: {e}", input.session_key);
    }
    let marks = &session.marks;
    if !marks.outside_recorded {
        if let Some(source) = marks.outside.clone().or_else(|| taint.untrusted()) {
            provenance::record(&agent.store, &session.id, &source).await;
        }
    }
    // Recorded once per session: the first source, as the tool's own name.
    if !marks.earlier_recorded {
        if let Some(source) = marks.earlier.clone().or_else(|| taint.source()) {
            let key = format!("{TAINT_PREFIX}{}", session.id);
            if let Err(e) = agent.store.kv_set(&key, &source).await {
                tracing::warn!("cannot record the taint of {}: {e}", input.session_key);
            }
        }
    }
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
