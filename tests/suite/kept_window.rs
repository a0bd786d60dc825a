//! The window a session's worker keeps between turns (`agent::window`), through the real daemon,
//! the fake Bot API and a scripted model: over a long conversation every turn's request
//! carries exactly the history a fresh load of the store gives — the newest
//! `model.history_messages` since the last summary, from a user message on, tool traffic
//! included — across the window's sliding front, a tool-calling turn, a restart (a fresh load),
//! `/new` and compactions.

use crate::support::model::{text_completion, tool_calls_completion, without_sent_time};
use crate::support::{Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const OWNER: i64 = 218485655;
const WAIT: Duration = Duration::from_secs(60);
const LIMIT: usize = 8;

/// One message of a request as compared: role, text (without the time stamped on a person's
/// message), the ids of its tool calls, the call a tool result answers.
type Msg = (String, String, Vec<String>, Option<String>);

fn msg(m: &Value) -> Msg {
    let text = m["content"].as_str().unwrap_or_default();
    let calls = m["tool_calls"].as_array().map_or(Vec::new(), |c| {
        c.iter()
            .map(|c| c["id"].as_str().unwrap_or_default().to_string())
            .collect()
    });
    (
        m["role"].as_str().unwrap_or_default().to_string(),
        without_sent_time(text).to_string(),
        calls,
        m["tool_call_id"].as_str().map(str::to_string),
    )
}

fn said(role: &str, text: &str) -> Msg {
    (role.to_string(), text.to_string(), Vec::new(), None)
}

fn kind(req: &Value) -> &'static str {
    let system = req["messages"][0]["content"].as_str().unwrap_or_default();
    if system.starts_with("You summarise the earlier part") {
        "summary"
    } else if system.starts_with("You read the earlier part") {
        "extract"
    } else {
        "turn"
    }
}

/// Summaries and extractions answered as such; a turn asked to "look up" calls
/// `history_search` first; every turn ends with `answer to <the question's first word that
/// starts with q>`.
fn model_steps() -> Vec<Step> {
    let summaries = Arc::new(Mutex::new(0));
    (0..1_000)
        .map(|_| {
            let summaries = summaries.clone();
            Step::custom(move |req| {
                let text = match kind(req) {
                    "summary" => {
                        let mut n = summaries.lock().unwrap();
                        *n += 1;
                        format!("- summary number {n}")
                    }
                    "extract" => "[]".to_string(),
                    _ => {
                        let question = crate::support::model::last_user_text(req);
                        let last = req["messages"].as_array().unwrap().last().unwrap();
                        if question.contains("look up") && last["role"] == "user" {
                            let args = r#"{"query": "q1"}"#.to_string();
                            let call = [("h1".to_string(), "history_search".to_string(), args)];
                            return (200, tool_calls_completion(req, &call));
                        }
                        let mut words = question.split_whitespace();
                        let first = words.find(|w| w.starts_with('q')).unwrap_or_default();
                        format!("answer to {first}")
                    }
                };
                (200, text_completion(req, &text))
            })
        })
        .collect()
}

struct Chat {
    tg: FakeTelegram,
    model: ScriptedModel,
    /// The conversation since `/new`, as the store holds it.
    said: Vec<Msg>,
    /// Where in `said` the last summary ends (compaction's point), and how many messages the
    /// summaries say they hold.
    point: usize,
    summarised: usize,
    /// Requests already checked.
    seen: usize,
    turns_checked: usize,
    summaries_seen: usize,
}

