//! The store traits of [`ethan_core::store`] for the SQLite [`Store`]: each method copies its
//! arguments, runs the statement of the same name on the connection thread ([`Store::call`])
//! and awaits the answer. Also the async forms of the daemon-only statements (inbound events),
//! and [`KvState`]: any store's kv table as the channels' [`ethan_channels::StateStore`].

use super::backend::{BackendInfo, InboundStore, ReplicaStore, SessionSummary, StoreAdmin};
use super::inbound::{RetentionCounts, UnconfirmedReply};
use super::{Store, StoreError};
use async_trait::async_trait;
use ethan_channels::InboundEvent;
use ethan_core::message::ChatMessage;
use ethan_core::store::{
    AuditEntry, AuditStore, Delivery, HeldWindow, HistoryHit, JobRecord, JobStore, KvStore,
    MemoryFact, MemoryStore, MessageStore, NewFact, OwnerStore, RunRecord, RunStatus, SessionStore,
    TurnEnd, TurnStart, UsageGrouping, UsageRecord, UsageRow, UsageStore,
};

fn owned(s: Option<&str>) -> Option<String> {
    s.map(str::to_owned)
}

#[async_trait]
impl SessionStore for Store {
    async fn current_session(&self, key: &str) -> Result<String, StoreError> {
        let key = key.to_owned();
        self.call("find session", move |db| db.current_session(&key))
            .await
    }
    async fn new_session(&self, key: &str) -> Result<String, StoreError> {
        let key = key.to_owned();
        self.call("retire session", move |db| db.new_session(&key))
            .await
    }
    async fn start_turn(
        &self,
        key: &str,
        kv_prefixes: &[&str],
        held: Option<&HeldWindow>,
        limit: usize,
    ) -> Result<TurnStart, StoreError> {
        let key = key.to_owned();
        let prefixes: Vec<String> = kv_prefixes.iter().map(|p| (*p).to_owned()).collect();
        let held = held.cloned();
        // One trip to the connection thread and one transaction: the session, its keys, what
        // followed the window.
        self.call("start turn", move |db| {
            db.in_transaction("start turn", |db| {
                start_turn(db, &key, &prefixes, held, limit)
            })
        })
        .await
    }
    async fn end_turn(&self, end: &TurnEnd) -> Result<(), StoreError> {
        // Queued, not awaited: the reply that follows waits for nothing but its own mark, which
        // the connection thread writes after this (in order, so a later turn reads it all).
        let end = end.clone();
        self.post("end turn", move |db| {
            if let Err(e) = db.end_turn(&end) {
                tracing::error!("cannot store a turn of session {}: {e}", end.session_id);
            }
            Ok(())
        });
        Ok(())
    }
}

#[async_trait]
impl MessageStore for Store {
    async fn append_messages(
        &self,
        session_id: &str,
        msgs: &[ChatMessage],
    ) -> Result<(), StoreError> {
        let (id, msgs) = (session_id.to_owned(), msgs.to_vec());
        self.call("append messages", move |db| db.append_messages(&id, &msgs))
            .await
    }
    async fn load_window(
        &self,
        session_id: &str,
        limit: usize,
    ) -> Result<Vec<ChatMessage>, StoreError> {
        let id = session_id.to_owned();
        self.call("load messages", move |db| db.load_window(&id, limit))
            .await
    }
}

#[async_trait]
impl KvStore for Store {
    async fn kv_get(&self, key: &str) -> Result<Option<String>, StoreError> {
        let key = key.to_owned();
        self.call("kv get", move |db| db.kv_get(&key)).await
    }
    async fn kv_set(&self, key: &str, value: &str) -> Result<(), StoreError> {
        let (key, value) = (key.to_owned(), value.to_owned());
        self.call("kv set", move |db| db.kv_set(&key, &value)).await
    }
    async fn kv_delete(&self, key: &str) -> Result<(), StoreError> {
        let key = key.to_owned();
        self.call("kv delete", move |db| db.kv_delete(&key)).await
    }
    async fn kv_take(&self, key: &str) -> Result<Option<String>, StoreError> {
        let key = key.to_owned();
        self.call("kv take", move |db| db.kv_take(&key)).await
    }
    async fn kv_list(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let prefix = prefix.to_owned();
        self.call("kv list", move |db| db.kv_list(&prefix, limit))
            .await
    }
}

