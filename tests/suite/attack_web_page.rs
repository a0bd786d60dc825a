//! The gateway's web page from the attacker's side, beyond what `web_page` already covers: each
//! test is an attack that the page must hold against, kept as a regression.
//! - model output (a prompt-injected answer, a shell command's approval): markup variants a
//!   sanitiser commonly misses (case and entity tricks in link schemes, reference links,
//!   mutation-XSS nests, a fence's info string, link titles, `meta`/`base`/`link`/`form`/`style`)
//!   run nothing and load nothing, in Chromium; the page's Trusted Types and CSP refuse an HTML
//!   insertion, `eval` and a second policy;
//! - approvals: "for this session" pressed on a call that must be asked every time grants
//!   nothing (the next one asks again); a press replayed, for an unknown request or with an
//!   unknown choice is refused; a message replayed with its id runs once;
//! - robustness: oversized and malformed bodies, hundreds of open event streams, odd
//!   `Last-Event-ID`s and session ids, and a flood of wrong sign-ins leave the daemon answering
//!   the owner, without a panic;
//! - secrets and caches: the token, the cookie and the header never reach the log; every API
//!   answer is `no-store`; errors carry the security headers; a rebinding `Host` or a same-site
//!   read is refused even with a valid session;
//! - another port of the same machine, in Chromium: an `EventSource` with credentials and a
//!   `fetch` that adds the session header (preflighted) get nothing.

use super::web_page::{base_of, config, recorder, start, TOKEN, WAIT};
use crate::support::web_page::{self, eval, wait_for, Chromium, PageClient};
use crate::support::{ScriptedModel, Step, TestHome};
use reqwest::Method;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Answer variants a sanitiser commonly lets through, pointing at `c` (a canary server).
fn variants(c: &str) -> String {
    format!(
        concat!(
            "Variants:\n\n",
            "<javascript:window.__pwned=10>\n\n",
            "[upper](JaVaScRiPt:window.__pwned=11) [entity](&#x6A;avascript:window.__pwned=12) ",
            "[data](data:text/html,<script>window.__pwned=13</script>) [vb](vbscript:msgbox(1))\n\n",
            "[ref link][r]\n\n[r]: javascript:window.__pwned=14\n\n",
            "<svg><style><img src=x onerror=window.__pwned=15></style></svg>\n\n",
            "<math><mtext><table><mglyph><style><img src={c}/mxss onerror=window.__pwned=16>\n\n",
            "```\"><img src={c}/fence onerror=window.__pwned=17>\ncode\n```\n\n",
            "[titled](https://a.example \"x\\\" onmouseover=\\\"window.__pwned=18\")\n\n",
            "<meta http-equiv=refresh content=\"0;url={c}/refresh\">\n\n",
            "<base href=\"{c}/base/\"><link rel=prefetch href=\"{c}/prefetch\">\n\n",
            "<form action=\"{c}/form\"><button>go</button></form>\n\n",
            "<div style=\"background:url({c}/css)\">styled</div>\n\n",
            "<noscript><p title=\"</noscript><img src={c}/noscript onerror=window.__pwned=20>\"></noscript>\n\n",
            "[a plain link]({c}/link) <{c}/autolink>\n\n",
            "The end."
        ),
        c = c
    )
}

/// Elements of the answers and cards that could run or load something.
const LIVE_MARKUP: &str = "[...document.querySelectorAll(
  '#log .msg *, #log .card-wrap *')].filter(e => e.matches(
  'script, img, iframe, style, svg, math, meta, base, link, form, button, object, embed, noscript, \
   [onerror], [onload], [onmouseover], [style], [src], [action], [formaction]')
  || (e.matches('a[href]') && !/^(https?:|mailto:)/.test(e.getAttribute('href'))))
  .map(e => e.outerHTML)";

