//! One conformance suite for every store backend: the same checks, through the traits only
//! ([`DaemonStore`]), against the SQLite store (in memory) and — with the `postgres` feature —
//! a PostgreSQL store on a fresh database of the throwaway cluster ([`super::pg::cluster`]).
//! What a backend must keep: sessions stable until `/new`, the history window cut at a user
//! message with tool calls, `is_error` and opaque values intact, a turn's end written whole or
//! not at all, kv overwrite and delete, the audit log newest first with its session filter,
//! replay keys recorded once, jobs due by their next slot, one claim per slot (also when claimed
//! concurrently), owners and one-time claim codes, the usage ledger's sums, clamping and
//! reports, remembered facts (supersession, subjects, forgetting a chain) and history search,
//! and the inbound events' dedupe window, states, attempts and retention.
//!
//! Backdating a record (to test windows and retention) needs a statement of the backend's own:
//! [`Backdate`], implemented for each.

use super::inbound::{DEDUPE_WINDOW_SECS, MAX_ATTEMPTS};
use super::{now, DaemonStore, DaemonStoreRef, Store};
use async_trait::async_trait;
use ethan_channels::{ChannelKind, ChatKind, ChatRef, InboundEvent, Sender};
use ethan_core::message::{ChatMessage, Role, ToolCall};
use ethan_core::store::{
    AuditEntry, Delivery, HeldWindow, JobRecord, JobState, RunStatus, TurnEnd, UsageGrouping,
    UsageRecord, UsageRow,
};
use std::sync::Arc;

/// Moves a stored inbound event's `received_at` and `updated_at` back by `secs` seconds.
#[async_trait]
pub(crate) trait Backdate: Send + Sync {
    async fn backdate_inbound(&self, event_id: &str, secs: i64);
}

#[async_trait]
impl Backdate for Store {
    async fn backdate_inbound(&self, event_id: &str, secs: i64) {
        let id = event_id.to_owned();
        self.call("backdate", move |db| {
            db.conn()
                .execute(
                    "UPDATE inbound_events SET received_at = received_at - ?2,
                     updated_at = updated_at - ?2 WHERE event_id = ?1",
                    rusqlite::params![id, secs],
                )
                .map(|_| ())
                .map_err(|e| super::StoreError::Backend {
                    op: "backdate",
                    message: e.to_string(),
                })
        })
        .await
        .unwrap();
    }
}

/// A store under test and its backdating.
pub(crate) struct Subject {
    pub store: DaemonStoreRef,
    pub backdate: Arc<dyn Backdate>,
}

pub(crate) fn sqlite() -> Subject {
    let store = Store::open_in_memory().unwrap();
    Subject {
        store: store.daemon(),
        backdate: Arc::new(store),
    }
}

fn ev(id: &str) -> InboundEvent {
    InboundEvent {
        channel: ChannelKind::Telegram,
        event_id: id.into(),
        message_id: Some("1".into()),
        chat: ChatRef {
            id: "7".into(),
            kind: ChatKind::Direct,
            thread: None,
        },
        sender: Sender {
            id: "7".into(),
            display_name: "A".into(),
            is_bot: false,
        },
        text: "hi".into(),
        relayed: None,
        unfetched: None,
        addressed: true,
        reply_to: None,
        sent_at: 0,
        seq: 0,
        attachments: Vec::new(),
    }
}

fn call(id: &str) -> ChatMessage {
    ChatMessage {
        role: Role::Assistant,
        content: None,
        tool_calls: vec![ToolCall::new(id, "file_read", "{\"path\": \"a b\"}")],
        tool_call_id: None,
        opaque: None,
        is_error: false,
        images: Vec::new(),
        sent_at: None,
        derived: Default::default(),
    }
}

pub(crate) async fn sessions(s: &dyn DaemonStore) {
    let a = s.current_session("telegram:1").await.unwrap();
    assert_eq!(a, s.current_session("telegram:1").await.unwrap());
    let b = s.new_session("telegram:1").await.unwrap();
    assert_ne!(a, b);
    assert_eq!(b, s.current_session("telegram:1").await.unwrap());
    assert_ne!(b, s.current_session("telegram:2").await.unwrap());
    // A turn's start: the session (made on first use) and its keys, in the order asked.
    let start = |key: &'static str, prefixes: &'static [&'static str]| async move {
        let t = s.start_turn(key, prefixes, None, 10).await.unwrap();
        assert_eq!(t.delta, None, "no window held, no delta");
        (t.session_id, t.values)
    };
    let (t, values) = start("telegram:3", &["k1:", "k2:"]).await;
    assert_eq!(t, s.current_session("telegram:3").await.unwrap());
    assert_eq!(values, vec![None, None]);
    s.kv_set(&format!("k2:{t}"), "two").await.unwrap();
    let (again, values) = start("telegram:3", &["k1:", "k2:"]).await;
    assert_eq!(again, t);
    assert_eq!(values, vec![None, Some("two".to_string())]);
    let (_, values) = start("telegram:1", &["k2:"]).await;
    assert_eq!(values, vec![None], "another session's key is not read");
    // Listing by a literal key prefix: active sessions only, titled by their first question.
    let w = s.current_session("web:w1").await.unwrap();
    s.append_messages(&w, &[ChatMessage::user("what is 100%_?")])
        .await
        .unwrap();
    s.current_session("web_not").await.unwrap();
    let listed = s.list_sessions("web:", 10).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].key, "web:w1");
    assert_eq!(listed[0].title.as_deref(), Some("what is 100%_?"));
    assert!(listed[0].updated_at >= listed[0].created_at);
    s.new_session("web:w1").await.unwrap();
    let listed = s.list_sessions("web:", 10).await.unwrap();
    assert_eq!(listed[0].title, None, "the retired session is not listed");
}

