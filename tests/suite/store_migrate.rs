//! `ethan store migrate --to postgres://…` run as the binary: a SQLite store with a row in every
//! table is copied into a fresh database of the throwaway PostgreSQL cluster, read back through
//! the PostgreSQL store, and a second copy into the now non-empty database is refused.

use crate::support::{run_cli, TestHome};
use ethan::store::pg::{cluster, PgStore};
use ethan::store::prelude::*;
use ethan::store::Store;
use ethan_channels::{ChannelKind, ChatKind, ChatRef, InboundEvent, Sender};
use ethan_core::message::{ChatMessage, Role, ToolCall};
use ethan_core::store::{AuditEntry, Delivery, JobRecord, JobState, RunStatus, UsageRecord};

fn event() -> InboundEvent {
    InboundEvent {
        channel: ChannelKind::Telegram,
        event_id: "900".into(),
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
        sent_at: 1_700_000_123,
        seq: 0,
        attachments: Vec::new(),
    }
}

fn job() -> JobRecord {
    JobRecord {
        id: "j1".into(),
        title: "News".into(),
        prompt: "summarise".into(),
        kind: "cron".into(),
        spec: "0 9 * * *".into(),
        timezone: Some("Europe/Berlin".into()),
        anchor: 1_700_000_000,
        end_at: None,
        allowed_tools: vec!["file_write".into()],
        model: Some("fast".into()),
        channel: "telegram".into(),
        chat_id: "42".into(),
        chat_kind: "direct".into(),
        thread: None,
        creator: "telegram:42".into(),
        created_in: "telegram:42".into(),
        next_run: Some(2_000_000_000),
        paused: true,
        state: JobState::Active,
        created_at: 1_700_000_000,
        updated_at: 1_700_000_001,
    }
}