#[tokio::test(flavor = "multi_thread")]
async fn sanitiser_bypass_variants_and_an_approval_stay_inert_in_chromium() {
    let Some(chromium) = Chromium::launch("attack_web_page::sanitiser_bypass").await else {
        return;
    };
    let (canary, hits) = recorder("<p>canary</p>").await;
    let command = format!("echo '<img src={canary}/desc onerror=window.__pwned=19>' > out.txt");
    let card = json!({"messages": [
        {"version": "v0.9", "createSurface": {"surfaceId": "s", "catalogId": ethan_cards::BASIC_CATALOG_ID}},
        {"version": "v0.9", "updateComponents": {"surfaceId": "s", "components": [
            {"id": "root", "component": "Column", "children": ["h", "t"]},
            {"id": "h", "component": "Text", "text": format!("<img src={canary}/a2ui onerror=window.__pwned=21>"), "variant": "h2"},
            {"id": "t", "component": "Text", "text": "<script>window.__pwned=22</script>"}
        ]}}
    ]});
    let model = ScriptedModel::start(vec![
        Step::tool_call("s1", "shell", &json!({ "command": command }).to_string()),
        Step::tool_call("u1", "ui_card", &card.to_string()),
        Step::slow_text(variants(&canary), Duration::from_millis(10)),
    ])
    .await;
    let home = TestHome::new();
    home.write_config(&config(&model));
    let _daemon = start(&home);
    let base = base_of(&home).await;
    let page = chromium.open(&format!("{base}/")).await;
    web_page::sign_in(&page, TOKEN).await;
    wait_for(&page, "!document.getElementById('app').hidden", WAIT).await;
    web_page::send_message(&page, "show me").await;

    // The approval shows the markup as text, in the description and in the tool line.
    wait_for(&page, "document.querySelector('.consent button')", WAIT).await;
    let desc: String = eval(&page, "document.querySelector('.consent pre').textContent").await;
    assert!(desc.contains("<img src="), "shown as text: {desc}");
    let consent_live: Value = eval(
        &page,
        "[...document.querySelectorAll('.consent *')].filter(e => e.matches('img, [onerror]')).length",
    )
    .await;
    assert_eq!(consent_live, json!(0));
    web_page::click(&page, ".consent button[data-choice=deny]").await;
    wait_for(&page, "[...document.querySelectorAll('.msg.assistant')].some(m => m.textContent.includes('The end.'))", WAIT).await;
    wait_for(&page, "document.querySelector('.card-wrap .card')", WAIT).await;
    // Hover over everything, as a pointer crossing the answer would.
    let _: i64 = eval(
        &page,
        "(() => { const all = [...document.querySelectorAll('#log *')];
           all.forEach(e => ['mouseover', 'mouseenter', 'focus'].forEach(t => e.dispatchEvent(new Event(t)))); return all.length; })()",
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let check = |when: &'static str| {
        let page = &page;
        let hits = hits.clone();
        async move {
            let pwned: String = eval(page, "String(window.__pwned)").await;
            assert_eq!(pwned, "undefined", "{when}: a payload ran");
            let live: Value = eval(page, LIVE_MARKUP).await;
            assert_eq!(live, json!([]), "{when}: live markup from the payload");
            let shown: String = eval(page, "document.getElementById('log').innerText").await;
            assert!(
                shown.contains("The end.") && shown.contains("a2ui onerror"),
                "{when}: the payload shows as text: {shown}"
            );
            assert!(
                hits.lock().unwrap().is_empty(),
                "{when}: requests left for the payload's URLs without a click: {:?}",
                hits.lock().unwrap()
            );
        }
    };
    check("streamed").await;
    // The page's own defences refuse what a payload that ran would try next.
    let tt: String = eval(
        &page,
        "(() => { try { document.getElementById('log').innerHTML = '<b>x</b>'; return 'inserted'; } catch (e) { return e.name; } })()",
    )
    .await;
    assert_eq!(tt, "TypeError", "Trusted Types refuse a raw HTML string");
    let policy: String = eval(
        &page,
        "(() => { try { trustedTypes.createPolicy('ethan', { createHTML: s => s }); return 'created'; } catch (e) { return e.name; } })()",
    )
    .await;
    assert_eq!(policy, "TypeError", "no second `ethan` policy");
    let other: String = eval(
        &page,
        "(() => { try { trustedTypes.createPolicy('evil', { createHTML: s => s }); return 'created'; } catch (e) { return e.name; } })()",
    )
    .await;
    assert_eq!(other, "TypeError", "no other policy");
    let evaluated: String = eval(
        &page,
        "(() => { try { return String(setTimeout('window.__pwned = 30', 0) && 'queued'); } catch (e) { return e.name; } })()",
    )
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let pwned: String = eval(&page, "String(window.__pwned)").await;
    assert_eq!(pwned, "undefined", "a string timer ran ({evaluated})");
    // Drawn again from the store.
    web_page::reload(&page).await;
    wait_for(&page, "[...document.querySelectorAll('.msg.assistant')].some(m => m.textContent.includes('The end.'))", WAIT).await;
    check("reloaded").await;
    home.assert_no_panic();
}

