//! The first hour of a new user, run against the real binary and loopback fakes: `ethan init`
//! (flags and `--yes`), config errors (all of them, in file order, with the line or the
//! variable), network errors naming their cause, and `ethan tools list`.

use crate::support::lark::{FakeLark, APP_ID, APP_SECRET};
use crate::support::{run_cli, run_cli_with_env, FakeTelegram, ScriptedModel, TestHome};
use std::os::unix::fs::PermissionsExt;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread")]
async fn init_yes_writes_a_private_config_that_doctor_passes_and_never_overwrites_it() {
    let home = TestHome::new();
    let model = ScriptedModel::start(vec![]).await;
    let tg = FakeTelegram::start().await;
    let lark = FakeLark::start().await;
    let args: Vec<String> = [
        "init",
        "--yes",
        "--model-base-url",
        &model.base_url(),
        "--model-api-key",
        "sk-init-test",
        "--model-name",
        // The model the fake lists: init and doctor find it there and spend no completion.
        crate::support::model::MODEL_ID,
        "--telegram-token",
        tg.token(),
        "--telegram-api-url",
        &tg.base_url(),
        "--lark-app-id",
        APP_ID,
        "--lark-app-secret",
        APP_SECRET,
        "--lark-base-url",
        &lark.base_url(),
        "--owner",
        "telegram:42",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (home, out) = tokio::task::spawn_blocking(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run_cli(&home, &a, None);
        (home, out)
    })
    .await
    .unwrap();
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    // Each endpoint was tried before the file was written.
    assert!(model.models_calls() >= 1);
    assert!(!tg.calls_of("getMe").is_empty(), "getMe was called");
    assert!(lark.token_requests() >= 1);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("ethan doctor"), "{stdout}");
    let path = home.config_path();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the config holds keys");
    let written = std::fs::read_to_string(&path).unwrap();
    assert!(written.contains("# "), "a commented file: {written}");
    assert!(written.contains("sk-init-test") && written.contains("telegram:42"));

    let (home, doctor) = tokio::task::spawn_blocking(move || {
        let out = run_cli(&home, &["doctor"], None);
        (home, out)
    })
    .await
    .unwrap();
    let report = text(&doctor.stdout);
    assert!(doctor.status.success(), "{report}");
    assert!(report.contains("ok    model:"), "{report}");
    assert!(report.contains("ok    telegram: getMe"), "{report}");
    assert!(
        report.contains("ok    lark: tenant_access_token"),
        "{report}"
    );

    // A second run refuses to touch the file; --force replaces it.
    let (home, again) = tokio::task::spawn_blocking(move || {
        let out = run_cli(&home, &["init", "--yes", "--no-check"], None);
        (home, out)
    })
    .await
    .unwrap();
    assert!(!again.status.success());
    assert!(
        text(&again.stderr).contains("already exists"),
        "{}",
        text(&again.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(home.config_path()).unwrap(),
        written
    );
    let forced = run_cli(
        &home,
        &[
            "init",
            "--yes",
            "--no-check",
            "--force",
            "--model-name",
            "other",
        ],
        None,
    );
    assert!(forced.status.success(), "{}", text(&forced.stderr));
    let replaced = std::fs::read_to_string(home.config_path()).unwrap();
    assert!(replaced.contains("\"other\"") && !replaced.contains("sk-init-test"));
}

#[test]
fn init_yes_with_an_endpoint_that_refuses_writes_nothing_and_says_why() {
    let home = TestHome::new();
    let url = format!("http://127.0.0.1:{}/v1", closed_port());
    let out = run_cli(
        &home,
        &[
            "init",
            "--yes",
            "--model-base-url",
            &url,
            "--model-api-key",
            "k",
        ],
        None,
    );
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("connection refused"), "{stderr}");
    assert!(!home.config_path().exists());
}

#[test]
fn doctor_reports_every_config_error_in_file_order_with_its_line() {
    let home = TestHome::new();
    home.write_config(
        "model:\n  name: m\n  timeout_secs: soon\nchannels:\n  telegram:\n    tokn: x\nowners:\n  - bob\n",
    );
    let out = run_cli(&home, &["doctor"], None);
    let stdout = text(&out.stdout);
    assert!(!out.status.success());
    let path = home.config_path().display().to_string();
    let fails: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("FAIL  config:"))
        .collect();
    assert_eq!(fails.len(), 3, "{stdout}");
    assert!(
        fails[0].contains(&format!("{path}:3:")) && fails[0].contains("model.timeout_secs"),
        "{stdout}"
    );
    assert!(
        fails[1].contains(&format!("{path}:6:")) && fails[1].contains("channels.telegram.tokn"),
        "{stdout}"
    );
    assert!(fails[1].contains("did you mean `token`"), "{stdout}");
    assert!(
        fails[2].contains(&format!("{path}:8:")) && fails[2].contains("owners[0]"),
        "{stdout}"
    );
    // `ethan run` says the same, all at once.
    let out = run_cli(&home, &["run"], None);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("3 problems in the configuration"),
        "{stderr}"
    );
}

