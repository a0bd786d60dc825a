//! The gateway's web page, driven in a real headless Chromium against the real daemon and a
//! scripted model on loopback:
//! - sign-in: a wrong token is refused, the right one opens the page; an answer grows in the page
//!   in at least three steps before it completes; a shell call's approval shows the description
//!   and its three buttons, "Approve once" runs it and its line shows the outcome; a `ui_card`
//!   comparison is an HTML table with its headers; the page fits a phone and follows dark mode;
//!   first paint is measured and printed, beside a one-line page's in the same browser;
//! - model output carrying `<script>`, `<img onerror>`, `javascript:` links, `<style>` and
//!   `<iframe>` (in the answer and in a card) runs nothing and loads nothing;
//! - a reload mid-answer shows the conversation so far and follows the rest; the daemon killed
//!   mid-answer and started again shows the completed answer once;
//! - from the attacker's side, without a browser and with one: no cookie, a cookie without its
//!   header, a foreign `Origin` (a page of another port of the same machine, in Chromium), a
//!   rebinding `Host`, a cross-site read; the security headers; the cookie's attributes;
//!   `ethan gateway token --rotate` ending the sessions and the old token.
//!
//! `ETHAN_WEB_SCREENSHOT=<path>` saves a screenshot of the page (the docs' picture).

use crate::support::daemon::gateway_addr;
use crate::support::web_page::{self, eval, wait_for, Chromium, PageClient};
use crate::support::{run_cli, Daemon, ScriptedModel, Step, TestHome};
use axum::extract::OriginalUri;
use reqwest::Method;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub(super) const TOKEN: &str = "web-page-token-5b1c0e7d2a9f";
pub(super) const WAIT: Duration = Duration::from_secs(60);
const GAP: Duration = Duration::from_millis(120);

pub(super) fn config(model: &ScriptedModel) -> String {
    format!(
        "model:\n  base_url: {}\n  api_key: k\n  name: m\ngateway:\n  token: {TOKEN}\n",
        model.base_url()
    )
}

pub(super) fn start(home: &TestHome) -> Daemon {
    start_on(home, "127.0.0.1:0")
}

/// The daemon with its gateway on `listen`.
fn start_on(home: &TestHome, listen: &str) -> Daemon {
    // The workspace must not be inside the temp dir, where writes need no consent.
    let tmp = home.path().join("tmpdir");
    std::fs::create_dir_all(&tmp).unwrap();
    Daemon::start_with_env(
        home,
        &[
            ("TMPDIR", tmp.to_str().unwrap()),
            ("ETHAN__GATEWAY__LISTEN", listen),
        ],
    )
}

pub(super) async fn base_of(home: &TestHome) -> String {
    format!("http://{}", gateway_addr(home, WAIT).await)
}

/// A loopback server recording every request it gets (a canary, or an attacker's site).
pub(super) async fn recorder(page: &'static str) -> (String, Arc<Mutex<Vec<String>>>) {
    let hits = Arc::new(Mutex::new(Vec::new()));
    let h = hits.clone();
    let app = axum::Router::new().fallback(move |OriginalUri(uri): OriginalUri| {
        let h = h.clone();
        async move {
            h.lock().unwrap().push(uri.to_string());
            axum::response::Html(page)
        }
    });
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(l, app).await;
    });
    (format!("http://{addr}"), hits)
}

fn texts(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

/// The first contentful paint of `url` in `tab`, `visits` times (ms from the navigation's start,
/// as the page's own `performance` entries tell). The first visit pays for the browser's new
/// renderer process and the daemon's first requests; later ones fetch everything again too
/// (the page's files are `no-cache` and carry no validator), as a reload does.
async fn first_paints(tab: &chromiumoxide::Page, url: &str, visits: usize) -> Vec<u64> {
    let mut out = Vec::new();
    for _ in 0..visits {
        tab.goto(url).await.unwrap();
        let fcp: f64 = eval(
            tab,
            "new Promise(r => { const f = () => { const e = performance.getEntriesByName('first-contentful-paint')[0];
               e ? r(e.startTime) : setTimeout(f, 10); }; f(); })",
        )
        .await;
        out.push(fcp.round() as u64);
    }
    out
}

