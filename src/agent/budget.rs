//! Token budgets and the usage ledger, for the agent loop: [`refusal`] checks the daily budgets
//! (`budget.daily_tokens` for the whole daemon, `budget.chat_daily_tokens` for one chat; 0 = no
//! limit) before a turn calls the model; [`usage`] is each model call's row in the ledger, which
//! [`record`] writes at once (a turn's last call is written with the turn's end, in one store
//! step). A day runs from midnight in the configured zone ([`crate::usage::local_day`]);
//! scheduled jobs count toward the daemon and toward the chat they post to. A store failure
//! never fails a turn: it is logged, and the turn goes on (unbudgeted, or unrecorded).

use super::{Agent, TurnInput};
use crate::usage::{local_day, thousands, zone};
use ethan_core::provider::Completion;
use ethan_core::store::UsageRecord;

/// The answer to a turn over a daily budget (one sentence: whose budget, how large, when it
/// resets), or `None` when the turn may call the model. The daemon's budget is checked first.
pub(super) async fn refusal(agent: &Agent, input: &TurnInput) -> Option<String> {
    let budget = &agent.config.config.budget;
    if budget.daily_tokens == 0 && budget.chat_daily_tokens == 0 {
        return None;
    }
    let day = local_day(zone(&agent.config.config), chrono::Utc::now(), 0);
    let used = |chat: Option<(&'static str, String)>| async move {
        let chat_ref = chat.as_ref().map(|(c, id)| (*c, id.as_str()));
        match agent.store.tokens_since(day.start, chat_ref).await {
            Ok(n) => Some(n),
            Err(e) => {
                tracing::warn!("cannot read today's token usage ({e}); not enforcing the budget");
                None
            }
        }
    };
    if budget.daily_tokens > 0 && used(None).await? >= budget.daily_tokens {
        tracing::info!(
            "the daily token budget ({}) is used up; refused a turn in {}",
            budget.daily_tokens,
            input.session_key
        );
        return Some(format!(
            "I have used my daily token budget ({} tokens); it resets at {}.",
            thousands(budget.daily_tokens),
            day.reset_label()
        ));
    }
    let chat = Some((input.channel.as_str(), input.chat_id.clone()));
    if budget.chat_daily_tokens > 0 && used(chat).await? >= budget.chat_daily_tokens {
        tracing::info!(
            "the chat {}:{} used its daily token budget ({}); refused a turn",
            input.channel,
            input.chat_id,
            budget.chat_daily_tokens
        );
        return Some(format!(
            "This chat has used its daily token budget ({} tokens); it resets at {}.",
            thousands(budget.chat_daily_tokens),
            day.reset_label()
        ));
    }
    None
}

/// The ledger's row for one model call of this turn that sent `sent` and returned
/// `completion` ([`crate::usage::call_record`]; estimated when the server reported none).
pub(super) fn usage(
    agent: &Agent,
    input: &TurnInput,
    sent: crate::usage::Sent<'_>,
    completion: &Completion,
) -> UsageRecord {
    crate::usage::call_record(
        &agent.config.config.model.name,
        &call_owner(input),
        sent,
        completion,
    )
}

/// Write `record` to the ledger now (a store failure is logged).
pub(super) async fn record(agent: &Agent, record: &UsageRecord) {
    if let Err(e) = agent.store.record_usage(record).await {
        tracing::warn!(
            "cannot record the token usage of a call in {}: {e}",
            record.session_key
        );
    }
}

/// Whom this turn's model calls are counted for.
pub(super) fn call_owner(input: &TurnInput) -> crate::usage::CallOwner {
    crate::usage::CallOwner {
        session_key: input.session_key.clone(),
        channel: input.channel.as_str().to_string(),
        chat_id: input.chat_id.clone(),
        job_id: input.job_id.clone(),
    }
}