impl Chat {
    /// Ask `text` (its first word unique), wait for the answer, and check the turn's first
    /// request: its history is the window a fresh load gives.
    async fn ask(&mut self, text: &str) {
        let first = text.split_whitespace().next().unwrap().to_string();
        let answer = format!("answer to {first}");
        self.tg.push_text(OWNER, OWNER, text);
        let deadline = Instant::now() + WAIT;
        while !self.tg.sent_texts().contains(&answer) {
            assert!(Instant::now() < deadline, "{}", self.tg.describe_calls());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let requests = self.model.requests();
        let turn: Vec<&Value> = requests[self.seen..]
            .iter()
            .filter(|r| kind(r) == "turn")
            .collect();
        self.summaries_seen += requests[self.seen..]
            .iter()
            .filter(|r| kind(r) == "summary")
            .count();
        self.seen = requests.len();
        let mut sent: Vec<Msg> = turn[0]["messages"].as_array().unwrap()[1..]
            .iter()
            .map(msg)
            .collect();
        let summarised = match sent.first() {
            Some((_, t, _, _)) if t.starts_with("## Summary of the earlier conversation") => {
                let n = t
                    .split_whitespace()
                    .nth(8)
                    .unwrap()
                    .parse::<usize>()
                    .unwrap();
                sent.remove(0);
                n
            }
            _ => 0,
        };
        if summarised > self.summarised {
            // Compaction folded the oldest messages of the window this turn read.
            self.point = self.window_start(self.point) + summarised - self.summarised;
            self.summarised = summarised;
        }
        let asked = sent.pop().unwrap();
        assert_eq!(asked, said("user", text));
        let expected = self.said[self.window_start(self.point)..].to_vec();
        assert_eq!(sent, expected, "the history sent with {first}");
        // What the turn stored: its messages as its last request carried them, and the answer.
        let last = turn.last().unwrap()["messages"].as_array().unwrap();
        let own = last.len() - turn[0]["messages"].as_array().unwrap().len() + 1;
        self.said.extend(last[last.len() - own..].iter().map(msg));
        self.said.push(said("assistant", &answer));
        self.turns_checked += 1;
    }

    /// Where the window a fresh load gives starts in `said`: the newest [`LIMIT`] messages
    /// after `point`, from a user message on.
    fn window_start(&self, point: usize) -> usize {
        let newest = point.max(self.said.len().saturating_sub(LIMIT));
        let from = self.said[newest..].iter().position(|m| m.0 == "user");
        newest + from.unwrap_or(self.said.len() - newest)
    }

    async fn new_session(&mut self) {
        let before = self.tg.sent_texts().len();
        self.tg.push_text(OWNER, OWNER, "/new");
        let deadline = Instant::now() + WAIT;
        while self.tg.sent_texts().len() == before {
            assert!(Instant::now() < deadline, "{}", self.tg.describe_calls());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.said.clear();
        (self.point, self.summarised) = (0, 0);
    }
}

fn start(home: &TestHome) -> Daemon {
    let tmp = home.path().join("tmpdir");
    std::fs::create_dir_all(&tmp).unwrap();
    Daemon::start_with_env(home, &[("TMPDIR", tmp.to_str().unwrap())])
}

#[tokio::test(flavor = "multi_thread")]
async fn every_turn_carries_the_window_a_fresh_load_gives_across_a_restart_new_and_compaction() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(model_steps()).await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: m\n  history_messages: {LIMIT}\n\
         \x20 context_tokens: 4000\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: off\n\
         owners: [\"telegram:{OWNER}\"]\n",
        model.base_url(),
        tg.token(),
        tg.base_url()
    ));
    let mut daemon = start(&home);
    let mut chat = Chat {
        tg,
        model,
        said: Vec::new(),
        point: 0,
        summarised: 0,
        seen: 0,
        turns_checked: 0,
        summaries_seen: 0,
    };
    // Short messages: the window's front slides past the limit; a turn with a tool call.
    for i in 1..=6 {
        chat.ask(&format!("q{i} tell me something")).await;
    }
    chat.ask("q7 look up what I asked first").await;
    for i in 8..=10 {
        chat.ask(&format!("q{i} and then?")).await;
    }
    // A restart: the next turn loads the window whole, the one after resumes it.
    daemon.stop();
    let mut daemon = start(&home);
    for i in 11..=13 {
        chat.ask(&format!("q{i} after the restart")).await;
    }
    // `/new`: another session, an empty window.
    chat.new_session().await;
    for i in 14..=15 {
        chat.ask(&format!("q{i} in a new session")).await;
    }
    // Long messages: compaction summarises the oldest turns, more than once.
    let filler = "and then we talked about the weather for a long while. ".repeat(40);
    for i in 16..=30 {
        chat.ask(&format!("q{i} {}", filler.trim_end())).await;
    }
    assert!(
        chat.summaries_seen >= 2,
        "{} summaries",
        chat.summaries_seen
    );
    assert_eq!(chat.turns_checked, 30);
    chat.model.assert_protocol_ok();
    daemon.stop();
}

