//! The usage ledger and the daily token budgets through the real binary and a scripted model
//! that reports `usage` in every answer: `ethan usage` shows the tokens the model reported (by
//! model, chat and day), a chat over `budget.chat_daily_tokens` or a daemon over
//! `budget.daily_tokens` gets one sentence and no model call, `/usage` in a Telegram DM is the
//! owner's, a scheduled job's calls count for its chat, and Lark behaves as Telegram does.

use crate::support::lark::{self, FakeLark};
use crate::support::{run_cli, Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use serde_json::{json, Value};
use std::time::Duration;

const OWNER: i64 = 218485655;
const OTHER: i64 = 4242;
const LARK_OWNER: &str = "ou_84aad35d084aa403a838cf73ee18467";
const WAIT: Duration = Duration::from_secs(30);
const ZONE: &str = "Asia/Shanghai";

/// The tokens the fake reported for one request answered with `text`: prompt = the length of
/// the request's `messages` JSON / 4, completion = the length of the answer message's JSON / 4
/// + 1 (see `tests/support/model.rs`).
pub(crate) fn reported(request: &Value, text: &str) -> (u64, u64) {
    let prompt = (request["messages"].to_string().len() / 4) as u64;
    let completion = (json!({"role": "assistant", "content": text})
        .to_string()
        .len()
        / 4) as u64
        + 1;
    (prompt, completion)
}

/// `n` as the table writes it: `12,345`.
pub(crate) fn thousands(n: u64) -> String {
    let d = n.to_string();
    let mut out = String::new();
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The cells of the table line whose first cell is `key`, counts without separators.
fn row(table: &str, key: &str) -> Option<Vec<u64>> {
    table.lines().find_map(|l| {
        let mut cells = l.split_whitespace();
        (cells.next() == Some(key)).then(|| {
            cells
                // The counts; the cache hit rate (`57%`, `-`) is not one.
                .filter(|c| !c.ends_with('%') && *c != "-")
                .map(|c| c.replace(',', "").parse::<u64>().expect("a count"))
                .collect()
        })
    })
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

async fn cli(home: &TestHome, args: &[&str]) -> std::process::Output {
    // `run_cli` waits for the process; the fake model answers on this runtime meanwhile.
    tokio::task::block_in_place(|| run_cli(home, args, None))
}

#[tokio::test(flavor = "multi_thread")]
async fn usage_shows_the_tokens_the_model_reported_by_model_chat_and_day() {
    let home = TestHome::new();
    let answers = ["first answer", "a second, longer answer", "third"];
    let model = ScriptedModel::start(answers.iter().map(|a| Step::text(*a)).collect()).await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: m\ntimezone: {ZONE}\n",
        model.base_url()
    ));

    let empty = cli(&home, &["usage"]).await;
    assert!(empty.status.success(), "{}", stderr(&empty));
    assert!(
        stdout(&empty).contains("no model calls recorded in the last 7 days"),
        "{}",
        stdout(&empty)
    );

    for (session, text) in [("a", "hello"), ("a", "more"), ("b", "other chat")] {
        let out = cli(&home, &["chat", "--session", session, "-m", text]).await;
        assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    }
    let reqs = model.requests();
    assert_eq!(reqs.len(), 3, "{}", model.describe());
    let per_call: Vec<(u64, u64)> = reqs
        .iter()
        .zip(answers)
        .map(|(r, a)| reported(r, a))
        .collect();
    let input: u64 = per_call.iter().map(|c| c.0).sum();
    let output: u64 = per_call.iter().map(|c| c.1).sum();

    let by_model = cli(&home, &["usage"]).await;
    let table = stdout(&by_model);
    assert!(by_model.status.success(), "{}", stderr(&by_model));
    assert!(
        table
            .lines()
            .next()
            .unwrap_or_default()
            .starts_with("MODEL"),
        "{table}"
    );
    assert_eq!(
        row(&table, "m"),
        Some(vec![3, input, output, 0, 0, input + output]),
        "{table}"
    );
    assert_eq!(
        row(&table, "TOTAL"),
        Some(vec![3, input, output, 0, 0, input + output]),
        "{table}"
    );
    assert!(table.contains(&thousands(input + output)), "{table}");

    let by_chat = stdout(&cli(&home, &["usage", "--by", "chat"]).await);
    let a = (per_call[0].0 + per_call[1].0, per_call[0].1 + per_call[1].1);
    let b = per_call[2];
    assert_eq!(
        row(&by_chat, "terminal:a"),
        Some(vec![2, a.0, a.1, 0, 0, a.0 + a.1]),
        "{by_chat}"
    );
    assert_eq!(
        row(&by_chat, "terminal:b"),
        Some(vec![1, b.0, b.1, 0, 0, b.0 + b.1]),
        "{by_chat}"
    );

    let today = chrono::Utc::now()
        .with_timezone(&ZONE.parse::<chrono_tz::Tz>().unwrap())
        .format("%Y-%m-%d")
        .to_string();
    let by_day = stdout(&cli(&home, &["usage", "--by", "day", "--days", "1"]).await);
    assert_eq!(
        row(&by_day, &today),
        Some(vec![3, input, output, 0, 0, input + output]),
        "{by_day}"
    );
    assert!(by_day.contains(ZONE), "{by_day}");

    let zero = cli(&home, &["usage", "--days", "0"]).await;
    assert!(!zero.status.success());
    assert!(stderr(&zero).contains("--days"), "{}", stderr(&zero));
    let bad = cli(&home, &["usage", "--by", "week"]).await;
    assert!(!bad.status.success());
    assert!(
        stderr(&bad).contains("week") && stderr(&bad).contains("day, model, chat"),
        "{}",
        stderr(&bad)
    );
}

fn telegram_config(home: &TestHome, tg: &FakeTelegram, model: &ScriptedModel, budget: &str) {
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: m\ntimezone: {ZONE}\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: off\n    \
         allow_from: [{OTHER}]\n\
         owners: [\"telegram:{OWNER}\"]\nbudget:\n{budget}",
        model.base_url(),
        tg.token(),
        tg.base_url()
    ));
}

