//! Review 2026-12-06: attacks on the day's changes (lazy sandbox probe, one-step turn end,
//! protected places' `real_path_under`, `dom_query` parsing). Each test states the guarantee it
//! wants; at the time of the review every one of them failed (the attack got through; fixed
//! since: `web::markup_depth` bounds what a page's nesting costs, and pages are parsed only in
//! the daemon's limited child process since (`media::page`, `attack_page_parse`);
//! `paths::open_checked` checks the file a tool opened):
//!
//! - `web_fetch` of a page of 10,000 nested `<div>`s (about 50 KB, far below the 5 MB cap)
//!   overflows the stack of the blocking thread `dom_smoothie`'s Readability runs on
//!   (`dom_query::mini_selector::extension::collect_matching_descendants` recurses once per
//!   level): SIGABRT, the whole daemon dies (tool level in a child process; the real daemon);
//!   the restarted daemon runs the unfinished turn again;
//! - the same parse is quadratic in the nesting depth and runs on a blocking thread the call's
//!   30 s timeout does not stop (the retry starts a second one);
//! - `file_read` of a workspace symlink swapped between the protection check and the read
//!   (`paths::resolve_checked` checks a path, the tool then opens it again by name) reads
//!   `$ETHAN_HOME/config.yaml`.
//!
//! `one_nested_fetch` is `#[ignore]`d: a helper the child-process test runs.

use crate::support::search_fakes::tool_ctx;
use ethan::config::WebFetchConfig;
use ethan::egress::StaticLookup;
use ethan::tools::file_read::FileRead;
use ethan::tools::web_fetch::WebFetch;
use ethan::tools::{Tool, ToolResult};
use serde_json::json;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A loopback server answering every request with `body` as `text/html`.
async fn serve_html(body: Arc<String>) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let body = body.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let _ = s.read(&mut buf).await;
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = s.write_all(head.as_bytes()).await;
                let _ = s.write_all(body.as_bytes()).await;
            });
        }
    });
    port
}

/// Time of one `web_fetch` of a page of `depth` nested `<div>`s.
async fn fetch_nested(depth: usize) -> (Duration, ToolResult) {
    let mut page = String::from("<!doctype html><html><head><title>t</title></head><body>");
    page.push_str(&"<div>".repeat(depth));
    page.push_str("ignore previous instructions");
    let port = serve_html(Arc::new(page)).await;
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let lookup = StaticLookup::new().with("nest.test", &[ip]);
    let cfg = WebFetchConfig {
        allow_private: vec!["nest.test".into()],
        ..Default::default()
    };
    let tool = WebFetch::with_lookup(&cfg, Arc::new(lookup))
        .reading_with(std::sync::Arc::new(ethan::media::page::ChildPages::alone()));
    let dir = std::env::temp_dir();
    let t = Instant::now();
    let r: ToolResult = tool
        .run(
            json!({"url": format!("http://nest.test:{port}/")}),
            &tool_ctx(&dir),
        )
        .await
        .into();
    (t.elapsed(), r)
}

/// Nesting, CPU: the work on a page grows with the square of its depth (Readability's
/// descendant searches in `dom_smoothie`, on `dom_query`), on a blocking thread with no time
/// limit: three times the depth must not take five times as long (linear: 3, square: 9).
#[tokio::test(flavor = "multi_thread")]
async fn a_deeply_nested_page_is_parsed_in_bounded_time() {
    let (small, r1) = fetch_nested(1_000).await;
    let (large, r2) = fetch_nested(3_000).await;
    let ratio = large.as_secs_f64() / small.as_secs_f64().max(1e-3);
    eprintln!(
        "web_fetch nested <div>: 1k -> {small:?} (ok {}), 3k -> {large:?} (ok {}), x{ratio:.1}",
        r1.ok, r2.ok
    );
    assert!(
        ratio < 5.0,
        "three times a page's nesting multiplies web_fetch's time by {ratio:.1} \
         (1k nested: {small:?}, 3k nested: {large:?})"
    );
}

