//! An approval covers exactly what the owner saw, from the attacker's side, through the real
//! daemon, the fake Bot API and the scripted model: a protected `file_read` of a symlink (or a
//! shell command naming it) asks the owner, naming where the link leads; something beside the
//! turn re-points the link while the owner decides; the approved call is described again right
//! before it runs, and refused when it would now read something else (the executor's
//! `still_as_approved`). Without a swap the approved read runs as before.

use crate::support::{Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub(super) const OWNER: i64 = 218485655;
pub(super) const WAIT: Duration = Duration::from_secs(60);

pub(super) const SSH_CONFIG: &str = "Host work HostName SSHCONFIG-1b2c";
pub(super) const SSH_KEY: &str = "SSHKEYSECRET-9e8d";

/// The owner's `$HOME` with two protected files and `~/notes/link` pointing at the first.
pub(super) fn setup(home: &TestHome, tg: &FakeTelegram, model: &ScriptedModel) -> PathBuf {
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: k\n  name: m\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: off\n\
         owners: [\"telegram:{OWNER}\"]\n",
        model.base_url(),
        tg.token(),
        tg.base_url()
    ));
    home.write_file("userhome/.ssh/config", SSH_CONFIG);
    home.write_file("userhome/.ssh/id_rsa", SSH_KEY);
    home.write_file("userhome/notes/keep.txt", "x");
    let user_home = home.path().join("userhome");
    std::os::unix::fs::symlink(user_home.join(".ssh/config"), user_home.join("notes/link"))
        .unwrap();
    user_home
}

pub(super) fn start(home: &TestHome, user_home: &Path) -> Daemon {
    Daemon::start_with_env(home, &[("HOME", user_home.to_str().unwrap())])
}

/// The model makes one `tool` call with `args`, then answers `done: read`.
pub(super) async fn reading_model(tool: &str, args: serde_json::Value) -> ScriptedModel {
    ScriptedModel::start(vec![
        Step::tool_call("r1", tool, &args.to_string()),
        Step::text("done: read"),
    ])
    .await
}

