//! Attacks on the two fixes of an approval's pin (a protected name that is another name of a
//! protected file names that file in its question; `file_write` opens the file judged), through
//! the real daemon, the fake Bot API and the scripted model. The owner's home lies outside
//! `$ETHAN_HOME`; something beside the turn re-links a name while the owner decides. The
//! approved call must be refused, and the other protected file's content read nowhere.
//!
//! Each test below was a hole when written: the question read the same after the re-link (the
//! other-name search named the approved file itself, or a place it does not search, or gave
//! up). Their doc comments say how. The executor now also compares the file each protected
//! path leads to (`CallPlan::identity`: device and inode), and each call is refused.

use super::attack_approval_swap::{
    first_approval, reading_model, setup, start, tool_result, wait_sent, OWNER,
};
use crate::support::{FakeTelegram, TestHome};
use serde_json::json;
use std::path::Path;

/// The content of the other protected file, which must reach nothing.
const OTHER_SECRET: &str = "OTHERSECRET-4f1a";

/// One attack in a home outside `$ETHAN_HOME` (`~/.ssh/config`, `~/.ssh/id_rsa`,
/// `~/notes/keep.txt`): the model makes one `tool` call with `args`; `before` arranges the
/// home; the question must contain `shows`; `meanwhile` changes the home while the owner
/// decides. Returns the tool result, the question, and everything sent or asked.
async fn attack(
    tool: &str,
    args: serde_json::Value,
    before: impl Fn(&Path),
    shows: impl Fn(&Path) -> String,
    meanwhile: impl Fn(&Path),
) -> (String, String, String) {
    let (result, question, seen, _home) =
        attack_with(tool, args, |h, _| before(h), shows, |h, _| meanwhile(h)).await;
    (result, question, seen)
}

/// [`attack`], with `before` and `meanwhile` given `$ETHAN_HOME` too.
async fn attack_with(
    tool: &str,
    args: serde_json::Value,
    before: impl Fn(&Path, &Path),
    shows: impl Fn(&Path) -> String,
    meanwhile: impl Fn(&Path, &Path),
) -> (String, String, String, tempfile::TempDir) {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = reading_model(tool, args).await;
    let inside = setup(&home, &tg, &model);
    let elsewhere = tempfile::tempdir().unwrap();
    let h = elsewhere.path();
    for dir in [".ssh", "notes"] {
        std::fs::create_dir_all(h.join(dir)).unwrap();
    }
    for file in [".ssh/config", ".ssh/id_rsa", "notes/keep.txt"] {
        std::fs::copy(inside.join(file), h.join(file)).unwrap();
    }
    before(h, home.path());
    tg.push_text(OWNER, OWNER, "read my notes");
    let mut daemon = start(&home, h);
    let (question, once) = first_approval(&tg).await;
    assert!(question.contains(&shows(h)), "the question:\n{question}");
    assert!(
        !question.contains(OTHER_SECRET),
        "the question:\n{question}"
    );
    meanwhile(h, home.path());
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
    (result, question, seen, elsewhere)
}

/// Replace `name` (under the owner's home) with a hard link to `to`, in one step.
fn relink(name: &'static str, to: &'static str) -> impl Fn(&Path) {
    move |h: &Path| {
        let tmp = h.join(format!("{name}.new"));
        std::fs::hard_link(h.join(to), &tmp).unwrap();
        std::fs::rename(&tmp, h.join(name)).unwrap();
    }
}

/// The approved call was refused as changed, and the other secret is nowhere.
fn refused_as_changed((result, question, seen): (String, String, String)) {
    assert!(
        !seen.contains(OTHER_SECRET),
        "the other protected file's content leaked (the owner approved: {question:?}); tool \
         result: {result}"
    );
    assert!(
        result.starts_with("Error (denied)")
            && result.contains("changed while the owner was deciding"),
        "{result}"
    );
}