/// Send `text` in the DM of `user`, and wait for the next message sent there.
async fn ask(tg: &FakeTelegram, user: i64, text: &str) -> String {
    let sent_to_user = || {
        tg.sent_messages()
            .iter()
            .filter(|m| m["chat_id"] == json!(user))
            .count()
    };
    let before = sent_to_user();
    tg.push_text(user, user, text);
    crate::support::wait_until(&format!("an answer to {text:?}"), WAIT, || {
        sent_to_user() > before
    })
    .await;
    tg.sent_messages()
        .iter()
        .rfind(|m| m["chat_id"] == json!(user))
        .and_then(|m| m["text"].as_str().map(str::to_string))
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_chat_over_its_daily_budget_is_told_so_and_the_model_is_not_called() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model =
        ScriptedModel::start(vec![Step::text("owner answer"), Step::text("other answer")]).await;
    telegram_config(&home, &tg, &model, "  chat_daily_tokens: 10\n");
    let mut daemon = Daemon::start(&home);

    assert!(ask(&tg, OWNER, "hello").await.contains("owner answer"));
    assert_eq!(model.requests().len(), 1);
    let refused = ask(&tg, OWNER, "and again").await;
    assert_eq!(
        refused,
        format!(
            "This chat has used its daily token budget (10 tokens); it resets at 00:00 ({ZONE})."
        ),
    );
    assert_eq!(model.requests().len(), 1, "the model was not called");
    // Another chat has its own budget.
    assert!(ask(&tg, OTHER, "hi").await.contains("other answer"));
    assert_eq!(model.requests().len(), 2);
    // The refused question is not in the history the next model call would see.
    let stored = crate::support::store::count(
        &home,
        "SELECT COUNT(*) FROM messages WHERE content LIKE '%and again%'",
        &[],
    );
    assert_eq!(stored, 0);
    let usage_rows = crate::support::store::count(&home, "SELECT COUNT(*) FROM model_usage", &[]);
    assert_eq!(usage_rows, 2);
    daemon.stop();
    home.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_daemons_daily_budget_stops_every_chat() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![Step::text("owner answer")]).await;
    telegram_config(&home, &tg, &model, "  daily_tokens: 20\n");
    let mut daemon = Daemon::start(&home);

    assert!(ask(&tg, OWNER, "hello").await.contains("owner answer"));
    let sentence =
        format!("I have used my daily token budget (20 tokens); it resets at 00:00 ({ZONE}).");
    assert_eq!(ask(&tg, OTHER, "hi").await, sentence);
    assert_eq!(ask(&tg, OWNER, "again").await, sentence);
    assert_eq!(model.requests().len(), 1, "{}", model.describe());
    daemon.stop();
    home.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread")]
