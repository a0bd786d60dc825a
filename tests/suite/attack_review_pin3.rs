//! Attacks on the pin of an approval to the file the owner saw (`CallPlan::identity`, checked
//! again right before an approved call runs), through the real daemon, the fake Bot API and the
//! scripted model: something beside the turn flips a link in the window between that check and
//! the moment the call opens the file.

use super::attack_approval_swap::{
    refuse, repoint, setup, start, unanswered_approval, wait_sent, OWNER, SSH_CONFIG, SSH_KEY,
};
use crate::support::{FakeTelegram, ScriptedModel, Step, TestHome};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The model calls `tool` with `args(i)` (each different, so none is refused as a replay; naming `~/notes/link`, which leads to `~/.ssh/config`
/// while each question is asked) `calls` times; the owner says yes to each question that does
/// not name the key, and while the approved call goes on a thread flips the link between the
/// key and the config. Returns every tool result the model was given.
async fn flipped_after_the_yes(
    tool: &str,
    args: impl Fn(usize) -> serde_json::Value,
    calls: usize,
) -> Vec<String> {
    let link_flip = |h: &Path| {
        let link = h.join("notes/link");
        repoint(&link, &h.join(".ssh/id_rsa"));
        repoint(&link, &h.join(".ssh/config"));
    };
    let reset = |h: &Path| repoint(&h.join("notes/link"), &h.join(".ssh/config"));
    flipping(
        tool,
        args,
        calls,
        "id_rsa",
        |_| {},
        link_flip,
        reset,
        |_| false,
    )
    .await
    .0
}

/// [`flipped_after_the_yes`] with the owner saying no to any question containing `refused`,
/// the home arranged by `before`, changed over and over by `flip`
/// while each approved call goes on, and put back by `reset` after it. Returns every tool
/// result, the harness's home and the owner's home (to look at after the daemon stopped).
#[allow(clippy::too_many_arguments)] // one attack's knobs, each named at the call
async fn flipping(
    tool: &str,
    args: impl Fn(usize) -> serde_json::Value,
    calls: usize,
    refused: &str,
    before: impl Fn(&Path),
    flip: impl Fn(&Path) + Send + Clone + 'static,
    reset: impl Fn(&Path),
    changed: impl Fn(&Path) -> bool,
) -> (Vec<String>, TestHome, PathBuf) {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    // Turns of at most `PER_TURN` calls (fewer than the 20 model calls a turn may make), each
    // call proposed a moment after the last result (the flipper stopped and the home put back
    // before the next question is made).
    const PER_TURN: usize = 18;
    let mut steps: Vec<Step> = Vec::new();
    for i in 0..calls {
        let call = Step::tool_call(&format!("r{i}"), tool, &args(i).to_string());
        steps.push(Step::delay(Duration::from_millis(150), call));
        if i % PER_TURN == PER_TURN - 1 || i == calls - 1 {
            steps.push(Step::text(format!("done: flipped {}", i / PER_TURN)));
        }
    }
    let model = ScriptedModel::start(steps).await;
    let user_home = setup(&home, &tg, &model);
    before(&user_home);
    let mut daemon = start(&home, &user_home);
    let mut answered: Vec<String> = Vec::new();
    let mut stopped = false;
    'calls: for i in 0..calls {
        if i % PER_TURN == 0 {
            if i > 0 {
                wait_sent(&tg, &format!("done: flipped {}", i / PER_TURN - 1)).await;
            }
            tg.push_text(OWNER, OWNER, "do it again and again");
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        let (once, text) = loop {
            let fresh = unanswered_approval(&tg, &answered);
            if let Some(found) = fresh {
                break found;
            }
            // A turn the model ended sooner than scripted (a step taken by a request asked
            // again): stop here, and look at what was done.
            let ended = format!("done: flipped {}", i / PER_TURN);
            if tg
                .sent_messages()
                .iter()
                .any(|m| m["text"] == ended.as_str())
            {
                stopped = true;
                break 'calls;
            }
            assert!(
                Instant::now() < deadline,
                "no question {i}; last sent: {:?}",
                tg.sent_messages().last()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        answered.push(once.clone());
        let asked = model.requests().len();
        if text.contains(refused) {
            // The question named what the owner would not allow: the owner says no.
            refuse(&tg, &once);
        } else {
            let stop = Arc::new(AtomicBool::new(false));
            let flipper = {
                let (stop, h, flip) = (stop.clone(), user_home.clone(), flip.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        flip(&h);
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
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while model.requests().len() == asked && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        reset(&user_home);
        assert!(model.requests().len() > asked, "no answer to {i}");
        if changed(&user_home) {
            // The attack worked: no need to go on.
            stopped = true;
            break;
        }
    }
    if !stopped {
        wait_sent(&tg, &format!("done: flipped {}", (calls - 1) / PER_TURN)).await;
    }
    let mut results = std::collections::BTreeMap::new();
    for req in model.requests() {
        for m in req["messages"].as_array().into_iter().flatten() {
            if m["role"] == "tool" {
                let id = m["tool_call_id"].as_str().unwrap_or_default().to_string();
                results.insert(id, m["content"].as_str().unwrap_or_default().to_string());
            }
        }
    }
    daemon.stop();
    home.assert_no_panic();
    (results.into_values().collect(), home, user_home)
}

/// An approved shell command naming a protected link (`cat ~/notes/link`, the question says it
/// leads to `~/.ssh/config`): the check right before the run pins the link's inode, but the
/// command opens the name itself when it runs, some milliseconds later. A link flipped to the
/// key in that window hands the key to the model.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "hole: an approved shell command opens the names it was approved for by name after \
            the re-check; a link flipped in between reads ~/.ssh/id_rsa into the model"]
async fn a_link_flipped_after_the_recheck_never_hands_the_key_to_a_shell_command() {
    let results = flipped_after_the_yes(
        "shell",
        |i| json!({"command": format!("cat ~/notes/link; echo {i}")}),
        12,
    )
    .await;
    let leaked = results.iter().filter(|r| r.contains(SSH_KEY)).count();
    assert_eq!(
        leaked,
        0,
        "the key reached the model in {leaked} of {} approved commands, e.g. {:?}",
        results.len(),
        results.iter().find(|r| r.contains(SSH_KEY))
    );
}

/// Swap the names `a` and `b` at once (`renameat2` with `RENAME_EXCHANGE`): each name is always
/// there, one moment the folder, the next the link.
fn exchange(a: &Path, b: &Path) {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let (a, b) = (
        CString::new(a.as_os_str().as_bytes()).unwrap(),
        CString::new(b.as_os_str().as_bytes()).unwrap(),
    );
    // SAFETY: two NUL-terminated paths.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
}

/// An approved `file_write` of a new file `~/notes/sub/config` (the question: write there;
/// `sub` is a real folder; a question naming `.ssh` the owner refuses). While the approved write goes on, something beside the turn swaps
/// the folder `sub` with a link to `~/.ssh` and back, over and over (an atomic exchange of two
/// names). When written, this was a hole: `run` made the folders without following a link but
/// then opened the file by its whole path, following a link in a parent folder, and removed a
/// file it had created by that name again after a failed check: `~/.ssh/config` was deleted
/// in 5 of 6 runs. Now the file is opened and removed in the folder `make_folders` holds open
/// (`openat`/`unlinkat`), so nothing in `~/.ssh` changes. The run stops at the first change to
/// `~/.ssh`; up to 144 approved writes.
#[tokio::test(flavor = "multi_thread")]
async fn a_folder_swapped_for_a_link_during_an_approved_write_changes_nothing_in_ssh() {
    let (results, _home, h) = flipping(
        "file_write",
        |i| json!({"path": "~/notes/sub/config", "content": format!("written {i}\n")}),
        144,
        ".ssh",
        |h| {
            std::fs::create_dir(h.join("notes/sub")).unwrap();
            std::os::unix::fs::symlink(h.join(".ssh"), h.join("notes/swap")).unwrap();
        },
        |h| exchange(&h.join("notes/sub"), &h.join("notes/swap")),
        |h| {
            if std::fs::symlink_metadata(h.join("notes/sub"))
                .unwrap()
                .file_type()
                .is_symlink()
            {
                exchange(&h.join("notes/sub"), &h.join("notes/swap"));
            }
            let _ = std::fs::remove_file(h.join("notes/sub/config"));
        },
        ssh_changed,
    )
    .await;
    let (in_ssh, config) = ssh_now(&h);
    assert!(
        !ssh_changed(&h),
        "~/.ssh now holds {in_ssh:?}, its config {config:?}; the results: {results:#?}"
    );
}

/// What `~/.ssh` holds (its names, sorted) and its config's text.
fn ssh_now(h: &Path) -> (Vec<String>, String) {
    let mut in_ssh: Vec<String> = std::fs::read_dir(h.join(".ssh"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    in_ssh.sort();
    let config = std::fs::read_to_string(h.join(".ssh/config")).unwrap_or_default();
    (in_ssh, config)
}

/// Whether `~/.ssh` is no longer just the config and the key as they were.
fn ssh_changed(h: &Path) -> bool {
    let (in_ssh, config) = ssh_now(h);
    config != SSH_CONFIG || in_ssh != ["config", "id_rsa"]
}

/// An approved shell command appending to a protected link (`echo … >> ~/notes/link`, the
/// question says it leads to `~/.ssh/config`): as with reading, the shell opens the name when
/// it runs, after the re-check; a link flipped to the key in between appends to `~/.ssh/id_rsa`.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "hole: an approved shell command writes through the names it was approved for after \
            the re-check; a link flipped in between appends to ~/.ssh/id_rsa"]
async fn a_link_flipped_after_the_recheck_never_lets_a_shell_command_write_the_key() {
    let key_changed = |h: &Path| std::fs::read_to_string(h.join(".ssh/id_rsa")).unwrap() != SSH_KEY;
    let (results, _home, h) = flipping(
        "shell",
        |i| json!({"command": format!("echo added{i} >> ~/notes/link")}),
        12,
        "id_rsa",
        |_| {},
        |h| {
            let link = h.join("notes/link");
            repoint(&link, &h.join(".ssh/id_rsa"));
            repoint(&link, &h.join(".ssh/config"));
        },
        |h| repoint(&h.join("notes/link"), &h.join(".ssh/config")),
        key_changed,
    )
    .await;
    let key = std::fs::read_to_string(h.join(".ssh/id_rsa")).unwrap();
    assert_eq!(
        key, SSH_KEY,
        "~/.ssh/id_rsa was changed; the results: {results:#?}"
    );
}
