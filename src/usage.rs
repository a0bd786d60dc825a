//! Token usage for people: the day the budgets count (from midnight in the configured zone, to
//! the next midnight), token counts written with thousands separators, and the owner's `/usage`
//! summary. The ledger itself is [`ethan_core::store::UsageStore`]; the budget check is
//! [`crate::agent::budget`]; `ethan usage` is [`crate::cli::usage`].
//!
//! A call to a server that reports no counts (llama.cpp streams none) is recorded with tokens
//! estimated from what was sent and the answer ([`crate::tokens::estimate`], the estimate the
//! compaction budget uses), marked as estimated; budgets count them like reported ones, and
//! counts that include estimates are shown as `≈12,345` ([`approx`]).

use crate::config::Config;
use chrono::{DateTime, Days, NaiveTime, Utc};
use chrono_tz::Tz;
use ethan_core::message::{ChatMessage, ToolSpec};
use ethan_core::provider::Completion;
use ethan_core::store::{DayOf, StoreError, UsageGrouping, UsageRecord, UsageStore};
use std::borrow::Cow;
use std::sync::Arc;

/// Whom a model call is counted for in the ledger: the session, its chat, and the scheduled job
/// it ran for (if any).
#[derive(Debug, Clone, Default)]
pub struct CallOwner {
    pub session_key: String,
    pub channel: String,
    pub chat_id: String,
    pub job_id: Option<String>,
}

/// What one model call sent: the messages and the tools offered.
#[derive(Debug, Clone, Copy)]
pub struct Sent<'a> {
    pub messages: &'a [Cow<'a, ChatMessage>],
    pub tools: &'a [ToolSpec],
}

/// Record the tokens of one model call that sent `sent` and returned `completion`
/// ([`call_record`]). A store failure is logged, never returned (a turn does not fail over its
/// ledger).
pub async fn record_call(
    store: &dyn UsageStore,
    configured_model: &str,
    owner: &CallOwner,
    sent: Sent<'_>,
    completion: &Completion,
) {
    let record = call_record(configured_model, owner, sent, completion);
    if let Err(e) = store.record_usage(&record).await {
        tracing::warn!(
            "cannot record the token usage of a call in {}: {e}",
            owner.session_key
        );
    }
}

/// The ledger's row for one model call that sent `sent` and returned `completion`, under the
/// model that answered (else `configured_model`). A completion without usage gets tokens
/// estimated, marked so.
pub fn call_record(
    configured_model: &str,
    owner: &CallOwner,
    sent: Sent<'_>,
    completion: &Completion,
) -> UsageRecord {
    let (usage, estimated) = match completion.usage {
        Some(u) => (u, false),
        None => {
            let u = crate::tokens::estimate(sent.messages, sent.tools, &completion.message);
            tracing::debug!(
                "the model reported no usage for a call in {}; recording an estimate ({} in, {} \
                 out)",
                owner.session_key,
                u.input_tokens,
                u.output_tokens
            );
            (u, true)
        }
    };
    let model = if completion.model.trim().is_empty() {
        configured_model.to_string()
    } else {
        completion.model.clone()
    };
    UsageRecord {
        created_at: chrono::Utc::now().timestamp(),
        model,
        session_key: owner.session_key.clone(),
        channel: owner.channel.clone(),
        chat_id: owner.chat_id.clone(),
        job_id: owner.job_id.clone(),
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cache_read_tokens: usage.cache_read_tokens,
        cache_write_tokens: usage.cache_write_tokens,
        estimated,
    }
}

/// The zone days are counted in: the config's `timezone`, else the system zone (an unknown
/// configured name, which config validation refuses anyway, falls back to the system zone).
pub fn zone(config: &Config) -> Tz {
    crate::tz::effective_zone(None, config.timezone.as_deref()).unwrap_or_else(|e| {
        tracing::warn!("{e}; counting token budgets in the system zone");
        crate::tz::system_zone()
    })
}

/// One local day in a zone: from its midnight to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalDay {
    pub zone: Tz,
    /// The day's first instant (Unix seconds).
    pub start: i64,
    /// The next day's first instant: when daily budgets reset.
    pub reset: DateTime<Utc>,
}

/// The first instant of `date` in `zone` (midnight, or the end of a gap that swallowed it).
fn midnight(zone: &Tz, date: chrono::NaiveDate) -> Option<DateTime<Utc>> {
    crate::tz::resolve_local(zone, date.and_time(NaiveTime::MIN))
}

