//! A turn as a value. [`run`] composes the stages, each in its own module with what it needs
//! and gives spelled out: [`prepare`] (the budget, the session, compaction, memory, the tools,
//! the prompt, the taint) gives a [`Prepared`]; then, until an answer, [`step`] makes one model
//! request ([`step::StepResult`]: an answer, tool calls, or ask again), [`calls`] runs the calls
//! and [`fold`] puts their results into the turn; [`persist`] stores the turn, its last model
//! call's usage and the session's marks in one store step. Progress goes to the [`sink::Sink`]
//! the loop hands the stages (streamed text, tool progress, cards). The window the turn read is
//! left in the session's [`KeptWindow`] for its next turn.

mod calls;
mod fold;
mod persist;
mod prepare;
mod sink;
mod step;

use super::{Agent, KeptWindow, TurnInput, TurnOutcome, TurnReply};
use crate::memory::compact::{self, Compactor};
use crate::provider::Chain;
use crate::tools::ToolContext;
use ethan_core::message::ChatMessage;
use std::collections::BTreeSet;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// What [`prepare`] gives the rest of the turn.
pub(crate) struct Prepared {
    pub session: Session,
    pub window: Window,
    pub offer: Offer,
    /// The context every tool call of the turn starts from, its taint marked with what the
    /// session brought in (each call gets its own copy with its id, attempt and key).
    pub ctx: ToolContext,
}

/// The session as the turn found it; fixed for the turn.
pub(crate) struct Session {
    pub id: String,
    pub group: bool,
    /// Whom the turn's model calls are counted for.
    pub owner: crate::usage::CallOwner,
    /// Whose personal memory compaction extracts facts into (`None`: none).
    pub extract_into: Option<String>,
    /// `model.context_tokens × 4`.
    pub budget_chars: usize,
    pub marks: Marks,
}

impl Session {
    /// The compaction of this session's history.
    pub(crate) fn compactor<'a>(&'a self, agent: &'a Agent) -> Compactor<'a> {
        Compactor {
            store: &agent.store,
            summariser: &agent.summariser,
            session_id: &self.id,
            owner: self.owner.clone(),
            group: self.group,
            extract_into: self.extract_into.clone(),
            budget_chars: self.budget_chars,
        }
    }
}

/// What brought private data and outside text into the session before this turn: as recorded
/// in the store (`*_recorded`), else as found in the history window.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Marks {
    pub earlier: Option<String>,
    pub earlier_recorded: bool,
    pub outside: Option<String>,
    pub outside_recorded: bool,
}

/// The conversation the requests carry; compaction folds it as the turn goes.
pub(crate) struct Window {
    pub compaction: compact::State,
    pub history: Vec<(i64, ChatMessage)>,
    /// The window as read, when `history` is narrowed for the asker (someone not the owner
    /// gets no tool traffic): what the session's worker keeps for the next turn.
    pub whole: Option<Vec<(i64, ChatMessage)>>,
    /// The compaction point the window was read after: once `compaction` moves past it, the
    /// window is not kept.
    pub read_after: i64,
    /// This turn's messages: the question, then the model's steps and the tools' results.
    pub turn: Vec<ChatMessage>,
    /// The whole history was already folded once after the model found the request too long.
    pub trimmed: bool,
}

/// What the model is offered, and who answers.
pub(crate) struct Offer {
    pub system: ChatMessage,
    /// The tools this turn may use.
    pub allowed: BTreeSet<String>,
    /// The tools sent with the requests, in the order they were first offered.
    pub active: Vec<String>,
    pub registry: Arc<crate::tools::registry::Registry>,
    /// The chain to ask; pinned to the model that answered once one has.
    pub models: Chain,
    pub max_iter: u32,
    /// The zone the questions' times are stamped in.
    pub zone: chrono_tz::Tz,
}

/// Run one turn: prepare it, step until an answer, a stop or the iteration cap, persist it.
/// `kept`: the session's window from its previous turn, replaced by this one's.
pub(super) async fn run(
    agent: &Agent,
    input: &TurnInput,
    cancel: &CancellationToken,
    kept: &mut KeptWindow,
) -> TurnReply {
    let mut sink = sink::Sink::new(input.events.as_ref());
    let Prepared {
        session,
        mut window,
        mut offer,
        mut ctx,
    } = match prepare::prepare(agent, input, cancel, &sink, kept).await {
        Ok(p) => p,
        Err(reply) => return reply,
    };
    let compactor = session.compactor(agent);
    let mut iterations = 0u32;
    let mut unrecorded = Vec::new();
    let outcome = loop {
        if let Some(cap) = step::cap(iterations, offer.max_iter) {
            break cap;
        }
        let step = step::Step {
            agent,
            input,
            compactor: &compactor,
            cancel,
        };
        let calls = match step
            .run(&mut window, &mut offer, &mut ctx, &sink, &mut unrecorded)
            .await
        {
            step::StepResult::Done(outcome) => break outcome,
            step::StepResult::Retry => continue,
            step::StepResult::Calls(calls) => calls,
        };
        iterations += 1;
        let ran = calls::run(agent, &calls, &offer.allowed, &ctx, &sink, cancel).await;
        let mut fold = fold::Fold {
            turn: &mut window.turn,
            taint: &ctx.taint,
            active: &mut offer.active,
            allowed: &offer.allowed,
            sink: &mut sink,
        };
        match ran {
            Ok(results) => fold.results(results, &agent.config.config).await,
            Err(progress) => {
                fold.stopped(&calls, progress);
                break TurnOutcome::Stopped;
            }
        }
    };
    let end = persist::End {
        turn: window.turn,
        unrecorded,
        taint: &ctx.taint,
        outcome: &outcome,
    };
    persist::persist(agent, input, &session, end).await;
    // The window as the store holds it before this turn's messages (they come back with the
    // next turn's delta); not kept once compaction moved its start or folded it whole.
    if window.compaction.upto == window.read_after && !window.trimmed {
        let limit = agent.config.config.model.history_messages as usize;
        let whole = window.whole.unwrap_or(window.history);
        kept.keep(session.id, window.read_after, limit, whole);
    }
    TurnReply {
        outcome,
        cards: sink.into_cards(),
        refused: false,
    }
}
