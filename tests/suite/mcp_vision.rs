//! An MCP tool's image content through the real daemon, the fake Bot API and the scripted
//! model, against the real `@modelcontextprotocol/server-everything` (`get-tiny-image`: a PNG
//! between two text items): with `model.vision: true` the picture is an image part of the next
//! request (the fake model checks its bytes are the type it claims), for that request only;
//! with vision off there is none and the result says where the picture was saved.

use crate::support::model::image_parts;
use crate::support::{Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const OWNER: i64 = 218485655;
const WAIT: Duration = Duration::from_secs(60);
const TOOL: &str = "mcp__everything__get-tiny-image";

fn everything() -> PathBuf {
    let dir = std::env::var_os("ETHAN_TEST_TOOLS")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-tools"));
    let p = dir.join("npm/node_modules/.bin/mcp-server-everything");
    assert!(
        p.is_file(),
        "{} is missing: run tests/tools/install.sh",
        p.display()
    );
    p
}

/// One turn calling `get-tiny-image`, then a second turn; the model's four requests.
async fn turn(vision: bool) -> (TestHome, Vec<Value>) {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call("i1", TOOL, "{}"),
        Step::text("It is the MCP logo."),
        Step::text("You're welcome."),
    ])
    .await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: m\n  vision: {vision}\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: off\n\
         owners: [\"telegram:{OWNER}\"]\n\
         tools:\n  fast_path: [\"{TOOL}\"]\n\
         mcp:\n  servers:\n    everything: {{ command: \"{}\", args: [] }}\n",
        model.base_url(),
        tg.token(),
        tg.base_url(),
        everything().display()
    ));
    let tmp = home.path().join("tmpdir");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut daemon = Daemon::start_with_env(&home, &[("TMPDIR", tmp.to_str().unwrap())]);
    let deadline = Instant::now() + WAIT;
    while !home.log().contains("mcp server everything ready") {
        assert!(Instant::now() < deadline, "not ready:\n{}", home.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tg.push_text(OWNER, OWNER, "show me the tiny image");
    tg.wait_for_sent(1, WAIT).await;
    tg.push_text(OWNER, OWNER, "thanks");
    tg.wait_for_sent(2, WAIT).await;
    let reqs = model.wait_for_requests(3, WAIT).await;
    model.assert_protocol_ok();
    daemon.stop();
    home.assert_no_panic();
    (home, reqs)
}

fn tool_result(req: &Value) -> String {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "i1")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_image_is_an_image_part_of_the_next_request_for_a_vision_model() {
    let (home, reqs) = turn(true).await;
    assert!(image_parts(&reqs[0]).is_empty());
    let parts = image_parts(&reqs[1]);
    assert_eq!(parts.len(), 1, "{}", reqs[1]);
    assert_eq!(parts[0].1, "image/png");
    let result = tool_result(&reqs[1]);
    assert!(
        result.contains("Here's the image you requested")
            && result.contains("[image returned: image/png"),
        "{result}"
    );
    // The picture was saved under $ETHAN_HOME/mcp/images/, and is what the server sent.
    let dir = home.path().join("mcp/images");
    let saved: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(saved.len(), 1);
    assert_eq!(std::fs::read(saved[0].path()).unwrap(), parts[0].2);
    assert!(
        result.contains(&saved[0].path().display().to_string()),
        "{result}"
    );
    // The next turn does not send it again.
    assert!(image_parts(&reqs[2]).is_empty(), "{}", reqs[2]);
}

#[tokio::test(flavor = "multi_thread")]
async fn without_vision_an_mcp_image_is_a_saved_file_the_model_is_told_of() {
    let (_home, reqs) = turn(false).await;
    for r in &reqs {
        assert!(image_parts(r).is_empty(), "{r}");
    }
    let result = tool_result(&reqs[1]);
    assert!(
        result.contains("saved to") && result.contains(".png"),
        "{result}"
    );
}