/// The local day of `now` in `zone`, `days_back` days before it (0: today).
pub fn local_day(zone: Tz, now: DateTime<Utc>, days_back: u64) -> LocalDay {
    let today = crate::tz::to_local(&zone, now).date();
    let date = today
        .checked_sub_days(Days::new(days_back))
        .unwrap_or(today);
    let start = midnight(&zone, date).map_or(now.timestamp() - 86_400, |t| t.timestamp());
    let reset = date
        .checked_add_days(Days::new(1))
        .and_then(|d| midnight(&zone, d))
        .unwrap_or(now + chrono::Duration::days(1));
    LocalDay { zone, start, reset }
}

impl LocalDay {
    /// When the day ends, for people: `00:00 (Asia/Shanghai)`.
    pub fn reset_label(&self) -> String {
        format!(
            "{} ({})",
            self.reset.with_timezone(&self.zone).format("%H:%M"),
            self.zone.name()
        )
    }
}

/// The local date of a Unix time in `zone` (`2026-12-02`), for [`UsageGrouping::Day`].
pub fn day_of(zone: Tz) -> DayOf {
    Arc::new(move |t| {
        DateTime::from_timestamp(t, 0)
            .map(|t| crate::tz::to_local(&zone, t).format("%Y-%m-%d").to_string())
            .unwrap_or_else(|| "?".into())
    })
}

pub use ethan_core::consent::display::thousands;

/// [`thousands`], led by `≈` when the count includes estimated tokens.
pub fn approx(n: u64, estimated: bool) -> String {
    if estimated {
        format!("≈{}", thousands(n))
    } else {
        thousands(n)
    }
}

/// What `≈` means, for a report that shows it.
pub const APPROX_NOTE: &str =
    "≈: includes tokens estimated from the text (the model server reported no counts)";

/// `12,345 tokens`, with ` of 50,000` when `budget` is set (not 0); `≈` when `estimated`.
fn against(used: u64, budget: u64, estimated: bool) -> String {
    if budget == 0 {
        format!("{} tokens", approx(used, estimated))
    } else {
        format!(
            "{} of {} tokens",
            approx(used, estimated),
            thousands(budget)
        )
    }
}

/// Which counts `/usage` shows in a chat: in a group only that group's, since everyone there
/// reads the answer; the daemon's totals (every chat's tokens, per model) in a direct chat
/// (and through `ethan usage` at the terminal).
pub async fn summary_for_chat(
    store: &dyn UsageStore,
    config: &Config,
    chat: (&str, &ethan_core::channel::ChatRef),
    now: DateTime<Utc>,
) -> Result<String, StoreError> {
    let (channel, chat) = chat;
    match chat.kind {
        ethan_core::channel::ChatKind::Group => {
            group_summary(store, config, channel, &chat.id, now).await
        }
        ethan_core::channel::ChatKind::Direct => {
            today_summary(store, config, channel, &chat.id, now).await
        }
    }
}

/// `/usage` in a group (Markdown): today's tokens of that group only, against
/// `budget.chat_daily_tokens` when one is set. Errors: the store's.
pub async fn group_summary(
    store: &dyn UsageStore,
    config: &Config,
    channel: &str,
    chat_id: &str,
    now: DateTime<Utc>,
) -> Result<String, StoreError> {
    let day = local_day(zone(config), now, 0);
    let chat = store
        .tokens_since(day.start, Some((channel, chat_id)))
        .await?;
    let estimated = store
        .usage_report(day.start, UsageGrouping::Chat)
        .await?
        .iter()
        .any(|r| r.key == format!("{channel}:{chat_id}") && r.estimated_calls > 0);
    let note = if estimated {
        format!("\n\n{APPROX_NOTE}.")
    } else {
        String::new()
    };
    Ok(format!(
        "**Token usage today in this group** (since 00:00, {}; resets at {})\n\
         - this group: {}\n\n\
         Only this group's counts are shown here; the totals of every chat are in a direct chat \
         with me or `ethan usage`.{note}",
        day.zone.name(),
        day.reset_label(),
        against(chat, config.budget.chat_daily_tokens, estimated),
    ))
}