pub(crate) async fn messages(s: &dyn DaemonStore) {
    let sid = s.current_session("t:1").await.unwrap();
    s.append_messages(
        &sid,
        &[
            ChatMessage::user("one"),
            call("c1"),
            ChatMessage::tool("c1", "result"),
            ChatMessage::assistant("answer one"),
            ChatMessage::user("two"),
            ChatMessage::assistant("answer two"),
        ],
    )
    .await
    .unwrap();
    let all = s.load_window(&sid, 100).await.unwrap();
    assert_eq!(all.len(), 6);
    assert_eq!(all[1], call("c1"));
    assert_eq!(all[2].tool_call_id.as_deref(), Some("c1"));
    // A window of 4 would start at the tool result: it is cut to the next user message.
    let w = s.load_window(&sid, 4).await.unwrap();
    assert_eq!(w.len(), 2);
    assert_eq!(w[0].content.as_deref(), Some("two"));
    assert!(s.load_window(&sid, 1).await.unwrap().is_empty());
    assert_eq!(s.load_window(&sid, usize::MAX).await.unwrap().len(), 6);
    // Loaded user messages carry when they were stored; the others carry no time.
    assert!(all[0].sent_at.is_some_and(|t| t > 1_700_000_000));
    assert!(all[1..4].iter().all(|m| m.sent_at.is_none()));

    // A user message keeps the time it was sent (its `created_at`), through both loads.
    let sid = s.current_session("t:3").await.unwrap();
    let mut timed = ChatMessage::user("timed");
    timed.sent_at = Some(1_700_000_042);
    s.append_messages(&sid, &[timed.clone(), ChatMessage::assistant("ok")])
        .await
        .unwrap();
    let back = s.load_window(&sid, 10).await.unwrap();
    assert_eq!(back[0], timed);
    assert_eq!(back[1].sent_at, None);
    let after = s.messages_after(&sid, 0, 10).await.unwrap();
    assert_eq!(after[0].1, timed);

    // A provider's opaque value and a failed tool result survive the store.
    let sid = s.current_session("t:2").await.unwrap();
    let mut thinking = call("c9");
    thinking.content = Some("let me look — 看看 🙂".into());
    thinking.opaque = Some(serde_json::json!({
        "anthropic": {"thinking": "…", "signature": "EqQBCkYIBxgCKkB+sig==", "n": 1.5, "z": [null, true]}
    }));
    s.append_messages(
        &sid,
        &[
            ChatMessage::user("q"),
            thinking.clone(),
            ChatMessage::tool_error("c9", "r"),
        ],
    )
    .await
    .unwrap();
    let back = s.load_window(&sid, 10).await.unwrap();
    assert_eq!(back[1], thinking);
    assert_eq!(back[2].opaque, None);
    assert!(back[2].is_error, "a failed tool result stays marked");
    assert!(!back[1].is_error);
    // Sessions do not see each other's history.
    assert_eq!(s.load_window("no-such-session", 10).await.unwrap(), vec![]);
}

