//! The command line as a user meets it: `ethan chat -m`, `ethan doctor`, config errors.

use crate::support::{run_cli, ScriptedModel, Step, TestHome};
use serde_json::json;

fn model_config(home: &TestHome, model: &ScriptedModel) {
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-cli-test\n  name: test-model\n",
        model.base_url()
    ));
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_message_answers_on_stdout_with_a_tool() {
    let home = TestHome::new();
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "c1",
            "bash",
            &json!({"command": "echo from-the-shell"}).to_string(),
        ),
        Step::echo_last_tool_result("shell said: "),
    ])
    .await;
    model_config(&home, &model);
    let out = tokio::task::spawn_blocking(move || {
        let o = run_cli(&home, &["chat", "-m", "hi"], None);
        (o, home)
    })
    .await
    .unwrap()
    .0;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("shell said: exit code: 0"), "{stdout}");
    assert!(stdout.contains("from-the-shell"), "{stdout}");
    model.assert_protocol_ok();
    // The terminal offers the fast-path tools (shell included) and find_tools up front.
    let offered = model.requests()[0]["tools"].to_string();
    assert!(
        offered.contains("\"shell\"") && offered.contains("\"find_tools\""),
        "{offered}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_message_fails_clearly_when_the_model_endpoint_fails() {
    let home = TestHome::new();
    let model = ScriptedModel::start(vec![
        Step::server_error(),
        Step::server_error(),
        Step::server_error(),
        Step::server_error(),
    ])
    .await;
    model_config(&home, &model);
    let out = tokio::task::spawn_blocking(move || run_cli(&home, &["chat", "-m", "hi"], None))
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("HTTP 500"), "{stderr}");
    // The sentence and its detail, and no log line (those go to the log file without -v).
    assert!(
        stderr
            .lines()
            .all(|l| l.starts_with("ethan: ") || l.starts_with("  detail: ")),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
    assert_eq!(model.requests().len(), 4, "one try and three retries");
    let (home, model) = (TestHome::new(), model);
    model_config(&home, &model);
    for _ in 0..4 {
        model.push_step(Step::server_error());
    }
    let out =
        tokio::task::spawn_blocking(move || run_cli(&home, &["-v", "chat", "-m", "hi"], None))
            .await
            .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(" WARN ") || stderr.contains("DEBUG"),
        "-v shows the log: {stderr}"
    );
}

#[test]
fn doctor_says_what_is_missing() {
    let home = TestHome::new();
    let out = run_cli(&home, &["doctor"], None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(stdout.contains("FAIL  model: no API key"), "{stdout}");
    assert!(stdout.contains("telegram: not configured"), "{stdout}");
    assert!(stdout.contains("ok    store: sqlite "), "{stdout}");
}

/// `ethan doctor` names each layer of the shell sandbox — Landlock with the places it hides, the
/// system-call filter, the namespaces (or what this kernel lacks) — and has a real sandboxed
/// command try to read the config.
#[test]
fn doctor_names_the_sandbox_layers_and_tries_them() {
    let home = TestHome::new();
    home.write_config("model:\n  api_key: sk-x\n");
    let out = run_cli(&home, &["doctor"], None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = |what: &str| {
        stdout
            .lines()
            .find(|l| l.contains("sandbox: ") && l.contains(what))
            .unwrap_or_else(|| panic!("no sandbox line with {what:?}:\n{stdout}"))
            .to_string()
    };
    let hidden = home.path().canonicalize().unwrap().display().to_string();
    let landlock = line("Landlock");
    let landlock_ok = landlock.starts_with("ok    ");
    if landlock_ok {
        assert!(landlock.contains(&hidden), "{landlock}");
    } else {
        assert!(landlock.contains("every one asks the owner"), "{landlock}");
    }
    if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        let filter = line("seccomp allow-list (seccompiler");
        assert!(filter.starts_with("ok    "), "{filter}");
        assert!(
            filter.contains("x32 and other architectures refused"),
            "{filter}"
        );
    }
    let namespaces_ok = stdout.contains("ok    sandbox: namespaces for each command: ");
    if namespaces_ok {
        let namespaces = line("namespaces for each command: ");
        assert!(namespaces.contains("PID, mount, network"), "{namespaces}");
        assert!(
            namespaces.contains("every process a command starts ends with it"),
            "{namespaces}"
        );
    } else {
        line("missing on this kernel: ");
    }
    assert!(
        stdout.contains("ok    sandbox: commands that run without approval get no network")
            || stdout.contains("commands cannot be cut off from the network"),
        "{stdout}"
    );
    if landlock_ok && namespaces_ok {
        let config = home.path().canonicalize().unwrap().join("config.yaml");
        assert!(
            stdout.contains(&format!(
                "ok    sandbox: checked: a sandboxed command could not read {}",
                config.display()
            )),
            "{stdout}"
        );
    }
}

#[test]
fn config_typo_stops_the_start_with_the_key_path() {
    let home = TestHome::new();
    home.write_config("channels:\n  telegram:\n    tokn: abc\n");
    let out = run_cli(&home, &["run"], None);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("channels.telegram.tokn"), "{stderr}");

    home.write_config("model:\n  timeout_secs: soon\n");
    let out = run_cli(&home, &["chat", "-m", "x"], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("model.timeout_secs"), "{stderr}");
}

