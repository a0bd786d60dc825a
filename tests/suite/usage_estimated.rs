//! A model server that reports no token counts (as llama.cpp's streams none): each call is
//! recorded with tokens estimated from the request and the answer, `ethan usage` and `/usage`
//! show them with `≈`, and the daily budgets count them: a budget of 1 token refuses the next
//! turn, and `chat -m` then exits non-zero.

use crate::support::{run_cli, wait_until, Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use serde_json::json;
use std::time::Duration;

const OWNER: i64 = 31337;

fn out(o: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

async fn cli(home: &TestHome, args: &[&str]) -> std::process::Output {
    tokio::task::block_in_place(|| run_cli(home, args, None))
}

/// The TOTAL cell of the table line whose first cell is `key` (`≈1,234` → 1234), and whether
/// it was marked as estimated.
fn total_of(table: &str, key: &str) -> Option<(u64, bool)> {
    table.lines().find_map(|l| {
        let cells: Vec<&str> = l.split_whitespace().collect();
        (cells.first() == Some(&key)).then(|| {
            let last = cells.last().copied().unwrap_or_default();
            let n = last.trim_start_matches('≈').replace(',', "");
            (n.parse().expect("a count"), last.starts_with('≈'))
        })
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn calls_without_counts_are_estimated_shown_and_budgeted() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::text("an answer from a server that counts nothing"),
        Step::text("a second one, through Telegram"),
    ])
    .await;
    model.set_report_usage(false);
    let config = |budget: &str| {
        format!(
            "model:\n  base_url: {}\n  api_key: sk-test\n  name: local\n\
             channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n\
             owners: [\"telegram:{OWNER}\"]\n{budget}",
            model.base_url(),
            tg.token(),
            tg.base_url()
        )
    };
    home.write_config(&config(""));

    // A streamed turn (the default): the server ignores `stream_options` and sends no usage.
    let turn = cli(&home, &["chat", "-m", "hello there"]).await;
    let (stdout, stderr) = out(&turn);
    assert!(turn.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("counts nothing"), "{stdout}");
    assert_eq!(model.requests()[0]["stream"], json!(true));

    let usage = cli(&home, &["usage"]).await;
    let (table, _) = out(&usage);
    let (total, estimated) = total_of(&table, "local").expect("a row for the model");
    assert!(total > 0 && estimated, "{table}");
    assert!(table.contains("≈: includes tokens estimated"), "{table}");

    // The owner's /usage says the same, with ≈.
    let mut daemon = Daemon::start(&home);
    tg.push_text(OWNER, OWNER, "how are you?");
    wait_until("the second answer", Duration::from_secs(30), || {
        tg.sent_texts()
            .iter()
            .any(|t| t.contains("through Telegram"))
    })
    .await;
    tg.push_text(OWNER, OWNER, "/usage");
    wait_until("the /usage answer", Duration::from_secs(30), || {
        tg.sent_texts()
            .iter()
            .any(|t| t.contains("Token usage today"))
    })
    .await;
    let summary = tg
        .sent_texts()
        .into_iter()
        .find(|t| t.contains("Token usage today"))
        .unwrap();
    assert!(summary.contains("all chats: ≈"), "{summary}");
    assert!(summary.contains("this chat: ≈"), "{summary}");
    assert!(summary.contains("local: 2 calls, ≈"), "{summary}");
    daemon.stop();

    // A budget of 1 token: the estimated tokens count, the next turn is refused without a
    // model call, and `chat -m` says so on stderr and exits non-zero.
    home.write_config(&config("budget:\n  daily_tokens: 1\n"));
    let calls = model.requests().len();
    let refused = cli(&home, &["chat", "-m", "and again"]).await;
    let (stdout, stderr) = out(&refused);
    assert!(!refused.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("I have used my daily token budget (1 tokens)"),
        "{stderr}"
    );
    assert_eq!(model.requests().len(), calls, "the model was not called");
    home.assert_no_panic();
}