/// The first approval request the bot posts: its text and its "once" button's callback data.
pub(super) async fn first_approval(tg: &FakeTelegram) -> (String, String) {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some((once, text)) = unanswered_approval(tg, &[]) {
            return (text, once);
        }
        assert!(
            Instant::now() < deadline,
            "no approval within {WAIT:?}; calls:\n{}",
            tg.describe_calls()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The first approval request sent so far whose "once" button's callback data is not in
/// `answered`: that data and the request's text.
pub(super) fn unanswered_approval(
    tg: &FakeTelegram,
    answered: &[String],
) -> Option<(String, String)> {
    tg.sent_messages().iter().find_map(|m| {
        let once = m["reply_markup"]["inline_keyboard"][0]
            .as_array()?
            .iter()
            .filter_map(|b| b["callback_data"].as_str())
            .find(|d| d.starts_with("ap:o:") && !answered.iter().any(|a| a == d))?
            .to_string();
        Some((once, m["text"].as_str().unwrap_or_default().to_string()))
    })
}

/// The owner says no to the approval whose "once" button has the callback data `once`.
pub(super) fn refuse(tg: &FakeTelegram, once: &str) {
    let no = once.replacen("ap:o:", "ap:d:", 1);
    tg.push_update(FakeTelegram::callback_update(
        tg.next_update_id(),
        OWNER,
        OWNER,
        &no,
    ));
}

/// Wait until a sent message contains `text`.
pub(super) async fn wait_sent(tg: &FakeTelegram, text: &str) {
    let deadline = Instant::now() + WAIT;
    while !tg
        .sent_messages()
        .iter()
        .any(|m| m["text"].as_str().is_some_and(|t| t.contains(text)))
    {
        assert!(
            Instant::now() < deadline,
            "no {text:?} within {WAIT:?}; calls:\n{}",
            tg.describe_calls()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The one tool result the model was given (from its last request).
pub(super) fn tool_result(model: &ScriptedModel) -> String {
    let last = model.last_request().expect("the model was asked again");
    let results: Vec<String> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(results.len(), 1, "{results:?}");
    results[0].clone()
}

/// Re-point `link` at `target` in one step (a new link renamed over it), as a command running
/// beside the turn would.
pub(super) fn repoint(link: &Path, target: &Path) {
    let tmp = link.with_extension("new");
    std::os::unix::fs::symlink(target, &tmp).unwrap();
    std::fs::rename(&tmp, link).unwrap();
}

/// The attack on a `tool` call with `args` reading `~/notes/link`: the link is re-pointed from
/// `~/.ssh/config` to `~/.ssh/id_rsa` between the question (which must name the first through
/// `leads_to(config)`) and the owner's yes. The call is refused and the key is read nowhere.
async fn re_pointed_while_asked(
    tool: &str,
    args: serde_json::Value,
    leads_to: impl Fn(&Path) -> String,
) {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = reading_model(tool, args).await;
    let user_home = setup(&home, &tg, &model);
    tg.push_text(OWNER, OWNER, "read my notes link");
    let mut daemon = start(&home, &user_home);

    let (text, once) = first_approval(&tg).await;
    let config = user_home.join(".ssh/config");
    assert!(
        text.contains(&leads_to(&config)),
        "the approval does not name where the link leads:\n{text}"
    );
    // While the owner decides, something beside the turn re-points the link at the key.
    repoint(
        &user_home.join("notes/link"),
        &user_home.join(".ssh/id_rsa"),
    );
    let id = tg.next_update_id();
    tg.push_update(FakeTelegram::callback_update(id, OWNER, OWNER, &once));
    wait_sent(&tg, "done: read").await;

    let result = tool_result(&model);
    assert!(
        result.starts_with("Error (denied)")
            && result.contains("changed while the owner was deciding")
            && result.contains("nothing was done"),
        "{result}"
    );
    // The key's content is nowhere: not in the result, no model request, no message sent.
    for (i, req) in model.requests().iter().enumerate() {
        assert!(
            !req.to_string().contains(SSH_KEY),
            "model request {i}: {req}"
        );
    }
    for m in tg.sent_messages() {
        assert!(!m.to_string().contains(SSH_KEY), "sent: {m}");
    }
    model.assert_protocol_ok();
    daemon.stop();
    // The audit records the refusal like any other.
    let rows = crate::support::store::rows(
        &home,
        "SELECT tool, ok, error_kind, error FROM audit ORDER BY id",
        &[],
    );
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0][0].as_deref(), Some(tool));
    assert_eq!(rows[0][1].as_deref(), Some("0"));
    assert_eq!(rows[0][2].as_deref(), Some("denied"));
    let error = rows[0][3].clone().unwrap_or_default();
    assert!(
        error.contains("changed while the owner was deciding"),
        "{error}"
    );
    home.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_link_re_pointed_while_the_owner_decides_is_refused_and_nothing_read() {
    let args = json!({"path": "~/notes/link"});
    re_pointed_while_asked("file_read", args, |config| {
        format!("(→ {})", config.display())
    })
    .await;
}

/// The same through the shell: an approved command naming a protected path runs outside the
/// sandbox, so where the link leads is part of its question too.
#[tokio::test(flavor = "multi_thread")]
async fn a_shell_read_of_a_link_re_pointed_while_the_owner_decides_is_refused() {
    let args = json!({"command": "cat ~/notes/link"});
    re_pointed_while_asked("shell", args, |config| {
        format!("(it leads to {})", config.display())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approved_read_of_a_link_that_did_not_change_runs() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = reading_model("file_read", json!({"path": "~/notes/link"})).await;
    let user_home = setup(&home, &tg, &model);
    tg.push_text(OWNER, OWNER, "read my notes link");
    let mut daemon = start(&home, &user_home);

    let (text, once) = first_approval(&tg).await;
    assert!(
        text.contains("read ") && text.contains("notes/link (→ "),
        "{text}"
    );
    let id = tg.next_update_id();
    tg.push_update(FakeTelegram::callback_update(id, OWNER, OWNER, &once));
    wait_sent(&tg, "done: read").await;

    let result = tool_result(&model);
    assert!(result.contains(SSH_CONFIG), "{result}");
    assert!(!result.contains(SSH_KEY), "{result}");
    model.assert_protocol_ok();
    daemon.stop();
    home.assert_no_panic();
}