/// The owner's `/usage` answer (Markdown): today's tokens (since local midnight) of the whole
/// daemon and of the chat `(channel, chat_id)`, each against its budget when one is set, and
/// per model. Errors: the store's.
pub async fn today_summary(
    store: &dyn UsageStore,
    config: &Config,
    channel: &str,
    chat_id: &str,
    now: DateTime<Utc>,
) -> Result<String, StoreError> {
    let day = local_day(zone(config), now, 0);
    let all = store.tokens_since(day.start, None).await?;
    let chat = store
        .tokens_since(day.start, Some((channel, chat_id)))
        .await?;
    let models = store.usage_report(day.start, UsageGrouping::Model).await?;
    let any_estimated = models.iter().any(|m| m.estimated_calls > 0);
    let chat_estimated = any_estimated
        && store
            .usage_report(day.start, UsageGrouping::Chat)
            .await?
            .iter()
            .any(|r| r.key == format!("{channel}:{chat_id}") && r.estimated_calls > 0);
    let budget = &config.budget;
    let mut out = format!(
        "**Token usage today** (since 00:00, {}; resets at {})\n\
         - all chats: {}\n\
         - this chat: {}\n",
        day.zone.name(),
        day.reset_label(),
        against(all, budget.daily_tokens, any_estimated),
        against(chat, budget.chat_daily_tokens, chat_estimated),
    );
    if models.is_empty() {
        out.push_str("\nNo model calls yet today.");
    } else {
        out.push_str("\nBy model:\n");
        for m in &models {
            let est = m.estimated_calls > 0;
            out.push_str(&format!(
                "- {}: {} call{}, {} tokens ({} in, {} out)\n",
                m.key,
                m.calls,
                if m.calls == 1 { "" } else { "s" },
                approx(m.total(), est),
                approx(m.input_tokens, est),
                approx(m.output_tokens, est),
            ));
        }
        if any_estimated {
            out.push_str(&format!("\n{APPROX_NOTE}."));
        }
    }
    Ok(out.trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(50_000), "50,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn a_day_runs_from_local_midnight_to_the_next() {
        let sh = crate::tz::parse_zone("Asia/Shanghai").unwrap();
        // 2026-12-01T20:00Z is 2026-12-02 04:00 in Shanghai (+8).
        let d = local_day(sh, utc("2026-12-01T20:00:00Z"), 0);
        assert_eq!(d.start, utc("2026-12-01T16:00:00Z").timestamp());
        assert_eq!(d.reset, utc("2026-12-02T16:00:00Z"));
        assert_eq!(d.reset_label(), "00:00 (Asia/Shanghai)");
        let week = local_day(sh, utc("2026-12-01T20:00:00Z"), 6);
        assert_eq!(week.start, utc("2026-11-25T16:00:00Z").timestamp());
        assert_eq!(
            day_of(sh)(utc("2026-12-01T15:59:59Z").timestamp()),
            "2026-12-01"
        );
        assert_eq!(
            day_of(sh)(utc("2026-12-01T16:00:00Z").timestamp()),
            "2026-12-02"
        );
    }

    #[test]
    fn a_midnight_lost_to_daylight_saving_starts_the_day_at_the_gaps_end() {
        // Santiago: 2026-09-06 00:00 -04 jumps to 01:00 -03.
        let cl = crate::tz::parse_zone("America/Santiago").unwrap();
        let d = local_day(cl, utc("2026-09-05T12:00:00Z"), 0);
        assert_eq!(d.reset, utc("2026-09-06T04:00:00Z"));
        assert_eq!(d.reset_label(), "01:00 (America/Santiago)");
        // The day after is 23 hours long.
        let next = local_day(cl, utc("2026-09-06T12:00:00Z"), 0);
        assert_eq!(next.start, d.reset.timestamp());
        assert_eq!(next.reset, utc("2026-09-07T03:00:00Z"));
    }

    #[test]
    fn grouping_by_local_day_follows_the_zone_across_a_dst_change() {
        let ny = crate::tz::parse_zone("America/New_York").unwrap();
        let day = day_of(ny);
        // 2026-11-01: EDT (-4) → EST (-5) at 06:00Z.
        assert_eq!(day(utc("2026-11-01T03:59:00Z").timestamp()), "2026-10-31");
        assert_eq!(day(utc("2026-11-01T04:00:00Z").timestamp()), "2026-11-01");
        assert_eq!(day(utc("2026-11-02T04:30:00Z").timestamp()), "2026-11-01");
        assert_eq!(day(utc("2026-11-02T05:00:00Z").timestamp()), "2026-11-02");
        let recs: Vec<_> = [
            "2026-11-01T03:59:00Z",
            "2026-11-01T04:00:00Z",
            "2026-11-02T04:30:00Z",
            "2026-11-02T05:00:00Z",
        ]
        .iter()
        .map(|t| ethan_core::store::UsageRecord {
            created_at: utc(t).timestamp(),
            model: "m".into(),
            session_key: String::new(),
            channel: "web".into(),
            chat_id: "s".into(),
            job_id: None,
            input_tokens: 10,
            output_tokens: 1,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            estimated: false,
        })
        .collect();
        let rows = crate::store::usage::group(&recs, &UsageGrouping::Day(day));
        let got: Vec<(&str, u64)> = rows.iter().map(|r| (r.key.as_str(), r.calls)).collect();
        assert_eq!(
            got,
            [("2026-10-31", 1), ("2026-11-01", 2), ("2026-11-02", 1)]
        );
    }
}
