//! The MCP client's lifecycle against real server processes: `tests/fixtures/mcp/lifecycle.py`
//! (plain Python, misbehaving on purpose), run by the manager as the daemon runs it.
//! - a server that lists no tools, then announces `tools/list_changed` → its tools appear;
//! - a server crashing right after listing → restarts spaced out (1, 2, 4, 8 s …; the cap of
//!   30 s is the unit test of `mcp::lifecycle::Backoff`);
//! - a hung server (it stops answering, its process stays) → killed and restarted after its
//!   ping timeout;
//! - a server whose `tools/list` pages never end → the list stops at the caps, and the daemon
//!   has its tools.

use ethan::config::{Config, Loaded, McpServerConfig};
use ethan::mcp::lifecycle::{MAX_PAGES, MAX_TOOLS};
use ethan::mcp::McpManager;
use ethan::tools::executor::RegistrySlot;
use ethan::tools::registry::Registry;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

fn script() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mcp/lifecycle.py")
        .display()
        .to_string()
}

/// A manager of one server `lifecycle.py <mode>` (with `timeout_secs`), started; the file its
/// starts are written to (in `out`: the server cannot write under `$ETHAN_HOME`, `home`).
fn manager(
    home: &Path,
    out: &Path,
    mode: &str,
    timeout_secs: u64,
) -> (Arc<McpManager>, RegistrySlot, PathBuf) {
    let starts = out.join(format!("{mode}.starts"));
    let mut config = Config::default();
    config.mcp.servers.insert(
        "life".into(),
        McpServerConfig {
            command: Some("python3".into()),
            args: vec![script(), mode.into(), starts.display().to_string()],
            timeout_secs,
            ..Default::default()
        },
    );
    let loaded = Loaded {
        config,
        home: home.to_path_buf(),
        path: home.join("config.yaml"),
        file_found: false,
        notices: Vec::new(),
    };
    let slot: RegistrySlot = Arc::new(RwLock::new(Arc::new(Registry::default())));
    let m = McpManager::new(&loaded, slot.clone());
    m.start();
    (m, slot, starts)
}

fn tool_names(slot: &RegistrySlot) -> Vec<String> {
    let r = slot.read().unwrap().clone();
    r.iter().map(|t| t.decl().name.to_string()).collect()
}

/// The times (seconds) of the server's starts so far.
fn starts(file: &Path) -> Vec<f64> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