pub(crate) async fn memory(s: &dyn DaemonStore) {
    use ethan_core::store::{MemoryScope, NewFact};
    let fact = |subject: &str, content: &str, replaces: Option<i64>| NewFact {
        scope: MemoryScope::Personal,
        subject: subject.into(),
        content: content.into(),
        source: "tool".into(),
        replaces,
    };
    let tea = s
        .save_fact(&fact("owner", "Likes tea.", None))
        .await
        .unwrap();
    let other = s
        .save_fact(&fact("telegram:9", "Likes cats.", None))
        .await
        .unwrap();
    // A replacement of another subject's fact changes nothing there.
    let stray = s
        .save_fact(&fact("owner", "Not a cat person.", Some(other)))
        .await
        .unwrap();
    assert_eq!(s.facts_of("telegram:9", false).await.unwrap().len(), 1);
    let coffee = s
        .save_fact(&fact("owner", "Likes coffee, not tea.", Some(tea)))
        .await
        .unwrap();
    let current = s.facts_of("owner", false).await.unwrap();
    let ids: Vec<i64> = current.iter().map(|f| f.id).collect();
    assert_eq!(
        ids,
        vec![coffee, stray],
        "newest first, the replaced one hidden"
    );
    let all = s.facts_of("owner", true).await.unwrap();
    let old = all.iter().find(|f| f.id == tea).unwrap();
    assert_eq!(old.superseded_by, Some(coffee));
    assert_eq!(old.scope, MemoryScope::Personal);
    // Confirming moves a fact to the front.
    s.confirm_facts(&[stray], now() + 100).await.unwrap();
    assert_eq!(s.facts_of("owner", false).await.unwrap()[0].id, stray);
    // Forgetting needs the right subject and takes the replaced versions with it.
    assert!(!s.forget_fact(coffee, Some("telegram:9")).await.unwrap());
    assert!(s.forget_fact(coffee, Some("owner")).await.unwrap());
    let left: Vec<i64> = s
        .facts_of("owner", true)
        .await
        .unwrap()
        .iter()
        .map(|f| f.id)
        .collect();
    assert_eq!(left, vec![stray]);
    assert!(!s.forget_fact(9_999_999, None).await.unwrap());
    assert_eq!(s.all_facts().await.unwrap().len(), 2);

    // The history after a point, and searching every session of a key.
    let first = s.current_session("t:mem").await.unwrap();
    s.append_messages(
        &first,
        &[
            ChatMessage::user("the code word is Zebra-17"),
            ChatMessage {
                content: Some("a working step quoting zebra-17".into()),
                ..call("c0")
            },
            ChatMessage::tool("c0", "ok"),
            call("c1"),
            ChatMessage::tool("c1", "tool says zebra-17 too"),
            ChatMessage::assistant("noted"),
        ],
    )
    .await
    .unwrap();
    let second = s.new_session("t:mem").await.unwrap();
    s.append_messages(
        &second,
        &[ChatMessage::user("q2"), ChatMessage::assistant("a2")],
    )
    .await
    .unwrap();
    // Without tool results, an assistant step that called tools is not searched either.
    let hits = s
        .search_history("t:mem", "ZEBRA-17", false, 10)
        .await
        .unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].role, Role::User);
    assert_eq!(hits[0].session_id, first);
    let with_tools = s.search_history("t:mem", "zebra", true, 10).await.unwrap();
    assert_eq!(with_tools.len(), 3);
    assert_eq!(with_tools[0].role, Role::Tool, "newest first");
    assert!(s
        .search_history("t:other", "zebra", true, 10)
        .await
        .unwrap()
        .is_empty());
    let after = s.messages_after(&first, 0, 100).await.unwrap();
    assert_eq!(after.len(), 6);
    let cut = s.messages_after(&first, after[0].0, 100).await.unwrap();
    assert!(cut.is_empty(), "no user message after the first: {cut:?}");
    assert_eq!(s.messages_after(&first, 0, 1).await.unwrap(), vec![]);
    assert!(after.windows(2).all(|w| w[0].0 < w[1].0));
}

pub(crate) async fn kv(s: &dyn DaemonStore) {
    assert_eq!(s.kv_get("a").await.unwrap(), None);
    s.kv_set("a", "1").await.unwrap();
    s.kv_set("a", "2").await.unwrap();
    assert_eq!(s.kv_get("a").await.unwrap().as_deref(), Some("2"));
    s.kv_delete("a").await.unwrap();
    s.kv_delete("a").await.unwrap();
    assert_eq!(s.kv_get("a").await.unwrap(), None);
    // Taking a key returns its value once.
    s.kv_set("t", "v").await.unwrap();
    assert_eq!(s.kv_take("t").await.unwrap().as_deref(), Some("v"));
    assert_eq!(s.kv_take("t").await.unwrap(), None);
    assert_eq!(s.kv_get("t").await.unwrap(), None);
    // Listing by prefix: literal (no wildcard, case kept), in key order, bounded.
    for (k, v) in [
        ("p.b", "2"),
        ("p.a", "1"),
        ("P.c", "3"),
        ("p%x", "4"),
        ("q", "5"),
    ] {
        s.kv_set(k, v).await.unwrap();
    }
    let listed = s.kv_list("p.", 10).await.unwrap();
    assert_eq!(
        listed,
        vec![
            ("p.a".to_string(), "1".to_string()),
            ("p.b".into(), "2".into())
        ]
    );
    assert_eq!(s.kv_list("p%", 10).await.unwrap().len(), 1);
    assert_eq!(s.kv_list("p.", 1).await.unwrap().len(), 1);
}

fn entry(session: &str, started_ms: i64, tool: &str) -> AuditEntry {
    AuditEntry {
        execution_id: "e".into(),
        trace_id: "t".into(),
        session_key: session.into(),
        user_id: "u".into(),
        channel: "terminal".into(),
        tool: tool.into(),
        args: "{\"command\":  \"ls\"}".into(),
        started_ms,
        ended_ms: started_ms + 1,
        ok: true,
        attempt: 1,
        error_kind: None,
        error: None,
        output_bytes: 3,
        spill_path: None,
        model: Some("m".into()),
    }
}