/// `~/.ssh/config` (a protected name of its own, one link) is re-linked while the owner decides
/// to `~/.aws/credentials`. The question's search for the file's other names walks `~/.ssh`
/// before `~/.aws` and finds the approved name itself first; `same_file_as` then says nothing
/// (`same == real`), the question is word for word the same, and the approved read returns
/// the AWS credentials.
#[tokio::test(flavor = "multi_thread")]
async fn a_credential_name_re_linked_to_a_later_searched_place_is_refused() {
    let out = attack(
        "file_read",
        json!({"path": "~/.ssh/config"}),
        |h| {
            std::fs::create_dir_all(h.join(".aws")).unwrap();
            std::fs::write(h.join(".aws/credentials"), OTHER_SECRET).unwrap();
        },
        |h| format!("{} looks like a secret", h.join(".ssh/config").display()),
        relink(".ssh/config", ".aws/credentials"),
    )
    .await;
    refused_as_changed(out);
}

/// `~/notes/.env` (a plain secret-looking file) is re-linked while the owner decides to
/// `~/deploy/server.pem`, a protected file (its name looks like a secret) in no place the
/// search for other names walks (only `$ETHAN_HOME`, the config and the credential places):
/// the question stays the same and the approved read returns the PEM.
#[tokio::test(flavor = "multi_thread")]
async fn a_secret_name_re_linked_to_an_unsearched_secret_file_is_refused() {
    let out = attack(
        "file_read",
        json!({"path": "~/notes/.env"}),
        |h| {
            std::fs::write(h.join("notes/.env"), "TOKEN=approved").unwrap();
            std::fs::create_dir_all(h.join("deploy")).unwrap();
            std::fs::write(h.join("deploy/server.pem"), OTHER_SECRET).unwrap();
        },
        |h| format!("{} looks like a secret", h.join("notes/.env").display()),
        relink("notes/.env", "deploy/server.pem"),
    )
    .await;
    refused_as_changed(out);
}

/// The same re-link through the shell (`cat ~/.ssh/config`): the shell's question uses the same
/// search, finds the approved name first, and the approved command prints the AWS
/// credentials.
#[tokio::test(flavor = "multi_thread")]
async fn a_credential_name_a_command_reads_re_linked_to_a_later_searched_place_is_refused() {
    let out = attack(
        "shell",
        json!({"command": "cat ~/.ssh/config"}),
        |h| {
            std::fs::create_dir_all(h.join(".aws")).unwrap();
            std::fs::write(h.join(".aws/credentials"), OTHER_SECRET).unwrap();
        },
        |h| h.join(".ssh/config").display().to_string(),
        relink(".ssh/config", ".aws/credentials"),
    )
    .await;
    refused_as_changed(out);
}

/// Control: the reverse direction holds. `~/.aws/config` re-linked to `~/.ssh/id_rsa` (the
/// search walks `~/.ssh` first and finds the key's own name): the question changes, the read
/// is refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_credential_name_re_linked_to_an_earlier_searched_place_is_refused() {
    let out = attack(
        "file_read",
        json!({"path": "~/.aws/config"}),
        |h| {
            std::fs::create_dir_all(h.join(".aws")).unwrap();
            std::fs::write(h.join(".aws/config"), "[default]").unwrap();
            std::fs::write(h.join(".ssh/id_rsa"), OTHER_SECRET).unwrap();
        },
        |h| format!("{} looks like a secret", h.join(".aws/config").display()),
        relink(".aws/config", ".ssh/id_rsa"),
    )
    .await;
    refused_as_changed(out);
}

