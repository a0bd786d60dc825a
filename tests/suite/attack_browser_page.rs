//! A page built to make the browser's read of it huge, from the attacker's side, on a real
//! headless Chromium: its script makes the document's text 20 MB and its title 8 MB. The
//! browser tools read the page through CDP (`Runtime.evaluate`, whose answer carried the whole
//! `outerHTML`) and only then cut the HTML for the page reader's child. Before the fix the
//! answer never came: the `goto` hung until the call's time limit (120 s here, each time)
//! while the renderer held 1.2 GB; with 250 MB of text (100 MB title) it failed after about a
//! minute with an empty answer.
//!
//! The guarantee: the read is cut in the browser, in the tools' own isolated world (the page
//! cannot replace `slice` there), so what crosses to the daemon is at most
//! [`MAX_HTML_CHARS`](ethan::tools::builtin::browser::view::MAX_HTML_CHARS) of HTML and short
//! strings; the page is read, in time, at a small cost to the daemon's side (this test's
//! process runs the tool as the daemon does).

use crate::suite::browser::browser_or_skip;
use axum::response::Html;
use axum::routing::get;
use ethan::config::{BrowserConfig, WebFetchConfig};
use ethan::egress::{EgressGuard, SystemLookup};
use ethan::tools::builtin::browser::hub::BrowserHub;
use ethan::tools::builtin::browser::page::BrowserPage;
use ethan::tools::{Tool, ToolContext, ToolResult};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// The page: a 150 MB document and a 100 MB title, built by its script.
const HUGE: &str = "<!doctype html><html><head><title>small</title></head><body>\
    <p id=p>start</p><script>\
    document.title = 'T'.repeat(8 * 1000 * 1000);\
    document.getElementById('p').textContent = 'x'.repeat(20 * 1000 * 1000);\
    </script></body></html>";

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_whose_html_is_huge_costs_the_daemon_little() {
    if !browser_or_skip("a_page_whose_html_is_huge_costs_the_daemon_little") {
        return;
    }
    let app = axum::Router::new().route("/huge", get(|| async { Html(HUGE) }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let allow = WebFetchConfig {
        allow_private: vec!["127.0.0.1".into()],
        ..Default::default()
    };
    let hub = BrowserHub::new(
        BrowserConfig {
            executable: String::new(),
            idle_secs: 300,
        },
        EgressGuard::new(&allow.allow_private, Arc::new(SystemLookup)),
    );
    hub.set_page_reader(Arc::new(ethan::media::page::ChildPages::alone()));
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext {
        session_key: "terminal:browser-attack".into(),
        ethan_home: Some(dir.path().to_path_buf()),
        ..ToolContext::local(dir.path().to_path_buf())
    };
    let page = BrowserPage(hub.clone());
    let (before, peak_before) = (rss_kib(), peak_rss_kib());
    let started = std::time::Instant::now();
    let r: ToolResult = tokio::time::timeout(
        Duration::from_secs(120),
        page.run(
            json!({"action": "goto", "url": format!("http://{addr}/huge")}),
            &ctx,
        ),
    )
    .await
    .expect("the read finished within 120 s")
    .into();
    let took = started.elapsed();
    let peak = peak_rss_kib();
    let grew_mb = peak.saturating_sub(before.max(peak_before.min(before))) / 1024;
    eprintln!(
        "huge page: rss before {} MB, peak before {} MB, peak after {} MB (+{grew_mb} MB); \
         ok {}; output {} bytes; error {:?}; took {took:?}",
        before / 1024,
        peak_before / 1024,
        peak / 1024,
        r.ok,
        r.output.len(),
        r.error
    );
    hub.shutdown().await;
    assert!(r.ok, "{r:?}");
    assert!(took < Duration::from_secs(60), "the read took {took:?}");
    assert!(
        r.output.len() < 16 * 1024 * 1024,
        "{} bytes of output",
        r.output.len()
    );
    // The 28 MB of the page does not cross whole: the page reader's HTML (at most 15 MB) and
    // its copies are the most that may.
    assert!(
        peak < peak_before.max(before) + 200 * 1024,
        "the daemon's side grew from {} MB to {} MB reading the page",
        peak_before.max(before) / 1024,
        peak / 1024
    );
}