pub(crate) async fn audit(s: &dyn DaemonStore) {
    let now_ms = now() * 1000;
    let mut failed = entry("a", now_ms, "first");
    failed.ok = false;
    failed.attempt = 2;
    failed.error_kind = Some("timeout".into());
    failed.error = Some("took too long".into());
    failed.spill_path = Some("/tmp/x".into());
    failed.model = None;
    failed.output_bytes = u64::from(u32::MAX) + 7;
    s.insert_audit(&failed).await.unwrap();
    s.insert_audit(&entry("b", now_ms, "second")).await.unwrap();
    s.insert_audit(&entry("a", now_ms - 10 * 86_400_000, "third"))
        .await
        .unwrap();
    let all = s.recent_audit(10, None).await.unwrap();
    let tools: Vec<&str> = all.iter().map(|e| e.tool.as_str()).collect();
    assert_eq!(tools, ["third", "second", "first"], "newest first");
    assert_eq!(all[2], failed, "every field comes back");
    assert_eq!(s.recent_audit(10, Some("a")).await.unwrap().len(), 2);
    assert_eq!(s.recent_audit(1, None).await.unwrap()[0].tool, "third");
    assert!(s.recent_audit(10, Some("zzz")).await.unwrap().is_empty());
    assert_eq!(s.prune_audit(5).await.unwrap(), 1);
    assert_eq!(s.recent_audit(10, None).await.unwrap().len(), 2);

    assert!(!s.replay_key_recorded("k1").await.unwrap());
    assert!(s.record_replay_key("k1", "t", "shell").await.unwrap());
    assert!(!s.record_replay_key("k1", "t2", "shell").await.unwrap());
    assert!(s.replay_key_recorded("k1").await.unwrap());
    assert_eq!(s.retention_counts().await.unwrap().replay_keys, 1);
}

pub(crate) fn job(id: &str, next_run: Option<i64>) -> JobRecord {
    JobRecord {
        id: id.into(),
        title: "Morning news".into(),
        prompt: "summarise the news".into(),
        kind: "cron".into(),
        spec: "0 9 * * *".into(),
        timezone: Some("Europe/Berlin".into()),
        anchor: 1_700_000_000,
        end_at: None,
        allowed_tools: vec!["file_write".into()],
        model: None,
        channel: "telegram".into(),
        chat_id: "42".into(),
        chat_kind: "direct".into(),
        thread: None,
        creator: "telegram:42".into(),
        created_in: "telegram:42".into(),
        next_run,
        paused: false,
        state: JobState::Active,
        created_at: 1_700_000_000,
        updated_at: 1_700_000_000,
    }
}

pub(crate) async fn jobs(s: &dyn DaemonStore) {
    let mut j = job("j1", Some(100));
    j.model = Some("fast".into());
    j.thread = Some("th".into());
    j.end_at = Some(9_999);
    assert!(s.insert_job(&j).await.unwrap());
    assert!(!s.insert_job(&j).await.unwrap(), "ids are unique");
    assert_eq!(s.get_job("j1").await.unwrap().unwrap(), j);
    assert_eq!(s.get_job("nope").await.unwrap(), None);
    let mut j0 = job("j0", None);
    j0.created_at = 1;
    s.insert_job(&j0).await.unwrap();
    let ids: Vec<String> = s
        .list_jobs()
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(ids, ["j0", "j1"], "oldest first");
    assert!(s.due_jobs(99).await.unwrap().is_empty());
    assert_eq!(s.due_jobs(100).await.unwrap().len(), 1);
    assert_eq!(s.next_due_at().await.unwrap(), Some(100));
    assert!(s.set_job_paused("j1", true, None).await.unwrap());
    assert!(s.due_jobs(1000).await.unwrap().is_empty());
    assert_eq!(s.next_due_at().await.unwrap(), None);
    assert!(!s.set_job_paused("nope", true, None).await.unwrap());
    s.set_job_paused("j1", false, Some(500)).await.unwrap();
    assert_eq!(s.get_job("j1").await.unwrap().unwrap().next_run, Some(500));
    assert!(
        !s.advance_job("j1", Some(100), Some(600)).await.unwrap(),
        "stale"
    );
    assert!(s.advance_job("j1", Some(500), None).await.unwrap());
    let done = s.get_job("j1").await.unwrap().unwrap();
    assert_eq!(done.state, JobState::Done);
    // A done job's slot is None: advancing from None matches it.
    assert!(s.advance_job("j1", None, Some(700)).await.unwrap());
    assert_eq!(
        s.get_job("j1").await.unwrap().unwrap().state,
        JobState::Active
    );
    assert!(s.advance_job("j1", Some(700), None).await.unwrap());
    assert!(s.due_jobs(i64::MAX).await.unwrap().is_empty());
    assert!(s.remove_job("j1").await.unwrap());
    assert!(!s.remove_job("j1").await.unwrap());
}