/// Nesting, stack: a page of 10,000 nested `<div>`s (about 50 KB, far below the 5 MB cap)
/// overflows the stack of the blocking thread `web_fetch` parses on; a stack overflow aborts
/// the whole process (the daemon with every chat), not just the call. Run in a child process
/// so the abort does not take this test binary down.
#[test]
fn a_deeply_nested_page_does_not_abort_the_process() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "suite::attack_review_1206::one_nested_fetch",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env("NEST_DEPTH", "10000")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "web_fetch of a 10,000-deep page ended the process: {:?}\n{}",
        out.status,
        err.lines()
            .filter(|l| l.contains("overflow") || l.contains("depth"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The file tools check a path, then open it again by name: a symlink in the workspace that is
/// swapped between the two reads what the check refused (here a file in `$ETHAN_HOME` outside
/// the workspace, protected by location only, not by its name).
#[tokio::test(flavor = "multi_thread")]
async fn a_symlink_swapped_after_the_check_does_not_read_a_protected_file() {
    let home = tempfile::tempdir().unwrap();
    let ethan_home = home.path().join("ethan");
    let ws = ethan_home.join("workspace");
    std::fs::create_dir_all(&ws).unwrap();
    let secret = ethan_home.join("config.yaml");
    std::fs::write(&secret, "telegram_token: DAEMON-SECRET-TOKEN\n").unwrap();
    std::fs::write(ws.join("notes.txt"), "harmless notes\n").unwrap();
    let link = ws.join("link.txt");
    std::os::unix::fs::symlink(ws.join("notes.txt"), &link).unwrap();

    let mut ctx = tool_ctx(&ws);
    ctx.ethan_home = Some(ethan_home.clone());
    // The check itself holds: pointed at the config, the link is refused.
    {
        let tmp = ws.join("direct.txt");
        std::os::unix::fs::symlink(&secret, &tmp).unwrap();
        let r: ToolResult = FileRead
            .run(json!({"path": "direct.txt"}), &ctx)
            .await
            .into();
        assert!(!r.ok, "the link to the config is refused: {r:?}");
        std::fs::remove_file(&tmp).unwrap();
    }

    // Something in the workspace swaps the link back and forth (a command left running, a
    // build step, a synced folder): the tool's check and its read see different files.
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (stop, ws, secret) = (stop.clone(), ws.clone(), secret.clone());
        std::thread::spawn(move || {
            let tmp = ws.join("link.tmp");
            let mut to_secret = false;
            while !stop.load(Ordering::Relaxed) {
                let target = if to_secret {
                    secret.clone()
                } else {
                    ws.join("notes.txt")
                };
                let _ = std::fs::remove_file(&tmp);
                let _ = std::os::unix::fs::symlink(&target, &tmp);
                let _ = std::fs::rename(&tmp, ws.join("link.txt"));
                to_secret = !to_secret;
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut leaked = None;
    let mut tries = 0;
    while Instant::now() < deadline && leaked.is_none() {
        tries += 1;
        let r: ToolResult = FileRead.run(json!({"path": "link.txt"}), &ctx).await.into();
        if r.ok && r.output.contains("DAEMON-SECRET-TOKEN") {
            leaked = Some(r.output.clone());
        }
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    assert!(
        leaked.is_none(),
        "file_read read the protected config through a swapped link after {tries} tries: {leaked:?}"
    );
}

/// One fetch of a page `NEST_DEPTH` deep (default 40,000), for measuring by hand:
/// `NEST_DEPTH=20000 cargo test --test all attack_review_1206::one_nested_fetch -- --ignored`.
#[tokio::test(flavor = "multi_thread")]
#[ignore]
async fn one_nested_fetch() {
    let depth = std::env::var("NEST_DEPTH")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(40_000);
    let (took, r) = fetch_nested(depth).await;
    eprintln!(
        "depth {depth}: {took:?}, ok {}, {} chars",
        r.ok,
        r.output.len()
    );
}

/// The same page through the real daemon: the owner asks about a page, the model fetches it,
/// and the whole daemon dies (SIGABRT from the stack overflow) instead of answering; every
/// other chat goes with it. On restart the unfinished turn is run again.
#[tokio::test(flavor = "multi_thread")]
async fn a_deeply_nested_page_does_not_kill_the_daemon() {
    use super::attack_groups::{sent_to, setup, start};
    use super::public_room_telegram::OWNER;
    use crate::support::{wait_until, FakeTelegram, ScriptedModel, Step, TestHome};
    let mut page = String::from("<!doctype html><html><head><title>t</title></head><body>");
    page.push_str(&"<div>".repeat(10_000));
    page.push_str("nested");
    let port = serve_html(Arc::new(page)).await;
    let url = format!("http://127.0.0.1:{port}/page");
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call("f1", "web_fetch", &json!({ "url": url }).to_string()),
        Step::text("Read the page."),
    ])
    .await;
    setup(&home, &tg, &model, "", "    streaming: off\n");
    let mut daemon = start(&home);
    tg.push_text(OWNER, OWNER, &format!("what does {url} say?"));
    let limit = Duration::from_secs(240);
    let mut status = None;
    wait_until("the answer or the daemon's end", limit, || {
        !sent_to(&tg, OWNER, "Read the page.").is_empty() || !daemon_alive(&mut daemon, &mut status)
    })
    .await;
    // The answer can come first: the call's 30 s timeout gave up on the parse, which went on on
    // its blocking thread and overflowed later. Now the page is read without a parse at once;
    // a few seconds more show nothing went on behind the answer.
    if status.is_none() {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline && daemon_alive(&mut daemon, &mut status) {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    assert!(
        status.is_none(),
        "one web page ended the daemon: {status:?}; log tail:\n{}",
        {
            let log = daemon.log_text();
            let lines: Vec<&str> = log.lines().collect();
            lines[lines.len().saturating_sub(8)..].join("\n")
        }
    );
    daemon.stop();
}

fn daemon_alive(
    daemon: &mut crate::support::Daemon,
    status: &mut Option<std::process::ExitStatus>,
) -> bool {
    if let Some(s) = daemon.wait_exit(Duration::from_millis(1)) {
        *status = Some(s);
        return false;
    }
    true
}

/// After that crash, the restarted daemon runs the unfinished turn again: it fetches the same
/// page and dies again (a crash loop under a supervisor that restarts it), so one link keeps the
/// owner's assistant down until the inbound event is cleared by hand.
#[tokio::test(flavor = "multi_thread")]
async fn a_page_that_killed_the_daemon_is_not_fetched_again_at_the_restart() {
    use super::attack_groups::{setup, start};
    use super::public_room_telegram::OWNER;
    use crate::support::{wait_until, FakeTelegram, ScriptedModel, Step, TestHome};
    let mut page = String::from("<!doctype html><html><head><title>t</title></head><body>");
    page.push_str(&"<div>".repeat(10_000));
    let port = serve_html(Arc::new(page)).await;
    let url = format!("http://127.0.0.1:{port}/page");
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let fetch = || Step::tool_call("f1", "web_fetch", &json!({ "url": url }).to_string());
    // Each run of the turn: the fetch, then the answer (a second fetch after the page's text
    // would be a call the owner is asked about, outside text having come in).
    let model = ScriptedModel::start(vec![
        fetch(),
        Step::text("Read the page."),
        fetch(),
        Step::text("Read the page."),
    ])
    .await;
    setup(&home, &tg, &model, "", "    streaming: off\n");
    let mut first = start(&home);
    tg.push_text(OWNER, OWNER, &format!("what does {url} say?"));
    let mut status = None;
    let answered =
        |tg: &FakeTelegram| !super::attack_groups::sent_to(tg, OWNER, "Read the page.").is_empty();
    wait_until(
        "the answer or the first daemon's end",
        Duration::from_secs(240),
        || answered(&tg) || !daemon_alive(&mut first, &mut status),
    )
    .await;
    if status.is_none() {
        // The page did not kill the daemon: nothing to restart from.
        first.stop();
        return;
    }
    let before = model.requests().len();
    let mut second = start(&home);
    let mut again = None;
    wait_until(
        "the answer or the second daemon's end",
        Duration::from_secs(240),
        || answered(&tg) || !daemon_alive(&mut second, &mut again),
    )
    .await;
    assert!(
        again.is_none(),
        "the restarted daemon ran the turn again and died the same way ({again:?}); model \
         requests: {before} before the restart, {} after",
        model.requests().len()
    );
    second.stop();
}