async fn usage_in_a_dm_shows_todays_tokens_to_the_owner_only() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![Step::text("owner answer")]).await;
    telegram_config(
        &home,
        &tg,
        &model,
        "  daily_tokens: 5000000\n  chat_daily_tokens: 1000000\n",
    );
    let mut daemon = Daemon::start(&home);

    assert!(ask(&tg, OWNER, "hello").await.contains("owner answer"));
    let (input, output) = reported(&model.requests()[0], "owner answer");
    let total = thousands(input + output);
    let text = ask(&tg, OWNER, "/usage").await;
    assert!(text.contains("Token usage today"), "{text}");
    assert!(
        text.contains(&format!("all chats: {total} of 5,000,000 tokens")),
        "{text}"
    );
    assert!(
        text.contains(&format!("this chat: {total} of 1,000,000 tokens")),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "m: 1 call, {total} tokens ({} in, {} out)",
            thousands(input),
            thousands(output)
        )),
        "{text}"
    );
    assert!(text.contains(ZONE), "{text}");

    let refused = ask(&tg, OTHER, "/usage").await;
    assert_eq!(refused, "Only the bot's owner can see the token usage.");
    assert_eq!(model.requests().len(), 1, "commands do not call the model");
    daemon.stop();
    home.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scheduled_jobs_calls_are_recorded_under_the_job_and_its_chat() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let create = json!({
        "job_id": "morning",
        "prompt": "Summarise what happened today",
        "cron": "0 9 * * 1-5",
        "title": "Morning digest",
    })
    .to_string();
    let model = ScriptedModel::start(vec![
        Step::tool_call("c1", "schedule_create", &create),
        Step::text("created"),
        Step::text("Three things happened today."),
    ])
    .await;
    telegram_config(&home, &tg, &model, "  chat_daily_tokens: 0\n");
    tg.push_text(OWNER, OWNER, "every weekday at 9 send me a summary");
    let mut daemon = Daemon::start(&home);
    let sent = tg.wait_for_sent(1, WAIT).await;
    let approve = sent[0]["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        .as_str()
        .expect("an approval request")
        .to_string();
    tg.push_update(FakeTelegram::callback_update(900, OWNER, OWNER, &approve));
    tg.wait_for_sent(2, WAIT).await;
    daemon.stop();

    let out = cli(&home, &["jobs", "run", "morning"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(model.requests().len(), 3, "{}", model.describe());
    let rows: Vec<(String, String, Option<String>)> = crate::support::store::rows(
        &home,
        "SELECT channel, chat_id, job_id FROM model_usage ORDER BY id",
        &[],
    )
    .into_iter()
    .map(|r| {
        (
            r[0].clone().unwrap_or_default(),
            r[1].clone().unwrap_or_default(),
            r[2].clone(),
        )
    })
    .collect();
    let chat = ("telegram".to_string(), OWNER.to_string());
    assert_eq!(
        rows,
        vec![
            (chat.0.clone(), chat.1.clone(), None),
            (chat.0.clone(), chat.1.clone(), None),
            (chat.0.clone(), chat.1.clone(), Some("morning".to_string())),
        ]
    );
    // The chat's figures (what its budget counts) include the job's run.
    let by_chat = stdout(&cli(&home, &["usage", "--by", "chat"]).await);
    assert_eq!(
        row(&by_chat, &format!("telegram:{OWNER}")).map(|r| r[0]),
        Some(3),
        "{by_chat}"
    );
    home.assert_no_panic();
}

/// Send `text` in the Lark DM of `sender`, and wait until the message answering it (a card,
/// streamed or not) shows `needle`; its Markdown.
async fn ask_lark(fake: &FakeLark, sender: &str, text: &str, needle: &str) -> String {
    let before = fake.messages().len();
    fake.push_event(&lark::p2p_text(sender, text));
    let answer = || {
        fake.messages()
            .get(before)
            .map(|m| m.card_markdown())
            .unwrap_or_default()
    };
    crate::support::wait_until(
        &format!("{needle:?} in the answer to {text:?}"),
        WAIT,
        || answer().contains(needle),
    )
    .await;
    answer()
}

#[tokio::test(flavor = "multi_thread")]
async fn on_lark_the_chat_budget_and_usage_work_alike() {
    let home = TestHome::new();
    let fake = FakeLark::start().await;
    let model = ScriptedModel::start(vec![Step::text("lark answer")]).await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: m\ntimezone: {ZONE}\n\
         channels:\n{}owners: [\"lark:{LARK_OWNER}\"]\nbudget:\n  chat_daily_tokens: 10\n",
        model.base_url(),
        fake.channel_yaml(""),
    ));
    let mut daemon = Daemon::start(&home);
    fake.wait_connections(1, WAIT).await;

    ask_lark(&fake, LARK_OWNER, "hello", "lark answer").await;
    let (input, output) = reported(&model.requests()[0], "lark answer");
    let sentence = format!(
        "This chat has used its daily token budget (10 tokens); it resets at 00:00 ({ZONE})."
    );
    ask_lark(&fake, LARK_OWNER, "again", &sentence).await;
    assert_eq!(model.requests().len(), 1, "the model was not called");
    let figures = format!("this chat: {} of 10 tokens", thousands(input + output));
    let usage = ask_lark(&fake, LARK_OWNER, "/usage", &figures).await;
    assert!(usage.contains("Token usage today"), "{usage}");
    daemon.stop();
    home.assert_no_panic();
}