pub(crate) async fn runs(s: &dyn DaemonStore) {
    s.insert_job(&job("j1", Some(100))).await.unwrap();
    let id = s
        .claim_run("j1", 100, "schedule", "a:1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        s.claim_run("j1", 100, "schedule", "b:2").await.unwrap(),
        None
    );
    assert!(s
        .record_missed_run("j1", 100, "b:2", "x")
        .await
        .unwrap()
        .is_none());
    let running = s.running_runs().await.unwrap();
    assert_eq!(running.len(), 1);
    assert_eq!(
        (
            running[0].status,
            running[0].delivery,
            running[0].finished_at
        ),
        (RunStatus::Running, Delivery::Pending, None)
    );
    assert_eq!(running[0].claimed_by, "a:1");
    s.finish_run(id, RunStatus::Ok, Some("digest"), None)
        .await
        .unwrap();
    s.record_delivery(id, Delivery::Delivered, 2, Some("1001"), None)
        .await
        .unwrap();
    let r = s.get_run(id).await.unwrap().unwrap();
    assert_eq!(r.status, RunStatus::Ok);
    assert_eq!(r.output.as_deref(), Some("digest"));
    assert!(r.finished_at.is_some());
    assert_eq!(r.delivery, Delivery::Delivered);
    assert_eq!(r.delivery_attempts, 2);
    assert_eq!(r.delivered_message_id.as_deref(), Some("1001"));
    assert!(s.running_runs().await.unwrap().is_empty());
    let missed = s
        .record_missed_run("j1", 200, "a:1", "down")
        .await
        .unwrap()
        .unwrap();
    let m = s.get_run(missed).await.unwrap().unwrap();
    assert_eq!(
        (m.status, m.delivery, m.error.as_deref()),
        (RunStatus::Missed, Delivery::Skipped, Some("down"))
    );
    assert!(m.finished_at.is_some());
    let runs = s.job_runs("j1", 10).await.unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0].status, RunStatus::Missed, "newest first");
    assert_eq!(s.job_runs("j1", 1).await.unwrap().len(), 1);
    assert_eq!(s.get_run(999_999).await.unwrap(), None);
    // A claim on a job that does not exist fails.
    assert!(s.claim_run("ghost", 1, "schedule", "a:1").await.is_err());
    s.remove_job("j1").await.unwrap();
    assert!(
        s.job_runs("j1", 10).await.unwrap().is_empty(),
        "history goes with the job"
    );
}

/// Many claims on one slot at once: exactly one wins.
pub(crate) async fn concurrent_claims(stores: &[DaemonStoreRef]) {
    stores[0].insert_job(&job("jc", Some(100))).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..16 {
        let s = stores[i % stores.len()].clone();
        tasks.push(tokio::spawn(async move {
            s.claim_run("jc", 100, "schedule", &format!("r:{i}")).await
        }));
    }
    let mut won = 0;
    for t in tasks {
        if t.await.unwrap().unwrap().is_some() {
            won += 1;
        }
    }
    assert_eq!(won, 1, "one claim per slot");
    assert_eq!(stores[0].job_runs("jc", 100).await.unwrap().len(), 1);
}

pub(crate) async fn owners(s: &dyn DaemonStore) {
    assert!(!s.has_stored_owner("telegram").await.unwrap());
    assert!(s.add_owner("telegram", "42", "claim").await.unwrap());
    assert!(!s.add_owner("telegram", "42", "claim").await.unwrap());
    assert!(s.add_owner("lark", "ou_1", "cli").await.unwrap());
    assert!(s.is_stored_owner("telegram", "42").await.unwrap());
    assert!(!s.is_stored_owner("lark", "42").await.unwrap());
    let owners = s.list_owners().await.unwrap();
    let mut who: Vec<(&str, &str, &str)> = owners
        .iter()
        .map(|(c, u, src, _)| (c.as_str(), u.as_str(), src.as_str()))
        .collect();
    who.sort();
    assert_eq!(who, [("lark", "ou_1", "cli"), ("telegram", "42", "claim")]);
    assert!((owners[0].3 - now()).abs() < 60);
    assert!(s.remove_owner("telegram", "42").await.unwrap());
    assert!(!s.remove_owner("telegram", "42").await.unwrap());
    assert!(!s.has_stored_owner("telegram").await.unwrap());

    s.put_claim_code("ABC", now() + 600).await.unwrap();
    assert!(s.take_claim_code("ABC").await.unwrap());
    assert!(!s.take_claim_code("ABC").await.unwrap(), "one time only");
    s.put_claim_code("OLD", now() - 1).await.unwrap();
    assert!(!s.take_claim_code("OLD").await.unwrap(), "expired");
    assert_eq!(s.kv_get("claim:OLD").await.unwrap(), None, "used up anyway");
}

