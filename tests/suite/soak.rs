//! Opt-in soak test: the real `ethan run` with both channels — Telegram (long polling against
//! [`FakeTelegram`]) and Lark (the event long connection against [`FakeLark`]) — answering
//! thousands of messages from a fast model ([`FnModel`]) while faults are injected, then every
//! message is checked for exactly one reply and every side effect for exactly one occurrence.
//!
//! ```text
//! cargo test --test all soak:: -- --ignored --nocapture
//! SOAK_MESSAGES=1000 SOAK_SESSIONS=40 SOAK_SEED=7 cargo test --test all soak:: -- --ignored --nocapture
//! ```
//!
//! Knobs (environment): `SOAK_MESSAGES` (default 10 000), `SOAK_SESSIONS` (default 200: half
//! Telegram private chats, half Lark p2p chats, every sender an owner), `SOAK_SEED` (default 1;
//! drives which turns call a tool and every fault), `SOAK_KILLS` (default 2: `kill -9` of the
//! daemon and a restart, after 10 % and 20 % of the messages).
//!
//! Each message carries a tag (`msg-000123`) that the model echoes, so replies are matched to
//! messages. About a fifth of the turns make the model call `file_write` appending the tag as one
//! line to a per-session file in a temporary directory, so a side effect run twice shows up as a
//! repeated line. Such a write asks the owner, and the test answers as the owner would: it presses
//! "approve for this session" on each approval it sees (Telegram's inline button, Lark's card
//! button), so the consent path runs under the faults too (a kill -9 forgets the grants: the
//! re-run turn asks again). Approvals are not replies. Faults, chosen by a seeded RNG: the model
//! answers 500, a body that is not JSON or a body cut off midway (at most once per model step,
//! the provider's retry gets the real answer); Telegram answers `sendMessage` and `getUpdates`
//! with a 5xx; the Lark websocket is dropped (unacknowledged events are pushed again after the
//! reconnect, as Lark does) and events are delivered twice; the daemon is killed and restarted.
//!
//! The whole run is bounded ([`RUN_BOUND`]); at the end a table of figures is printed.

use crate::support::lark::{self, FakeLark};
use crate::support::model::{self, FnAnswer, FnModel};
use crate::support::{Daemon, FakeTelegram, TestHome};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The whole run, daemon start to the last check.
const RUN_BOUND: Duration = Duration::from_secs(20 * 60);
/// Messages sent but not answered yet, at most (the daemon runs 8 turns at once).
const MAX_IN_FLIGHT: usize = 48;
/// Share of turns that call the side-effect tool.
const TOOL_SHARE: f64 = 0.2;
/// Per model step (first request of a step only): chance of a 500, garbage, or a cut-off body.
const MODEL_FAULT: f64 = 0.03;
/// Per message sent: chance of queueing a Telegram `sendMessage` 5xx.
const TG_SEND_FAULT: f64 = 0.004;
/// Per message sent: chance of queueing a Telegram `getUpdates` 5xx (each stalls polling ~11 s).
const TG_POLL_FAULT: f64 = 0.0004;
/// Per message sent: chance of dropping the Lark websocket.
const LARK_DROP: f64 = 0.0015;
/// Per Lark message: chance that its event is delivered a second time a little later.
const LARK_REDELIVER: f64 = 0.02;
/// An event not acknowledged this long after its push is pushed again.
const LARK_ACK_PATIENCE: Duration = Duration::from_secs(6);
/// The run fails when no message gets its first reply for this long.
const NO_PROGRESS: Duration = Duration::from_secs(90);
/// After the last first reply, how long to keep watching for late duplicates.
const SETTLE: Duration = Duration::from_secs(5);

const TG_USER_BASE: i64 = 700_000_000;

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().replace('_', "").parse().ok())
        .unwrap_or(default)
}

fn tag(n: usize) -> String {
    format!("msg-{n:06}")
}

/// Every tag (`msg-` and six digits) in `text`, as message numbers.
fn tags_in(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("msg-") {
        let digits = &rest[i + 4..];
        let d: String = digits.chars().take(6).collect();
        if d.len() == 6 && d.chars().all(|c| c.is_ascii_digit()) {
            out.push(d.parse().unwrap());
        }
        rest = &rest[i + 4..];
    }
    out
}