fn median(v: &[u64]) -> u64 {
    let mut v = v.to_vec();
    v.sort_unstable();
    v[v.len() / 2]
}

#[tokio::test(flavor = "multi_thread")]
async fn sign_in_stream_approve_and_see_a_card_in_chromium() {
    let Some(chromium) = Chromium::launch("web_page::sign_in_stream").await else {
        return;
    };
    let answer =
        "The answer arrives in the page piece by piece, word after word, until it is whole.";
    // A bidi override hides what follows it, and a long comment pushes the end out of sight
    // where a description is cut: the page must show both.
    let tail = "padding ".repeat(60) + "end-of-the-command";
    let shell_command =
        format!("echo approved-from-the-page \u{202e}txt.exe > web-approved.txt # {tail}");
    let card = json!({"card": {"type": "compare", "title": "Plans",
        "columns": ["Plan", "Price", "Seats"],
        "rows": [{"values": ["Free", "0", "1"]}, {"values": ["Pro", "$8", "5"]}]}});
    let model = ScriptedModel::start(vec![
        Step::slow_text(answer, GAP),
        Step::tool_call(
            "s1",
            "shell",
            &json!({ "command": shell_command }).to_string(),
        ),
        Step::text("It ran."),
        Step::tool_call("u1", "ui_card", &card.to_string()),
        Step::text("Here is the comparison."),
    ])
    .await;
    let home = TestHome::new();
    home.write_config(&config(&model));
    let _daemon = start(&home);
    let base = base_of(&home).await;

    // First paint, measured (not asserted): see `first_paints`.
    let (plain, _) = recorder("<!doctype html><title>plain</title><p>A one-line page.</p>").await;
    let tab = chromium.open("about:blank").await;
    let baseline = first_paints(&tab, &format!("{plain}/"), 3).await;
    let ours = first_paints(&tab, &format!("{base}/"), 5).await;
    eprintln!(
        "first paint of the web page on loopback: median {} ms (visits: {ours:?} ms); \
         a one-line page in the same browser: median {} ms ({baseline:?} ms)",
        median(&ours),
        median(&baseline)
    );
    let page = chromium.open(&format!("{base}/")).await;

    // A wrong token is refused and the form stays.
    web_page::sign_in(&page, "not-the-token").await;
    wait_for(
        &page,
        "document.getElementById('signin-error').textContent.includes('wrong token')",
        WAIT,
    )
    .await;
    let app_hidden: bool = eval(&page, "document.getElementById('app').hidden").await;
    assert!(app_hidden);
    let cookies: String = eval(&page, "document.cookie").await;
    assert_eq!(cookies, "", "no session, and the cookie is HttpOnly anyway");
    // The right one opens the page.
    page.evaluate("document.getElementById('token').value = ''")
        .await
        .unwrap();
    web_page::sign_in(&page, TOKEN).await;
    wait_for(&page, "!document.getElementById('app').hidden", WAIT).await;
    let cookies: String = eval(&page, "document.cookie").await;
    assert_eq!(cookies, "", "the session cookie is invisible to script");

    // The answer grows in at least three steps before it completes.
    let _: bool = eval(&page, web_page::WATCH_GROWTH).await;
    web_page::send_message(&page, "tell me something").await;
    wait_for(&page, "document.querySelector('.msg.assistant')", WAIT).await;
    let growth: Vec<u64> = eval(&page, "window.__growth").await;
    let final_text: String = eval(
        &page,
        "document.querySelector('.msg.assistant').textContent.trim()",
    )
    .await;
    assert_eq!(final_text, answer);
    assert!(
        growth.len() >= 3 && growth.windows(2).all(|w| w[0] < w[1]),
        "the text should grow in 3 or more steps: {growth:?}"
    );
    assert!(
        (*growth.last().unwrap() as usize) <= answer.len(),
        "{growth:?}"
    );
    // The session is listed, titled by its first message.
    wait_for(
        &page,
        "document.querySelector('#sessions button')?.textContent === 'tell me something'",
        WAIT,
    )
    .await;

    // A shell call asks: the same description, three buttons; "Approve once" runs it.
    web_page::send_message(&page, "run it").await;
    wait_for(&page, "document.querySelector('.consent button')", WAIT).await;
    let desc: String = eval(&page, "document.querySelector('.consent pre').textContent").await;
    // As every channel shows it: the reasons first, the invisible character escaped, the
    // whole command.
    assert!(
        desc.starts_with("(writes to a file (web-approved.txt))"),
        "{desc}"
    );
    assert!(
        desc.contains("echo approved-from-the-page \\u202etxt.exe > web-approved.txt #")
            && !desc.contains('\u{202e}'),
        "{desc}"
    );
    assert!(desc.trim_end().ends_with("end-of-the-command"), "{desc}");
    let buttons: Value = eval(
        &page,
        "[...document.querySelectorAll('.consent button')].map(b => b.textContent)",
    )
    .await;
    assert_eq!(
        texts(&buttons),
        ["Approve once", "Approve for this session", "Deny"]
    );
    let running: String = eval(&page, "document.querySelector('.tools .tool').className").await;
    assert!(running.contains("running"), "{running}");
    web_page::click(&page, ".consent button[data-choice=once]").await;
    wait_for(&page, "[...document.querySelectorAll('.msg.assistant')].some(m => m.textContent.includes('It ran.'))", WAIT).await;
    let line: String = eval(&page, "[...document.querySelectorAll('.tool')].map(t => t.className + ' ' + t.textContent).join('|')").await;
    assert!(
        line.contains("tool done") && line.contains("shell"),
        "{line}"
    );
    let ran = model.requests().iter().any(|r| {
        r.to_string().contains("approved-from-the-page")
            && r["messages"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["role"] == "tool")
    });
    assert!(
        ran,
        "the approved call ran and its result went back to the model"
    );

    // A card: a real table with its headers.
    web_page::send_message(&page, "compare the plans").await;
    wait_for(&page, "document.querySelector('.card table th')", WAIT).await;
    let heads: Value = eval(
        &page,
        "[...document.querySelectorAll('.card thead th')].map(t => t.textContent)",
    )
    .await;
    assert_eq!(texts(&heads), ["Plan", "Price", "Seats"]);
    let rows: Value = eval(
        &page,
        "[...document.querySelectorAll('.card tbody th')].map(t => t.textContent)",
    )
    .await;
    assert_eq!(texts(&rows), ["Free", "Pro"]);
    wait_for(&page, "[...document.querySelectorAll('.msg.assistant')].some(m => m.textContent.includes('comparison'))", WAIT).await;

    if let Some(path) = std::env::var_os("ETHAN_WEB_SCREENSHOT") {
        use chromiumoxide::page::ScreenshotParams;
        let png = page
            .screenshot(ScreenshotParams::builder().build())
            .await
            .unwrap();
        std::fs::write(&path, png).unwrap();
        eprintln!("screenshot saved to {path:?}");
    }

    // A phone's width in dark mode: nothing wider than the screen, dark colours, the list
    // folded away behind the menu button.
    web_page::phone_in_dark_mode(&page).await;
    wait_for(&page, "document.documentElement.clientWidth === 390", WAIT).await;
    let wide: i64 = eval(&page, "document.documentElement.scrollWidth").await;
    assert!(wide <= 390, "the page is {wide} px wide on a 390 px screen");
    let bg: String = eval(&page, "getComputedStyle(document.body).backgroundColor").await;
    assert_eq!(bg, "rgb(22, 24, 28)", "dark mode");
    let menu: String = eval(
        &page,
        "getComputedStyle(document.getElementById('menu')).display",
    )
    .await;
    assert_ne!(menu, "none");
    let composer_right: f64 = eval(
        &page,
        "document.getElementById('send').getBoundingClientRect().right",
    )
    .await;
    assert!(composer_right <= 390.0, "{composer_right}");
    model.assert_protocol_ok();
    home.assert_no_panic();
}