fn usage(at: i64, model: &str, chat: (&str, &str), input: u64, output: u64) -> UsageRecord {
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

pub(crate) async fn usage_ledger(s: &dyn DaemonStore) {
    assert_eq!(s.tokens_since(0, None).await.unwrap(), 0);
    s.record_usage(&usage(100, "small", ("telegram", "1"), 10, 5))
        .await
        .unwrap();
    // Estimated tokens (a server that reported none) count like reported ones, and say so.
    let mut estimated = usage(200, "big", ("telegram", "1"), 100, 50);
    estimated.estimated = true;
    s.record_usage(&estimated).await.unwrap();
    s.record_usage(&usage(300, "small", ("lark", "1"), 20, 5))
        .await
        .unwrap();
    let mut job = usage(300, "small", ("telegram", "1"), 1, 1);
    job.job_id = Some("j1".into());
    s.record_usage(&job).await.unwrap();
    assert_eq!(s.tokens_since(0, None).await.unwrap(), 15 + 150 + 25 + 2);
    assert_eq!(s.tokens_since(200, None).await.unwrap(), 150 + 25 + 2);
    assert_eq!(s.tokens_since(301, None).await.unwrap(), 0);
    assert_eq!(
        s.tokens_since(0, Some(("telegram", "1"))).await.unwrap(),
        15 + 150 + 2
    );
    assert_eq!(s.tokens_since(0, Some(("lark", "1"))).await.unwrap(), 25);
    assert_eq!(s.tokens_since(0, Some(("lark", "9"))).await.unwrap(), 0);
    let by_model = s.usage_report(0, UsageGrouping::Model).await.unwrap();
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
                estimated_calls: 1,
            },
            UsageRow {
                key: "small".into(),
                calls: 3,
                input_tokens: 31,
                output_tokens: 11,
                cache_read_tokens: 15,
                cache_write_tokens: 3,
                estimated_calls: 0,
            },
        ]
    );
    let by_chat = s.usage_report(150, UsageGrouping::Chat).await.unwrap();
    let keys: Vec<(&str, u64, u64)> = by_chat
        .iter()
        .map(|r| (r.key.as_str(), r.calls, r.total()))
        .collect();
    assert_eq!(keys, [("telegram:1", 2, 152), ("lark:1", 1, 25)]);
    let day_of: ethan_core::store::DayOf = Arc::new(|t| format!("d{}", t / 150));
    let by_day = s.usage_report(0, UsageGrouping::Day(day_of)).await.unwrap();
    let days: Vec<(&str, u64)> = by_day.iter().map(|r| (r.key.as_str(), r.calls)).collect();
    assert_eq!(days, [("d0", 1), ("d1", 1), ("d2", 2)]);

    // An absurd count is clamped, so sums never overflow.
    for _ in 0..4 {
        s.record_usage(&usage(1_000, "a", ("web", "x"), u64::MAX, u64::MAX))
            .await
            .unwrap();
    }
    assert_eq!(
        s.tokens_since(1_000, None).await.unwrap(),
        8 * 1_000_000_000
    );
}

pub(crate) async fn inbound(subject: &Subject) {
    let s = &*subject.store;
    assert!(s.record_inbound(&ev("1")).await.unwrap());
    assert!(!s.record_inbound(&ev("1")).await.unwrap(), "a redelivery");
    assert!(s.record_inbound(&ev("2")).await.unwrap());
    assert_eq!(
        s.inbound_state("telegram", "1").await.unwrap().as_deref(),
        Some("received")
    );
    assert_eq!(s.inbound_state("telegram", "nope").await.unwrap(), None);
    s.set_inbound_state("telegram", "1", "done").await.unwrap();
    let left = s.unfinished_inbound().await.unwrap();
    assert_eq!(left, vec![ev("2")]);
    for _ in 0..MAX_ATTEMPTS {
        s.set_inbound_state("telegram", "2", "processing")
            .await
            .unwrap();
    }
    assert!(s.unfinished_inbound().await.unwrap().is_empty());
    assert_eq!(
        s.inbound_state("telegram", "2").await.unwrap().as_deref(),
        Some("failed")
    );

    // A reply being sent is not re-run but listed as unconfirmed.
    assert!(s.record_inbound(&ev("3")).await.unwrap());
    assert!(s.record_inbound(&ev("4")).await.unwrap());
    s.set_inbound_state("telegram", "3", "processing")
        .await
        .unwrap();
    s.set_inbound_sending("telegram", "3", "the answer")
        .await
        .unwrap();
    assert_eq!(s.unfinished_inbound().await.unwrap(), vec![ev("4")]);
    let pending = s.unconfirmed_replies().await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].event, ev("3"));
    assert_eq!(pending[0].reply, "the answer");
    assert!(pending[0].since > 0);
    s.set_inbound_state("telegram", "3", "unconfirmed")
        .await
        .unwrap();
    assert!(s.unconfirmed_replies().await.unwrap().is_empty());
    s.set_inbound_sending("telegram", "4", "second")
        .await
        .unwrap();
    s.set_inbound_state("telegram", "4", "done").await.unwrap();
    assert!(s.unconfirmed_replies().await.unwrap().is_empty());
    assert!(s.unfinished_inbound().await.unwrap().is_empty());
}

