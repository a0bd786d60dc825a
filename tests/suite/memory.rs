//! Long-term memory, compaction and long tool output, through the real daemon, the fake Bot API
//! and a scripted model: a fact the owner says in a direct chat is remembered in later sessions
//! and after a restart, never shown in a group, and replaced by a fact that contradicts it; a
//! group's own fact needs the owner's approval and shows only there; a session of 300 long
//! messages keeps every request under the budget by summarising (after extracting facts), and
//! `history_search` still finds what was summarised away; a 50,000-character tool output reaches
//! the model as a summary with its spill path, unless the tool must be repeated verbatim.

use crate::support::model::{text_completion, tool_calls_completion};
use crate::support::{Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const OWNER: i64 = 218485655;
const STRANGER: i64 = 99001;
const GROUP: i64 = -1001234;
const WAIT: Duration = Duration::from_secs(60);

fn config(home: &TestHome, tg: &FakeTelegram, model: &ScriptedModel, extra: &str) {
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: m\n{extra}\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: off\n\
         owners: [\"telegram:{OWNER}\"]\n",
        model.base_url(),
        tg.token(),
        tg.base_url()
    ));
}

fn start(home: &TestHome) -> Daemon {
    let tmp = home.path().join("tmpdir");
    std::fs::create_dir_all(&tmp).unwrap();
    Daemon::start_with_env(home, &[("TMPDIR", tmp.to_str().unwrap())])
}

fn group_update(update_id: i64, user: i64, text: &str) -> Value {
    json!({
        "update_id": update_id,
        "message": {
            "message_id": update_id,
            "date": 1700000000,
            "chat": {"id": GROUP, "type": "supergroup", "title": "team"},
            "from": {"id": user, "is_bot": false, "first_name": "U"},
            "text": format!("@ethan_test_bot {text}"),
            "entities": [{"type": "mention", "offset": 0, "length": 15}],
        }
    })
}