#[async_trait]
impl AuditStore for Store {
    async fn insert_audit(&self, entry: &AuditEntry) -> Result<(), StoreError> {
        // Queued, not awaited: the row is written before any later call of this store (one
        // thread takes them in order), and the call's result need not wait for the disk.
        let entry = entry.clone();
        self.post("insert audit", move |db| db.insert_audit(&entry));
        Ok(())
    }
    async fn recent_audit(
        &self,
        n: usize,
        session: Option<&str>,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        let session = owned(session);
        self.call("read audit", move |db| {
            db.recent_audit(n, session.as_deref())
        })
        .await
    }
    async fn replay_key_recorded(&self, key: &str) -> Result<bool, StoreError> {
        let key = key.to_owned();
        self.call("replay key", move |db| db.replay_key_recorded(&key))
            .await
    }
    async fn record_replay_key(
        &self,
        key: &str,
        trace_id: &str,
        tool: &str,
    ) -> Result<bool, StoreError> {
        let (key, trace, tool) = (key.to_owned(), trace_id.to_owned(), tool.to_owned());
        self.call("replay key", move |db| {
            db.record_replay_key(&key, &trace, &tool)
        })
        .await
    }
}

#[async_trait]
impl JobStore for Store {
    async fn insert_job(&self, job: &JobRecord) -> Result<bool, StoreError> {
        let job = job.clone();
        self.call("insert job", move |db| db.insert_job(&job)).await
    }
    async fn get_job(&self, id: &str) -> Result<Option<JobRecord>, StoreError> {
        let id = id.to_owned();
        self.call("get job", move |db| db.get_job(&id)).await
    }
    async fn list_jobs(&self) -> Result<Vec<JobRecord>, StoreError> {
        self.call("list jobs", |db| db.list_jobs()).await
    }
    async fn due_jobs(&self, now: i64) -> Result<Vec<JobRecord>, StoreError> {
        self.call("due jobs", move |db| db.due_jobs(now)).await
    }
    async fn next_due_at(&self) -> Result<Option<i64>, StoreError> {
        self.call("next due", |db| db.next_due_at()).await
    }
    async fn remove_job(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.call("remove job", move |db| db.remove_job(&id)).await
    }
    async fn set_job_paused(
        &self,
        id: &str,
        paused: bool,
        next_run: Option<i64>,
    ) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.call("pause job", move |db| {
            db.set_job_paused(&id, paused, next_run)
        })
        .await
    }
    async fn advance_job(
        &self,
        id: &str,
        expected: Option<i64>,
        next: Option<i64>,
    ) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.call("advance job", move |db| db.advance_job(&id, expected, next))
            .await
    }
    async fn claim_run(
        &self,
        job_id: &str,
        scheduled_for: i64,
        trigger: &str,
        claimed_by: &str,
    ) -> Result<Option<i64>, StoreError> {
        let (job, trigger, by) = (job_id.to_owned(), trigger.to_owned(), claimed_by.to_owned());
        self.call("claim run", move |db| {
            db.claim_run(&job, scheduled_for, &trigger, &by)
        })
        .await
    }
    async fn record_missed_run(
        &self,
        job_id: &str,
        scheduled_for: i64,
        claimed_by: &str,
        note: &str,
    ) -> Result<Option<i64>, StoreError> {
        let (job, by, note) = (job_id.to_owned(), claimed_by.to_owned(), note.to_owned());
        self.call("record missed run", move |db| {
            db.record_missed_run(&job, scheduled_for, &by, &note)
        })
        .await
    }
    async fn finish_run(
        &self,
        run_id: i64,
        status: RunStatus,
        output: Option<&str>,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        let (output, error) = (owned(output), owned(error));
        self.call("finish run", move |db| {
            db.finish_run(run_id, status, output.as_deref(), error.as_deref())
        })
        .await
    }
    async fn record_delivery(
        &self,
        run_id: i64,
        delivery: Delivery,
        attempts: u32,
        message_id: Option<&str>,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        let (message_id, error) = (owned(message_id), owned(error));
        self.call("record delivery", move |db| {
            db.record_delivery(
                run_id,
                delivery,
                attempts,
                message_id.as_deref(),
                error.as_deref(),
            )
        })
        .await
    }
    async fn get_run(&self, run_id: i64) -> Result<Option<RunRecord>, StoreError> {
        self.call("get run", move |db| db.get_run(run_id)).await
    }
    async fn job_runs(&self, job_id: &str, limit: usize) -> Result<Vec<RunRecord>, StoreError> {
        let job = job_id.to_owned();
        self.call("job runs", move |db| db.job_runs(&job, limit))
            .await
    }
    async fn running_runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        self.call("running runs", |db| db.running_runs()).await
    }
    async fn undelivered_runs(&self, since: i64) -> Result<Vec<RunRecord>, StoreError> {
        self.call("undelivered runs", move |db| db.undelivered_runs(since))
            .await
    }
}