pub(crate) async fn inbound_dedupe_window(subject: &Subject) {
    let (s, back) = (&*subject.store, &*subject.backdate);
    assert!(s.record_inbound(&ev("5")).await.unwrap());
    s.set_inbound_state("telegram", "5", "done").await.unwrap();
    back.backdate_inbound("5", DEDUPE_WINDOW_SECS + 60).await;
    // The same message delivered again late is still a duplicate.
    assert!(!s.record_inbound(&ev("5")).await.unwrap());
    // The id was reused by another message: a new event, recorded afresh.
    let reused = InboundEvent {
        sent_at: 1_700_000_000,
        ..ev("5")
    };
    assert!(s.record_inbound(&reused).await.unwrap());
    assert_eq!(
        s.inbound_state("telegram", "5").await.unwrap().as_deref(),
        Some("received")
    );
    assert!(!s.record_inbound(&reused).await.unwrap());
    // An old record that is not finished still counts.
    back.backdate_inbound("5", DEDUPE_WINDOW_SECS + 60).await;
    assert!(!s.record_inbound(&ev("5")).await.unwrap());
}

pub(crate) async fn inbound_retention(subject: &Subject) {
    let (s, back) = (&*subject.store, &*subject.backdate);
    let day = 86_400;
    for id in ["old", "recent", "old-unfinished", "old-sending"] {
        assert!(s.record_inbound(&ev(id)).await.unwrap());
    }
    s.set_inbound_state("telegram", "old", "done")
        .await
        .unwrap();
    s.set_inbound_state("telegram", "recent", "done")
        .await
        .unwrap();
    s.set_inbound_state("telegram", "old-unfinished", "processing")
        .await
        .unwrap();
    s.set_inbound_sending("telegram", "old-sending", "r")
        .await
        .unwrap();
    back.backdate_inbound("old", 8 * day).await;
    back.backdate_inbound("recent", day).await;
    back.backdate_inbound("old-unfinished", 8 * day).await;
    back.backdate_inbound("old-sending", 8 * day).await;
    let t = now();
    s.kv_set("lark.seen:om_old", &(t - 8 * day).to_string())
        .await
        .unwrap();
    s.kv_set("lark.seen:om_new", &(t - day).to_string())
        .await
        .unwrap();
    s.kv_set("lark.seen:om_junk", "not a number").await.unwrap();
    s.kv_set("telegram.offset", "1").await.unwrap();

    let before = s.retention_counts().await.unwrap();
    assert_eq!((before.inbound_events, before.lark_seen), (4, 3));
    assert_eq!(s.prune_inbound(7).await.unwrap(), (1, 2));
    assert_eq!(s.inbound_state("telegram", "old").await.unwrap(), None);
    for (id, state) in [("old-unfinished", "processing"), ("old-sending", "sending")] {
        assert_eq!(
            s.inbound_state("telegram", id).await.unwrap().as_deref(),
            Some(state)
        );
    }
    assert!(s.kv_get("lark.seen:om_old").await.unwrap().is_none());
    assert!(s.kv_get("lark.seen:om_junk").await.unwrap().is_none());
    assert!(s.kv_get("lark.seen:om_new").await.unwrap().is_some());
    assert!(s.kv_get("telegram.offset").await.unwrap().is_some());
    // The redelivery of a recent event is still recognised.
    assert!(!s.record_inbound(&ev("recent")).await.unwrap());
    // A setting below the dedupe window keeps the window.
    assert_eq!(s.prune_inbound(0).await.unwrap(), (0, 0));
    assert!(!s.record_inbound(&ev("recent")).await.unwrap());
}

/// A turn's start with a window held: what followed it, uncut, and how many messages its
/// range holds now; nothing for another session's window.
pub(crate) async fn turn_window(s: &dyn DaemonStore) {
    let sid = s.current_session("t:w").await.unwrap();
    s.append_messages(
        &sid,
        &[ChatMessage::user("one"), ChatMessage::assistant("1")],
    )
    .await
    .unwrap();
    let held = s.messages_after(&sid, 0, 10).await.unwrap();
    let mark = HeldWindow {
        session_id: sid.clone(),
        first_id: held[0].0,
        last_id: held[1].0,
        len: 2,
    };
    let start = s.start_turn("t:w", &["k:"], Some(&mark), 10).await.unwrap();
    assert_eq!(start.session_id, sid);
    let delta = start.delta.expect("a delta for the held session");
    assert_eq!((delta.after.len(), delta.held_now), (0, 2));
    // A tool result first: a delta follows the held messages, so it is not cut.
    s.append_messages(
        &sid,
        &[
            ChatMessage::tool("c1", "late"),
            ChatMessage::user("two"),
            ChatMessage::assistant("2"),
        ],
    )
    .await
    .unwrap();
    let delta = s
        .start_turn("t:w", &[], Some(&mark), 10)
        .await
        .unwrap()
        .delta
        .unwrap();
    let texts: Vec<_> = delta.after.iter().map(|(_, m)| m.content.clone()).collect();
    assert_eq!(
        texts,
        [Some("late".into()), Some("two".into()), Some("2".into())]
    );
    assert!(delta.after.windows(2).all(|w| w[0].0 < w[1].0));
    assert!(
        delta.after[1].1.sent_at.is_some(),
        "a user message carries its time"
    );
    assert_eq!(delta.held_now, 2);
    // The newest `limit` only.
    let delta = s
        .start_turn("t:w", &[], Some(&mark), 2)
        .await
        .unwrap()
        .delta
        .unwrap();
    assert_eq!(delta.after.len(), 2);
    assert_eq!(delta.after[1].1.content.as_deref(), Some("2"));
    // Another session (`/new`): no delta.
    s.new_session("t:w").await.unwrap();
    let start = s.start_turn("t:w", &[], Some(&mark), 10).await.unwrap();
    assert_ne!(start.session_id, sid);
    assert_eq!(start.delta, None);
}