fn audit() -> AuditEntry {
    AuditEntry {
        execution_id: "e1".into(),
        trace_id: "t1".into(),
        session_key: "telegram:7".into(),
        user_id: "7".into(),
        channel: "telegram".into(),
        tool: "shell".into(),
        args: "{\"command\":  \"ls\"}".into(),
        started_ms: 1_700_000_000_000,
        ended_ms: 1_700_000_000_500,
        ok: false,
        attempt: 2,
        error_kind: Some("timeout".into()),
        error: Some("slow".into()),
        output_bytes: 12,
        spill_path: None,
        model: Some("m".into()),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn store_migrate_copies_every_table_once_into_an_empty_database() {
    let home = TestHome::new();
    home.write_config("model:\n  name: m\n");
    let url = cluster::fresh_database()
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    let mut assistant = ChatMessage::assistant("let me look");
    assistant.tool_calls = vec![ToolCall::new("c1", "file_read", "{\"path\": \"a\"}")];
    assistant.opaque = Some(serde_json::json!({"anthropic": {"signature": "sig=="}}));
    // A user message keeps when it was sent (its `created_at`), copied as it is.
    let mut question = ChatMessage::user("question");
    question.sent_at = Some(1_700_000_000);
    let history = vec![
        question,
        assistant,
        ChatMessage::tool_error("c1", "no such file"),
        ChatMessage::assistant("answer"),
    ];
    let (session, run_id) = {
        let sqlite = Store::open(&home.path().join("ethan.db")).unwrap();
        sqlite.current_session("telegram:1").await.unwrap();
        let session = sqlite.new_session("telegram:1").await.unwrap();
        sqlite.append_messages(&session, &history).await.unwrap();
        sqlite.add_owner("telegram", "42", "claim").await.unwrap();
        sqlite.put_claim_code("CODE", 4_000_000_000).await.unwrap();
        sqlite.insert_job(&job()).await.unwrap();
        let run_id = sqlite
            .claim_run("j1", 100, "schedule", "host:1")
            .await
            .unwrap()
            .unwrap();
        sqlite
            .finish_run(run_id, RunStatus::Ok, Some("digest"), None)
            .await
            .unwrap();
        sqlite.insert_audit(&audit()).await.unwrap();
        sqlite.record_replay_key("rk", "t1", "shell").await.unwrap();
        sqlite.kv_set("telegram.offset", "77").await.unwrap();
        sqlite
            .record_usage(&UsageRecord {
                created_at: 1_700_000_000,
                model: "m".into(),
                session_key: "telegram:1".into(),
                channel: "telegram".into(),
                chat_id: "1".into(),
                job_id: None,
                input_tokens: 30,
                output_tokens: 12,
                cache_read_tokens: 0,
                cache_write_tokens: 0,
                estimated: true,
            })
            .await
            .unwrap();
        sqlite.record_inbound(&event()).await.unwrap();
        sqlite
            .set_inbound_sending("telegram", "900", "the reply")
            .await
            .unwrap();
        (session, run_id)
    };

    let args = ["store", "migrate", "--to", url.as_str()];
    let out = {
        let (home, args) = (&home, args);
        tokio::task::block_in_place(|| run_cli(home, &args, None))
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "sessions",
        "messages",
        "jobs",
        "job_runs",
        "inbound_events",
        "audit",
        "replay_keys",
        "owners",
        "model_usage",
        "memories",
    ] {
        assert!(stdout.contains(line), "{line} missing in: {stdout}");
    }
    assert!(
        stdout
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["sessions", "2"]),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["messages", "4"]),
        "{stdout}"
    );

    let pg = PgStore::connect(&url).await.unwrap();
    assert_eq!(pg.current_session("telegram:1").await.unwrap(), session);
    assert_eq!(pg.load_window(&session, 10).await.unwrap(), history);
    assert_eq!(
        pg.load_window(&session, 10).await.unwrap()[1].role,
        Role::Assistant
    );
    assert!(pg.is_stored_owner("telegram", "42").await.unwrap());
    assert!(pg.take_claim_code("CODE").await.unwrap());
    assert_eq!(pg.get_job("j1").await.unwrap().unwrap(), job());
    let run = pg.get_run(run_id).await.unwrap().unwrap();
    assert_eq!(
        (run.status, run.delivery, run.output.as_deref()),
        (RunStatus::Ok, Delivery::Pending, Some("digest"))
    );
    assert_eq!(pg.recent_audit(10, None).await.unwrap(), vec![audit()]);
    assert!(pg.replay_key_recorded("rk").await.unwrap());
    assert_eq!(
        pg.kv_get("telegram.offset").await.unwrap().as_deref(),
        Some("77")
    );
    assert_eq!(pg.tokens_since(0, None).await.unwrap(), 42);
    let rows = pg
        .usage_report(0, ethan_core::store::UsageGrouping::Model)
        .await
        .unwrap();
    assert_eq!(rows[0].estimated_calls, 1, "the estimated mark is copied");
    let pending = pg.unconfirmed_replies().await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(
        (&pending[0].event, pending[0].reply.as_str()),
        (&event(), "the reply")
    );
    // The same event is still a duplicate, and new rows get ids past the copied ones.
    assert!(!pg.record_inbound(&event()).await.unwrap());
    let next = pg
        .claim_run("j1", 200, "schedule", "host:2")
        .await
        .unwrap()
        .unwrap();
    assert!(next > run_id);
    pg.append_messages(&session, &[ChatMessage::user("more")])
        .await
        .unwrap();

    // The target is no longer empty: a second copy is refused and changes nothing.
    let again = tokio::task::block_in_place(|| run_cli(&home, &args, None));
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(!again.status.success());
    assert!(stderr.contains("is not empty"), "{stderr}");
    assert_eq!(pg.load_window(&session, 10).await.unwrap().len(), 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn store_migrate_without_a_sqlite_store_says_so() {
    let home = TestHome::new();
    home.write_config("model:\n  name: m\nstore:\n  url: \"\"\n");
    // Neither --to nor store.url: it asks for the database.
    let out = tokio::task::block_in_place(|| run_cli(&home, &["store", "migrate"], None));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("name the PostgreSQL database"), "{stderr}");
    let out = tokio::task::block_in_place(|| {
        run_cli(
            &home,
            &["store", "migrate", "--to", "postgres://u@127.0.0.1:1/db"],
            None,
        )
    });
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no SQLite store to copy"), "{stderr}");

    // While a daemon runs for this home (its record names a live process: this test's own),
    // the copy is refused.
    std::fs::write(
        home.path().join("daemon.json"),
        format!(
            r#"{{"pid":{},"started_at":0,"version":"0","gateway":null}}"#,
            std::process::id()
        ),
    )
    .unwrap();
    let out = tokio::task::block_in_place(|| {
        run_cli(
            &home,
            &["store", "migrate", "--to", "postgres://u@127.0.0.1:1/db"],
            None,
        )
    });
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("stop it first"), "{stderr}");
}