/// The payload a prompt-injected model would write, pointing at `canary`.
fn payload(canary: &str) -> String {
    format!(
        "Look:\n\n<script>window.__pwned = 1</script>\n\n<img src=\"{canary}/img\" onerror=\"window.__pwned = 2\">\n\n\
         [a link](javascript:window.__pwned=3) <a href=\"javascript:window.__pwned=4\">another</a>\n\n\
         <style>body {{ display: none }}</style>\n\n<iframe src=\"{canary}/frame\" onload=\"window.__pwned = 5\"></iframe>\n\n\
         ![picture]({canary}/markdown.png) <svg onload=\"window.__pwned=6\"></svg> <video src=\"{canary}/v.mp4\"></video>\n\n\
         The end."
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn model_output_renders_inert() {
    let Some(chromium) = Chromium::launch("web_page::model_output_renders_inert").await else {
        return;
    };
    let (canary, hits) = recorder("<p>canary</p>").await;
    let evil = payload(&canary);
    let card = json!({"card": {"type": "compare", "title": evil.clone(),
        "columns": ["<img src=x onerror=window.__pwned=7>", "B"],
        "rows": [{"values": [format!("<iframe src={canary}/card>"), "<script>window.__pwned=8</script>"]}]}});
    let model = ScriptedModel::start(vec![
        Step::tool_call("u1", "ui_card", &card.to_string()),
        Step::slow_text(evil.clone(), Duration::from_millis(20)),
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
    wait_for(&page, "[...document.querySelectorAll('.msg.assistant')].some(m => m.textContent.includes('The end.'))", WAIT).await;
    wait_for(&page, "document.querySelector('.card table')", WAIT).await;
    // Follow every link the answer has, as a person would.
    let clicked: i64 = eval(&page, "(() => { const a = [...document.querySelectorAll('#log a')]; a.forEach(x => x.click()); return a.length; })()").await;
    eprintln!("followed {clicked} link(s) of the answer");
    tokio::time::sleep(Duration::from_millis(500)).await;

    let pwned: String = eval(&page, "String(window.__pwned)").await;
    assert_eq!(pwned, "undefined", "a payload ran");
    let live: Value = eval(
        &page,
        "[...document.querySelectorAll('#log script, #log img, #log iframe, #log style, #log svg, #log video, #log [onerror], #log [onload], #log a[href^=javascript]')].map(e => e.outerHTML)",
    )
    .await;
    assert_eq!(live, json!([]), "live elements from the payload");
    let shown: String = eval(&page, "document.getElementById('log').innerText").await;
    assert!(
        shown.contains("<script>window.__pwned = 1</script>"),
        "the text is shown as text: {shown}"
    );
    let display: String = eval(&page, "getComputedStyle(document.body).display").await;
    assert_eq!(display, "block", "the <style> did not apply");
    assert!(
        hits.lock().unwrap().is_empty(),
        "requests left for the payload's URLs: {:?}",
        hits.lock().unwrap()
    );
    // The same after a reload, drawn from the store.
    web_page::reload(&page).await;
    wait_for(&page, "[...document.querySelectorAll('.msg.assistant')].some(m => m.textContent.includes('The end.'))", WAIT).await;
    wait_for(&page, "document.querySelector('.card table')", WAIT).await;
    let pwned: String = eval(&page, "String(window.__pwned)").await;
    assert_eq!(pwned, "undefined");
    assert!(
        hits.lock().unwrap().is_empty(),
        "{:?}",
        hits.lock().unwrap()
    );
    home.assert_no_panic();
}

/// A port nobody listens on now, for a daemon that must come back on the same address.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reload_and_a_restart_mid_answer_show_the_answer_once() {
    let Some(chromium) = Chromium::launch("web_page::reload_and_restart").await else {
        return;
    };
    let first = "One two three four five six seven eight nine ten eleven twelve thirteen fourteen.";
    let second = "Alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa.";
    let slow = Duration::from_millis(250);
    let model = ScriptedModel::start(vec![
        Step::slow_text(first, slow),
        Step::slow_text(second, Duration::from_millis(400)),
        // The re-run after the restart.
        Step::slow_text(second, GAP),
    ])
    .await;
    let home = TestHome::new();
    let listen = format!("127.0.0.1:{}", free_port());
    home.write_config(&config(&model));
    let mut daemon = start_on(&home, &listen);
    let base = base_of(&home).await;
    let page = chromium.open(&format!("{base}/")).await;
    web_page::sign_in(&page, TOKEN).await;
    wait_for(&page, "!document.getElementById('app').hidden", WAIT).await;

    // A reload mid-answer: the question, the text so far, then the rest.
    web_page::send_message(&page, "count").await;
    wait_for(
        &page,
        "document.querySelector('.msg.live .text')?.textContent.length > 10",
        WAIT,
    )
    .await;
    web_page::reload(&page).await;
    wait_for(&page, "!document.getElementById('app').hidden", WAIT).await;
    wait_for(
        &page,
        "document.querySelector('.msg.user')?.textContent === 'count'",
        WAIT,
    )
    .await;
    wait_for(
        &page,
        "document.querySelector('.msg.live .text')?.textContent.startsWith('One two')",
        WAIT,
    )
    .await;
    wait_for(&page, "document.querySelector('.msg.assistant')", WAIT).await;
    let answers: Value = eval(
        &page,
        "[...document.querySelectorAll('.msg.assistant')].map(m => m.textContent.trim())",
    )
    .await;
    assert_eq!(answers, json!([first]));

    // The daemon killed mid-answer and started again: the answer completes, once.
    web_page::send_message(&page, "spell").await;
    wait_for(
        &page,
        "document.querySelector('.msg.live .text')?.textContent.length > 5",
        WAIT,
    )
    .await;
    daemon.kill();
    let mut daemon = start_on(&home, &listen);
    wait_for(
        &page,
        "[...document.querySelectorAll('.msg.assistant')].some(m => m.textContent.includes('papa.'))",
        WAIT,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let answers: Value = eval(
        &page,
        "[...document.querySelectorAll('.msg.assistant')].map(m => m.textContent.trim())",
    )
    .await;
    assert_eq!(answers, json!([first, second]), "each answer once");
    let users: Value = eval(
        &page,
        "[...document.querySelectorAll('.msg.user')].map(m => m.textContent.trim())",
    )
    .await;
    assert_eq!(users, json!(["count", "spell"]));
    let live: bool = eval(
        &page,
        "Boolean(document.querySelector('.msg.live, .msg.pending'))",
    )
    .await;
    assert!(!live, "nothing is left half-done");
    // The store has the turn once too.
    let c = PageClient::sign_in(&base, TOKEN).await;
    let id: String = eval(&page, "location.hash.slice(1)").await;
    let conv: Value = c
        .req(Method::GET, &format!("sessions/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let stored: Vec<&Value> = conv["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == "assistant")
        .collect();
    assert_eq!(stored.len(), 2, "{conv}");
    daemon.stop();
    home.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_from_the_attackers_side() {
    let model = ScriptedModel::start(vec![Step::text("never asked")]).await;
    let home = TestHome::new();
    home.write_config(&config(&model));
    let _daemon = start(&home);
    let base = base_of(&home).await;
    let port = base.rsplit(':').next().unwrap().to_string();
    let http = reqwest::Client::new();
    let login = |origin: Option<&str>, host: Option<String>, token: &str| {
        let mut r = http
            .post(format!("{base}/web/api/login"))
            .json(&json!({ "token": token }));
        if let Some(o) = origin {
            r = r.header("origin", o);
        }
        if let Some(h) = host {
            r = r.header("host", h);
        }
        r.send()
    };

    // The page and its headers: strict CSP, no framing.
    let r = http.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    for part in [
        "default-src 'none'",
        "script-src 'self'",
        "frame-ancestors 'none'",
        "object-src 'none'",
        "require-trusted-types-for 'script'",
    ] {
        assert!(csp.contains(part), "{csp}");
    }
    assert!(
        !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
        "{csp}"
    );
    assert_eq!(r.headers()["x-frame-options"], "DENY");
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    let html = r.text().await.unwrap();
    assert!(
        !html.contains("<script>") && !html.contains(" style=") && !html.contains("<style"),
        "no inline script or style"
    );

    // DNS rebinding: another name for this address is not served.
    let r = http
        .get(format!("{base}/"))
        .header("host", format!("rebind.attacker.example:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 421);
    assert_eq!(
        login(
            Some(&format!("http://rebind.attacker.example:{port}")),
            Some(format!("rebind.attacker.example:{port}")),
            TOKEN
        )
        .await
        .unwrap()
        .status(),
        421
    );

    // Sign-in: a wrong token, no Origin, a foreign Origin are refused.
    assert_eq!(
        login(Some(&base), None, "wrong").await.unwrap().status(),
        401
    );
    assert_eq!(login(None, None, TOKEN).await.unwrap().status(), 403);
    assert_eq!(
        login(Some("http://127.0.0.1:1"), None, TOKEN)
            .await
            .unwrap()
            .status(),
        403
    );
    let ok = login(Some(&base), None, TOKEN).await.unwrap();
    assert_eq!(ok.status(), 200);
    let set = ok.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        set.contains("HttpOnly")
            && set.contains("SameSite=Strict")
            && set.contains("Max-Age=604800"),
        "{set}"
    );
    assert!(!set.contains("Secure"), "plain HTTP on loopback: {set}");
    let tls = http
        .post(format!("{base}/web/api/login"))
        .header("origin", &base)
        .header("x-forwarded-proto", "https")
        .json(&json!({ "token": TOKEN }))
        .send()
        .await
        .unwrap();
    assert!(tls.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .ends_with("; Secure"));

    let c = PageClient::sign_in(&base, TOKEN).await;
    let post = |path: &str| {
        c.bare(Method::POST, path)
            .json(&json!({"id": "m1", "text": "rm -rf ~"}))
    };
    assert_eq!(
        c.req(Method::GET, "sessions")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    // Without the cookie, without its header, with a foreign or no Origin, a cross-site read.
    let r = http
        .post(format!("{base}/web/api/sessions/s1/messages"))
        .header("origin", &base)
        .header("x-ethan-csrf", &c.csrf)
        .json(&json!({"id": "m1", "text": "rm -rf ~"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "no cookie");
    let r = http
        .post(format!("{base}/web/api/sessions/s1/messages"))
        .header("origin", &base)
        .header("cookie", &c.cookie)
        .json(&json!({"id": "m1", "text": "rm -rf ~"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        401,
        "the cookie without its header (what another port of localhost gets)"
    );
    let r = post("sessions/s1/messages")
        .header("origin", "http://localhost:3000")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "a page of another port");
    let r = post("sessions/s1/messages").send().await.unwrap();
    assert_eq!(r.status(), 403, "no Origin on a change");
    let r = post("sessions/s1/messages")
        .header("origin", &base)
        .header("origin", "http://localhost:3000")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "two Origins");
    let r = c
        .req(Method::GET, "sessions")
        .header("sec-fetch-site", "cross-site")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "a cross-site read");
    let r = c
        .req(Method::GET, "sessions")
        .header("sec-fetch-site", "same-site")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "a read from another port of the same host");
    let r = c
        .bare(Method::POST, "consent/abc")
        .header("origin", "null")
        .json(&json!({"choice": "once", "session": "s1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "a sandboxed or file page (Origin: null)");
    // The bearer API refuses a foreign page too.
    let r = http
        .post(format!("{base}/api/chat"))
        .bearer_auth(TOKEN)
        .header("origin", "http://localhost:3000")
        .json(&json!({"message": "rm -rf ~"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert!(model.requests().is_empty(), "nothing reached the model");

    // Rotation: the old token and every session stop working at once.
    let out = run_cli(&home, &["gateway", "token", "--rotate"], None);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a configured token is not replaced: {out:?}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("signed out"));
    assert_eq!(
        c.req(Method::GET, "sessions")
            .send()
            .await
            .unwrap()
            .status(),
        401,
        "signed out"
    );
    let c2 = PageClient::sign_in(&base, TOKEN).await;
    assert_eq!(
        c2.req(Method::GET, "me").send().await.unwrap().status(),
        200
    );
    home.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread")]
async fn rotating_a_stored_token_refuses_the_old_one_at_once() {
    let model = ScriptedModel::start(vec![]).await;
    let home = TestHome::new();
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: k\n  name: m\n",
        model.base_url()
    ));
    let _daemon = start(&home);
    let base = base_of(&home).await;
    let old = String::from_utf8(run_cli(&home, &["gateway", "token"], None).stdout).unwrap();
    let old = old.trim();
    let c = PageClient::sign_in(&base, old).await;
    assert_eq!(c.req(Method::GET, "me").send().await.unwrap().status(), 200);
    let out = run_cli(&home, &["gateway", "token", "--rotate"], None);
    assert!(out.status.success(), "{out:?}");
    let new = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert_ne!(new, old);
    assert_eq!(c.req(Method::GET, "me").send().await.unwrap().status(), 401);
    let r = reqwest::Client::new()
        .post(format!("{base}/api/consent/x"))
        .bearer_auth(old)
        .json(&json!({"allowed": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "the old bearer token");
    let c = PageClient::sign_in(&base, &new).await;
    assert_eq!(c.req(Method::GET, "me").send().await.unwrap().status(), 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_of_another_port_cannot_use_the_session_in_chromium() {
    let Some(chromium) = Chromium::launch("web_page::another_port").await else {
        return;
    };
    let model = ScriptedModel::start(vec![Step::text("never asked")]).await;
    let home = TestHome::new();
    home.write_config(&config(&model));
    let _daemon = start(&home);
    let base = base_of(&home).await;
    let page = chromium.open(&format!("{base}/")).await;
    web_page::sign_in(&page, TOKEN).await;
    wait_for(&page, "!document.getElementById('app').hidden", WAIT).await;

    // The attacker's page is on the same machine, another port: "same-site", so the browser
    // sends our cookie with its requests. It posts a message, a consent answer and a form, and
    // tries to read the conversations list.
    let (attacker, _hits) = recorder("<!doctype html><title>attacker</title><p>hello</p>").await;
    let evil = chromium.open(&format!("{attacker}/")).await;
    let gw = base.clone();
    let script = format!(
        "(async () => {{
          const out = [];
          const opts = (body) => ({{ method: 'POST', credentials: 'include', mode: 'no-cors',
            headers: {{ 'Content-Type': 'text/plain' }}, body: JSON.stringify(body) }});
          await fetch('{gw}/web/api/sessions/evil/messages', opts({{ id: 'attack1', text: 'rm -rf ~' }})).catch(e => out.push('blocked'));
          await fetch('{gw}/web/api/consent/abc', opts({{ choice: 'once', session: 'evil' }})).catch(e => out.push('blocked'));
          try {{ const r = await fetch('{gw}/web/api/sessions', {{ credentials: 'include' }}); out.push('read ' + r.status); }}
          catch (e) {{ out.push('read refused'); }}
          const f = document.createElement('form');
          f.method = 'POST'; f.action = '{gw}/web/api/sessions/evil/messages'; f.enctype = 'text/plain';
          const i = document.createElement('input'); i.name = '{{\"id\":\"attack2\",\"text\":\"rm -rf ~\",\"x\":\"'; i.value = '\"}}';
          f.append(i); document.body.append(f); f.submit();
          return out;
        }})()"
    );
    let out: Value = eval(&evil, &script).await;
    assert!(
        out.as_array().unwrap().iter().any(|v| v == "read refused"),
        "the read must fail: {out}"
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    // Nothing was taken in: no session "evil", no request to the model.
    let c = PageClient::sign_in(&base, TOKEN).await;
    let sessions: Value = c
        .req(Method::GET, "sessions")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(!sessions.to_string().contains("evil"), "{sessions}");
    assert!(
        model.requests().is_empty(),
        "the attacker's message reached the model"
    );
    assert!(!home.log().contains("attack1") && !home.log().contains("attack2"));
    // Framing the page shows nothing of it.
    let framed: Value = eval(
        &evil,
        &format!(
            "new Promise(r => {{ const f = document.createElement('iframe'); f.src = '{gw}/';
              f.onload = () => {{ try {{ r(f.contentDocument ? f.contentDocument.body.innerText : 'opaque'); }} catch (e) {{ r('opaque'); }} }};
              document.body.append(f); setTimeout(() => r('timeout'), 3000); }})"
        ),
    )
    .await;
    assert!(!framed.to_string().contains("Sign in"), "{framed}");
    home.assert_no_panic();
}