/// A turn's end in one step: its messages in order, its usage rows and its marks; all or
/// nothing (an unknown session writes none of it).
pub(crate) async fn turn_end(s: &dyn DaemonStore) {
    let sid = s.current_session("t:e").await.unwrap();
    let call = UsageRecord {
        created_at: now(),
        model: "m".into(),
        session_key: "t:e".into(),
        channel: "telegram".into(),
        chat_id: "9".into(),
        job_id: None,
        input_tokens: 10,
        output_tokens: 5,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        estimated: false,
    };
    let mark = format!("taint:{sid}");
    let end = TurnEnd {
        session_id: sid.clone(),
        messages: vec![ChatMessage::user("q"), ChatMessage::assistant("a")],
        usage: vec![call.clone(), call.clone()],
        marks: vec![(mark.clone(), "file_read".into())],
    };
    s.end_turn(&end).await.unwrap();
    let texts = |w: Vec<ChatMessage>| w.into_iter().map(|m| m.content).collect::<Vec<_>>();
    let window = texts(s.load_window(&sid, 10).await.unwrap());
    assert_eq!(window, [Some("q".into()), Some("a".into())]);
    assert_eq!(
        s.tokens_since(0, Some(("telegram", "9"))).await.unwrap(),
        30
    );
    assert_eq!(s.kv_get(&mark).await.unwrap().as_deref(), Some("file_read"));
    // Marks alone, overwritten.
    let marks = TurnEnd {
        session_id: sid.clone(),
        marks: vec![(mark.clone(), "shell".into())],
        ..TurnEnd::default()
    };
    s.end_turn(&marks).await.unwrap();
    assert_eq!(s.kv_get(&mark).await.unwrap().as_deref(), Some("shell"));
    // No such session: nothing of it is written (an error, or, from a store that queues the
    // write, an answer at once and the failure logged).
    let orphan = TurnEnd {
        session_id: "no-such-session".into(),
        marks: vec![("k:orphan".into(), "v".into())],
        ..end
    };
    let _ = s.end_turn(&orphan).await;
    assert_eq!(s.kv_get("k:orphan").await.unwrap(), None);
    assert_eq!(
        s.tokens_since(0, Some(("telegram", "9"))).await.unwrap(),
        30
    );
}

/// The suite's tests for one backend: `$open` is an async expression giving a [`Subject`].
macro_rules! suite {
    ($backend:ident, $open:expr) => {
        mod $backend {
            #[tokio::test]
            async fn sessions() {
                super::sessions(&*$open.store).await
            }
            #[tokio::test]
            async fn turn_window() {
                super::turn_window(&*$open.store).await
            }
            #[tokio::test]
            async fn turn_end() {
                super::turn_end(&*$open.store).await
            }
            #[tokio::test]
            async fn messages() {
                super::messages(&*$open.store).await
            }
            #[tokio::test]
            async fn kv() {
                super::kv(&*$open.store).await
            }
            #[tokio::test]
            async fn audit_and_replay_keys() {
                super::audit(&*$open.store).await
            }
            #[tokio::test]
            async fn jobs() {
                super::jobs(&*$open.store).await
            }
            #[tokio::test]
            async fn runs() {
                super::runs(&*$open.store).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_slot_claimed_concurrently_is_claimed_once() {
                super::concurrent_claims(&[$open.store]).await
            }
            #[tokio::test]
            async fn owners_and_claim_codes() {
                super::owners(&*$open.store).await
            }
            #[tokio::test]
            async fn memory_and_history_search() {
                super::memory(&*$open.store).await
            }
            #[tokio::test]
            async fn usage_ledger() {
                super::usage_ledger(&*$open.store).await
            }
            #[tokio::test]
            async fn inbound_dedupe_states_and_attempts() {
                super::inbound(&$open).await
            }
            #[tokio::test]
            async fn inbound_dedupe_window() {
                super::inbound_dedupe_window(&$open).await
            }
            #[tokio::test]
            async fn inbound_retention() {
                super::inbound_retention(&$open).await
            }
        }
    };
}

suite!(sqlite_store, super::sqlite());

#[cfg(feature = "postgres")]
suite!(postgres_store, crate::store::pg::tests::subject().await);