#[async_trait]
impl OwnerStore for Store {
    async fn add_owner(
        &self,
        channel: &str,
        user_id: &str,
        source: &str,
    ) -> Result<bool, StoreError> {
        let (c, u, s) = (channel.to_owned(), user_id.to_owned(), source.to_owned());
        self.call("add owner", move |db| db.add_owner(&c, &u, &s))
            .await
    }
    async fn remove_owner(&self, channel: &str, user_id: &str) -> Result<bool, StoreError> {
        let (c, u) = (channel.to_owned(), user_id.to_owned());
        self.call("remove owner", move |db| db.remove_owner(&c, &u))
            .await
    }
    async fn list_owners(&self) -> Result<Vec<(String, String, String, i64)>, StoreError> {
        self.call("list owners", |db| db.list_owners()).await
    }
    async fn is_stored_owner(&self, channel: &str, user_id: &str) -> Result<bool, StoreError> {
        let (c, u) = (channel.to_owned(), user_id.to_owned());
        self.call("find owner", move |db| db.is_stored_owner(&c, &u))
            .await
    }
    async fn has_stored_owner(&self, channel: &str) -> Result<bool, StoreError> {
        let c = channel.to_owned();
        self.call("find owner", move |db| db.has_stored_owner(&c))
            .await
    }
    async fn put_claim_code(&self, code: &str, expires_at: i64) -> Result<(), StoreError> {
        let code = code.to_owned();
        self.call("claim code", move |db| db.put_claim_code(&code, expires_at))
            .await
    }
    async fn take_claim_code(&self, code: &str) -> Result<bool, StoreError> {
        let code = code.to_owned();
        self.call("claim code", move |db| db.take_claim_code(&code))
            .await
    }
}

