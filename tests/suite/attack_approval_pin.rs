//! More attacks on an approval's pin to what the owner saw (after `attack_approval_swap`),
//! through the real daemon, the fake Bot API and the scripted model: a shell command naming a
//! second path beside the protected one its question shows, a link in a parent folder, a hard
//! link. Something beside the turn changes the file system while the owner decides; the
//! approved call must then be refused, and the other protected file read nowhere.

use super::attack_approval_swap::{
    first_approval, reading_model, refuse, repoint, setup, start, tool_result, unanswered_approval,
    wait_sent, OWNER, SSH_KEY,
};
use crate::support::{FakeTelegram, TestHome};
use serde_json::json;
use std::path::Path;

/// One attack: the model makes one `tool` call with `args`; `before` arranges the owner's home
/// (`~/notes/link` already leads to `~/.ssh/config`); the question must contain `shows`;
/// `meanwhile` changes the home while the owner decides. Returns the tool result the model got
/// and everything sent or asked (to look for the key in).
async fn attack(
    tool: &str,
    args: serde_json::Value,
    before: impl Fn(&Path),
    shows: impl Fn(&Path) -> String,
    meanwhile: impl Fn(&Path),
) -> (String, String) {
    attack_in(false, tool, args, before, shows, meanwhile).await
}

/// [`attack`], with the owner's home outside `$ETHAN_HOME` when `outside` (in the harness's
/// usual setup it is inside, so everything in it is protected as the daemon's own).
async fn attack_in(
    outside: bool,
    tool: &str,
    args: serde_json::Value,
    before: impl Fn(&Path),
    shows: impl Fn(&Path) -> String,
    meanwhile: impl Fn(&Path),
) -> (String, String) {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = reading_model(tool, args).await;
    let mut user_home = setup(&home, &tg, &model);
    let elsewhere = tempfile::tempdir().unwrap();
    if outside {
        let h = elsewhere.path();
        for dir in [".ssh", "notes"] {
            std::fs::create_dir_all(h.join(dir)).unwrap();
        }
        for file in [".ssh/config", ".ssh/id_rsa", "notes/keep.txt"] {
            std::fs::copy(user_home.join(file), h.join(file)).unwrap();
        }
        std::os::unix::fs::symlink(h.join(".ssh/config"), h.join("notes/link")).unwrap();
        user_home = h.to_path_buf();
    }
    before(&user_home);
    tg.push_text(OWNER, OWNER, "read my notes");
    let mut daemon = start(&home, &user_home);
    let (text, once) = first_approval(&tg).await;
    assert!(text.contains(&shows(&user_home)), "the question:\n{text}");
    assert!(!text.contains("id_rsa"), "the question:\n{text}");
    meanwhile(&user_home);
    let id = tg.next_update_id();
    tg.push_update(FakeTelegram::callback_update(id, OWNER, OWNER, &once));
    wait_sent(&tg, "done: read").await;
    let result = tool_result(&model);
    let mut seen = String::new();
    for req in model.requests() {
        seen.push_str(&req.to_string());
    }
    for m in tg.sent_messages() {
        seen.push_str(&m.to_string());
    }
    model.assert_protocol_ok();
    daemon.stop();
    home.assert_no_panic();
    (result, seen)
}

/// The approved call was refused as changed, and the key is nowhere.
fn refused_as_changed((result, seen): (String, String)) {
    assert!(
        !seen.contains(SSH_KEY),
        "the key leaked; tool result: {result}"
    );
    assert!(
        result.starts_with("Error (denied)")
            && result.contains("changed while the owner was deciding"),
        "{result}"
    );
}

/// A shell command naming the protected link first and a harmless link second, the second
/// re-pointed at the key while the owner decides: the question names every protected path the
/// command names and where each leads, so the check right before the run sees the second one
/// appear and refuses the command.
#[tokio::test(flavor = "multi_thread")]
async fn a_second_path_of_an_approved_command_re_pointed_at_the_key_is_refused() {
    let out = attack(
        "shell",
        json!({"command": "cat ~/notes/link ~/notes/other"}),
        |h| std::os::unix::fs::symlink(h.join("notes/keep.txt"), h.join("notes/other")).unwrap(),
        |h| format!("(it leads to {})", h.join(".ssh/config").display()),
        |h| repoint(&h.join("notes/other"), &h.join(".ssh/id_rsa")),
    )
    .await;
    refused_as_changed(out);
}

/// A shell command whose second path is worked out when it runs (`$(cat …)`): the question
/// is the command's text, which a file beside the turn changes nothing of, and the approved
/// command runs outside the sandbox.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "hole: an approved shell command runs unsandboxed whatever paths it computes at run \
            time; a file it reads a path from, changed while the owner decides, reads the key"]