/// A group message to the bot from `user`.
fn group_update(update_id: i64, user: i64, text: &str) -> Value {
    serde_json::json!({
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

const GROUP: i64 = -1001234;
const STRANGER: i64 = 99001;

/// In a group the kept window is the whole one: someone not the owner is sent it without the
/// owner's tool traffic, and the owner's next turn still gets that traffic.
#[tokio::test(flavor = "multi_thread")]
async fn in_a_group_the_owner_keeps_the_tool_traffic_a_stranger_is_not_sent() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(model_steps()).await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: m\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: off\n\
         owners: [\"telegram:{OWNER}\"]\n",
        model.base_url(),
        tg.token(),
        tg.base_url()
    ));
    let mut daemon = start(&home);
    let (tg, model) = (&tg, &model);
    let ask = |user: i64, text: &str| {
        let first = text.split_whitespace().next().unwrap().to_string();
        tg.push_update(group_update(tg.next_update_id(), user, text));
        async move {
            let answer = format!("answer to {first}");
            let deadline = Instant::now() + WAIT;
            while !tg.sent_texts().iter().any(|t| t.contains(&answer)) {
                assert!(Instant::now() < deadline, "{}", tg.describe_calls());
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            model.last_request().unwrap()
        }
    };
    ask(OWNER, "q1 hello").await;
    ask(OWNER, "q2 look up what I asked").await;
    let strangers = ask(STRANGER, "q3 what did they say?").await;
    let owners = ask(OWNER, "q4 and now?").await;
    let texts = |req: &Value| -> Vec<Msg> {
        req["messages"].as_array().unwrap()[1..]
            .iter()
            .map(msg)
            .collect()
    };
    let strangers = texts(&strangers);
    assert!(
        strangers.iter().all(|m| m.0 != "tool" && m.2.is_empty()),
        "{strangers:?}"
    );
    let answers: Vec<&str> = strangers
        .iter()
        .filter(|m| m.0 == "assistant")
        .map(|m| m.1.as_str())
        .collect();
    assert_eq!(answers, ["answer to q1", "answer to q2"]);
    let owners = texts(&owners);
    let calls = owners
        .iter()
        .position(|m| m.2 == ["h1"])
        .expect("the tool call");
    assert_eq!(owners[calls + 1].3.as_deref(), Some("h1"), "{owners:?}");
    let answers: Vec<&str> = owners
        .iter()
        .filter(|m| m.0 == "assistant" && m.2.is_empty())
        .map(|m| m.1.as_str())
        .collect();
    assert_eq!(answers, ["answer to q1", "answer to q2", "answer to q3"]);
    model.assert_protocol_ok();
    daemon.stop();
}

/// Replicas on one PostgreSQL: a replica whose worker kept the session's window while it was
/// paused and another replica ran turns of the session answers the next turn with the whole
/// conversation.
#[tokio::test(flavor = "multi_thread")]
async fn a_replica_that_kept_a_window_while_another_ran_the_session_sends_all_of_it() {
    use crate::support::daemon::fresh_pg_database;
    const CHAT: i64 = 6161;
    let url = fresh_pg_database();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(crate::support::model::echo_user(20)).await;
    let homes = super::replicas::homes(2, &url, |url| {
        format!(
            "model:\n  base_url: {}\n  api_key: sk-test\n  name: test-model\n\
             channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: off\n\
             owners: [\"telegram:{CHAT}\"]\ngateway:\n  listen: 127.0.0.1:0\n\
             store:\n  url: \"{url}\"\n  lease_secs: 5\n",
            model.base_url(),
            tg.token(),
            tg.base_url()
        )
    });
    let mut daemons: Vec<Daemon> = homes.iter().map(Daemon::start).collect();
    let polling = |h: &TestHome| h.log().contains("polls Telegram now");
    crate::support::wait_until("a replica polls", WAIT, || homes.iter().any(polling)).await;
    let (tg, model, homes) = (&tg, &model, &homes);
    // Ask, wait for the answer; the replica that ran the turn and the turn's request.
    let ask = |text: &'static str| async move {
        let id = tg.push_text(CHAT, CHAT, text);
        let answer = format!("answer to: {text}");
        let deadline = Instant::now() + WAIT;
        while !tg.sent_texts().contains(&answer) {
            assert!(Instant::now() < deadline, "{}", tg.describe_calls());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let ran = format!("runs telegram event {id} ");
        let runner = homes.iter().position(|h| h.log().contains(&ran));
        (
            runner.expect("a replica logs the turn"),
            model.last_request().unwrap(),
        )
    };
    let signal = |d: &Daemon, sig: libc::c_int| {
        // SAFETY: kill has no memory preconditions; the pid is our own child's.
        assert_eq!(unsafe { libc::kill(d.pid() as libc::pid_t, sig) }, 0);
    };
    ask("one").await;
    ask("two").await;
    let (kept_it, _) = ask("three").await;
    let other = 1 - kept_it;
    // Its session lease let go once the turn ended; then it is paused.
    tokio::time::sleep(Duration::from_secs(1)).await;
    signal(&daemons[kept_it], libc::SIGSTOP);
    // kill(2) returns before every thread has stopped (the group stop is carried out by the
    // process's own threads, which a loaded machine may run late): "four" is sent only once
    // all of them have, or the paused replica may start its turn first.
    let pid = daemons[kept_it].pid();
    crate::support::wait_until("the paused replica's threads all stop", WAIT, || {
        all_stopped(pid)
    })
    .await;
    assert_eq!(ask("four").await.0, other);
    assert_eq!(ask("five").await.0, other);
    signal(&daemons[kept_it], libc::SIGCONT);
    daemons[other].stop();
    let (runner, req) = ask("six").await;
    assert_eq!(
        runner, kept_it,
        "the replica that kept a window runs the turn"
    );
    let sent: Vec<Msg> = req["messages"].as_array().unwrap()[1..]
        .iter()
        .map(msg)
        .collect();
    let mut expected = Vec::new();
    for q in ["one", "two", "three", "four", "five"] {
        expected.push(said("user", q));
        expected.push(said("assistant", &format!("answer to: {q}")));
    }
    expected.push(said("user", "six"));
    assert_eq!(sent, expected);
    for d in &mut daemons {
        d.stop();
    }
}

/// Whether every thread of process `pid` is stopped (state `T` in `/proc/PID/task/*/stat`).
fn all_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|t| {
        std::fs::read_to_string(t.path().join("stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, rest)| rest.trim_start().starts_with('T'))
            })
            .unwrap_or(false)
    })
}