/// The first approval waiting in web session `session`, polled from its conversation.
async fn waiting_consent(c: &PageClient, session: &str, not: &[String]) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let conv: Value = c
            .req(Method::GET, &format!("sessions/{session}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if let Some(req) = conv["live"]["consents"].as_array().and_then(|a| {
            a.iter()
                .find(|r| !not.iter().any(|n| r["request_id"] == n.as_str()))
        }) {
            return req.clone();
        }
        assert!(Instant::now() < deadline, "no approval came: {conv}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Wait until the stored conversation of `session` has an answer containing `text`.
async fn answered(c: &PageClient, session: &str, text: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        let conv: Value = c
            .req(Method::GET, &format!("sessions/{session}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let done = conv["items"].as_array().unwrap().iter().any(|i| {
            i["kind"] == "assistant" && i["html"].as_str().unwrap_or_default().contains(text)
        });
        if done {
            return;
        }
        assert!(Instant::now() < deadline, "no answer {text:?}: {conv}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn press(c: &PageClient, request: &str, choice: &str, session: &str) -> (u16, Value) {
    let r = c
        .req(Method::POST, &format!("consent/{request}"))
        .json(&json!({ "choice": choice, "session": session }))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn say(c: &PageClient, session: &str, id: &str, text: &str) -> Value {
    let r = c
        .req(Method::POST, &format!("sessions/{session}/messages"))
        .json(&json!({ "id": id, "text": text }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn approvals_cannot_be_stretched_or_replayed() {
    // Brace expansion in the command name: the classifier asks for it every time.
    let always = json!({ "command": "{echo,always-asked}" }).to_string();
    let model = ScriptedModel::start(vec![
        Step::tool_call("a1", "shell", &always),
        Step::text("first done"),
        Step::tool_call("a2", "shell", &always),
        Step::text("second done"),
    ])
    .await;
    let home = TestHome::new();
    home.write_config(&config(&model));
    let _daemon = start(&home);
    let base = base_of(&home).await;
    let c = PageClient::sign_in(&base, TOKEN).await;

    let first = say(&c, "s1", "m1", "run it").await;
    assert_eq!(first["duplicate"], false);
    // The same message again (a replayed request): taken once.
    let again = say(&c, "s1", "m1", "run it").await;
    assert_eq!(again["duplicate"], true, "{again}");
    let req = waiting_consent(&c, "s1", &[]).await;
    let r1 = req["request_id"].as_str().unwrap().to_string();
    assert_eq!(req["always"], true, "{req}");
    assert!(
        req["description"]
            .as_str()
            .unwrap()
            .starts_with("(dangerous:"),
        "{req}"
    );
    // Unknown choices and requests, refused; nothing is decided by them.
    let (status, _) = press(&c, &r1, "ONCE", "s1").await;
    assert_eq!(status, 400);
    let (status, _) = press(&c, &r1, "always", "s1").await;
    assert_eq!(status, 400);
    let (status, body) = press(&c, "no-such-request", "once", "s1").await;
    assert_eq!((status, &body["ok"]), (200, &json!(false)), "{body}");
    let (status, _) = press(&c, "../../x", "once", "s1").await;
    assert!(status == 400 || status == 404, "{status}");
    // "For this session", which the page does not offer here, pressed anyway.
    let (status, body) = press(&c, &r1, "session", "s1").await;
    assert_eq!((status, &body["ok"]), (200, &json!(true)), "{body}");
    answered(&c, "s1", "first done").await;
    // The same press again: the request is over.
    let (_, body) = press(&c, &r1, "once", "s1").await;
    assert_eq!(body["ok"], false, "a replayed press: {body}");

    // The next identical call asks again: nothing was granted for the session.
    say(&c, "s1", "m2", "run it again").await;
    let req = waiting_consent(&c, "s1", std::slice::from_ref(&r1)).await;
    let r2 = req["request_id"].as_str().unwrap().to_string();
    assert_ne!(r1, r2);
    let (_, body) = press(&c, &r2, "deny", "s1").await;
    assert_eq!(body["ok"], true, "{body}");
    answered(&c, "s1", "second done").await;
    let last = model.requests().last().unwrap().to_string();
    assert!(
        last.contains("denied") || last.contains("refused"),
        "the second call was refused: {last}"
    );
    // m1 ran once: two model requests for the first turn, two for the second.
    assert_eq!(model.requests().len(), 4, "{}", model.describe());
    home.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread")]
async fn oversized_malformed_and_many_requests_leave_the_daemon_answering() {
    let model = ScriptedModel::start(vec![Step::text("still here")]).await;
    let home = TestHome::new();
    home.write_config(&config(&model));
    let _daemon = start(&home);
    let base = base_of(&home).await;
    let http = reqwest::Client::new();

    // A flood of wrong sign-ins (compared a second apart, only the newest few kept waiting)
    // does not keep the owner, who signs in after it, out for long.
    let mut flood = Vec::new();
    for i in 0..30 {
        let http = http.clone();
        let base = base.clone();
        flood.push(tokio::spawn(async move {
            http.post(format!("{base}/web/api/login"))
                .header("origin", &base)
                .json(&json!({ "token": format!("guess-{i}") }))
                .send()
                .await
                .map(|r| r.status().as_u16())
        }));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t = Instant::now();
    let c = PageClient::sign_in(&base, TOKEN).await;
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "the owner waited {:?} behind wrong guesses",
        t.elapsed()
    );
    for f in flood {
        f.abort();
    }

    // Bodies: too large, too long a message, not JSON, the wrong shapes.
    let huge = "x".repeat(5 * 1024 * 1024);
    let r = c
        .req(Method::POST, "sessions/s1/messages")
        .header("content-type", "application/json")
        .body(format!("{{\"id\":\"m1\",\"text\":\"{huge}\"}}"))
        .send()
        .await;
    // Refused, or cut off while it was still being sent (answered 413 before the end).
    if let Ok(r) = r {
        assert!(matches!(r.status().as_u16(), 400 | 413), "{}", r.status());
    }
    // The server closed that connection once it refused the body: the next requests go on a
    // new one (the client's pool could otherwise hand back the closed one).
    let c = PageClient {
        http: reqwest::Client::new(),
        ..c
    };
    let r = c
        .req(Method::POST, "sessions/s1/messages")
        .json(&json!({"id": "m1", "text": "y".repeat(40 * 1024)}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    for body in [
        "",
        "null",
        "[]",
        "{\"id\": 1, \"text\": 2}",
        "{\"id\": \"m\"}",
        "\u{0}\u{ff}",
    ] {
        let r = c
            .req(Method::POST, "sessions/s1/messages")
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{body:?}");
        let r = c
            .req(Method::POST, "consent/r1")
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{body:?}");
    }
    let r = http
        .post(format!("{base}/web/api/login"))
        .header("origin", &base)
        .header("content-type", "application/json")
        .body(format!("{{\"token\":\"{}\"}}", "t".repeat(1024 * 1024)))
        .send()
        .await;
    // Refused, or cut off while it was still being sent (the server answered before reading it
    // all and closed): either way the body was not taken; the daemon answering is checked below.
    if let Ok(r) = r {
        assert!(
            matches!(r.status().as_u16(), 400 | 413),
            "a sign-in body over 8 KB: {}",
            r.status()
        );
    }
    // Ids: too long, not of the alphabet, a path.
    for id in [
        "a".repeat(65),
        "ü".into(),
        "a%2F..%2Fb".into(),
        "%00".into(),
    ] {
        let r = c
            .req(Method::GET, &format!("sessions/{id}"))
            .send()
            .await
            .unwrap();
        assert!(
            matches!(r.status().as_u16(), 400 | 404),
            "{id}: {}",
            r.status()
        );
    }

    // Odd Last-Event-IDs: a reset (reload) or the stream, never a failure.
    for last in [
        "x",
        "-",
        "deadbeef-99999999999999999999999",
        &"9".repeat(4000),
    ] {
        let mut r = c
            .req(Method::GET, "sessions/s1/events")
            .header("last-event-id", last)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{last}");
        if let Ok(Ok(Some(chunk))) = tokio::time::timeout(Duration::from_secs(2), r.chunk()).await {
            let chunk = String::from_utf8_lossy(&chunk).to_string();
            assert!(chunk.contains("reset"), "{last}: {chunk}");
        }
    }

    // Hundreds of open event streams, for as many sessions: the owner is still answered.
    let mut streams = Vec::new();
    for i in 0..300 {
        let r = c
            .req(Method::GET, &format!("sessions/flood{i}/events"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        streams.push(r);
    }
    let t = Instant::now();
    let me = c.req(Method::GET, "me").send().await.unwrap();
    assert_eq!(me.status(), 200);
    say(&c, "s2", "m2", "hello").await;
    answered(&c, "s2", "still here").await;
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    drop(streams);
    let health = http.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    home.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_stay_out_of_logs_caches_and_other_hosts() {
    let model = ScriptedModel::start(vec![Step::text("ok")]).await;
    let home = TestHome::new();
    home.write_config(&config(&model));
    let _daemon = start(&home);
    let base = base_of(&home).await;
    let port = base.rsplit(':').next().unwrap().to_string();
    let http = reqwest::Client::new();

    // A near miss, then the token.
    let near = format!("{}X", &TOKEN[..TOKEN.len() - 1]);
    let r = http
        .post(format!("{base}/web/api/login"))
        .header("origin", &base)
        .json(&json!({ "token": near }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()["cache-control"], "no-store");
    assert!(r.headers().contains_key("content-security-policy"));
    let r = http
        .post(format!("{base}/web/api/login"))
        .header("origin", &base)
        .json(&json!({ "token": TOKEN }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["cache-control"], "no-store");
    let set = r.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        !set.to_ascii_lowercase().contains("domain="),
        "host-only: {set}"
    );
    assert!(set.contains("Path=/;"), "{set}");
    let c = PageClient::sign_in(&base, TOKEN).await;
    say(&c, "s1", "m1", "hi").await;
    answered(&c, "s1", "ok").await;

    // Every read and change answers no-store.
    for (method, path) in [
        (Method::GET, "me"),
        (Method::GET, "sessions"),
        (Method::GET, "sessions/s1"),
        (Method::GET, "sessions/s1/events"),
        (Method::POST, "consent/none"),
    ] {
        let r = c
            .req(method.clone(), path)
            .json(&json!({"choice": "deny", "session": "s1"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.headers()["cache-control"], "no-store", "{path}");
        assert_eq!(r.headers()["x-frame-options"], "DENY", "{path}");
    }
    // Errors carry the headers too.
    for url in [
        format!("{base}/assets/nope.js"),
        format!("{base}/web/api/sessions"),
    ] {
        let r = http.get(&url).send().await.unwrap();
        assert!(r.status().is_client_error(), "{url}");
        assert!(r.headers().contains_key("content-security-policy"), "{url}");
        assert_eq!(r.headers()["referrer-policy"], "no-referrer", "{url}");
    }

    // A valid session does not open the page to another name (DNS rebinding) or to a
    // same-site read (another port).
    let r = c
        .req(Method::GET, "sessions")
        .header("host", format!("attacker.example:{port}"))
        .header("origin", format!("http://attacker.example:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 421);
    let r = c
        .bare(Method::GET, "sessions/s1/events")
        .header("sec-fetch-site", "same-site")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    // Another name for the same address is another origin.
    let r = c
        .bare(Method::POST, "sessions/s1/messages")
        .header("origin", format!("http://localhost:{port}"))
        .json(&json!({"id": "m9", "text": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "Origin localhost for Host 127.0.0.1");

    let log = home.log();
    for secret in [TOKEN, near.as_str(), c.csrf.as_str(), c.cookie.as_str()] {
        assert!(!log.contains(secret), "{secret} is in the log");
    }
    let nonce = c.cookie.split('.').nth(2).unwrap();
    assert!(!log.contains(nonce), "the cookie's nonce is in the log");
    home.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread")]
async fn another_port_cannot_stream_or_send_the_header_in_chromium() {
    let Some(chromium) = Chromium::launch("attack_web_page::another_port").await else {
        return;
    };
    let model = ScriptedModel::start(vec![Step::slow_text(
        "secret answer text that must not leak",
        Duration::from_millis(50),
    )])
    .await;
    let home = TestHome::new();
    home.write_config(&config(&model));
    let _daemon = start(&home);
    let base = base_of(&home).await;
    let page = chromium.open(&format!("{base}/")).await;
    web_page::sign_in(&page, TOKEN).await;
    wait_for(&page, "!document.getElementById('app').hidden", WAIT).await;
    web_page::send_message(&page, "tell me").await;
    wait_for(&page, "document.querySelector('.msg.assistant')", WAIT).await;
    let session: String = eval(&page, "location.hash.slice(1)").await;

    let (attacker, _hits) = recorder("<!doctype html><title>attacker</title><p>hi</p>").await;
    let evil = chromium.open(&format!("{attacker}/")).await;
    let script = format!(
        "(async () => {{
          const out = {{}};
          out.sse = await new Promise(r => {{
            const es = new EventSource('{base}/web/api/sessions/{session}/events', {{ withCredentials: true }});
            es.onmessage = (e) => {{ es.close(); r('message ' + e.data); }};
            es.addEventListener('delta', (e) => {{ es.close(); r('delta ' + e.data); }});
            es.onerror = () => {{ es.close(); r('error'); }};
            setTimeout(() => {{ es.close(); r('timeout'); }}, 3000);
          }});
          try {{
            const r = await fetch('{base}/web/api/sessions/{session}', {{ credentials: 'include',
              headers: {{ 'X-Ethan-Csrf': 'guess' }} }});
            out.preflight = 'read ' + r.status + ' ' + (await r.text());
          }} catch (e) {{ out.preflight = 'refused'; }}
          try {{
            const r = await fetch('{base}/web/api/consent/x', {{ method: 'POST', credentials: 'include',
              headers: {{ 'X-Ethan-Csrf': 'guess', 'Content-Type': 'application/json' }},
              body: JSON.stringify({{ choice: 'once', session: '{session}' }}) }});
            out.post = 'sent ' + r.status;
          }} catch (e) {{ out.post = 'refused'; }}
          return out;
        }})()"
    );
    let out: Value = eval(&evil, &script).await;
    assert_eq!(out["sse"], "error", "{out}");
    assert_eq!(out["preflight"], "refused", "{out}");
    assert_eq!(out["post"], "refused", "{out}");
    assert!(!out.to_string().contains("secret answer"), "{out}");
    home.assert_no_panic();
}
