//! The usage ledger (`model_usage`, migration 8; `estimated`, migration 11): one row per model
//! call with the tokens the provider reported, or estimated when it reported none. Rows are kept for good. Reports are grouped in Rust, so a day can be the
//! configured zone's local date whatever its offset on that day.

use super::{Ctx, Db, StoreError};
pub use ethan_core::store::{UsageGrouping, UsageRecord, UsageRow};
use rusqlite::Connection;
use std::collections::HashMap;

/// The most tokens one call is recorded with: a count beyond it (a broken or hostile endpoint)
/// is clamped, so sums over any number of rows stay far from SQLite's integer overflow.
pub(crate) const MAX_TOKENS_PER_CALL: u64 = 1_000_000_000;

/// A stored count as SQLite's integer, clamped to [`MAX_TOKENS_PER_CALL`].
fn int(n: u64) -> i64 {
    n.min(MAX_TOKENS_PER_CALL) as i64
}

/// A stored count back (a negative one, written by hand, reads as 0).
fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// Record one model call on `conn` (alone, or in the caller's transaction).
pub(super) fn insert_usage(conn: &Connection, r: &UsageRecord) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO model_usage (created_at, model, session_key, channel, chat_id, job_id,
         input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, estimated)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )
    .and_then(|mut st| {
        st.execute(rusqlite::params![
            r.created_at,
            r.model,
            r.session_key,
            r.channel,
            r.chat_id,
            r.job_id,
            int(r.input_tokens),
            int(r.output_tokens),
            int(r.cache_read_tokens),
            int(r.cache_write_tokens),
            r.estimated,
        ])
    })
    .op("record usage")?;
    Ok(())
}

impl Db {
    /// Record one model call.
    pub fn record_usage(&self, r: &UsageRecord) -> Result<(), StoreError> {
        insert_usage(&self.conn(), r)
    }

    /// Input + output tokens since `since` (Unix seconds), of all calls or of one
    /// `(channel, chat_id)`.
    pub fn tokens_since(&self, since: i64, chat: Option<(&str, &str)>) -> Result<u64, StoreError> {
        let (channel, chat_id) = chat.unzip();
        let total: i64 = self
            .conn()
            .prepare_cached(
                "SELECT COALESCE(SUM(input_tokens + output_tokens), 0) FROM model_usage
                 WHERE created_at >= ?1 AND (?2 IS NULL OR (channel = ?2 AND chat_id = ?3))",
            )
            .and_then(|mut st| {
                st.query_row(rusqlite::params![since, channel, chat_id], |r| r.get(0))
            })
            .op("sum usage")?;
        Ok(count(total))
    }

    /// The calls since `since`, one record each, oldest first.
    pub fn usage_since(&self, since: i64) -> Result<Vec<UsageRecord>, StoreError> {
        let conn = self.conn();
        let mut st = conn
            .prepare_cached(
                "SELECT created_at, model, session_key, channel, chat_id, job_id, input_tokens,
                 output_tokens, cache_read_tokens, cache_write_tokens, estimated FROM model_usage
                 WHERE created_at >= ?1 ORDER BY created_at, id",
            )
            .op("read usage")?;
        let rows = st
            .query_map([since], |r| {
                Ok(UsageRecord {
                    created_at: r.get(0)?,
                    model: r.get(1)?,
                    session_key: r.get(2)?,
                    channel: r.get(3)?,
                    chat_id: r.get(4)?,
                    job_id: r.get(5)?,
                    input_tokens: count(r.get(6)?),
                    output_tokens: count(r.get(7)?),
                    cache_read_tokens: count(r.get(8)?),
                    cache_write_tokens: count(r.get(9)?),
                    estimated: r.get(10)?,
                })
            })
            .op("read usage")?;
        rows.collect::<Result<Vec<_>, _>>().op("read usage")
    }

    /// The calls since `since` grouped by `by` (see [`group`]).
    pub fn usage_report(
        &self,
        since: i64,
        by: &UsageGrouping,
    ) -> Result<Vec<UsageRow>, StoreError> {
        Ok(group(&self.usage_since(since)?, by))
    }
}

