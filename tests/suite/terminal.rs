//! The terminal as a person meets it, driven through a pseudo-terminal (`rexpect`): the
//! interactive `ethan init`, and an `ethan chat` session — the status line while the scripted
//! model takes its time, no log line in the conversation, Ctrl-C during an answer and at the
//! prompt, the line each tool call leaves, and Ctrl-C at an approval stopping the turn.

use crate::support::daemon::{child_env, ethan_bin};
use crate::support::{FakeTelegram, ScriptedModel, Step, TestHome};
use rexpect::session::{spawn_command, PtySession};
use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::Duration;

/// `ethan <args>` on a pseudo-terminal, with the tests' scrubbed environment.
fn spawn(home: &TestHome, args: &[&str]) -> PtySession {
    let mut cmd = Command::new(ethan_bin());
    cmd.args(args).env_clear().envs(child_env(
        std::env::vars_os(),
        home.path(),
        None,
        &[("TERM", "xterm")],
    ));
    spawn_command(cmd, Some(30_000)).expect("spawn ethan on a pty")
}

#[tokio::test(flavor = "multi_thread")]
async fn interactive_init_asks_tests_and_writes() {
    let home = TestHome::new();
    let model = ScriptedModel::start(vec![]).await;
    let tg = FakeTelegram::start().await;
    let (url, token, api) = (model.base_url(), tg.token().to_string(), tg.base_url());
    let home = tokio::task::spawn_blocking(move || {
        // Flags and questions mix: the Bot API URL (not asked) points at the fake.
        let mut p = spawn(&home, &["init", "--telegram-api-url", &api]);
        p.exp_string("Model endpoint").unwrap();
        p.send_line(&url).unwrap();
        p.exp_string("API key").unwrap();
        p.send_line("sk-typed-secret").unwrap();
        let shown = p.exp_string("Model name").unwrap();
        assert!(
            !shown.contains("sk-typed-secret"),
            "the key was echoed: {shown}"
        );
        p.send_line("").unwrap();
        p.exp_string("ok:").unwrap();
        p.exp_string("Telegram bot token").unwrap();
        p.send_line(&token).unwrap();
        p.exp_string("ok: getMe").unwrap();
        p.exp_string("Lark/Feishu App ID").unwrap();
        p.send_line("").unwrap();
        p.exp_string("Owner").unwrap();
        p.send_line("bob").unwrap();
        p.exp_string("must look like").unwrap();
        p.exp_string("Owner").unwrap();
        p.send_line("telegram:7").unwrap();
        p.exp_string("Wrote").unwrap();
        p.exp_string("ethan doctor").unwrap();
        p.exp_eof().unwrap();
        home
    })
    .await
    .unwrap();
    assert!(model.models_calls() >= 1);
    let path = home.config_path();
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let written = std::fs::read_to_string(&path).unwrap();
    assert!(written.contains("\"sk-typed-secret\""), "{written}");
    assert!(
        written.contains(&format!("\"{}\"", crate::support::model::MODEL_ID)),
        "the model the server lists, offered as the default: {written}"
    );
    assert!(written.contains("\"telegram:7\""), "{written}");
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_shows_progress_keeps_logs_out_and_handles_ctrl_c() {
    let home = TestHome::new();
    let model = ScriptedModel::start(vec![
        Step::delay(Duration::from_millis(2500), Step::text("the slow answer")),
        Step::delay(Duration::from_secs(40), Step::text("never shown")),
    ])
    .await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-pty\n  name: test-model\n",
        model.base_url()
    ));
    let home = tokio::task::spawn_blocking(move || {
        // Debug logging on: every line of it must go to the log file, none to the chat.
        let mut p = spawn(&home, &["--log-level", "debug", "chat"]);
        p.exp_string("you> ").unwrap();
        p.send_line("hello").unwrap();
        let before = p.exp_string("thinking").unwrap();
        let during = p.exp_string("the slow answer").unwrap();
        let after = p.exp_string("you> ").unwrap();
        for part in [&before, &during, &after] {
            for level in ["DEBUG", " INFO ", " WARN ", "ERROR"] {
                assert!(!part.contains(level), "a log line in the chat: {part}");
            }
        }

        // Ctrl-C at the prompt says how to quit, and does not quit.
        p.send_control('c').unwrap();
        p.exp_string("press Ctrl-C again or Ctrl-D to quit")
            .unwrap();

        // Ctrl-C during an answer stops the answer, and the session goes on.
        p.send_line("and now?").unwrap();
        p.exp_string("thinking").unwrap();
        p.send_control('c').unwrap();
        p.exp_string("(stopped)").unwrap();
        p.exp_string("you> ").unwrap();

        // Two in a row at the prompt quit.
        p.send_control('c').unwrap();
        p.exp_string("press Ctrl-C again").unwrap();
        p.send_control('c').unwrap();
        p.exp_eof().unwrap();
        home
    })
    .await
    .unwrap();
    let logs: Vec<_> = std::fs::read_dir(home.path().join("logs"))
        .expect("a logs folder")
        .flatten()
        .collect();
    assert_eq!(logs.len(), 1, "one daily file");
    let log = std::fs::read_to_string(logs[0].path()).unwrap();
    assert!(
        log.contains("DEBUG"),
        "the debug lines went to the file: {log}"
    );
    assert!(!log.contains("sk-pty"), "secrets stay out of the log");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_call_leaves_its_line_and_ctrl_c_at_an_approval_stops_the_turn() {
    let home = TestHome::new();
    let workspace = home.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("notes.txt"), "three words here").unwrap();
    let marker = workspace.join("stopped-marker");
    let model = ScriptedModel::start(vec![
        Step::tool_call("c1", "file_read", r#"{"path": "notes.txt"}"#),
        Step::text("The notes hold three words."),
        Step::tool_call(
            "c2",
            "file_write",
            r#"{"path": "stopped-marker", "content": "x"}"#,
        ),
        Step::text("never shown: the turn was stopped"),
    ])
    .await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-pty\n  name: test-model\n",
        model.base_url()
    ));
    // A temp directory of its own: the workspace is not under the system's, where writes
    // need no approval.
    let tmp = home.path().join("tmpdir");
    std::fs::create_dir_all(&tmp).unwrap();
    let tmp = tmp.display().to_string();
    let (home, during) = tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new(ethan_bin());
        cmd.arg("chat").env_clear().envs(child_env(
            std::env::vars_os(),
            home.path(),
            None,
            &[("TERM", "xterm"), ("TMPDIR", &tmp)],
        ));
        let mut p = spawn_command(cmd, Some(30_000)).expect("spawn ethan on a pty");
        p.exp_string("you> ").unwrap();
        p.send_line("what do my notes say?").unwrap();
        p.exp_string(&as_read("✓ file_read notes.txt · ")).unwrap();
        p.exp_string("three words").unwrap();
        p.exp_string("you> ").unwrap();

        // Ctrl-C at the approval: the turn ends, the session goes on.
        p.send_line("leave a marker").unwrap();
        p.exp_string("Allow?").unwrap();
        p.send_control('c').unwrap();
        let during = p.exp_string("(stopped)").unwrap();
        p.exp_string("you> ").unwrap();
        p.send_line("/exit").unwrap();
        p.exp_eof().unwrap();
        (home, during)
    })
    .await
    .unwrap();
    assert!(during.contains(&as_read("✗ file_write")), "{during}");
    assert!(!marker.exists(), "the write was not approved");
    assert_eq!(
        model.requests().len(),
        3,
        "no model call after the stop: {}",
        model.describe()
    );
    drop(home);
}

/// `text` as `rexpect` reads it from the terminal: each byte of its UTF-8 a character.
fn as_read(text: &str) -> String {
    text.bytes().map(char::from).collect()
}
