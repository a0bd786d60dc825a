//! The end of a turn on PostgreSQL ([`ethan_core::store::SessionStore::end_turn`]): the turn's
//! messages, the model calls not yet in the ledger and the session's kv marks written by one
//! statement (data-modifying `WITH` parts run as one: all of it or nothing), so one round trip.

use super::errors::pg_error;
use super::messages::{Columns, INSERT};
use super::{text, PgStore, StoreError};
use crate::store::usage::MAX_TOKENS_PER_CALL;
use ethan_core::store::TurnEnd;
use tokio_postgres::types::ToSql;

/// [`INSERT`] of the messages (`$1`–`$8`), then the usage rows (`$9`–`$19`) and the kv pairs
/// (`$20`, `$21`), each from its arrays.
fn statement() -> String {
    format!(
        "WITH appended AS ({INSERT}),
         recorded AS (
           INSERT INTO model_usage (created_at, model, session_key, channel, chat_id, job_id,
             input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, estimated)
           SELECT * FROM unnest($9::bigint[], $10::text[], $11::text[], $12::text[],
             $13::text[], $14::text[], $15::bigint[], $16::bigint[], $17::bigint[],
             $18::bigint[], $19::bool[]))
         INSERT INTO kv (key, value) SELECT * FROM unnest($20::text[], $21::text[])
         ON CONFLICT (key) DO UPDATE SET value = excluded.value"
    )
}

/// A count as stored, clamped to [`MAX_TOKENS_PER_CALL`].
fn int(n: u64) -> i64 {
    n.min(MAX_TOKENS_PER_CALL) as i64
}

pub(super) async fn end_turn(store: &PgStore, end: &TurnEnd) -> Result<(), StoreError> {
    let op = "end turn";
    let messages = Columns::of(op, &end.messages)?;
    let u = &end.usage;
    let created: Vec<i64> = u.iter().map(|r| r.created_at).collect();
    let model: Vec<&str> = u.iter().map(|r| r.model.as_str()).collect();
    let session: Vec<&str> = u.iter().map(|r| r.session_key.as_str()).collect();
    let channel: Vec<&str> = u.iter().map(|r| r.channel.as_str()).collect();
    let chat: Vec<&str> = u.iter().map(|r| r.chat_id.as_str()).collect();
    let job: Vec<Option<&str>> = u.iter().map(|r| r.job_id.as_deref()).collect();
    let tokens = |f: fn(&ethan_core::store::UsageRecord) -> u64| -> Vec<i64> {
        u.iter().map(|r| int(f(r))).collect()
    };
    let input = tokens(|r| r.input_tokens);
    let output = tokens(|r| r.output_tokens);
    let cache_read = tokens(|r| r.cache_read_tokens);
    let cache_write = tokens(|r| r.cache_write_tokens);
    let estimated: Vec<bool> = u.iter().map(|r| r.estimated).collect();
    let keys: Vec<&str> = end.marks.iter().map(|(k, _)| k.as_str()).collect();
    let values: Vec<String> = end
        .marks
        .iter()
        .map(|(_, v)| text(v).into_owned())
        .collect();
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&end.session_id];
    params.extend(messages.params());
    params.extend([
        &created as &(dyn ToSql + Sync),
        &model,
        &session,
        &channel,
        &chat,
        &job,
        &input,
        &output,
        &cache_read,
        &cache_write,
        &estimated,
        &keys,
        &values,
    ]);
    let client = store.client(op).await?;
    let stmt = client
        .prepare_cached(&statement())
        .await
        .map_err(|e| pg_error(op, &e))?;
    client
        .execute(&stmt, &params)
        .await
        .map_err(|e| pg_error(op, &e))?;
    Ok(())
}