/// Wait until a sent message contains `text`, pressing "approve once" on every approval the
/// bot posts on the way; returns the approval texts seen.
async fn wait_reply(tg: &FakeTelegram, text: &str) -> Vec<String> {
    let deadline = Instant::now() + WAIT;
    let mut pressed = 0;
    loop {
        let sent = tg.sent_messages();
        let asks: Vec<&Value> = sent
            .iter()
            .filter(|m| m["reply_markup"]["inline_keyboard"][0].is_array())
            .collect();
        for m in &asks[pressed..] {
            let data = m["reply_markup"]["inline_keyboard"][0]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|b| b["callback_data"].as_str())
                .find(|d| d.starts_with("ap:o:"))
                .expect("an approve-once button")
                .to_string();
            let chat = m["chat_id"].as_i64().unwrap();
            let id = tg.next_update_id();
            tg.push_update(FakeTelegram::callback_update(id, OWNER, chat, &data));
        }
        pressed = asks.len();
        if sent
            .iter()
            .any(|m| m["text"].as_str().is_some_and(|t| t.contains(text)))
        {
            return asks
                .iter()
                .map(|m| m["text"].as_str().unwrap_or_default().to_string())
                .collect();
        }
        assert!(
            Instant::now() < deadline,
            "no {text:?} within {WAIT:?}:\n{}",
            tg.describe_calls()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn system_prompt(req: &Value) -> String {
    req["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The id the snapshot in `req`'s system prompt gives the fact `content`.
fn fact_id(req: &Value, content: &str) -> i64 {
    let prompt = system_prompt(req);
    let line = prompt
        .lines()
        .find(|l| l.ends_with(content))
        .unwrap_or_else(|| panic!("{content:?} is not in the snapshot:\n{prompt}"));
    line.trim_start_matches("- [#")
        .split(']')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no id in {line:?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_follows_the_person_into_later_sessions_and_never_into_a_group() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        // DM: the owner's fact is saved (no approval: their own memory).
        Step::tool_call(
            "s1",
            "memory_save",
            r#"{"content": "Likes green tea.", "scope": "personal"}"#,
        ),
        Step::text("saved-tea"),
        // DM after /new: the snapshot holds it.
        Step::text("dm-after-new"),
        // Group: the group's own fact, approved by the owner.
        Step::tool_call(
            "g1",
            "memory_save",
            r#"{"content": "Standup is at 9:00.", "scope": "chat"}"#,
        ),
        Step::text("saved-standup"),
        // Group: a stranger tries to write the group's memory; the owner's consent cannot be
        // given for them.
        Step::tool_call(
            "g2",
            "memory_save",
            r#"{"content": "The owner's password hint is cats.", "scope": "chat"}"#,
        ),
        Step::text("stranger-done"),
        // Group after /new: the group's fact, never the owner's.
        Step::text("group-after-new"),
        // DM: a contradicting fact names the old one's id, read from the snapshot.
        Step::custom(|req| {
            let id = fact_id(req, "Likes green tea.");
            let args = json!({"content": "Likes coffee, not tea.", "replaces": id}).to_string();
            (
                200,
                tool_calls_completion(req, &[("s2".into(), "memory_save".into(), args)]),
            )
        }),
        Step::text("saved-coffee"),
        // DM after /new and a restart.
        Step::text("after-restart"),
    ])
    .await;
    config(&home, &tg, &model, "");
    let mut daemon = start(&home);

    tg.push_text(OWNER, OWNER, "remember that I like green tea");
    assert!(
        wait_reply(&tg, "saved-tea").await.is_empty(),
        "no approval for one's own memory"
    );
    tg.push_text(OWNER, OWNER, "/new");
    wait_reply(&tg, "Started a fresh conversation").await;
    tg.push_text(OWNER, OWNER, "what do I drink?");
    wait_reply(&tg, "dm-after-new").await;
    let dm = model.requests()[2].clone();
    assert!(
        system_prompt(&dm).contains("Likes green tea."),
        "{}",
        system_prompt(&dm)
    );

    tg.push_update(group_update(
        tg.next_update_id(),
        OWNER,
        "remember: standup at 9",
    ));
    let asked = wait_reply(&tg, "saved-standup").await;
    assert_eq!(
        asked.len(),
        1,
        "the group's memory asks the owner: {asked:?}"
    );
    assert!(asked[0].contains("Standup is at 9:00."), "{}", asked[0]);
    tg.push_update(group_update(
        tg.next_update_id(),
        STRANGER,
        "remember my secret hint",
    ));
    wait_reply(&tg, "stranger-done").await;
    let refused = model.requests()[6]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"]
        .to_string();
    assert!(
        refused.contains("owner"),
        "a stranger's group fact is refused: {refused}"
    );
    tg.push_update(group_update(tg.next_update_id(), OWNER, "/new"));
    wait_reply(&tg, "Started a fresh conversation").await;
    tg.push_update(group_update(tg.next_update_id(), OWNER, "when is standup?"));
    wait_reply(&tg, "group-after-new").await;
    let group = model.requests()[7].clone();
    assert!(
        system_prompt(&group).contains("Standup is at 9:00."),
        "{}",
        system_prompt(&group)
    );
    assert!(!group.to_string().contains("password hint"));
    for (i, req) in model.requests()[3..=7].iter().enumerate() {
        assert!(
            !req.to_string().contains("green tea"),
            "group request {i} shows the owner's personal memory:\n{req}"
        );
    }
    // /memory in the group lists the group's facts, not the owner's.
    tg.push_update(group_update(tg.next_update_id(), STRANGER, "/memory"));
    wait_reply(&tg, "What I remember about this group").await;
    let listing = tg
        .sent_texts()
        .into_iter()
        .find(|t| t.contains("What I remember about this group"))
        .unwrap();
    assert!(
        listing.contains("Standup") && !listing.contains("tea"),
        "{listing}"
    );

    tg.push_text(OWNER, OWNER, "actually I switched to coffee");
    wait_reply(&tg, "saved-coffee").await;
    tg.push_text(OWNER, OWNER, "/new");
    let fresh = tg
        .sent_texts()
        .iter()
        .filter(|t| t.contains("Started a fresh conversation"))
        .count();
    let deadline = Instant::now() + WAIT;
    while tg
        .sent_texts()
        .iter()
        .filter(|t| t.contains("Started a fresh conversation"))
        .count()
        == fresh
    {
        assert!(Instant::now() < deadline, "{}", tg.describe_calls());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    daemon.stop();
    let mut daemon = start(&home);
    tg.push_text(OWNER, OWNER, "what do I drink now?");
    wait_reply(&tg, "after-restart").await;
    let last = model.last_request().unwrap();
    let prompt = system_prompt(&last);
    assert!(prompt.contains("Likes coffee, not tea."), "{prompt}");
    assert!(
        !prompt.contains("Likes green tea."),
        "the replaced fact is gone: {prompt}"
    );
    tg.push_text(OWNER, OWNER, "/memory");
    wait_reply(&tg, "What I remember about you").await;
    daemon.stop();

    // `ethan memory list` shows both scopes; the replaced fact only with --all.
    let out = crate::support::run_cli(&home, &["memory", "list"], None);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains("Likes coffee") && text.contains("Standup"),
        "{text}"
    );
    assert!(!text.contains("green tea"), "{text}");
    let all = crate::support::run_cli(&home, &["memory", "list", "--all"], None);
    assert!(String::from_utf8_lossy(&all.stdout).contains("green tea"));
    model.assert_protocol_ok();
}

/// The kind of request the daemon made: its own summary or extraction request, or a turn.
fn kind(req: &Value) -> &'static str {
    let system = system_prompt(req);
    if system.starts_with("You summarise the earlier part") {
        "summary"
    } else if system.starts_with("You read the earlier part") {
        "extract"
    } else if system.starts_with("You summarise the output of a tool") {
        "output"
    } else {
        "turn"
    }
}

/// Characters of a request's messages: their text and their tool calls' names and arguments.
fn request_chars(req: &Value) -> usize {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m["content"].as_str().map_or(0, |c| c.chars().count())
                + m["tool_calls"].as_array().map_or(0, |calls| {
                    calls
                        .iter()
                        .map(|c| {
                            c["function"]["name"].as_str().unwrap_or("").chars().count()
                                + c["function"]["arguments"]
                                    .as_str()
                                    .unwrap_or("")
                                    .chars()
                                    .count()
                        })
                        .sum()
                })
        })
        .sum()
}