/// Whether message `n` makes the model call the tool (a pure function of the seed and `n`, so
/// a re-run turn after a restart asks for the very same call).
fn calls_tool(seed: u64, n: usize) -> bool {
    StdRng::seed_from_u64(seed ^ (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .random_bool(TOOL_SHARE)
}

/// Messages whose reply was being sent to Telegram when the daemon was killed: the Bot API has
/// no idempotent send, so the restarted daemon does not send it again and logs `the reply … to
/// telegram event <update_id> … not sent again`. Such a reply may be lost; it is never doubled.
fn replies_not_resent(log: &str, tg_updates: &HashMap<i64, usize>) -> HashSet<usize> {
    log.lines()
        .filter(|l| l.contains("not sent again"))
        .filter_map(|l| {
            let rest = &l[l.find("telegram event ")? + "telegram event ".len()..];
            let id: i64 = rest.split_whitespace().next()?.parse().ok()?;
            tg_updates.get(&id).copied()
        })
        .collect()
}

/// Tool turns whose `file_write` the daemon refused to run (logged `tool call call_<tag> … ok=false`)
/// and never ran (no `ok=true` line): a turn cut by a kill -9 after the replay guard recorded the
/// call but before the write ran is re-run after the restart, and the guard refuses the call
/// (side effects are at most once). Such a side effect is lost; it is never doubled.
fn effects_not_rerun(log: &str) -> HashSet<usize> {
    let mut ran = HashSet::new();
    let mut refused = HashSet::new();
    for line in log.lines().filter(|l| l.contains("tool call call_msg-")) {
        let Some(&n) = tags_in(line).first() else {
            continue;
        };
        if line.contains("ok=true") {
            ran.insert(n);
        } else if line.contains("ok=false") {
            refused.insert(n);
        }
    }
    refused.difference(&ran).copied().collect()
}

fn vm_rss_kb(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

#[derive(Default)]
struct ModelFaults {
    /// `(message, step)` pairs that already got their fault.
    done: HashSet<(usize, u8)>,
    server_error: u64,
    garbage: u64,
    cut_off: u64,
}

/// The model: echoes the tag of the latest user message; for tool turns first asks for one
/// `file_write` (append the tag to the session's file), then answers after the tool result.
fn model_answer(
    req: &Value,
    seed: u64,
    sessions: usize,
    effects: &Path,
    faults: &Mutex<(StdRng, ModelFaults)>,
) -> FnAnswer {
    let Some(&n) = tags_in(&model::last_user_text(req)).first() else {
        return FnAnswer::Json(200, model::text_completion(req, "ok"));
    };
    let after_tool = model::last_role(req) == Some("tool");
    let step = u8::from(after_tool);
    {
        let mut g = faults.lock().unwrap();
        let (rng, f) = &mut *g;
        if !f.done.contains(&(n, step)) && rng.random_bool(MODEL_FAULT) {
            f.done.insert((n, step));
            match rng.random_range(0..3) {
                0 => {
                    f.server_error += 1;
                    return FnAnswer::Json(
                        500,
                        json!({"error": {"message": "The server had an error", "type": "server_error"}}),
                    );
                }
                1 => {
                    f.garbage += 1;
                    return FnAnswer::Garbage;
                }
                _ => {
                    f.cut_off += 1;
                    return FnAnswer::CutOff(model::text_completion(req, "CUT OFF ANSWER"));
                }
            }
        }
    }
    let t = tag(n);
    if !after_tool && calls_tool(seed, n) {
        let path = effects.join(format!("session-{:03}.log", n % sessions));
        let args = json!({"path": path.display().to_string(), "content": format!("{t}\n"), "append": true});
        let calls = [(
            format!("call_{t}"),
            "file_write".to_string(),
            args.to_string(),
        )];
        return FnAnswer::Json(200, model::tool_calls_completion(req, &calls));
    }
    let text = if after_tool {
        format!("Wrote {t}.")
    } else {
        format!("Got {t}.")
    };
    FnAnswer::Json(200, model::text_completion(req, &text))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    Telegram,
    Lark,
}

struct Msg {
    via: Via,
    replies: u32,
    /// Lark only: the envelope (pushed again on redelivery) and when it was last pushed.
    envelope: Option<Value>,
    last_push: Option<Instant>,
}

/// On a failure, copies the daemon log out of the test home (which is deleted) and says where.
struct KeepLogOnFailure(PathBuf, u64);

impl Drop for KeepLogOnFailure {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let to = std::env::temp_dir().join(format!("ethan-soak-seed{}-daemon.log", self.1));
            if std::fs::copy(&self.0, &to).is_ok() {
                eprintln!("soak: the daemon log is kept at {}", to.display());
            }
        }
    }
}

#[derive(Default)]
struct Counts {
    tg_send_5xx: u64,
    tg_poll_5xx: u64,
    lark_drops: u64,
    lark_redelivered: u64,
    lark_repushed_unacked: u64,
    kills: u64,
    unmatched_replies: u64,
    approvals_pressed: u64,
    /// The daemon's "Approved" answers to a typed `/approve <id>` (the text fallback's).
    approvals_acknowledged: u64,
}

/// The `callback_data` of the button to press on a Telegram approval ("for this session" when
/// offered, else "once"), or `None` when the message is not an approval.
fn telegram_approval(body: &Value) -> Option<String> {
    let rows = body.pointer("/reply_markup/inline_keyboard")?.as_array()?;
    let data: Vec<&str> = rows
        .iter()
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(|b| b.get("callback_data").and_then(Value::as_str))
        .filter(|d| d.starts_with("ap:"))
        .collect();
    let pick = |p: &str| {
        data.iter()
            .find(|d| d.starts_with(p))
            .map(|d| d.to_string())
    };
    pick("ap:s:").or_else(|| pick("ap:o:"))
}

/// The request id of an approval sent as text, without buttons (when the keyboard's send
/// failed): "… Reply /approve <id> or /deny <id>."
fn fallback_approval(text: &str) -> Option<&str> {
    let rest = &text[text.find("Reply /approve ")? + "Reply /approve ".len()..];
    rest.split_whitespace().next()
}

/// The daemon's answer to a typed `/approve <id>`: accepted, or the request already gone (a
/// kill -9 between the question and the answer; the re-run turn asks again).
fn is_approval_ack(text: &str) -> bool {
    text == "Approved" || text.starts_with("This request is no longer waiting")
}

/// The button value to press on a Lark approval card (`ethan_approval` with choice `s` when
/// offered, else `o`), or `None` when the message is not an approval.
fn lark_approval(content: &Value) -> Option<Value> {
    fn values(v: &Value, out: &mut Vec<Value>) {
        match v {
            Value::Object(m) => {
                if m.contains_key("ethan_approval") {
                    out.push(v.clone());
                }
                m.values().for_each(|x| values(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| values(x, out)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    values(content, &mut found);
    let pick = |c: &str| found.iter().find(|v| v["choice"] == c).cloned();
    pick("s").or_else(|| pick("o"))
}

/// The session an approval is about: the `session-NNN.log` file its description names.
fn session_in(text: &str) -> Option<usize> {
    let i = text.find("session-")?;
    text[i + 8..].get(..3)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "soak test, minutes long: cargo test --test all soak:: -- --ignored --nocapture"]
async fn soak_both_channels_under_faults() {
    match tokio::time::timeout(RUN_BOUND, soak()).await {
        Ok(()) => {}
        Err(_) => panic!("the soak run did not finish within {RUN_BOUND:?}"),
    }
}

async fn soak() {
    let messages = knob("SOAK_MESSAGES", 10_000) as usize;
    let sessions = (knob("SOAK_SESSIONS", 200) as usize).max(2);
    let seed = knob("SOAK_SEED", 1);
    let kills_planned = knob("SOAK_KILLS", 2) as usize;
    assert!(messages < 1_000_000, "tags have six digits");
    let tg_sessions = sessions / 2;
    let started = Instant::now();

    let home = TestHome::new();
    let _keep = KeepLogOnFailure(home.log_path(), seed);
    let effects_dir = tempfile::Builder::new()
        .prefix("ethan-soak-effects-")
        .tempdir()
        .unwrap();
    let effects: PathBuf = effects_dir.path().to_path_buf();
    let tg = FakeTelegram::start().await;
    let lk = FakeLark::start().await;
    let faults = Arc::new(Mutex::new((
        StdRng::seed_from_u64(seed.wrapping_add(1)),
        ModelFaults::default(),
    )));
    let model = {
        let (faults, effects) = (Arc::clone(&faults), effects.clone());
        FnModel::start(move |req| model_answer(req, seed, sessions, &effects, &faults)).await
    };

    // Session s < tg_sessions is Telegram user/chat TG_USER_BASE + s; the rest are Lark users.
    let lark_user = |s: usize| format!("ou_soak{s:05}");
    let mut owners: Vec<String> = (0..tg_sessions)
        .map(|s| format!("\"telegram:{}\"", TG_USER_BASE + s as i64))
        .collect();
    owners.extend((tg_sessions..sessions).map(|s| format!("\"lark:{}\"", lark_user(s))));
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-soak\n  name: soak-model\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n{}\
         owners: [{}]\n",
        model.base_url(),
        tg.token(),
        tg.base_url(),
        lk.channel_yaml(""),
        owners.join(", ")
    ));

    let mut daemon = Daemon::start(&home);
    lk.wait_connections(1, Duration::from_secs(60)).await;

    let mut rng = StdRng::seed_from_u64(seed);
    let mut msgs: Vec<Msg> = Vec::with_capacity(messages);
    let mut seq_to_msg: HashMap<u64, usize> = HashMap::new();
    let mut tg_updates: HashMap<i64, usize> = HashMap::new();
    // Messages whose reply the daemon says it did not send again after a kill (see below).
    let mut in_doubt: HashSet<usize> = HashSet::new();
    let mut last_doubt_scan = Instant::now();
    let mut stalled = false;
    let mut unacked: HashSet<usize> = HashSet::new();
    // Lark approval presses not yet pushed (no connection at the time).
    let mut lark_presses: Vec<Value> = Vec::new();
    // Lark streaming cards sent as replies and not closed yet (checked every 100 ms).
    let mut open_cards: Vec<String> = Vec::new();
    let mut last_card_scan = Instant::now();
    let mut redeliveries: VecDeque<(Instant, usize)> = VecDeque::new();
    let mut counts = Counts::default();
    let (mut tg_cursor, mut lk_cursor, mut ack_cursor) = (0usize, 0usize, 0usize);
    let mut answered = 0usize;
    let mut answered_at_restart = 0usize;
    let mut rss_start = None;
    let mut rss_max = 0u64;
    let mut last_rss_sample = Instant::now();
    // Early in the run, so that the last process serves most of it (its RSS tells about leaks).
    let kill_points: Vec<usize> = (1..=kills_planned)
        .map(|k| (messages * k / 10).max(1))
        .collect();
    let mut rss_last_start = None;
    let mut all_answered_at: Option<Instant> = None;
    let mut last_progress = Instant::now();
    // Per Telegram chat: `/approve <id>` typed and not yet acknowledged.
    let mut typed_approvals: HashMap<i64, u32> = HashMap::new();

    loop {
        // Replies, and approvals answered as the owner would.
        let mut new_replies: Vec<String> = Vec::new();
        for (chat, body) in tg.sent_since(&mut tg_cursor) {
            let text = body["text"].as_str().unwrap_or("").to_string();
            if is_approval_ack(&text) && typed_approvals.get(&chat).copied().unwrap_or(0) > 0 {
                // The answer to an `/approve <id>` typed below: not a reply to a message.
                *typed_approvals.entry(chat).or_default() -= 1;
                counts.approvals_acknowledged += 1;
            } else if let Some(data) = telegram_approval(&body) {
                let id = tg.next_update_id();
                tg.push_update(FakeTelegram::callback_update(id, chat, chat, &data));
                counts.approvals_pressed += 1;
            } else if let Some(request) = fallback_approval(&text) {
                // The keyboard's send met a fault: the text fallback, answered as it says.
                let id = tg.next_update_id();
                let answer = format!("/approve {request}");
                tg.push_update(FakeTelegram::text_update(id, chat, chat, &answer));
                *typed_approvals.entry(chat).or_default() += 1;
                counts.approvals_pressed += 1;
            } else {
                new_replies.push(text);
            }
        }
        for m in lk.messages_since(&mut lk_cursor) {
            let text = m.content.to_string();
            match lark_approval(&m.content) {
                Some(value) => {
                    let s = session_in(&text).expect("a Lark approval naming the session's file");
                    let user = lark_user(s);
                    lark_presses.push(lark::card_action(value, &user, &format!("oc_p2p_{user}")));
                    counts.approvals_pressed += 1;
                }
                // A reply streamed into a card counts once the card is closed (its final text).
                None => match m.card_entity {
                    Some(card) => open_cards.push(card),
                    None => new_replies.push(text),
                },
            }
        }
        lark_presses.retain(|press| lk.try_push_event(press).is_none());
        if !open_cards.is_empty() && last_card_scan.elapsed() >= Duration::from_millis(100) {
            last_card_scan = Instant::now();
            let cards = lk.cards();
            open_cards.retain(|id| match cards.iter().find(|c| &c.card_id == id) {
                Some(c) if !c.streaming => {
                    new_replies.push(c.current().to_string());
                    false
                }
                _ => true,
            });
        }
        for text in new_replies {
            // A Lark card may show the text twice (summary and body): one reply per message.
            let mut found = tags_in(&text);
            found.sort_unstable();
            found.dedup();
            if found.is_empty() {
                counts.unmatched_replies += 1;
                eprintln!("soak: a reply without a tag: {text:.200}");
            }
            for n in found {
                if let Some(m) = msgs.get_mut(n) {
                    m.replies += 1;
                    if m.replies == 1 {
                        answered += 1;
                        last_progress = Instant::now();
                    }
                }
            }
        }
        // Lark ACKs.
        for (seq, code) in lk.acks_since(&mut ack_cursor) {
            if let Some(&n) = seq_to_msg.get(&seq) {
                if code == 200 {
                    unacked.remove(&n);
                }
            }
        }
        if rss_start.is_none() && answered > 0 {
            rss_start = vm_rss_kb(daemon.pid());
        }
        if rss_last_start.is_none() && answered > answered_at_restart {
            rss_last_start = vm_rss_kb(daemon.pid());
        }
        if last_rss_sample.elapsed() >= Duration::from_secs(1) {
            last_rss_sample = Instant::now();
            rss_max = rss_max.max(vm_rss_kb(daemon.pid()).unwrap_or(0));
        }

        // kill -9 and restart.
        if kill_points.get(counts.kills as usize) == Some(&msgs.len()) && msgs.len() < messages {
            let status = daemon.kill();
            counts.kills += 1;
            eprintln!(
                "soak: killed the daemon ({status}) after {} messages sent, {answered} answered; restarting",
                msgs.len()
            );
            daemon = Daemon::start(&home);
            rss_last_start = None;
            answered_at_restart = answered;
        }

        let connected = lk.is_connected();
        // Lark: events not acknowledged in time (lost with a dropped connection, or answered
        // with a failure code) are pushed again, as Lark does.
        if connected {
            let now = Instant::now();
            let stale: Vec<usize> = unacked
                .iter()
                .copied()
                .filter(|&n| {
                    msgs[n]
                        .last_push
                        .is_none_or(|t| now.duration_since(t) >= LARK_ACK_PATIENCE)
                })
                .collect();
            for n in stale {
                let env = msgs[n].envelope.clone().unwrap();
                if let Some(seq) = lk.try_push_event(&env) {
                    seq_to_msg.insert(seq, n);
                    msgs[n].last_push = Some(Instant::now());
                    counts.lark_repushed_unacked += 1;
                }
            }
            while redeliveries.front().is_some_and(|(t, _)| *t <= now) {
                let (_, n) = redeliveries.pop_front().unwrap();
                let env = msgs[n].envelope.clone().unwrap();
                if let Some(seq) = lk.try_push_event(&env) {
                    seq_to_msg.insert(seq, n);
                    counts.lark_redelivered += 1;
                }
            }
        }

        // New messages.
        while msgs.len() < messages
            && msgs.len() - answered.min(msgs.len()) < MAX_IN_FLIGHT
            && kill_points.get(counts.kills as usize) != Some(&msgs.len())
        {
            let n = msgs.len();
            let s = n % sessions;
            let text = format!("Please note {} for me (session {s}).", tag(n));
            if s < tg_sessions {
                let user = TG_USER_BASE + s as i64;
                let id = tg.push_text(user, user, &text);
                tg_updates.insert(id, n);
                msgs.push(Msg {
                    via: Via::Telegram,
                    replies: 0,
                    envelope: None,
                    last_push: None,
                });
            } else {
                if !lk.is_connected() {
                    break;
                }
                let env = lark::p2p_text(&lark_user(s), &text);
                let seq = lk.try_push_event(&env);
                if let Some(seq) = seq {
                    seq_to_msg.insert(seq, n);
                }
                unacked.insert(n);
                if rng.random_bool(LARK_REDELIVER) {
                    let later = Instant::now() + Duration::from_millis(rng.random_range(100..3000));
                    redeliveries.push_back((later, n));
                }
                msgs.push(Msg {
                    via: Via::Lark,
                    replies: 0,
                    envelope: Some(env),
                    last_push: seq.map(|_| Instant::now()),
                });
            }
            // Transport faults, drawn per message sent.
            if rng.random_bool(TG_SEND_FAULT) && tg.pending_failures("sendMessage") == 0 {
                tg.fail_next(
                    "sendMessage",
                    502,
                    json!({"ok": false, "error_code": 502, "description": "Bad Gateway"}),
                );
                counts.tg_send_5xx += 1;
            }
            if rng.random_bool(TG_POLL_FAULT) && tg.pending_failures("getUpdates") == 0 {
                tg.fail_next(
                    "getUpdates",
                    500,
                    json!({"ok": false, "error_code": 500, "description": "Internal Server Error"}),
                );
                counts.tg_poll_5xx += 1;
            }
            if rng.random_bool(LARK_DROP) && lk.is_connected() {
                lk.drop_connection();
                counts.lark_drops += 1;
            }
        }
        redeliveries.make_contiguous().sort_by_key(|(t, _)| *t);

        // Waiting for the last replies: is the daemon saying some will never come?
        if msgs.len() == messages
            && answered < messages
            && counts.kills > 0
            && last_progress.elapsed() >= Duration::from_secs(10)
            && last_doubt_scan.elapsed() >= Duration::from_secs(5)
        {
            last_doubt_scan = Instant::now();
            in_doubt = replies_not_resent(&home.log(), &tg_updates);
        }
        let unanswered_in_doubt = in_doubt.iter().filter(|&&n| msgs[n].replies == 0).count();
        if msgs.len() == messages && answered + unanswered_in_doubt == messages {
            let at = *all_answered_at.get_or_insert_with(Instant::now);
            if at.elapsed() >= SETTLE && redeliveries.is_empty() {
                break;
            }
        }
        if last_progress.elapsed() > NO_PROGRESS {
            eprintln!("soak: no new reply for {NO_PROGRESS:?}; stopping");
            stalled = true;
            break;
        }
        if !daemon.is_running() {
            panic!("the daemon exited: {:?}", daemon.try_status());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    if counts.kills > 0 {
        in_doubt = replies_not_resent(&home.log(), &tg_updates);
    }
    let rss_end = vm_rss_kb(daemon.pid());
    rss_max = rss_max.max(rss_end.unwrap_or(0));
    let model_requests = model.requests();
    let status = daemon.stop();
    let wall = started.elapsed();

    // Side effects: one line per tool turn, in its session's file.
    let expected: BTreeMap<usize, ()> = (0..msgs.len())
        .filter(|&n| calls_tool(seed, n))
        .map(|n| (n, ()))
        .collect();
    let mut seen: HashMap<usize, u32> = HashMap::new();
    let mut stray_lines = 0u64;
    for entry in std::fs::read_dir(&effects).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for line in text.lines() {
            match tags_in(line).as_slice() {
                [n] => *seen.entry(*n).or_default() += 1,
                _ => stray_lines += 1,
            }
        }
    }
    let first = |v: &[usize]| v.iter().take(10).map(|&n| tag(n)).collect::<Vec<_>>();
    let not_rerun = if counts.kills > 0 {
        effects_not_rerun(&home.log())
    } else {
        HashSet::new()
    };
    let effects_lost_in_kill: Vec<usize> = expected
        .keys()
        .copied()
        .filter(|n| !seen.contains_key(n) && not_rerun.contains(n))
        .collect();
    let effects_missing: Vec<usize> = expected
        .keys()
        .copied()
        .filter(|n| !seen.contains_key(n) && !not_rerun.contains(n))
        .collect();
    let effects_dup: Vec<usize> = seen
        .iter()
        .filter(|(_, c)| **c > 1)
        .map(|(n, _)| *n)
        .collect();
    let effects_unexpected = seen.keys().filter(|n| !expected.contains_key(n)).count();

    let replies: u64 = msgs.iter().map(|m| u64::from(m.replies)).sum();
    let lost_in_kill = in_doubt.iter().filter(|&&n| msgs[n].replies == 0).count();
    // A stalled run stops sending: only the messages sent are judged, the rest counted apart.
    let unsent = messages - msgs.len();
    let missing: Vec<usize> = (0..msgs.len())
        .filter(|&n| msgs[n].replies == 0 && !in_doubt.contains(&n))
        .collect();
    let duplicates: Vec<usize> = (0..msgs.len()).filter(|&n| msgs[n].replies > 1).collect();
    let by = |v: Via| msgs.iter().filter(|m| m.via == v).count();
    let mf = {
        let g = faults.lock().unwrap();
        (g.1.server_error, g.1.garbage, g.1.cut_off)
    };
    let mb =
        |kb: Option<u64>| kb.map_or("?".to_string(), |k| format!("{:.1} MB", k as f64 / 1024.0));

    let rows: Vec<(&str, String)> = vec![
        ("seed", seed.to_string()),
        (
            "sessions",
            format!(
                "{sessions} ({tg_sessions} Telegram, {} Lark)",
                sessions - tg_sessions
            ),
        ),
        (
            "messages",
            format!(
                "{messages} ({} Telegram, {} Lark)",
                by(Via::Telegram),
                by(Via::Lark)
            ),
        ),
        ("messages never sent (the run stalled)", unsent.to_string()),
        ("replies", replies.to_string()),
        ("approvals pressed", counts.approvals_pressed.to_string()),
        (
            "approvals typed and acknowledged",
            counts.approvals_acknowledged.to_string(),
        ),
        ("missing replies", missing.len().to_string()),
        (
            "replies cut by kill -9, not re-sent (Telegram)",
            lost_in_kill.to_string(),
        ),
        ("duplicate replies", duplicates.len().to_string()),
        (
            "replies without a tag",
            counts.unmatched_replies.to_string(),
        ),
        (
            "side effects expected / seen",
            format!("{} / {}", expected.len(), seen.len()),
        ),
        (
            "side effects missing / duplicated / unexpected",
            format!(
                "{} / {} / {effects_unexpected} (+{stray_lines} stray lines)",
                effects_missing.len(),
                effects_dup.len()
            ),
        ),
        (
            "side effects cut by kill -9, re-run refused",
            format!(
                "{} {:?}",
                effects_lost_in_kill.len(),
                first(&effects_lost_in_kill)
            ),
        ),
        ("model requests", model_requests.to_string()),
        ("fault: model 500", mf.0.to_string()),
        ("fault: model garbage body", mf.1.to_string()),
        ("fault: model body cut off", mf.2.to_string()),
        (
            "fault: Telegram sendMessage 5xx",
            counts.tg_send_5xx.to_string(),
        ),
        (
            "fault: Telegram getUpdates 5xx",
            counts.tg_poll_5xx.to_string(),
        ),
        (
            "fault: Lark websocket dropped",
            counts.lark_drops.to_string(),
        ),
        (
            "fault: Lark event delivered again",
            counts.lark_redelivered.to_string(),
        ),
        (
            "Lark events re-pushed (no ACK in time)",
            counts.lark_repushed_unacked.to_string(),
        ),
        ("Lark connections", lk.connections().to_string()),
        ("fault: kill -9 + restart", counts.kills.to_string()),
        (
            "daemon RSS, first process at its first reply",
            mb(rss_start),
        ),
        (
            "daemon RSS, last process at its first reply",
            mb(rss_last_start),
        ),
        ("daemon RSS, last process at the end", mb(rss_end)),
        ("daemon RSS max (sampled 1/s)", mb(Some(rss_max))),
        ("daemon exit after SIGTERM", status.to_string()),
        ("wall time", format!("{:.1} s", wall.as_secs_f64())),
        (
            "throughput",
            format!("{:.1} messages/s", messages as f64 / wall.as_secs_f64()),
        ),
    ];
    let w = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    println!("\n== soak figures");
    for (k, v) in &rows {
        println!("{k:<w$}  {v}");
    }
    println!();

    assert!(!stalled, "no new reply for {NO_PROGRESS:?}");
    assert!(
        missing.is_empty(),
        "{} messages without a reply, e.g. {:?}",
        missing.len(),
        first(&missing)
    );
    assert!(
        duplicates.is_empty(),
        "{} messages answered more than once, e.g. {:?}",
        duplicates.len(),
        first(&duplicates)
    );
    assert_eq!(counts.unmatched_replies, 0, "replies without a tag");
    assert!(
        effects_dup.is_empty(),
        "{} side effects ran more than once, e.g. {:?}",
        effects_dup.len(),
        first(&effects_dup)
    );
    assert!(
        effects_missing.is_empty(),
        "{} side effects missing, e.g. {:?}",
        effects_missing.len(),
        first(&effects_missing)
    );
    assert_eq!(effects_unexpected, 0, "side effects nobody asked for");
}
