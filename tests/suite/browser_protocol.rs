//! The protocol client against the Chromium this machine has (Debian's, `/usr/bin/chromium`),
//! through the real daemon: a page that makes the browser send many kinds of events — requests
//! with cookies and their extra info (which Chromium 156 sends in a shape `chromiumoxide` 0.9.1
//! cannot parse), frames, workers, console messages, exceptions, history changes, popups — and
//! the log, with the client's own warnings on, must hold no unparsed message: neither the
//! client's `WS Invalid message` nor the relay's `cannot read` line
//! (`crates/tools/src/builtin/browser/relay.rs`).
//!
//! Without a browser the test prints why and returns (under CI it fails instead).

use crate::suite::browser::browser_or_skip;
use crate::support::{Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use axum::response::Html;
use axum::routing::get;
use serde_json::json;
use std::time::Duration;

const OWNER: i64 = 218485655;
const WAIT: Duration = Duration::from_secs(90);

const BUSY: &str = r#"<html><head><title>Busy</title>
<link rel="icon" href="/nope.ico"><link rel="preload" href="/nope.css" as="style">
</head><body><h1>Busy page</h1><iframe src="/frame"></iframe>
<img src="/missing.png"><img src="data:image/png;base64,iVBORw0KGgo=">
<script>
console.log('a log', {a: 1}); console.warn('a warning'); console.error('an error');
console.table([{a: 1}]); console.count(); console.time('t'); console.timeEnd('t');
try { null.x } catch (e) { console.error(e) }
setTimeout(() => { throw new Error('uncaught') }, 10);
Promise.reject(new Error('unhandled rejection'));
fetch('/missing.json').catch(() => {});
new Worker(URL.createObjectURL(new Blob(['postMessage(1)'], {type: 'text/javascript'})));
try { new WebSocket('ws://' + location.host + '/ws') } catch (e) {}
document.cookie = 'a=b';
localStorage.setItem('k', 'v'); sessionStorage.setItem('k', 'v');
history.pushState({}, '', '/pushed'); location.hash = '#frag';
const s = document.createElement('style'); s.textContent = 'h1{color:red}'; document.head.append(s);
eval('1+1'); new Function('return 2')();
navigator.sendBeacon && navigator.sendBeacon('/beacon', 'x');
const a = new (window.AudioContext || window.webkitAudioContext)();
window.open('/frame');
try { document.body.requestFullscreen() } catch (e) {}
navigator.permissions && navigator.permissions.query({name: 'geolocation'});
performance.mark('m');
</script></body></html>"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_busy_page_leaves_no_unparsed_protocol_message_in_the_log() {
    if !browser_or_skip("a_busy_page_leaves_no_unparsed_protocol_message_in_the_log") {
        return;
    }
    let app = axum::Router::new()
        .route("/busy", get(|| async { Html(BUSY) }))
        .route(
            "/frame",
            get(|| async { Html("<p>frame</p><script>console.log('in frame')</script>") }),
        );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(l, app).await;
    });
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "g1",
            "browser_page",
            &json!({"action": "goto", "url": format!("http://{addr}/busy")}).to_string(),
        ),
        Step::tool_call("w1", "browser_page", r#"{"action": "wait", "ms": 1500}"#),
        Step::tool_call("s1", "browser_page", r#"{"action": "screenshot"}"#),
        Step::tool_call("t1", "browser_tab", r#"{"action": "list"}"#),
        Step::text("done"),
    ])
    .await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: m\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: off\n\
         owners: [\"telegram:{OWNER}\"]\n\
         tools:\n  web_fetch:\n    allow_private: [\"127.0.0.1\"]\n",
        model.base_url(),
        tg.token(),
        tg.base_url(),
    ));
    // The client's warnings are in the log too (it names no method, so it is looked for as is).
    let mut daemon = Daemon::start_with_env(
        &home,
        &[(
            "RUST_LOG",
            "ethan=debug,ethan_channels=debug,chromiumoxide=warn",
        )],
    );
    tg.push_text(OWNER, OWNER, "go");
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert!(
        sent[0]["text"].as_str().is_some_and(|t| t.contains("done")),
        "{}",
        tg.describe_calls()
    );
    daemon.stop();
    let log = home.log();
    // The page did load, with its requests, through the relay.
    assert!(
        log.contains("tool call s1 tool=browser_page ok=true"),
        "{log}"
    );
    for unparsed in [
        "WS Invalid message",
        "cannot read",
        "did not match any variant",
    ] {
        assert!(
            !log.contains(unparsed),
            "an unparsed protocol message ({unparsed}):\n{log}"
        );
    }
    model.assert_protocol_ok();
    home.assert_no_panic();
}
