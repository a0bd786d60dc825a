//! Attacks on the pictures and resources of MCP servers that got through once, kept as tests
//! with their fixes: a server whose tools the owner switched off was still read through
//! `mcp_resource_read` (now a server's resources are read only where its config says
//! `resources: true`); a server's images piled up on disk without bound (now the folder keeps its
//! newest within 64 MiB); a server's resource names reached the owner's terminal with their
//! escape sequences (now `ethan mcp list` prints them harmless). And one that held: a stranger in
//! a group cannot read a resource even of a server that opened them.
//!
//! The server is `tests/fixtures/mcp/lifecycle.py` in its `resources`, `escapes` and `images`
//! modes.

use crate::support::{run_cli, Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

const OWNER: i64 = 218485655;
const WAIT: Duration = Duration::from_secs(60);

fn fixture() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mcp/lifecycle.py")
        .display()
        .to_string()
}

/// The content of the tool message answering `id` in a model request.
fn result_for(req: &Value, id: &str) -> String {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

async fn ready(home: &TestHome, server: &str) {
    let deadline = Instant::now() + WAIT;
    while !home.log().contains(&format!("mcp server {server} ready")) {
        assert!(Instant::now() < deadline, "{}", home.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A config with the Telegram fake, the model and one server `notes` (`lifecycle.py <mode>`)
/// with `server_extra` in its entry, and `extra` at the top level.
fn config(
    tg: &FakeTelegram,
    model: &ScriptedModel,
    mode: &str,
    server_extra: &str,
    extra: &str,
    out: &Path,
) -> String {
    format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: m\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: off\n\
         owners: [\"telegram:{OWNER}\"]\n{extra}\
         mcp:\n  servers:\n    notes: {{ command: python3, args: [\"{}\", {mode}, \"{}\"]{server_extra} }}\n",
        model.base_url(),
        tg.token(),
        tg.base_url(),
        fixture(),
        out.join("starts").display()
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_whose_tools_are_switched_off_is_not_read_through_its_resources() {
    let home = TestHome::new();
    let out = tempfile::tempdir().unwrap();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "r1",
            "mcp_resource_read",
            r#"{"server": "notes", "uri": "note://inbox"}"#,
        ),
        Step::text("done"),
    ])
    .await;
    home.write_config(&config(
        &tg,
        &model,
        "resources",
        ", deny: [greet]",
        "tools:\n  deny: [\"mcp__notes__*\"]\n",
        out.path(),
    ));
    let mut daemon = Daemon::start(&home);
    ready(&home, "notes").await;
    tg.push_text(OWNER, OWNER, "hello");
    crate::support::wait_until("the answer", WAIT, || {
        tg.sent_texts().iter().any(|t| t.contains("done"))
    })
    .await;
    let reqs = model.requests();
    daemon.stop();
    let read = result_for(&reqs[1], "r1");
    assert!(
        read.starts_with("Error") && !read.contains("Inbox note"),
        "{read}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_servers_images_cannot_grow_their_folder_past_its_limit() {
    let home = TestHome::new();
    let out = tempfile::tempdir().unwrap();
    // An old file of 70 MiB (sparse: no disk used) already there: over the folder's limit.
    let images = home.path().join("mcp/images");
    std::fs::create_dir_all(&images).unwrap();
    let old = images.join("20200101T000000.000-old-0.png");
    std::fs::File::create(&old)
        .unwrap()
        .set_len(70 << 20)
        .unwrap();
    let a_day_ago = std::time::SystemTime::now() - Duration::from_secs(86_400);
    std::fs::File::options()
        .write(true)
        .open(&old)
        .unwrap()
        .set_modified(a_day_ago)
        .unwrap();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call("s1", "mcp__notes__greet", "{}"),
        Step::text("done"),
    ])
    .await;
    home.write_config(&config(&tg, &model, "images", "", "", out.path()));
    let mut daemon = Daemon::start(&home);
    ready(&home, "notes").await;
    tg.push_text(OWNER, OWNER, "take a picture");
    crate::support::wait_until("the answer", WAIT, || {
        tg.sent_texts().iter().any(|t| t.contains("done"))
    })
    .await;
    daemon.stop();
    let (mut files, mut bytes) = (0, 0);
    for e in std::fs::read_dir(&images).unwrap().flatten() {
        files += 1;
        bytes += e.metadata().unwrap().len();
    }
    assert!(!old.exists(), "the oldest file goes first");
    assert_eq!(files, 8, "the call's 8 pictures are kept");
    assert!(bytes <= 64 << 20, "{files} files, {bytes} bytes");
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_list_prints_a_servers_names_without_their_escape_sequences() {
    let home = TestHome::new();
    let out = tempfile::tempdir().unwrap();
    let model = ScriptedModel::start(vec![]).await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: m\n\
         mcp:\n  servers:\n    notes: {{ command: python3, args: [\"{}\", escapes, \"{}\"] }}\n",
        model.base_url(),
        fixture(),
        out.path().join("starts").display()
    ));
    let run = tokio::task::block_in_place(|| run_cli(&home, &["mcp", "list"], None));
    let text = String::from_utf8_lossy(&run.stdout).to_string();
    assert!(run.status.success(), "{text}");
    assert!(text.contains("note://inbox"), "{text}");
    assert!(!text.contains('\u{1b}') && !text.contains('\r'), "{text:?}");
    assert!(
        !text.lines().any(|l| l.starts_with("other: ok")),
        "a forged line: {text:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stranger_in_a_group_cannot_read_a_resource() {
    const GROUP: i64 = -100777;
    const STRANGER: i64 = 999001;
    let home = TestHome::new();
    let out = tempfile::tempdir().unwrap();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "r1",
            "mcp_resource_read",
            r#"{"server": "notes", "uri": "note://inbox"}"#,
        ),
        Step::text("done"),
    ])
    .await;
    // The server opened its resources: what holds is that a stranger's turn is not the owner's.
    home.write_config(&config(
        &tg,
        &model,
        "resources",
        ", resources: true",
        "",
        out.path(),
    ));
    let mut daemon = Daemon::start(&home);
    ready(&home, "notes").await;
    tg.push_update(serde_json::json!({
        "update_id": 50,
        "message": {
            "message_id": 50, "date": 1700000000,
            "chat": {"id": GROUP, "type": "supergroup", "title": "team"},
            "from": {"id": STRANGER, "is_bot": false, "first_name": "U"},
            "text": "@ethan_test_bot read note://inbox from notes",
            "entities": [{"type": "mention", "offset": 0, "length": 15}],
        }
    }));
    tg.wait_for_sent(1, WAIT).await;
    let reqs = model.requests();
    daemon.stop();
    let offered: Vec<String> = reqs[0]["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect();
    assert!(
        !offered.contains(&"mcp_resource_read".to_string()),
        "{offered:?}"
    );
    let read = result_for(&reqs[1], "r1");
    assert!(
        read.starts_with("Error") && !read.contains("Inbox note"),
        "{read}"
    );
    assert!(tg.sent_texts().iter().all(|t| !t.contains("exfil.example")));
}