#[test]
fn run_without_a_channel_explains_itself() {
    let home = TestHome::new();
    home.write_config("model:\n  api_key: sk-x\ngateway:\n  enabled: false\n");
    let out = run_cli(&home, &["run"], None);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no channel is configured"), "{stderr}");
    assert!(!stderr.contains("sk-x"));
}

/// `ethan chat -m` asks on the terminal: "y" on stdin approves, "n" or EOF refuses.
#[tokio::test(flavor = "multi_thread")]
async fn terminal_consent_reads_the_answer_from_stdin() {
    for (stdin, expect_written) in [(Some("y\n"), true), (Some("n\n"), false), (None, false)] {
        let home = TestHome::new();
        let tmp = home.path().join("tmpdir");
        std::fs::create_dir_all(&tmp).unwrap();
        let model = ScriptedModel::start(vec![
            Step::tool_call(
                "w1",
                "file_write",
                r#"{"path": "note.txt", "content": "hello"}"#,
            ),
            Step::echo_last_tool_result("result: "),
        ])
        .await;
        model_config(&home, &model);
        let (out, home) = tokio::task::spawn_blocking(move || {
            let tmp = home.path().join("tmpdir");
            let o = crate::support::run_cli_with_env(
                &home,
                &["chat", "-m", "write a note"],
                stdin,
                &[("TMPDIR", tmp.to_str().unwrap())],
            );
            (o, home)
        })
        .await
        .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(
            stderr.contains("Allow?"),
            "the question is asked on stderr: {stderr}"
        );
        let written = home.path().join("workspace/note.txt").exists();
        assert_eq!(written, expect_written, "stdin {stdin:?}: {stdout}");
        if !expect_written {
            assert!(stdout.contains("the user refused"), "{stdout}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn context_length_error_summarises_the_history_and_retries_once() {
    let home = TestHome::new();
    let model = ScriptedModel::start(vec![
        Step::text("first answer"),
        Step::context_length_exceeded(),
        // The history is folded into a summary: first the facts to keep, then the summary.
        Step::text("[]"),
        Step::text("- the person asked a first question"),
        Step::text("second answer"),
    ])
    .await;
    model_config(&home, &model);
    let home = tokio::task::spawn_blocking(move || {
        let a = run_cli(&home, &["chat", "--session", "s", "-m", "first"], None);
        assert!(a.status.success());
        let b = run_cli(&home, &["chat", "--session", "s", "-m", "second"], None);
        assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
        assert_eq!(String::from_utf8_lossy(&b.stdout).trim(), "second answer");
        home
    })
    .await
    .unwrap();
    let reqs = model.requests();
    assert_eq!(reqs.len(), 5);
    let len = |i: usize| reqs[i]["messages"].as_array().unwrap().len();
    assert_eq!(len(1), 4, "system + first turn + new question");
    assert_eq!(len(4), 3, "the retry: system + summary + new question");
    assert!(reqs[4]["messages"][1]["content"]
        .as_str()
        .unwrap()
        .contains("the person asked a first question"));
    drop(home);
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_iteration_cap_ends_a_runaway_loop() {
    let home = TestHome::new();
    let model = ScriptedModel::start(vec![
        Step::tool_call("a", "file_list", r#"{"path": "."}"#),
        Step::tool_call("b", "file_list", r#"{"path": "."}"#),
        Step::tool_call("c", "file_list", r#"{"path": "."}"#),
    ])
    .await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: k\n  name: m\n  max_tool_iterations: 2\n",
        model.base_url()
    ));
    let out = tokio::task::spawn_blocking(move || run_cli(&home, &["chat", "-m", "loop"], None))
        .await
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("stopped after 2 tool steps"));
    assert_eq!(model.requests().len(), 2);
}

#[test]
fn empty_messages_missing_keys_and_bad_owners_are_refused_up_front() {
    let home = TestHome::new();
    home.write_config("model:\n  base_url: http://127.0.0.1:9/v1\n  api_key: k\n");
    let out = run_cli(&home, &["chat", "-m", "   "], None);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("empty"));

    home.write_config("model:\n  name: m\n");
    let out = run_cli(&home, &["chat", "-m", "hi"], None);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no API key"));

    let out = run_cli(&home, &["owner", "add", "telegram:abc"], None);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("numeric"));
    let out = run_cli(&home, &["owner", "add", "telegram:12345"], None);
    assert!(out.status.success());
}

/// The terminal question shows an ANSI sequence in a command escaped (`\x1b[2J`), never raw, so
/// the command cannot clear or repaint the screen it is asked on.
#[tokio::test(flavor = "multi_thread")]
async fn terminal_consent_shows_escape_sequences_escaped() {
    let home = TestHome::new();
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "c1",
            "shell",
            &json!({"command": "touch \u{1b}[2Jnote\u{1b}[31m.txt"}).to_string(),
        ),
        Step::echo_last_tool_result("result: "),
    ])
    .await;
    model_config(&home, &model);
    let out = tokio::task::spawn_blocking(move || {
        run_cli(&home, &["chat", "-m", "make a note"], Some("n\n"))
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The reasons come first, then the command on its own line, escapes shown escaped.
    let mut lines = stderr
        .lines()
        .skip_while(|l| !l.contains("Ethan wants to run"));
    let question = lines
        .next()
        .unwrap_or_else(|| panic!("no question on stderr: {stderr}"));
    assert!(
        question.starts_with("Ethan wants to run shell: ("),
        "{stderr}"
    );
    assert_eq!(
        lines.next(),
        Some("touch \\x1b[2Jnote\\x1b[31m.txt"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("\u{1b}[2J"),
        "raw sequence written: {stderr}"
    );
    assert!(
        !stderr.contains("\u{1b}[31m"),
        "raw sequence written: {stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("the user refused"), "{stdout}");
}

/// A misspelt tool name in the tool policy would switch nothing off; it stops the start instead.
#[test]
fn a_misspelt_tool_name_in_tools_deny_stops_the_start_with_a_suggestion() {
    let home = TestHome::new();
    home.write_config(
        "model:\n  api_key: sk-x\ngateway:\n  enabled: false\ntools:\n  deny: [shel]\n",
    );
    let out = run_cli(&home, &["run"], None);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let path = home.config_path().display().to_string();
    assert!(
        stderr.contains(&format!(
            "{path}:6: config key `tools.deny[0]`: no tool named \"shel\" (did you mean \"shell\"?)"
        )),
        "{stderr}"
    );

    // Every problem in one run, each with its line: a type error, and every misspelt name.
    home.write_config(
        "model:\n  api_key: sk-x\n  timeout_secs: soon\ngateway:\n  enabled: false\ntools:\n  \
         deny:\n    - shel\n    - file_raed\n  allow: [clok]\n",
    );
    let out = run_cli(&home, &["doctor"], None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    let fails: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("FAIL  config:"))
        .collect();
    assert_eq!(fails.len(), 4, "{stdout}");
    for (line, (n, key)) in fails.iter().zip([
        (3, "model.timeout_secs"),
        (8, "tools.deny[0]"),
        (9, "tools.deny[1]"),
        (10, "tools.allow[0]"),
    ]) {
        assert!(
            line.contains(&format!("{path}:{n}: config key `{key}`")),
            "{line}\n{stdout}"
        );
    }
    assert!(fails[2].contains("did you mean \"file_read\""), "{stdout}");

    // A real tool that is not enabled here (no Lark app) is not a typo.
    home.write_config(
        "model:\n  api_key: sk-x\ngateway:\n  enabled: false\ntools:\n  deny: [lark_message_send, shell]\n  shell: { timeout_secs: 5 }\n",
    );
    let out = run_cli(&home, &["run"], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no channel is configured"), "{stderr}");
    assert!(!stderr.contains("no tool named"), "{stderr}");
}

/// `ethan doctor` shows how many rows each pruned table holds.
#[test]
fn doctor_shows_the_size_of_the_pruned_tables() {
    let home = TestHome::new();
    home.write_config("model:\n  api_key: sk-x\n  base_url: http://127.0.0.1:9/v1\n");
    let out = run_cli(&home, &["doctor"], None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "ok    retention: 0 inbound events and 0 lark.seen keys (finished ones kept 7 days), \
             0 audit rows and 0 replay keys (kept 90 days)"
        ),
        "{stdout}"
    );
    crate::support::store::execute(
        &home,
        "INSERT INTO inbound_events
         (channel, event_id, session_key, payload, state, attempts, received_at, updated_at)
         VALUES ('telegram', '1', 'k', '{}', 'done', 1, 0, 0)",
        &[],
    );
    crate::support::store::execute(
        &home,
        "INSERT INTO kv (key, value) VALUES ('lark.seen:om_1', '0')",
        &[],
    );
    let out = run_cli(&home, &["doctor"], None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("ok    retention: 1 inbound events and 1 lark.seen keys"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_prints_a_streamed_answer_once_with_the_preamble_before_the_tool() {
    let home = TestHome::new();
    let model = ScriptedModel::start(vec![
        // Text before a tool call: a preamble, printed as it comes, not repeated.
        Step::custom(|req| {
            let message = json!({
                "role": "assistant",
                "content": "Checking the shell.",
                "tool_calls": [{"id": "c1", "type": "function", "function": {
                    "name": "shell", "arguments": json!({"command": "echo streamed-tool"}).to_string()}}]
            });
            (200, crate::support::model::completion(req, message, "tool_calls"))
        }),
        Step::slow_text(
            "The shell printed streamed-tool, and that is the whole answer.",
            std::time::Duration::from_millis(50),
        ),
    ])
    .await;
    model_config(&home, &model);
    let out = tokio::task::spawn_blocking(move || run_cli(&home, &["chat", "-m", "hi"], None))
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer = "The shell printed streamed-tool, and that is the whole answer.";
    assert_eq!(stdout.matches(answer).count(), 1, "{stdout:?}");
    assert_eq!(
        stdout.matches("Checking the shell.").count(),
        1,
        "{stdout:?}"
    );
    assert!(stdout.ends_with(&format!("{answer}\n")), "{stdout:?}");
    assert!(
        stdout.find("Checking the shell.") < stdout.find(answer),
        "{stdout:?}"
    );
    // Both requests asked for a stream; the fake answered them as SSE.
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests.iter().all(|r| r["stream"] == json!(true)));
    model.assert_protocol_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn doctor_checks_every_model_in_the_chain() {
    // Neither name is in the fake's model list: each gets a one-token completion.
    let model = ScriptedModel::start(vec![Step::text("O"), Step::text("O")]).await;
    let home = TestHome::new();
    home.write_config(&format!(
        "model:\n  base_url: {0}\n  api_key: k\n  name: main\n  fallback:\n    - {{ base_url: \
         \"{0}\", api_key: k2, name: cheap }}\n    - {{ provider: anthropic, name: claude-x }}\n",
        model.base_url()
    ));
    let out = tokio::task::spawn_blocking(move || {
        let out = run_cli(&home, &["doctor"], None);
        drop(home);
        out
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(stdout.contains("ok    model: "), "{stdout}");
    assert!(stdout.contains("ok    model.fallback[0]: "), "{stdout}");
    assert!(
        stdout.contains(
            "FAIL  model.fallback[1]: no API key for claude-x (anthropic): set \
             model.fallback[1].api_key in the config or ANTHROPIC_API_KEY"
        ),
        "{stdout}"
    );
    assert_eq!(
        model.models_calls(),
        2,
        "each OpenAI entry's model list was asked"
    );
}