#[test]
fn a_value_from_a_variable_is_blamed_on_the_variable() {
    let home = TestHome::new();
    home.write_config("model:\n  name: m\n");
    let out = run_cli_with_env(
        &home,
        &["doctor"],
        None,
        &[
            ("ETHAN__MODEL__TIMEOUT_SECS", "soon"),
            ("ETHAN_MODEL_NAME", "x"),
        ],
    );
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("FAIL  config: environment variable ETHAN__MODEL__TIMEOUT_SECS: config key `model.timeout_secs`"),
        "{stdout}"
    );
    assert!(!stdout.contains("config.yaml:"), "{stdout}");
    // A misspelt override is not an error, but it is not silent either.
    let out = run_cli_with_env(&home, &["doctor"], None, &[("ETHAN_MODEL_NAME", "x")]);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("warn  config: environment variable ETHAN_MODEL_NAME is not read")
            && stdout.contains("ETHAN__MODEL__NAME"),
        "{stdout}"
    );
}

#[test]
fn misshapen_sections_and_files_are_told_apart() {
    let home = TestHome::new();
    let path = home.config_path().display().to_string();
    let cases = [
        (
            "model: \"gpt-4o\"\n",
            "config key `model`: expected a map with keys provider, base_url, api_key, name",
        ),
        (
            "model:\n  - name: gpt-4o\n",
            "config key `model`: expected a map with keys",
        ),
        (
            "channels: []\n",
            "config key `channels`: expected a map with keys telegram, lark, found an empty list",
        ),
    ];
    for (yaml, want) in cases {
        home.write_config(yaml);
        let out = run_cli(&home, &["doctor"], None);
        let stdout = text(&out.stdout);
        assert!(!out.status.success(), "{yaml}: {stdout}");
        assert!(stdout.contains(want), "{yaml}: {stdout}");
        assert!(stdout.contains(&format!("{path}:1:")), "{yaml}: {stdout}");
    }
    // A list at the top: the file is named once.
    home.write_config("- model: x\n");
    let out = run_cli(&home, &["doctor"], None);
    let stdout = text(&out.stdout);
    assert_eq!(stdout.matches(&path).count(), 1, "{stdout}");
    assert!(
        stdout.contains("line 1: the top level must be a map"),
        "{stdout}"
    );

    // A directory, a missing file and an unreadable one each say so.
    let dir = home.path().join("conf.d");
    std::fs::create_dir(&dir).unwrap();
    let out = run_cli(&home, &["--config", dir.to_str().unwrap(), "doctor"], None);
    assert!(
        text(&out.stdout).contains("is a directory"),
        "{}",
        text(&out.stdout)
    );
    let missing = home.path().join("nope.yaml");
    let out = run_cli(
        &home,
        &["--config", missing.to_str().unwrap(), "chat", "-m", "hi"],
        None,
    );
    assert!(
        text(&out.stderr).contains("not found"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stderr).contains("ethan init"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn doctor_names_the_network_cause() {
    let home = TestHome::new();
    for (url, cause) in [
        (
            format!("http://127.0.0.1:{}/v1", closed_port()),
            "connection refused",
        ),
        ("http://no-such-host.invalid/v1".to_string(), "no such host"),
    ] {
        home.write_config(&format!(
            "model:\n  base_url: {url}\n  api_key: k\n  name: m\n"
        ));
        let out = run_cli(&home, &["doctor"], None);
        let stdout = text(&out.stdout);
        let line = stdout
            .lines()
            .find(|l| l.starts_with("FAIL  model:"))
            .unwrap_or_else(|| panic!("{stdout}"));
        assert!(line.contains(cause), "{line}");
        assert!(!line.contains("error sending request for url"), "{line}");
    }
}

#[test]
fn tools_list_keeps_its_columns_and_whole_sentences() {
    let home = TestHome::new();
    let out = run_cli(&home, &["tools", "list"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "", "nothing on stderr");
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().filter(|l| !l.contains("skipped:")).collect();
    let col = lines[0].find("risk").unwrap();
    for l in &lines {
        let risk = &l[col..];
        assert!(
            ["risk", "read_only", "write", "exec", "dangerous"]
                .iter()
                .any(|r| risk.starts_with(r)),
            "misaligned: {l}"
        );
        assert!(!l.trim_end().ends_with("e.g."), "cut at e.g.: {l}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn status_tells_a_running_daemon_from_none() {
    let home = TestHome::new();
    let model = ScriptedModel::start(vec![]).await;
    let tg = FakeTelegram::start().await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-status\n  name: m\nchannels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\nowners: [\"telegram:1\"]\n",
        model.base_url(),
        tg.token(),
        tg.base_url()
    ));
    let before = run_cli(&home, &["status"], None);
    assert!(!before.status.success());
    assert!(
        text(&before.stdout).contains("daemon     not running"),
        "{}",
        text(&before.stdout)
    );

    let mut daemon = crate::support::Daemon::start(&home);
    let mut last = String::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        let out = run_cli(&home, &["status"], None);
        last = text(&out.stdout);
        if out.status.success() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let pid = daemon.pid();
    assert!(
        last.contains(&format!("daemon     running: pid {pid}, up ")),
        "{last}"
    );
    assert!(last.contains(env!("CARGO_PKG_VERSION")), "{last}");
    assert!(last.contains("channels   telegram up; store up"), "{last}");
    assert!(last.contains("turns      0 in flight"), "{last}");
    assert!(last.contains("approvals  0 waiting"), "{last}");
    assert!(last.contains("jobs       no run scheduled"), "{last}");
    println!("{last}");

    daemon.stop();
    let after = run_cli(&home, &["status"], None);
    assert!(!after.status.success());
    assert!(
        text(&after.stdout).contains("daemon     not running"),
        "{}",
        text(&after.stdout)
    );
}