/// `~/notes/.env` (a plain secret-looking file) re-linked while the owner decides to a file of
/// `$ETHAN_HOME` (its knowledge), in a home whose `~/.kube` (searched before `$ETHAN_HOME`)
/// holds more than the 20,000 entries the search for other names looks at (a kubectl cache):
/// the search gives up (`LinkUnchecked`, which `check` treats as protected), but
/// `same_file_as` names only a `HardLink` it found, so the question is word for word the same
/// and the approved read returns the daemon's own file.
#[tokio::test(flavor = "multi_thread")]
async fn a_secret_name_re_linked_when_the_search_gives_up_is_refused() {
    let (result, question, seen, _home) = attack_with(
        "file_read",
        json!({"path": "~/notes/.env"}),
        |h, ethan| {
            std::fs::write(h.join("notes/.env"), "TOKEN=approved").unwrap();
            std::fs::create_dir_all(ethan.join("knowledge")).unwrap();
            std::fs::write(ethan.join("knowledge/private.md"), OTHER_SECRET).unwrap();
            let many = h.join(".kube/cache");
            std::fs::create_dir_all(&many).unwrap();
            for i in 0..20_001 {
                std::fs::write(many.join(format!("f{i}")), "").unwrap();
            }
        },
        |h| format!("{} looks like a secret", h.join("notes/.env").display()),
        |h, ethan| {
            let tmp = h.join("notes/.env.new");
            std::fs::hard_link(ethan.join("knowledge/private.md"), &tmp).unwrap();
            std::fs::rename(&tmp, h.join("notes/.env")).unwrap();
        },
    )
    .await;
    refused_as_changed((result, question, seen));
}

/// The same within one credential place, with the key itself: `~/.ssh/<name>` re-linked to
/// `~/.ssh/id_rsa`, where `<name>` is one the directory lists after `id_rsa` (the search pops
/// the last entry first, so it finds the approved name before the key). The order of a
/// directory's entries is the file system's (ext4: by a hash of the name, one seed per file
/// system), so the name is chosen by listing a probe folder on the same file system.
#[tokio::test(flavor = "multi_thread")]
async fn a_credential_name_re_linked_to_the_key_beside_it_is_refused() {
    const NAMES: &[&str] = &[
        "config",
        "known_hosts",
        "authorized_keys",
        "environment",
        "rc",
        "known_hosts.old",
        "allowed_signers",
        "config.d",
        "work.conf",
        "notes",
        "agent.sock.txt",
        "hosts",
    ];
    let probe = tempfile::tempdir().unwrap();
    std::fs::write(probe.path().join("id_rsa"), "").unwrap();
    for n in NAMES {
        std::fs::write(probe.path().join(n), "").unwrap();
    }
    let listed: Vec<String> = std::fs::read_dir(probe.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let key_at = listed.iter().position(|n| n == "id_rsa").unwrap();
    let name: &'static str = NAMES
        .iter()
        .copied()
        .find(|n| listed.iter().position(|l| l == n).unwrap() > key_at)
        .expect("a name listed after id_rsa");
    let path: &'static str = Box::leak(format!(".ssh/{name}").into_boxed_str());
    let out = attack(
        "file_read",
        json!({ "path": format!("~/{path}") }),
        |h| {
            std::fs::write(h.join(".ssh/id_rsa"), OTHER_SECRET).unwrap();
            std::fs::write(h.join(path), "harmless").unwrap();
        },
        |h| format!("{} looks like a secret", h.join(path).display()),
        relink(path, ".ssh/id_rsa"),
    )
    .await;
    refused_as_changed(out);
}

/// The write side of the same: an approved `file_write` of `~/.ssh/config`, the name re-linked
/// while the owner decides to `~/.aws/credentials` (searched after `~/.ssh`, so the question
/// stays the same): the approved write replaces the AWS credentials, a protected file the
/// owner was not asked about.
#[tokio::test(flavor = "multi_thread")]
async fn an_approved_write_of_a_credential_name_re_linked_elsewhere_is_refused() {
    let (result, question, _seen, h) = attack_with(
        "file_write",
        json!({"path": "~/.ssh/config", "content": "Host evil"}),
        |h, _| {
            std::fs::create_dir_all(h.join(".aws")).unwrap();
            std::fs::write(h.join(".aws/credentials"), OTHER_SECRET).unwrap();
        },
        |h| format!("write {}", h.join(".ssh/config").display()),
        |h, _| relink(".ssh/config", ".aws/credentials")(h),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(h.path().join(".aws/credentials")).unwrap(),
        OTHER_SECRET,
        "the approved write ({question:?}) replaced ~/.aws/credentials; tool result: {result}"
    );
    assert!(
        result.contains("changed while the owner was deciding"),
        "{result}"
    );
}