async fn a_path_an_approved_command_computes_cannot_reach_the_key() {
    let out = attack(
        "shell",
        json!({"command": "cat ~/notes/link $(cat ~/notes/which)"}),
        |h| {
            std::fs::write(
                h.join("notes/which"),
                h.join("notes/keep.txt").display().to_string(),
            )
            .unwrap()
        },
        |h| format!("(it leads to {})", h.join(".ssh/config").display()),
        |h| {
            std::fs::write(
                h.join("notes/which"),
                h.join(".ssh/id_rsa").display().to_string(),
            )
            .unwrap()
        },
    )
    .await;
    refused_as_changed(out);
}

/// A link in a parent folder (`~/notes/dir` → `~/.ssh`), re-pointed at another credential
/// place holding a file of the same name (`~/.aws`): the question names the real path, so the
/// check before the run sees the change.
#[tokio::test(flavor = "multi_thread")]
async fn a_parent_folder_link_re_pointed_while_the_owner_decides_is_refused() {
    let out = attack(
        "file_read",
        json!({"path": "~/notes/dir/config"}),
        |h| {
            std::fs::create_dir_all(h.join(".aws")).unwrap();
            std::fs::write(h.join(".aws/config"), SSH_KEY).unwrap();
            std::os::unix::fs::symlink(h.join(".ssh"), h.join("notes/dir")).unwrap();
        },
        |h| format!("(→ {})", h.join(".ssh/config").display()),
        |h| repoint(&h.join("notes/dir"), &h.join(".aws")),
    )
    .await;
    refused_as_changed(out);
}

/// A chain of links (`~/notes/link` → `~/notes/hop` → `~/.ssh/config`) whose middle hop is
/// re-pointed at the key: the question names the end of the chain, so the change is seen.
#[tokio::test(flavor = "multi_thread")]
async fn a_middle_link_of_a_chain_re_pointed_while_the_owner_decides_is_refused() {
    let out = attack(
        "file_read",
        json!({"path": "~/notes/link"}),
        |h| {
            std::os::unix::fs::symlink(h.join(".ssh/config"), h.join("notes/hop")).unwrap();
            repoint(&h.join("notes/link"), &h.join("notes/hop"));
        },
        |h| format!("(→ {})", h.join(".ssh/config").display()),
        |h| repoint(&h.join("notes/hop"), &h.join(".ssh/id_rsa")),
    )
    .await;
    refused_as_changed(out);
}

/// A hard link to `~/.ssh/config` replaced by a hard link to the key (renamed over it), in a
/// home outside `$ETHAN_HOME`: the question names the protected file the link shares, so the
/// change is seen.
#[tokio::test(flavor = "multi_thread")]
async fn a_hard_link_replaced_while_the_owner_decides_is_refused() {
    let out = attack_in(
        true,
        "file_read",
        json!({"path": "~/notes/hard"}),
        |h| std::fs::hard_link(h.join(".ssh/config"), h.join("notes/hard")).unwrap(),
        |h| {
            format!(
                "hard link to the protected file {}",
                h.join(".ssh/config").display()
            )
        },
        swap_hard_link("notes/hard"),
    )
    .await;
    refused_as_changed(out);
}

/// The same hard link under a secret-looking name (`~/notes/.env`): no symlink is there for the
/// question to resolve, and the first reason found is the name ("looks like a secret"). The
/// question also names the protected file the name is another name of (`~/.ssh/config`), so
/// replacing the hard link with one to the key changes the question, and the approved read is
/// refused (before: the question stayed word for word the same, and the key was read).
#[tokio::test(flavor = "multi_thread")]
async fn a_secret_looking_hard_link_replaced_while_the_owner_decides_is_refused() {
    let out = attack_in(
        true,
        "file_read",
        json!({"path": "~/notes/.env"}),
        |h| std::fs::hard_link(h.join(".ssh/config"), h.join("notes/.env")).unwrap(),
        |h| {
            format!(
                "{} looks like a secret (\".env\"); tools may not read or change secret files \
                 (the same file as {})",
                h.join("notes/.env").display(),
                h.join(".ssh/config").display()
            )
        },
        swap_hard_link("notes/.env"),
    )
    .await;
    refused_as_changed(out);
}

/// The same through the shell: `cat ~/notes/.env` asks, naming the protected file the name
/// shares; the name re-linked to the key while the owner decides changes the question, and
/// the approved command is refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_secret_looking_hard_link_a_command_reads_replaced_while_the_owner_decides_is_refused() {
    let out = attack_in(
        true,
        "shell",
        json!({"command": "cat ~/notes/.env"}),
        |h| std::fs::hard_link(h.join(".ssh/config"), h.join("notes/.env")).unwrap(),
        |h| format!("(the same file as {})", h.join(".ssh/config").display()),
        swap_hard_link("notes/.env"),
    )
    .await;
    refused_as_changed(out);
}