/// `records` grouped by `by`: days in ascending order; models and chats by total tokens, most
/// first, then by key.
pub fn group(records: &[UsageRecord], by: &UsageGrouping) -> Vec<UsageRow> {
    let mut groups: HashMap<String, UsageRow> = HashMap::new();
    for r in records {
        let key = match by {
            UsageGrouping::Day(day_of) => day_of(r.created_at),
            UsageGrouping::Model => r.model.clone(),
            UsageGrouping::Chat => format!("{}:{}", r.channel, r.chat_id),
        };
        groups
            .entry(key.clone())
            .or_insert_with(|| UsageRow {
                key,
                ..UsageRow::default()
            })
            .add_call(r);
    }
    let mut rows: Vec<UsageRow> = groups.into_values().collect();
    match by {
        UsageGrouping::Day(_) => ethan_core::sort::sort_by(&mut rows, |a, b| a.key.cmp(&b.key)),
        _ => ethan_core::sort::sort_by(&mut rows, |a, b| {
            b.total().cmp(&a.total()).then_with(|| a.key.cmp(&b.key))
        }),
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn call(at: i64, model: &str, chat: (&str, &str), input: u64, output: u64) -> UsageRecord {
        UsageRecord {
            created_at: at,
            model: model.into(),
            session_key: format!("{}:{}", chat.0, chat.1),
            channel: chat.0.into(),
            chat_id: chat.1.into(),
            job_id: None,
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: input / 2,
            cache_write_tokens: 1,
            estimated: false,
        }
    }

    #[test]
    fn sums_count_input_and_output_since_a_time_for_all_or_one_chat() {
        let db = Db::open_in_memory().unwrap();
        assert_eq!(db.tokens_since(0, None).unwrap(), 0);
        db.record_usage(&call(100, "a", ("telegram", "1"), 10, 5))
            .unwrap();
        db.record_usage(&call(200, "a", ("telegram", "2"), 20, 7))
            .unwrap();
        db.record_usage(&call(300, "b", ("lark", "1"), 40, 3))
            .unwrap();
        let mut job = call(300, "b", ("telegram", "1"), 1, 1);
        job.job_id = Some("j1".into());
        db.record_usage(&job).unwrap();
        assert_eq!(db.tokens_since(0, None).unwrap(), 15 + 27 + 43 + 2);
        assert_eq!(db.tokens_since(200, None).unwrap(), 27 + 43 + 2);
        assert_eq!(db.tokens_since(301, None).unwrap(), 0);
        assert_eq!(
            db.tokens_since(0, Some(("telegram", "1"))).unwrap(),
            15 + 2,
            "a job's calls count for its chat"
        );
        // The channel matters, not only the chat id.
        assert_eq!(db.tokens_since(0, Some(("lark", "1"))).unwrap(), 43);
        assert_eq!(db.tokens_since(0, Some(("lark", "9"))).unwrap(), 0);
        let back = db.usage_since(300).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[1], job);
    }

    #[test]
    fn an_absurd_count_is_clamped_so_sums_never_overflow() {
        let db = Db::open_in_memory().unwrap();
        for _ in 0..4 {
            db.record_usage(&call(100, "a", ("telegram", "1"), u64::MAX, u64::MAX))
                .unwrap();
        }
        assert_eq!(
            db.tokens_since(0, None).unwrap(),
            8 * MAX_TOKENS_PER_CALL,
            "the budget check still reads a sum"
        );
    }

    #[test]
    fn reports_group_by_model_and_by_chat_most_first() {
        let db = Db::open_in_memory().unwrap();
        db.record_usage(&call(100, "small", ("telegram", "1"), 10, 5))
            .unwrap();
        db.record_usage(&call(200, "big", ("telegram", "1"), 100, 50))
            .unwrap();
        db.record_usage(&call(300, "small", ("terminal", "x"), 20, 5))
            .unwrap();
        let by_model = db.usage_report(0, &UsageGrouping::Model).unwrap();
        assert_eq!(
            by_model,
            vec![
                UsageRow {
                    key: "big".into(),
                    calls: 1,
                    input_tokens: 100,
                    output_tokens: 50,
                    cache_read_tokens: 50,
                    cache_write_tokens: 1,
                    estimated_calls: 0,
                },
                UsageRow {
                    key: "small".into(),
                    calls: 2,
                    input_tokens: 30,
                    output_tokens: 10,
                    cache_read_tokens: 15,
                    cache_write_tokens: 2,
                    estimated_calls: 0,
                },
            ]
        );
        let by_chat = db.usage_report(0, &UsageGrouping::Chat).unwrap();
        let keys: Vec<(&str, u64, u64)> = by_chat
            .iter()
            .map(|r| (r.key.as_str(), r.calls, r.total()))
            .collect();
        assert_eq!(keys, [("telegram:1", 2, 165), ("terminal:x", 1, 25)]);
        assert_eq!(
            db.usage_report(150, &UsageGrouping::Model).unwrap().len(),
            2
        );
        assert!(db
            .usage_report(301, &UsageGrouping::Chat)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn days_are_named_by_the_callers_function_in_ascending_order() {
        // Days of a zone eight hours ahead of UTC: 16:00Z is already the next day there.
        let day_of: ethan_core::store::DayOf =
            Arc::new(|t| format!("day{}", (t + 8 * 3600).div_euclid(86_400)));
        let recs = [
            call(86_400 + 16 * 3600, "m", ("web", "s"), 1, 1), // day 2 locally
            call(86_400 + 15 * 3600, "m", ("web", "s"), 2, 2), // day 1
            call(3600, "m", ("web", "s"), 4, 4),               // day 0
            call(86_400 + 17 * 3600, "m", ("web", "s"), 8, 8), // day 2
        ];
        let rows = group(&recs, &UsageGrouping::Day(day_of));
        let got: Vec<(&str, u64, u64)> = rows
            .iter()
            .map(|r| (r.key.as_str(), r.calls, r.total()))
            .collect();
        assert_eq!(got, [("day0", 1, 8), ("day1", 1, 4), ("day2", 2, 18)]);
    }

    #[test]
    fn huge_counts_are_clamped_not_wrapped() {
        let db = Db::open_in_memory().unwrap();
        db.record_usage(&call(1, "m", ("web", "s"), u64::MAX, 0))
            .unwrap();
        assert_eq!(
            db.usage_since(0).unwrap()[0].input_tokens,
            MAX_TOKENS_PER_CALL
        );
    }
}
