//! What a new user meets in the first hour, checked against the real binary and loopback fakes:
//! - `ethan init` and `ethan doctor` judge the model endpoint as the chat will use it: a base
//!   URL without `/v1` (its `/models` and `/chat/completions` answer 404 while `/v1/…` answers)
//!   fails both, with "did you mean …/v1?"; `init` offers the models the server lists; a network
//!   failure is named as one, never as a refused token; an untested token is written only when
//!   the person types `yes`;
//! - `ethan run` without an owner says how to claim the bot, and `ethan doctor` counts an owner
//!   claimed with `/claim`.

use crate::support::model::MODEL_ID;
use crate::support::{run_cli, wait_until, Daemon, FakeTelegram, ScriptedModel, TestHome};
use std::time::Duration;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

async fn cli(home: &TestHome, args: &[&str], stdin: Option<&str>) -> std::process::Output {
    tokio::task::block_in_place(|| run_cli(home, args, stdin))
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
async fn a_base_url_without_v1_fails_init_and_doctor_with_the_suggestion() {
    let home = TestHome::new();
    let model = ScriptedModel::start(vec![]).await;
    let root = format!("http://{}", model.addr());
    let out = cli(
        &home,
        &[
            "init",
            "--yes",
            "--model-base-url",
            &root,
            "--model-api-key",
            "k",
        ],
        None,
    )
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("HTTP 404"), "{stderr}");
    assert!(
        stderr.contains(&format!("Did you mean {root}/v1?")),
        "{stderr}"
    );
    assert!(!home.config_path().exists(), "nothing written");

    home.write_config(&format!(
        "model:\n  base_url: {root}\n  api_key: k\n  name: {MODEL_ID}\n"
    ));
    let out = cli(&home, &["doctor"], None).await;
    let report = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{report}");
    let line = report
        .lines()
        .find(|l| l.starts_with("FAIL  model:"))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(line.contains(&format!("Did you mean {root}/v1?")), "{line}");
    // Nothing was spent on the chat path: the fake has no such route, and no completion ran.
    assert!(model.requests().is_empty(), "{}", model.describe());
}

#[tokio::test(flavor = "multi_thread")]
async fn init_offers_the_listed_model_and_doctor_passes_the_right_url() {
    let home = TestHome::new();
    let model = ScriptedModel::start(vec![]).await;
    let out = cli(
        &home,
        &[
            "init",
            "--yes",
            "--model-base-url",
            &model.base_url(),
            "--model-api-key",
            "k",
        ],
        None,
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let written = std::fs::read_to_string(home.config_path()).unwrap();
    assert!(
        written.contains(&format!("name: \"{MODEL_ID}\"")),
        "the listed model, not a default the server lacks: {written}"
    );
    let out = cli(&home, &["doctor"], None).await;
    let report = text(&out.stdout);
    assert!(
        report.contains(&format!(
            "ok    model: {} answers and lists the model {MODEL_ID}",
            model.base_url()
        )),
        "{report}"
    );

    // Asked on the terminal: the list is shown and its model is the default.
    let home = TestHome::new();
    let answers = format!("{}\n\n\n\n\n\n", model.base_url());
    let out = cli(&home, &["init"], Some(&answers)).await;
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("the server lists: {MODEL_ID}")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("Model name [{MODEL_ID}]")),
        "{stderr}"
    );

    // Given without /v1: "Try again?" offers the URL that answers, and Enter takes it.
    let home = TestHome::new();
    let root = format!("http://{}", model.addr());
    let out = cli(&home, &["init"], Some(&format!("{root}\n\n\n\n\n\n\n\n\n"))).await;
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("Try again?"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "Model endpoint (OpenAI-compatible base URL) [{root}/v1]"
        )),
        "{stderr}"
    );
    let written = std::fs::read_to_string(home.config_path()).unwrap();
    assert!(
        written.contains(&format!("base_url: \"{root}/v1\"")),
        "{written}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_network_failure_is_not_a_refused_token_and_untested_tokens_need_a_yes() {
    let home = TestHome::new();
    let model = ScriptedModel::start(vec![]).await;
    let down = format!("http://127.0.0.1:{}", closed_port());
    let out = cli(
        &home,
        &[
            "init",
            "--yes",
            "--model-base-url",
            &model.base_url(),
            "--model-name",
            MODEL_ID,
            "--telegram-token",
            "123:abc",
            "--telegram-api-url",
            &down,
        ],
        None,
    )
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot reach Telegram: network error: connection refused"),
        "{stderr}"
    );
    assert!(!stderr.contains("refuses the token"), "{stderr}");
    assert!(!home.config_path().exists());

    // On the terminal: "n" to trying again, then Enter, leaves the token out…
    let flags = [
        "init",
        "--model-base-url",
        &model.base_url(),
        "--model-name",
        MODEL_ID,
        "--model-api-key",
        "",
        "--telegram-api-url",
        &down,
    ];
    let out = cli(&home, &flags, Some("123:untested\nn\n\n\n\n")).await;
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("Type yes to write it"), "{stderr}");
    assert!(stderr.contains("Telegram left out"), "{stderr}");
    let written = std::fs::read_to_string(home.config_path()).unwrap();
    assert!(!written.contains("123:untested"), "{written}");

    // …and typing yes writes it.
    let mut forced = flags.to_vec();
    forced.push("--force");
    let out = cli(&home, &forced, Some("123:untested\nn\nyes\n\n\n")).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let written = std::fs::read_to_string(home.config_path()).unwrap();
    assert!(written.contains("\"123:untested\""), "{written}");
}

#[tokio::test(flavor = "multi_thread")]
async fn run_says_how_to_claim_and_doctor_counts_the_claimed_owner() {
    const CLAIMER: i64 = 777001;
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![]).await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: k\n  name: {MODEL_ID}\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n",
        model.base_url(),
        tg.token(),
        tg.base_url()
    ));
    let before = cli(&home, &["doctor"], None).await;
    let report = text(&before.stdout);
    assert!(
        report.contains("warn  owners: nobody owns the bot on telegram yet")
            && report.contains("ethan owner claim"),
        "{report}"
    );

    let claim = cli(&home, &["owner", "claim"], None).await;
    let code = text(&claim.stdout).trim().to_string();
    let mut daemon = Daemon::start(&home);
    wait_until("the claim hint in the log", Duration::from_secs(30), || {
        home.log().contains("nobody owns the bot on telegram yet")
    })
    .await;
    assert!(home.log().contains("send `/claim <code>` to the bot"));
    tg.push_text(CLAIMER, CLAIMER, &format!("/claim {code}"));
    wait_until("the claim's answer", Duration::from_secs(30), || {
        tg.sent_texts().iter().any(|t| t.contains("now the owner"))
    })
    .await;
    daemon.stop();

    let after = cli(&home, &["doctor"], None).await;
    let report = text(&after.stdout);
    assert!(
        report.contains(&format!(
            "ok    owners: 1 owner: telegram:{CLAIMER} (claim)"
        )),
        "{report}"
    );
    assert!(!report.contains("nobody"), "{report}");
    assert!(!report.contains("no owners"), "{report}");
}