/// Replace the hard link `name` (under the owner's home) with one to the key, in one step.
fn swap_hard_link(name: &'static str) -> impl Fn(&Path) {
    move |h: &Path| {
        let tmp = h.join(format!("{name}.new"));
        std::fs::hard_link(h.join(".ssh/id_rsa"), &tmp).unwrap();
        std::fs::rename(&tmp, h.join(name)).unwrap();
    }
}

/// The window after the executor's check, through the real daemon: a process beside the turn
/// (a backgrounded command, another chat's turn) flips `~/notes/link` between `~/.ssh/config`
/// and the key as fast as it can once the owner said yes. The question named the config each
/// time (the link is put back before each question); the check right before the run sees the
/// config some of the time, and the read that follows opens only the file pinned at that check
/// (`paths::Pinned`): the key never comes back (before the pin: 1 in 16 and more).
#[tokio::test(flavor = "multi_thread")]
async fn a_link_flipped_after_the_yes_never_hands_over_the_key() {
    use crate::support::{ScriptedModel, Step};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    // Turns of calls each (fewer than the 20 model calls a turn may make).
    const TURNS: usize = 3;
    const PER_TURN: usize = 18;
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let args = json!({"path": "~/notes/link"}).to_string();
    let mut steps: Vec<Step> = Vec::new();
    for t in 0..TURNS {
        for i in 0..PER_TURN {
            steps.push(Step::tool_call(&format!("t{t}r{i}"), "file_read", &args));
        }
        steps.push(Step::text(format!("done: turn {t}")));
    }
    let model = ScriptedModel::start(steps).await;
    let user_home = setup(&home, &tg, &model);
    let mut daemon = start(&home, &user_home);
    let link = user_home.join("notes/link");
    let (config, key) = (user_home.join(".ssh/config"), user_home.join(".ssh/id_rsa"));
    let mut answered: Vec<String> = Vec::new();
    for t in 0..TURNS {
        tg.push_text(OWNER, OWNER, "read my notes link, again and again");
        for i in 0..PER_TURN {
            // The next question (the link leads to the config while it is asked).
            let deadline = Instant::now() + Duration::from_secs(60);
            let (once, text) = loop {
                let fresh = unanswered_approval(&tg, &answered);
                if let Some(found) = fresh {
                    break found;
                }
                assert!(Instant::now() < deadline, "no question {t}/{i}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            answered.push(once.clone());
            if text.contains("id_rsa") {
                // The question named the key (the link was still flipping when the call was
                // first described): the owner says no, as anyone reading it would.
                let asked = model.requests().len();
                refuse(&tg, &once);
                let deadline = Instant::now() + Duration::from_secs(60);
                while model.requests().len() == asked && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                repoint(&link, &config);
                continue;
            }
            let asked = model.requests().len();
            let stop = Arc::new(AtomicBool::new(false));
            let flipper = {
                let (stop, link) = (stop.clone(), link.clone());
                let (config, key) = (config.clone(), key.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        repoint(&link, &key);
                        repoint(&link, &config);
                    }
                })
            };
            let id = tg.next_update_id();
            tg.push_update(FakeTelegram::callback_update(id, OWNER, OWNER, &once));
            let deadline = Instant::now() + Duration::from_secs(60);
            while model.requests().len() == asked && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            stop.store(true, Ordering::Relaxed);
            flipper.join().unwrap();
            repoint(&link, &config);
            assert!(model.requests().len() > asked, "no answer to {t}/{i}");
        }
        wait_sent(&tg, &format!("done: turn {t}")).await;
    }
    // Every tool result the model was given, by call id.
    let mut results = std::collections::BTreeMap::new();
    for req in model.requests() {
        for m in req["messages"].as_array().into_iter().flatten() {
            if m["role"] == "tool" {
                let id = m["tool_call_id"].as_str().unwrap_or_default().to_string();
                results.insert(id, m["content"].as_str().unwrap_or_default().to_string());
            }
        }
    }
    let leaked = results.values().filter(|r| r.contains(SSH_KEY)).count();
    let refused = results
        .values()
        .filter(|r| r.contains("changed while"))
        .count();
    daemon.stop();
    home.assert_no_panic();
    assert_eq!(results.len(), TURNS * PER_TURN, "{results:?}");
    assert_eq!(
        leaked,
        0,
        "the key reached the model in {leaked} of {} approved reads ({refused} refused as \
         changed), e.g. {:?}",
        results.len(),
        results.iter().find(|(_, r)| r.contains(SSH_KEY))
    );
}