async fn until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !f() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_lists_no_tools_then_announces_list_changed_gets_them() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let (m, slot, starts_file) = manager(home.path(), out.path(), "late", 10);
    until(
        "the tool after list_changed",
        Duration::from_secs(20),
        || tool_names(&slot).contains(&"mcp__life__greet".to_string()),
    )
    .await;
    // On the same connection: no restart was needed.
    assert_eq!(starts(&starts_file).len(), 1);
    let tool = slot
        .read()
        .unwrap()
        .get("mcp__life__greet")
        .cloned()
        .unwrap();
    let ctx = ethan::tools::ToolContext::local(home.path().to_path_buf());
    let r: ethan::tools::ToolResult = tool.run(serde_json::json!({}), &ctx).await.into();
    assert!(r.ok && r.output == "hello from late", "{r:?}");
    m.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_crashing_right_after_listing_is_restarted_ever_more_slowly() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let (m, slot, starts_file) = manager(home.path(), out.path(), "crash", 10);
    // 1 + 2 + 4 s of waits, plus the starts themselves.
    until("four starts", Duration::from_secs(30), || {
        starts(&starts_file).len() >= 4
    })
    .await;
    let t = starts(&starts_file);
    let gaps: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
    // The waits double (1, 2, 4 s), each start taking some more on top (how much depends on
    // the machine's load, so only the waits are asserted: restarting every second, as before,
    // gives no gap of 4 s).
    assert!(gaps[0] >= 0.9, "{gaps:?}");
    assert!(gaps[1] >= 1.9, "{gaps:?}");
    assert!(gaps[2] >= 3.9, "{gaps:?}");
    // Its tools stay registered meanwhile.
    assert!(tool_names(&slot).contains(&"mcp__life__greet".to_string()));
    m.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hung_server_is_restarted_after_its_ping_timeout() {
    let home = tempfile::tempdir().unwrap();
    // timeout_secs 2: pinged every 2 s, and given 2 s to answer.
    let out = tempfile::tempdir().unwrap();
    let (m, _slot, starts_file) = manager(home.path(), out.path(), "hang", 2);
    until("the first start", Duration::from_secs(10), || {
        !starts(&starts_file).is_empty()
    })
    .await;
    let first = Instant::now();
    until(
        "a restart of the hung server",
        Duration::from_secs(20),
        || starts(&starts_file).len() >= 2,
    )
    .await;
    // Ping after 2 s, no answer within 2 s, restart after 1 s: about 5 s.
    let took = first.elapsed();
    assert!(took >= Duration::from_secs(3), "{took:?}");
    assert!(took <= Duration::from_secs(12), "{took:?}");
    m.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn endless_tools_list_pages_stop_at_the_caps() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let (m, slot, _) = manager(home.path(), out.path(), "pages", 20);
    let listed = |slot: &RegistrySlot| {
        tool_names(slot)
            .iter()
            .filter(|n| n.starts_with("mcp__life__"))
            .count()
    };
    until("the capped list", Duration::from_secs(30), || {
        listed(&slot) == MAX_TOOLS
    })
    .await;
    // 100 tools a page: the tool cap comes before the page cap.
    const { assert!(MAX_TOOLS < MAX_PAGES * 100) };
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(listed(&slot), MAX_TOOLS);
    // No resource reader: the server's config did not open its resources (`resources: true`).
    assert!(!tool_names(&slot).contains(&"mcp_resource_read".to_string()));
    m.shutdown().await;
}

// ----- through the binary --------------------------------------------------------------------

use crate::support::{run_cli, Daemon, ScriptedModel, TestHome};

/// A config with the scripted model and one server `lifecycle.py <mode>` writing its starts
/// into `out`.
fn write_config(home: &TestHome, model: &ScriptedModel, mode: &str, out: &Path) {
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: m\n\
         mcp:\n  servers:\n    life: {{ command: python3, args: [\"{}\", \"{mode}\", \"{}\"], timeout_secs: 10 }}\n",
        model.base_url(),
        script(),
        out.join("starts").display()
    ));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_skipped_tool_is_logged_once_not_at_every_rebuild() {
    let home = TestHome::new();
    let out = tempfile::tempdir().unwrap();
    let model = ScriptedModel::start(vec![]).await;
    write_config(&home, &model, "late", out.path());
    let mut daemon = Daemon::start(&home);
    until("the second list", Duration::from_secs(30), || {
        home.log()
            .contains("mcp server life changed its tools: 2 tools")
    })
    .await;
    // Listed twice (at start, after list_changed), each time rebuilding the registry.
    let log = home.log();
    let skips = log
        .lines()
        .filter(|l| l.contains("\"mcp__life__broken\" skipped"))
        .count();
    assert_eq!(skips, 1, "{log}");
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_list_shows_mcp_tools_with_their_risk() {
    let home = TestHome::new();
    let out = tempfile::tempdir().unwrap();
    let model = ScriptedModel::start(vec![]).await;
    write_config(&home, &model, "resources", out.path());
    let run = run_cli(&home, &["tools", "list"], None);
    let text = String::from_utf8_lossy(&run.stdout).to_string();
    assert!(run.status.success(), "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("mcp__life__greet "))
        .unwrap_or_else(|| panic!("no MCP tool listed:\n{text}"));
    assert!(line.contains("read_only"), "{line}");
    // The server was stopped again.
    assert_eq!(starts(&out.path().join("starts")).len(), 1);
}
