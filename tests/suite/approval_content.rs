//! A `file_write` approval shows what will be written, through the real daemon and the fake
//! Bot API: a short text whole, with whether the call creates or replaces the file (and the
//! size it replaces); a 50 KB text as its first and last lines, its size, its SHA-256 and the
//! path of a preview file holding the whole text.

use crate::support::{wait_until, Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use serde_json::json;
use sha2::{Digest, Sha256};
use std::time::Duration;

const OWNER: i64 = 218485655;
const WAIT: Duration = Duration::from_secs(30);

/// The text of the newest approval request (the message carrying the keyboard), and its
/// buttons' callback data.
fn newest_approval(tg: &FakeTelegram) -> Option<(String, Vec<String>)> {
    tg.sent_messages().iter().rev().find_map(|m| {
        let buttons = m["reply_markup"]["inline_keyboard"][0].as_array()?;
        Some((
            m["text"].as_str()?.to_string(),
            buttons
                .iter()
                .filter_map(|b| b["callback_data"].as_str().map(str::to_string))
                .collect(),
        ))
    })
}

/// Wait for the `n`th approval request; its text and buttons.
async fn approval(tg: &FakeTelegram, n: usize) -> (String, Vec<String>) {
    let count = || {
        tg.sent_messages()
            .iter()
            .filter(|m| m["reply_markup"]["inline_keyboard"].is_array())
            .count()
    };
    wait_until(&format!("approval request #{n}"), WAIT, || count() >= n).await;
    newest_approval(tg).unwrap()
}

/// Telegram shows the text as HTML: the characters the renderer escapes, back.
fn unescaped(html: &str) -> String {
    html.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_write_approval_shows_the_text_or_its_ends_size_hash_and_preview() {
    let home = TestHome::new();
    let workspace = home.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("hello.txt"), "hi").unwrap();
    let big: String = (1..=1000)
        .map(|i| format!("row {i:04} of the big file {}\n", "z".repeat(30)))
        .collect();
    assert!(big.len() >= 50_000);
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "c1",
            "file_write",
            &json!({"path": "hello.txt", "content": "Hello, World!"}).to_string(),
        ),
        Step::echo_last_tool_result("result: "),
        Step::tool_call(
            "c2",
            "file_write",
            &json!({"path": "big.txt", "content": big}).to_string(),
        ),
        Step::echo_last_tool_result("result: "),
    ])
    .await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: m\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: off\n\
         owners: [\"telegram:{OWNER}\"]\n",
        model.base_url(),
        tg.token(),
        tg.base_url()
    ));
    // A temp directory of its own: the workspace is not under the system's, where writes
    // need no approval.
    let tmp = home.path().join("tmpdir");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut daemon = Daemon::start_with_env(&home, &[("TMPDIR", tmp.to_str().unwrap())]);

    tg.push_text(OWNER, OWNER, "say hi in hello.txt");
    let (text, buttons) = approval(&tg, 1).await;
    let text = unescaped(&text);
    assert!(text.contains("Hello, World!"), "{text}");
    assert!(
        text.contains("write 13 bytes to ") && text.contains("(replaces a file of 2 bytes)"),
        "{text}"
    );
    tg.push_update(FakeTelegram::callback_update(
        tg.next_update_id(),
        OWNER,
        OWNER,
        &buttons[0],
    ));
    wait_until("the approved write", WAIT, || {
        std::fs::read_to_string(workspace.join("hello.txt"))
            .ok()
            .as_deref()
            == Some("Hello, World!")
    })
    .await;

    tg.push_text(OWNER, OWNER, "now the big one");
    let (text, buttons) = approval(&tg, 2).await;
    let text = unescaped(&text);
    let hash = hex::encode(Sha256::digest(big.as_bytes()));
    assert!(
        text.contains(&format!(
            "write {} bytes, 1,000 lines to ",
            thousands(big.len())
        )) && text.contains("(creates it)"),
        "{text}"
    );
    assert!(text.contains(&format!("SHA-256 {hash}")), "{text}");
    assert!(text.contains("row 0001 of the big file"), "{text}");
    assert!(text.contains("row 1000 of the big file"), "{text}");
    assert!(!text.contains("row 0500"), "{text}");
    assert!(text.contains("lines not shown"), "{text}");
    let preview = home
        .path()
        .join("previews")
        .join(format!("{}.txt", &hash[..16]));
    assert!(
        text.contains(&format!("the whole text: {}", preview.display())),
        "{text}"
    );
    assert_eq!(std::fs::read_to_string(&preview).unwrap(), big);
    // Denied: nothing written.
    tg.push_update(FakeTelegram::callback_update(
        tg.next_update_id(),
        OWNER,
        OWNER,
        &buttons[2],
    ));
    wait_until("the denial reaches the model", WAIT, || {
        model.requests().len() >= 4
    })
    .await;
    assert!(!workspace.join("big.txt").exists());
    model.assert_protocol_ok();
    daemon.stop();
    home.assert_no_panic();
}

fn thousands(n: usize) -> String {
    ethan::usage::thousands(n as u64)
}