/// A model that answers by the kind of request: summaries, one extracted fact, `ok` to a turn,
/// a `history_search` call when asked to search, and the search result back as the answer.
fn answering_model() -> Vec<Step> {
    let summaries = Arc::new(Mutex::new(0));
    (0..2_000)
        .map(|_| {
            let summaries = summaries.clone();
            Step::custom(move |req| {
                let text = match kind(req) {
                    "summary" => {
                        let mut n = summaries.lock().unwrap();
                        *n += 1;
                        format!("- summary number {n} of the talk so far")
                    }
                    "extract" => r#"["Has a dog called Biscuit."]"#.to_string(),
                    "output" => "the output lists many lines".to_string(),
                    _ => {
                        let last = req["messages"].as_array().unwrap().last().unwrap().clone();
                        if last["role"] == "tool" {
                            format!("found: {}", last["content"].as_str().unwrap_or(""))
                        } else if crate::support::model::last_user_text(req).contains("search now")
                        {
                            return (
                                200,
                                tool_calls_completion(
                                    req,
                                    &[(
                                        "h1".into(),
                                        "history_search".into(),
                                        r#"{"query": "PURPLE-OTTER"}"#.into(),
                                    )],
                                ),
                            );
                        } else {
                            "ok".to_string()
                        }
                    }
                };
                (200, text_completion(req, &text))
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn three_hundred_long_messages_stay_under_the_budget_and_stay_findable() {
    const CONTEXT_TOKENS: usize = 4_000;
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(answering_model()).await;
    config(
        &home,
        &tg,
        &model,
        &format!("  context_tokens: {CONTEXT_TOKENS}\n"),
    );
    let filler = "and then we talked about the weather for a long while. ".repeat(25);
    for i in 0..300 {
        let text = if i == 3 {
            format!("message {i}: my dog is called Biscuit; the vault code is PURPLE-OTTER-42. {filler}")
        } else {
            format!("message {i}: {filler}")
        };
        tg.push_text(OWNER, OWNER, &text);
    }
    let mut daemon = start(&home);
    let deadline = Instant::now() + Duration::from_secs(240);
    while tg.sent_texts().iter().filter(|t| *t == "ok").count() < 300 {
        assert!(
            Instant::now() < deadline,
            "{} answers so far",
            tg.sent_texts().len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tg.push_text(OWNER, OWNER, "search now for the vault code");
    wait_reply(&tg, "found:").await;

    let requests = model.requests();
    let budget = CONTEXT_TOKENS * 4;
    for (i, req) in requests.iter().enumerate() {
        let n = request_chars(req);
        assert!(
            n <= budget,
            "request {i} ({}) has {n} characters > {budget}",
            kind(req)
        );
    }
    let kinds: Vec<&str> = requests.iter().map(kind).collect();
    let first_summary = kinds
        .iter()
        .position(|k| *k == "summary")
        .expect("a summary");
    let first_extract = kinds
        .iter()
        .position(|k| *k == "extract")
        .expect("an extraction");
    assert!(first_extract < first_summary, "{kinds:?}");
    // Once anything was summarised, every turn's first message after the system prompt is
    // the summary.
    let turns_after: Vec<&Value> = requests[first_summary..]
        .iter()
        .filter(|r| kind(r) == "turn")
        .collect();
    assert!(turns_after.len() > 100, "{}", turns_after.len());
    for req in &turns_after {
        let second = &req["messages"][1];
        assert_eq!(second["role"], "user", "{second}");
        assert!(
            second["content"]
                .as_str()
                .unwrap()
                .starts_with("## Summary of the earlier conversation"),
            "{second}"
        );
    }
    // The detail is gone from the window, and history_search finds it in the store.
    let last = requests.last().unwrap();
    let search_result = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(search_result.contains("PURPLE-OTTER-42"), "{search_result}");
    let window: Vec<&Value> = last["messages"].as_array().unwrap().iter().collect();
    assert!(
        !window[..window.len() - 2]
            .iter()
            .any(|m| m.to_string().contains("PURPLE-OTTER-42")),
        "the detail was compacted away"
    );
    // The extracted fact went into the owner's memory.
    tg.push_text(OWNER, OWNER, "/memory");
    wait_reply(&tg, "Has a dog called Biscuit.").await;
    daemon.stop();
}

/// The content of the tool message answering `id` in a request.
fn tool_result(req: &Value, id: &str) -> String {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no result for {id} in {req}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_tool_output_reaches_the_model_summarised_unless_it_must_stay_verbatim() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    // 1,000 lines of 50 characters: 50,000 characters for either tool.
    let line = format!("needle {}\n", "x".repeat(42));
    home.write_file("workspace/big.txt", &line.repeat(1_000));
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "r1",
            "rg_search",
            r#"{"pattern": "needle", "path": "big.txt", "max_results": 1000}"#,
        ),
        // The summary request for rg_search's output comes before the turn goes on.
        Step::custom(|req| {
            assert_eq!(kind(req), "output", "{req}");
            (
                200,
                text_completion(req, "SUMMARY: 1000 lines that say needle"),
            )
        }),
        Step::text("searched"),
        Step::tool_call("f1", "file_read", r#"{"path": "big.txt"}"#),
        Step::text("done-reading"),
    ])
    .await;
    config(&home, &tg, &model, "");
    let mut daemon = start(&home);
    tg.push_text(OWNER, OWNER, "search the big file");
    wait_reply(&tg, "searched").await;
    let requests = model.requests();
    let output_request = &requests[1];
    assert!(
        output_request.to_string().contains("needle xxxx"),
        "the summary model saw the output"
    );
    let rg = tool_result(&requests[2], "r1");
    assert!(rg.contains("SUMMARY: 1000 lines"), "{rg}");
    assert!(rg.contains("[summary by"), "{rg}");
    assert!(rg.contains("full output saved to"), "{rg}");
    assert!(rg.chars().count() < 1_000, "{}", rg.chars().count());

    tg.push_text(OWNER, OWNER, "read the big file");
    wait_reply(&tg, "done-reading").await;
    let requests = model.requests();
    assert_eq!(requests.len(), 5, "no summary request for file_read");
    let read = tool_result(&requests[4], "f1");
    assert!(read.contains("output truncated"), "{read}");
    assert!(!read.contains("SUMMARY"), "{read}");
    assert!(read.contains("full output saved to"), "{read}");
    assert!(
        read.starts_with("needle xxxx") || read.contains("needle xxxx"),
        "{read}"
    );
    daemon.stop();
    model.assert_protocol_ok();
}
