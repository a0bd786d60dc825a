//! Fault injection on the daemon's own storage, against the real daemon: the database locked by
//! another process, the database read-only, and a file-size limit that makes the spill file
//! fail. Each ends with a clear message in the log or on the terminal, nothing lost, and the
//! daemon serving other sessions (or refusing to start, for a database it cannot write).

use crate::support::daemon::{run_cli_limited, wait_for_log, ChildLimits};
use crate::support::{Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

const OWNER: i64 = 218485655;
const OTHER: i64 = 5550123;
/// Generous: the poller backs off after a failed update, and CI machines are busy.
const WAIT: Duration = Duration::from_secs(45);
/// The daemon's SQLite busy timeout (src/store/mod.rs).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

fn write_config(home: &TestHome, tg: &FakeTelegram, model: &ScriptedModel) {
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: test-model\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    allow_from: [{OTHER}]\n\
         owners: [\"telegram:{OWNER}\"]\n",
        model.base_url(),
        tg.token(),
        tg.base_url()
    ));
}

fn db_path(home: &TestHome) -> std::path::PathBuf {
    home.path().join("ethan.db")
}

fn last_tool_text(req: &Value) -> String {
    req["messages"]
        .as_array()
        .and_then(|m| m.iter().rfind(|m| m["role"] == "tool"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_string()
}

fn count_containing(texts: &[String], needle: &str) -> usize {
    texts.iter().filter(|t| t.contains(needle)).count()
}

// ----- the database locked by another process ------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn locked_database_loses_no_update_and_answers_once_after_release() {
    let home = TestHome::new();
    if crate::support::store::skip_unless_sqlite(
        &home,
        "its subject is SQLite's write lock held by another process",
    ) {
        return;
    }
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(crate::support::model::echo_user(4)).await;
    write_config(&home, &tg, &model);
    let mut daemon = Daemon::start(&home);
    // Polling runs (start-up writes are done).
    tg.wait_for_getupdates(2, WAIT).await;

    // Another process takes the write lock and keeps it longer than the daemon waits.
    let mut locker = rusqlite::Connection::open(db_path(&home)).expect("open ethan.db");
    locker.busy_timeout(Duration::from_secs(10)).unwrap();
    let tx = locker
        .transaction_with_behavior(rusqlite::TransactionBehavior::Exclusive)
        .expect("BEGIN EXCLUSIVE");
    let locked_at = Instant::now();
    let first = tg.push_text(OWNER, OWNER, "sent while the database is locked");
    let second = tg.push_text(OTHER, OTHER, "another session, also during the lock");

    wait_for_log(&home, "database is locked", WAIT).await;
    // Hold on past another full busy timeout: the daemon must retry, not spin or give up.
    let hold = BUSY_TIMEOUT + Duration::from_secs(3);
    tokio::time::sleep(hold.saturating_sub(locked_at.elapsed())).await;

    assert!(
        tg.sent_messages().is_empty(),
        "answered without recording: {}",
        tg.describe_calls()
    );
    assert!(model.requests().is_empty(), "{}", model.describe());
    // Not acknowledged: no poll so far confirmed the first update.
    let offsets = tg.getupdates_offsets();
    assert!(
        offsets.iter().all(|o| o.unwrap_or(0) <= first),
        "the update was confirmed before it was recorded: {offsets:?}"
    );
    // Polls during the lock stay bounded (a back-off, not a spin).
    let polls_during_lock = tg.getupdates_count();
    assert!(
        polls_during_lock < 20,
        "{polls_during_lock} getUpdates calls"
    );
    let log = home.log();
    let error = log
        .lines()
        .find(|l| l.contains("ERROR") && l.contains("database is locked"))
        .unwrap_or_else(|| panic!("no error line naming the locked database:\n{log}"));
    assert!(
        error.contains(&format!("telegram update {first}")) && error.contains("write lock"),
        "{error}"
    );

    tx.rollback().expect("release the lock");
    drop(locker);

    let sent = tg.wait_for_sent(2, WAIT).await;
    let mut chats: Vec<i64> = sent.iter().filter_map(|m| m["chat_id"].as_i64()).collect();
    chats.sort();
    assert_eq!(chats, vec![OTHER, OWNER], "{}", tg.describe_calls());
    // Give a duplicate time to show up.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let texts = tg.sent_texts();
    assert_eq!(
        count_containing(&texts, "answer to: sent while the database is locked"),
        1,
        "{texts:?}"
    );
    assert_eq!(
        count_containing(&texts, "answer to: another session, also during the lock"),
        1,
        "{texts:?}"
    );
    assert_eq!(texts.len(), 2, "{}", tg.describe_calls());
    assert_eq!(model.requests().len(), 2, "{}", model.describe());
    // Both updates are confirmed now.
    tg.wait_for_getupdates(tg.getupdates_count() + 1, WAIT)
        .await;
    assert!(
        tg.getupdates_offsets()
            .last()
            .copied()
            .flatten()
            .is_some_and(|o| o > second),
        "{:?}",
        tg.getupdates_offsets()
    );
    assert!(daemon.is_running());
    home.assert_no_panic();
    daemon.stop();
}

/// Another process makes the database refuse writes of the Telegram offset, and only those
/// (a trigger in the real file), after the update itself was recorded.
const REFUSE_OFFSET: &str = "
    CREATE TRIGGER refuse_offset_insert BEFORE INSERT ON kv WHEN NEW.key = 'telegram.offset'
    BEGIN SELECT RAISE(ABORT, 'offset writes refused by the test'); END;
    CREATE TRIGGER refuse_offset_update BEFORE UPDATE ON kv WHEN NEW.key = 'telegram.offset'
    BEGIN SELECT RAISE(ABORT, 'offset writes refused by the test'); END;";

#[tokio::test(flavor = "multi_thread")]
async fn failed_offset_write_does_not_stop_polling() {
    let home = TestHome::new();
    if crate::support::store::skip_unless_sqlite(
        &home,
        "it makes SQLite refuse one write with a trigger in the file",
    ) {
        return;
    }
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(crate::support::model::echo_user(4)).await;
    write_config(&home, &tg, &model);
    let mut daemon = Daemon::start(&home);
    tg.wait_for_getupdates(1, WAIT).await;
    let conn = rusqlite::Connection::open(db_path(&home)).expect("open ethan.db");
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    conn.execute_batch(REFUSE_OFFSET).unwrap();

    let first = tg.push_text(OWNER, OWNER, "the offset of this cannot be stored");
    wait_for_log(&home, "could not store the telegram offset", WAIT).await;
    tg.wait_for_sent(1, WAIT).await;
    // Polling goes on (from the offset in memory): the next session is served.
    tg.push_text(OTHER, OTHER, "still polling?");
    let sent = tg.wait_for_sent(2, WAIT).await;
    assert_eq!(sent[1]["text"], "answer to: still polling?");
    assert!(
        tg.getupdates_offsets()
            .iter()
            .any(|o| o.is_some_and(|o| o > first)),
        "{:?}",
        tg.getupdates_offsets()
    );

    // Writes work again: the offset is stored with the next update.
    conn.execute_batch("DROP TRIGGER refuse_offset_insert; DROP TRIGGER refuse_offset_update;")
        .unwrap();
    let third = tg.push_text(OWNER, OWNER, "and now?");
    tg.wait_for_sent(3, WAIT).await;
    let mut stored = None;
    crate::support::wait_until("the stored offset", WAIT, || {
        stored = conn
            .query_row(
                "SELECT value FROM kv WHERE key = 'telegram.offset'",
                [],
                |r| r.get::<_, String>(0),
            )
            .ok();
        stored.as_deref() == Some(&(third + 1).to_string())
    })
    .await;

    tokio::time::sleep(Duration::from_millis(1500)).await;
    let texts = tg.sent_texts();
    assert_eq!(texts.len(), 3, "{}", tg.describe_calls());
    assert_eq!(
        count_containing(&texts, "answer to: the offset of this cannot be stored"),
        1
    );
    let log = home.log();
    assert!(!log.contains("telegram channel stopped"), "{log}");
    assert!(daemon.is_running());
    home.assert_no_panic();
    daemon.stop();
}

const LARK_OWNER: &str = "ou_84aad35d084aa403a838cf73ee18467";
const LARK_OTHER: &str = "ou_0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f";

/// Lark delivers at least once: an event without a `200` ACK (an error code, no ACK in time,
/// or a connection lost before the ACK) comes again. Pushes `event` until an ACK with code 200
/// arrives for one of its pushes; returns how many pushes it took.
async fn deliver_like_lark(fake: &crate::support::lark::FakeLark, event: &Value) -> usize {
    let deadline = Instant::now() + WAIT;
    let mut pushes = 0;
    loop {
        let connection = fake.connections();
        let seq = fake.push_event(event);
        pushes += 1;
        let retry_at = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(ack) = fake.acks().into_iter().find(|a| a.seq_id == seq) {
                if ack.code == 200 {
                    return pushes;
                }
                break;
            }
            if Instant::now() >= retry_at || fake.connections() != connection {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no 200 ACK after {pushes} deliveries\n{}",
                fake.describe()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        fake.wait_connections(1, WAIT).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn lark_message_during_a_locked_database_is_not_lost() {
    let home = TestHome::new();
    if crate::support::store::skip_unless_sqlite(
        &home,
        "its subject is SQLite's write lock held by another process",
    ) {
        return;
    }
    let fake = crate::support::lark::FakeLark::start().await;
    let model = ScriptedModel::start(crate::support::model::echo_user(6)).await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: test-model\n\
         channels:\n{}\
         owners: [\"lark:{LARK_OWNER}\"]\n",
        model.base_url(),
        fake.channel_yaml(&format!("    allow_from: [\"{LARK_OTHER}\"]\n")),
    ));
    // As on a machine with more cores than this one may have (more runtime threads).
    let mut daemon = Daemon::start_with_env(&home, &[("TOKIO_WORKER_THREADS", "8")]);
    fake.wait_connections(1, WAIT).await;

    let mut locker = rusqlite::Connection::open(db_path(&home)).expect("open ethan.db");
    locker.busy_timeout(Duration::from_secs(10)).unwrap();
    let tx = locker
        .transaction_with_behavior(rusqlite::TransactionBehavior::Exclusive)
        .expect("BEGIN EXCLUSIVE");
    let locked_at = Instant::now();
    let event = crate::support::lark::p2p_text(LARK_OWNER, "sent to lark while locked");
    let message_id = crate::support::lark::message_id(&event);
    let release = async {
        wait_for_log(&home, "database is locked", WAIT).await;
        // Longer than two busy timeouts in a row.
        let hold = BUSY_TIMEOUT * 2 + Duration::from_secs(2);
        tokio::time::sleep(hold.saturating_sub(locked_at.elapsed())).await;
        assert!(fake.messages().is_empty(), "{}", fake.describe());
        tx.rollback().expect("release the lock");
    };
    // Delivered (and redelivered, as Lark does) while the lock is held and after.
    let (pushes, ()) = tokio::join!(deliver_like_lark(&fake, &event), release);
    drop(locker);
    let sent = fake.wait_for_messages(1, WAIT).await;
    assert_eq!(sent[0].reply_to.as_deref(), Some(message_id.as_str()));

    // Another session is served.
    let other = crate::support::lark::p2p_text(LARK_OTHER, "another lark session");
    deliver_like_lark(&fake, &other).await;
    let sent = fake.wait_for_messages(2, WAIT).await;
    assert_eq!(
        sent[1].reply_to.as_deref(),
        Some(crate::support::lark::message_id(&other).as_str())
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let replies = fake
        .messages()
        .iter()
        .filter(|m| m.reply_to.as_deref() == Some(message_id.as_str()))
        .count();
    assert_eq!(replies, 1, "{pushes} deliveries\n{}", fake.describe());
    assert_eq!(fake.messages().len(), 2, "{}", fake.describe());
    let log = home.log();
    let error = log
        .lines()
        .find(|l| l.contains("ERROR") && l.contains("database is locked"))
        .unwrap_or_else(|| panic!("no error line naming the locked database:\n{log}"));
    assert!(
        error.contains(&format!("could not record lark message {message_id}")),
        "{error}"
    );
    assert!(daemon.is_running());
    home.assert_no_panic();
    daemon.stop();
}

// ----- the database read-only -----------------------------------------------------------------

/// Makes `ethan.db` read-only for the daemon: mode 0444, and when the test runs as root (who may
/// write anyway) the daemon runs as `nobody` (uid/gid 65534). Returns the limits to start it
/// with.
fn make_database_read_only(home: &TestHome) -> ChildLimits {
    let db = db_path(home);
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        return ChildLimits::default();
    }
    // `nobody` may read the config and write the home directory: only the database is
    // read-only.
    std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::set_permissions(home.config_path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    ChildLimits {
        user: Some((65534, 65534)),
        ..ChildLimits::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn read_only_database_refuses_to_start_with_one_clear_line() {
    let home = TestHome::new();
    if crate::support::store::skip_unless_sqlite(&home, "its subject is a read-only SQLite file") {
        return;
    }
    let model = ScriptedModel::start(vec![]).await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: test-model\n",
        model.base_url()
    ));
    // A database from an earlier run.
    let out = crate::support::run_cli(&home, &["owner", "list"], None);
    assert!(out.status.success(), "{out:?}");
    let db = db_path(&home);
    assert!(db.exists());
    for side in ["ethan.db-wal", "ethan.db-shm"] {
        let _ = std::fs::remove_file(home.path().join(side));
    }
    let before = std::fs::read(&db).unwrap();
    let limits = make_database_read_only(&home);
    let shown = db.display().to_string();

    // `ethan run` refuses at once, exit ≠ 0, one line naming the file and the cause.
    let out = run_cli_limited(&home, &["run"], None, &[], limits);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "ethan run started: {stderr}");
    assert!(out.status.code().is_some(), "killed: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("read-only")).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    let line = lines[0];
    assert!(
        line.starts_with("ethan: ") && line.contains(&shown),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");

    // `ethan doctor` says the same, and fails.
    let out = run_cli_limited(&home, &["doctor"], None, &[], limits);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!out.status.success(), "{stdout}");
    let db_line = stdout
        .lines()
        .find(|l| l.contains("database"))
        .unwrap_or_default();
    assert!(
        db_line.starts_with("FAIL") && db_line.contains("read-only") && db_line.contains(&shown),
        "{stdout}"
    );

    // Nothing was written to it.
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

// ----- a file-size limit hits the spill file --------------------------------------------------

/// The approve/deny callback data of the newest approval keyboard sent.
fn approval_buttons(tg: &FakeTelegram) -> Vec<String> {
    tg.sent_messages()
        .iter()
        .rev()
        .find_map(|m| m["reply_markup"]["inline_keyboard"][0].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|b| b["callback_data"].as_str().map(str::to_string))
        .collect()
}

/// `RLIMIT_FSIZE` of the daemon: above what SQLite and the log need in this test, below the
/// full output of the command.
const FILE_SIZE_LIMIT: u64 = 1024 * 1024;

#[tokio::test(flavor = "multi_thread")]
async fn spill_file_over_the_size_limit_is_reported_and_the_daemon_keeps_serving() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    // ~3 MB on each stream; the shell tool keeps 1 MiB of each, so the full output (~2 MiB)
    // cannot be written under the limit.
    let command =
        "head -c 3000000 /dev/zero | tr '\\0' x; head -c 3000000 /dev/zero | tr '\\0' y >&2";
    let model = ScriptedModel::start(vec![
        Step::tool_call("c1", "shell", &json!({ "command": command }).to_string()),
        Step::text("the big command ran"),
        Step::text("next answer"),
    ])
    .await;
    write_config(&home, &tg, &model);
    // The cut copy is this test's subject; a summary would be another model request.
    let config = std::fs::read_to_string(home.config_path()).unwrap();
    home.write_config(&format!("{config}tools:\n  summarise_over_chars: 0\n"));
    let tmp = home.path().join("tmpdir");
    std::fs::create_dir_all(&tmp).unwrap();
    let limits = ChildLimits {
        file_size: Some(FILE_SIZE_LIMIT),
        ..ChildLimits::default()
    };
    let mut daemon = Daemon::start_limited(&home, &[("TMPDIR", tmp.to_str().unwrap())], limits);

    tg.push_text(OWNER, OWNER, "print a lot");
    // The command may need the owner's approval (ChannelGuard); press Approve when asked.
    let mut approved = false;
    let mut texts = Vec::new();
    crate::support::wait_until("the answer after the big command", WAIT, || {
        texts = tg.sent_texts();
        if !approved && count_containing(&texts, "Approval needed") > 0 {
            if let Some(approve) = approval_buttons(&tg).first() {
                tg.push_update(FakeTelegram::callback_update(
                    tg.next_update_id(),
                    OWNER,
                    OWNER,
                    approve,
                ));
                approved = true;
            }
        }
        count_containing(&texts, "the big command ran") > 0
    })
    .await;
    assert_eq!(
        count_containing(&texts, "the big command ran"),
        1,
        "{texts:?}"
    );

    // The model got the usual cut output, told that the full output could not be saved and why.
    let requests = model.requests();
    assert!(requests.len() >= 2, "{}", model.describe());
    let tool = last_tool_text(&requests[1]);
    assert!(tool.contains("output truncated"), "{tool:.300}");
    assert!(tool.chars().count() <= 8200, "{}", tool.chars().count());
    assert!(
        tool.contains("the full output could not be saved") && tool.contains("File too large"),
        "{}",
        &tool[tool.len().saturating_sub(300)..]
    );
    assert!(!tool.contains("full output saved to"));
    // No partial spill file passes for the full output.
    let spilled: Vec<_> = std::fs::read_dir(home.path().join("spill"))
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(spilled.is_empty(), "{spilled:?}");

    // The audit row is there, without a spill path.
    let row = crate::support::store::row(
        &home,
        "SELECT ok, output_bytes, spill_path FROM audit WHERE tool = 'shell'",
        &[],
    )
    .expect("one audit row for the shell call");
    let ok = row[0].as_deref() == Some("1");
    let output_bytes: i64 = row[1].as_deref().and_then(|v| v.parse().ok()).unwrap_or(0);
    let spill_path = row[2].clone();
    assert!(ok);
    assert!(output_bytes > FILE_SIZE_LIMIT as i64, "{output_bytes}");
    assert_eq!(spill_path, None);
    assert!(
        home.log().contains("cannot save the full output"),
        "no warning in the log"
    );

    // The daemon was not killed by SIGXFSZ and answers the next message.
    assert!(daemon.is_running(), "{:?}", daemon.try_status());
    tg.push_text(OWNER, OWNER, "still there?");
    crate::support::wait_until("the next answer", WAIT, || {
        tg.sent_texts().iter().any(|t| t.contains("next answer"))
    })
    .await;
    model.assert_protocol_ok();
    assert!(daemon.is_running());
    home.assert_no_panic();
    daemon.stop();
}