#[async_trait]
impl MemoryStore for Store {
    async fn save_fact(&self, fact: &NewFact) -> Result<i64, StoreError> {
        let fact = fact.clone();
        self.call("save memory", move |db| db.save_fact(&fact))
            .await
    }
    async fn facts_of(
        &self,
        subject: &str,
        with_superseded: bool,
    ) -> Result<Vec<MemoryFact>, StoreError> {
        let subject = subject.to_owned();
        self.call("read memory", move |db| {
            db.facts_of(&subject, with_superseded)
        })
        .await
    }
    async fn all_facts(&self) -> Result<Vec<MemoryFact>, StoreError> {
        self.call("read memory", |db| db.all_facts()).await
    }
    async fn confirm_facts(&self, ids: &[i64], at: i64) -> Result<(), StoreError> {
        let ids = ids.to_vec();
        self.call("confirm memory", move |db| db.confirm_facts(&ids, at))
            .await
    }
    async fn forget_fact(&self, id: i64, subject: Option<&str>) -> Result<bool, StoreError> {
        let subject = owned(subject);
        self.call("forget memory", move |db| {
            db.forget_fact(id, subject.as_deref())
        })
        .await
    }
    async fn messages_after(
        &self,
        session_id: &str,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(i64, ChatMessage)>, StoreError> {
        let id = session_id.to_owned();
        self.call("load history", move |db| {
            db.messages_after(&id, after, limit)
        })
        .await
    }
    async fn search_history(
        &self,
        session_key: &str,
        needle: &str,
        with_tool_results: bool,
        limit: usize,
    ) -> Result<Vec<HistoryHit>, StoreError> {
        let (key, needle) = (session_key.to_owned(), needle.to_owned());
        self.call("search history", move |db| {
            db.search_history(&key, &needle, with_tool_results, limit)
        })
        .await
    }
}

#[async_trait]
impl UsageStore for Store {
    async fn record_usage(&self, record: &UsageRecord) -> Result<(), StoreError> {
        // Queued, not awaited, as the audit row: a budget read after it sees it.
        let record = record.clone();
        self.post("record usage", move |db| db.record_usage(&record));
        Ok(())
    }
    async fn tokens_since(
        &self,
        since: i64,
        chat: Option<(&str, &str)>,
    ) -> Result<u64, StoreError> {
        let chat = chat.map(|(c, id)| (c.to_owned(), id.to_owned()));
        self.call("sum usage", move |db| {
            db.tokens_since(
                since,
                chat.as_ref().map(|(c, id)| (c.as_str(), id.as_str())),
            )
        })
        .await
    }
    async fn usage_report(
        &self,
        since: i64,
        by: UsageGrouping,
    ) -> Result<Vec<UsageRow>, StoreError> {
        self.call("read usage", move |db| db.usage_report(since, &by))
            .await
    }
}

#[async_trait]
impl InboundStore for Store {
    /// See [`super::Db::record_inbound`].
    async fn record_inbound(&self, ev: &InboundEvent) -> Result<bool, StoreError> {
        let ev = ev.clone();
        self.call("record inbound", move |db| db.record_inbound(&ev))
            .await
    }
    /// See [`super::Db::set_inbound_state`].
    async fn set_inbound_state(
        &self,
        channel: &str,
        event_id: &str,
        state: &str,
    ) -> Result<(), StoreError> {
        let (c, e, s) = (channel.to_owned(), event_id.to_owned(), state.to_owned());
        self.call("inbound state", move |db| db.set_inbound_state(&c, &e, &s))
            .await
    }
    /// Queued on the connection thread ([`Store::post`]).
    async fn queue_inbound_state(&self, channel: &str, event_id: &str, state: &str) {
        let (c, e, s) = (channel.to_owned(), event_id.to_owned(), state.to_owned());
        self.post("inbound state", move |db| db.set_inbound_state(&c, &e, &s));
    }
    /// Queued on the connection thread ([`Store::post`]).
    async fn queue_kv_delete(&self, key: &str) {
        let key = key.to_owned();
        self.post("kv delete", move |db| db.kv_delete(&key));
    }
    /// Queued on the connection thread ([`Store::post`]), both writes in one transaction.
    async fn queue_reply_settled(
        &self,
        channel: &str,
        event_id: &str,
        state: &str,
        draft_key: &str,
    ) {
        let (c, e, s) = (channel.to_owned(), event_id.to_owned(), state.to_owned());
        let key = draft_key.to_owned();
        self.post("reply settled", move |db| {
            db.in_transaction("reply settled", |db| {
                db.set_inbound_state(&c, &e, &s)?;
                db.kv_delete(&key)
            })
        });
    }
    /// See [`super::Db::set_inbound_sending`].
    async fn set_inbound_sending(
        &self,
        channel: &str,
        event_id: &str,
        reply: &str,
    ) -> Result<(), StoreError> {
        let (c, e, r) = (channel.to_owned(), event_id.to_owned(), reply.to_owned());
        self.call("inbound sending", move |db| {
            db.set_inbound_sending(&c, &e, &r)
        })
        .await
    }
    /// See [`super::Db::unconfirmed_replies`].
    async fn unconfirmed_replies(&self) -> Result<Vec<UnconfirmedReply>, StoreError> {
        self.call("unconfirmed replies", |db| db.unconfirmed_replies())
            .await
    }
    /// See [`super::Db::inbound_state`].
    async fn inbound_state(
        &self,
        channel: &str,
        event_id: &str,
    ) -> Result<Option<String>, StoreError> {
        let (c, e) = (channel.to_owned(), event_id.to_owned());
        self.call("inbound state", move |db| db.inbound_state(&c, &e))
            .await
    }
    /// See [`super::Db::unfinished_inbound`].
    async fn unfinished_inbound(&self) -> Result<Vec<InboundEvent>, StoreError> {
        self.call("unfinished inbound", |db| db.unfinished_inbound())
            .await
    }
    /// See [`super::Db::retention_counts`].
    async fn retention_counts(&self) -> Result<RetentionCounts, StoreError> {
        self.call("count rows", |db| db.retention_counts()).await
    }
    /// See [`super::Db::prune_inbound`].
    async fn prune_inbound(&self, days: u32) -> Result<(usize, usize), StoreError> {
        self.call("prune inbound", move |db| db.prune_inbound(days))
            .await
    }
    /// See [`super::Db::prune_audit`].
    async fn prune_audit(&self, days: u32) -> Result<usize, StoreError> {
        self.call("prune audit", move |db| db.prune_audit(days))
            .await
    }
}

#[async_trait]
impl StoreAdmin for Store {
    async fn list_sessions(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<SessionSummary>, StoreError> {
        let prefix = prefix.to_owned();
        self.call("list sessions", move |db| db.list_sessions(&prefix, limit))
            .await
    }
    async fn backend_info(&self) -> Result<BackendInfo, StoreError> {
        let (path, schema_version) = self
            .call("schema version", |db| Ok((db.path(), db.schema_version()?)))
            .await?;
        Ok(BackendInfo {
            backend: "sqlite",
            location: path,
            server_version: format!("SQLite {}", rusqlite::version()),
            schema_version,
            binary_schema_version: super::migrations::latest_version(),
            connection: None,
        })
    }
    async fn schema_version(&self) -> Result<i64, StoreError> {
        self.call("schema version", |db| db.schema_version()).await
    }
    async fn checkpoint(&self) -> Result<(), StoreError> {
        self.call("checkpoint", |db| db.checkpoint()).await
    }
    async fn settle(&self) -> Result<(), StoreError> {
        // The calls run in order: this one's answer comes after every write queued before it.
        self.call("settle", |_| Ok(())).await
    }
}

/// One process per SQLite file: the defaults (nothing shared, every lease granted).
impl ReplicaStore for Store {}

/// A turn's start on the connection thread ([`SessionStore::start_turn`]): the session of
/// `key`, its kv values under `prefixes`, and what followed the `held` window.
fn start_turn(
    db: &super::Db,
    key: &str,
    prefixes: &[String],
    held: Option<HeldWindow>,
    limit: usize,
) -> Result<TurnStart, StoreError> {
    let session_id = db.current_session(key)?;
    let values = prefixes
        .iter()
        .map(|p| db.kv_get(&format!("{p}{session_id}")))
        .collect::<Result<Vec<_>, _>>()?;
    let delta = match held.filter(|h| h.session_id == session_id) {
        Some(h) => Some(db.window_delta(&h, limit)?),
        None => None,
    };
    Ok(TurnStart {
        session_id,
        values,
        delta,
    })
}
