//! Attacks on the web page that once succeeded, kept as regressions (each test states what the
//! defence guarantees):
//! - a page of another port of this host tosses a junk `ethan_session` cookie on a longer path
//!   (sent first by the browser): the owner stays signed in, and signing out and in again
//!   works while the junk is there;
//! - sign-in guesses sent at once are decided at most one a second, a right one no sooner; the
//!   owner signing in after a burst of guesses gets in within a few seconds;
//! - signing out ends the session on the server: a copy of the cookie and header is refused;
//! - a code fence's language cannot give an answer the page's own classes;
//! - an approval answered with another session's name is resolved in the session that asked;
//! - the page's responses turn DNS prefetching off; over TLS the cookie is `__Host-` prefixed.

use super::web_page::{base_of, config, recorder, start, TOKEN, WAIT};
use crate::support::web_page::{self, eval, wait_for, Chromium, PageClient};
use crate::support::{ScriptedModel, Step, TestHome};
use reqwest::Method;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// A page of another port of the same host sets a cookie of the same name on a longer path,
/// which the browser sends first: the owner stays signed in (every value is tried), and can
/// sign out and in again while the junk is there.
#[tokio::test(flavor = "multi_thread")]
async fn a_tossed_cookie_from_another_port_does_not_sign_the_owner_out() {
    let Some(chromium) = Chromium::launch("attack_web_page_fixed::tossed_cookie").await else {
        return;
    };
    let model = ScriptedModel::start(vec![]).await;
    let home = TestHome::new();
    home.write_config(&config(&model));
    let _daemon = start(&home);
    let base = base_of(&home).await;
    let page = chromium.open(&format!("{base}/")).await;
    web_page::sign_in(&page, TOKEN).await;
    wait_for(&page, "!document.getElementById('app').hidden", WAIT).await;

    let (attacker, _) = recorder("<!doctype html><title>attacker</title>").await;
    let evil = chromium.open(&format!("{attacker}/")).await;
    let _: String = eval(
        &evil,
        "(document.cookie = 'ethan_session=junk; path=/web/api; max-age=31536000', document.cookie)",
    )
    .await;
    web_page::reload(&page).await;
    wait_for(
        &page,
        "!document.getElementById('app').hidden || !document.getElementById('signin').hidden",
        WAIT,
    )
    .await;
    let me: u16 = eval(
        &page,
        "fetch('/web/api/me', { headers: { 'X-Ethan-Csrf': localStorage.getItem('ethan.csrf') } }).then(r => r.status)",
    )
    .await;
    let signed_in: bool = eval(&page, "!document.getElementById('app').hidden").await;
    assert!(
        signed_in && me == 200,
        "signed out by another port's cookie: GET /web/api/me answers {me}"
    );

    // Signing out and in again through the form works while the junk cookie is still there
    // (every step bounded: a hang fails the test).
    let again = async {
        // The attacker's tab was opened last; input goes to the tab in front.
        page.bring_to_front().await.unwrap();
        let _: bool = eval(&page, "(document.getElementById('signout').click(), true)").await;
        wait_for(&page, "!document.getElementById('signin').hidden", WAIT).await;
        web_page::sign_in(&page, TOKEN).await;
        wait_for(&page, "!document.getElementById('app').hidden", WAIT).await;
        let me: u16 = eval(
            &page,
            "fetch('/web/api/me', { headers: { 'X-Ethan-Csrf': localStorage.getItem('ethan.csrf') } }).then(r => r.status)",
        )
        .await;
        assert_eq!(me, 200, "signing in again beside the junk cookie");
        // The junk is still in the browser, sent with every request under /web/api.
        let junk = chromium.open(&format!("{attacker}/web/api/x")).await;
        let cookies: String = eval(&junk, "document.cookie").await;
        assert!(cookies.contains("ethan_session=junk"), "{cookies}");
    };
    tokio::time::timeout(Duration::from_secs(90), again)
        .await
        .expect("signing in again beside the junk cookie hung");
    home.assert_no_panic();
}

/// Guesses sent in parallel and abandoned after a moment: were each decided at once, "no fast
/// 200" would mean "wrong". The token is compared at most once a second, a right guess no
/// sooner, so the right token among ten is never accepted before nine seconds.
#[tokio::test(flavor = "multi_thread")]
async fn sign_in_guesses_are_decided_at_most_one_a_second() {
    let model = ScriptedModel::start(vec![]).await;
    let home = TestHome::new();
    home.write_config(&config(&model));
    let _daemon = start(&home);
    let base = base_of(&home).await;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let t = Instant::now();
    let mut guesses = Vec::new();
    for i in 0..10 {
        let token = if i == 9 {
            // The right token goes last, once the wrong ones are on their way (spawned together,
            // a loaded machine could send it first, and the first guess is decided at once).
            tokio::time::sleep(Duration::from_millis(500)).await;
            TOKEN.to_string()
        } else {
            format!("guess-{i}")
        };
        let (http, base) = (http.clone(), base.clone());
        guesses.push(tokio::spawn(async move {
            let r = http
                .post(format!("{base}/web/api/login"))
                .header("origin", &base)
                .json(&json!({ "token": token }))
                .send()
                .await;
            (i, r.map(|r| r.status().as_u16()).ok(), Instant::now())
        }));
    }
    let mut right_at = None;
    for g in guesses {
        let (i, status, at) = g.await.unwrap();
        if i == 9 && status == Some(200) {
            right_at = Some(at - t);
        }
    }
    if let Some(at) = right_at {
        assert!(
            at >= Duration::from_secs(9),
            "the 10th guess (the token) was accepted {at:?} after 9 wrong ones in flight: \
             ten guesses decided in {at:?}"
        );
    }
}

/// After a burst of guesses (abandoned, or still waiting), the owner's right token is decided
/// within a few seconds; and a right token sent just after a wrong one is no faster than the
/// wrong one was: it waits its second too.
#[tokio::test(flavor = "multi_thread")]
async fn the_owner_gets_in_within_seconds_after_a_burst_of_guesses() {
    let model = ScriptedModel::start(vec![]).await;
    let home = TestHome::new();
    home.write_config(&config(&model));
    let _daemon = start(&home);
    let base = base_of(&home).await;
    let login = |http: reqwest::Client, base: String, token: String| async move {
        http.post(format!("{base}/web/api/login"))
            .header("origin", &base)
            .json(&json!({ "token": token }))
            .send()
            .await
            .map(|r| r.status().as_u16())
    };
    // Abandoned guesses: each client hangs up after 300 ms.
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let mut burst = Vec::new();
    for i in 0..10 {
        burst.push(tokio::spawn(login(
            impatient.clone(),
            base.clone(),
            format!("guess-{i}"),
        )));
    }
    for b in burst {
        let _ = b.await.unwrap();
    }
    let http = reqwest::Client::new();
    let t = Instant::now();
    let status = login(http.clone(), base.clone(), TOKEN.to_string())
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "the owner waited {:?} after abandoned guesses",
        t.elapsed()
    );

    // A wrong guess, then the right token at once: the right one waits its turn.
    let t = Instant::now();
    let wrong = tokio::spawn(login(http.clone(), base.clone(), "guess-x".into()));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let right = login(http.clone(), base.clone(), TOKEN.to_string())
        .await
        .unwrap();
    assert_eq!(wrong.await.unwrap().unwrap(), 401);
    assert_eq!(right, 200);
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "the right token was decided {:?} after a wrong one",
        t.elapsed()
    );
    home.assert_no_panic();
}

/// "Sign out" ends the session on the server, not only the cookie in this browser: a copy of
/// the cookie and header (another browser profile, a proxy log, a shared machine) stops working
/// at once.
#[tokio::test(flavor = "multi_thread")]
async fn signing_out_ends_the_session_on_the_server() {
    let model = ScriptedModel::start(vec![]).await;
    let home = TestHome::new();
    home.write_config(&config(&model));
    let _daemon = start(&home);
    let base = base_of(&home).await;
    let c = PageClient::sign_in(&base, TOKEN).await;
    let r = c.req(Method::POST, "logout").send().await.unwrap();
    assert_eq!(r.status(), 200);
    let r = c.req(Method::GET, "sessions").send().await.unwrap();
    assert_eq!(
        r.status(),
        401,
        "the signed-out session still reads the conversations"
    );
    // A copy of the cookie and header in another client (a proxy log, another profile).
    let copy = PageClient {
        base: base.clone(),
        http: reqwest::Client::new(),
        cookie: c.cookie.clone(),
        csrf: c.csrf.clone(),
    };
    for (m, path) in [
        (Method::GET, "me"),
        (Method::POST, "sessions/s1/stop"),
        (Method::POST, "logout"),
    ] {
        let r = copy.req(m, path).send().await.unwrap();
        assert_eq!(r.status(), 401, "{path} with a signed-out session's copy");
    }
    // Another session of the same browser owner is untouched, and a new sign-in works.
    let other = PageClient::sign_in(&base, TOKEN).await;
    let r = other.req(Method::GET, "me").send().await.unwrap();
    assert_eq!(r.status(), 200);
    home.assert_no_panic();
}

/// A fenced code block's info string becomes `class="language-…"`; pulldown-cmark cuts it at
/// the first space but not at a tab: the sanitiser must keep only the `language-` class, or
/// the model's answer takes the page's own classes (an approval's look, a user's message).
#[tokio::test(flavor = "multi_thread")]
async fn an_answer_cannot_take_the_pages_classes_in_chromium() {
    let Some(chromium) = Chromium::launch("attack_web_page_fixed::classes").await else {
        return;
    };
    let spoof = "Before you approve, note:\n\n```x\tconsent\tmsg\tuser\n🔐 Approval needed: shell\n(reads a file)\ncat README.md\n```\n\nThe end.";
    let model = ScriptedModel::start(vec![Step::text(spoof)]).await;
    let home = TestHome::new();
    home.write_config(&config(&model));
    let _daemon = start(&home);
    let base = base_of(&home).await;
    let page = chromium.open(&format!("{base}/")).await;
    web_page::sign_in(&page, TOKEN).await;
    wait_for(&page, "!document.getElementById('app').hidden", WAIT).await;
    web_page::send_message(&page, "hi").await;
    wait_for(&page, "[...document.querySelectorAll('.msg.assistant')].some(m => m.textContent.includes('The end.'))", WAIT).await;
    let borrowed: Value = eval(
        &page,
        "[...document.querySelectorAll('.msg.assistant [class]')]
           .filter(e => [...e.classList].some(c => !c.startsWith('language-')))
           .map(e => e.outerHTML.slice(0, 80) + ' bg=' + getComputedStyle(e).backgroundColor)",
    )
    .await;
    assert_eq!(borrowed, json!([]), "the answer carries the page's classes");
}

/// An approval pressed with another session's name: the press counts (every web session is the
/// owner's), and "resolved" must be recorded in the session that asked, or it would still list
/// the approval as waiting — a reload would show its buttons again for an answered call.
#[tokio::test(flavor = "multi_thread")]
async fn an_answered_approval_leaves_the_session_that_asked() {
    let model = ScriptedModel::start(vec![
        Step::tool_call("a1", "shell", &json!({"command": "{echo,x}"}).to_string()),
        Step::delay(Duration::from_secs(30), Step::text("done")),
    ])
    .await;
    let home = TestHome::new();
    home.write_config(&config(&model));
    let _daemon = start(&home);
    let base = base_of(&home).await;
    let c = PageClient::sign_in(&base, TOKEN).await;
    let r = c
        .req(Method::POST, "sessions/s1/messages")
        .json(&json!({"id": "m1", "text": "go"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let deadline = Instant::now() + WAIT;
    let request = loop {
        let conv: Value = c
            .req(Method::GET, "sessions/s1")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if let Some(id) = conv["live"]["consents"][0]["request_id"].as_str() {
            break id.to_string();
        }
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let r: Value = c
        .req(Method::POST, &format!("consent/{request}"))
        .json(&json!({"choice": "deny", "session": "other"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["ok"], true, "{r}");
    let conv: Value = c
        .req(Method::GET, "sessions/s1")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        conv["live"]["consents"],
        json!([]),
        "the answered approval is still shown as waiting in the session that asked"
    );
}

/// Every response of the page turns DNS prefetching off (a link in an answer does not make the
/// browser resolve its name); behind a TLS proxy on this machine, the session cookie is
/// `__Host-` prefixed and works.
#[tokio::test(flavor = "multi_thread")]
async fn prefetching_is_off_and_a_tls_cookie_is_host_prefixed() {
    let model = ScriptedModel::start(vec![]).await;
    let home = TestHome::new();
    home.write_config(&config(&model));
    let _daemon = start(&home);
    let base = base_of(&home).await;
    let http = reqwest::Client::new();
    for path in ["/", "/assets/app.js", "/web/api/me"] {
        let r = http.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(
            r.headers()
                .get("x-dns-prefetch-control")
                .map(|v| v.to_str().unwrap()),
            Some("off"),
            "{path}"
        );
    }
    let r = http
        .post(format!("{base}/web/api/login"))
        .header("origin", &base)
        .header("x-forwarded-proto", "https")
        .json(&json!({ "token": TOKEN }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let set = r.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        set.starts_with("__Host-ethan_session=")
            && set.contains("; Path=/;")
            && set.ends_with("; Secure"),
        "{set}"
    );
    let csrf = r.json::<Value>().await.unwrap()["csrf"]
        .as_str()
        .unwrap()
        .to_string();
    let c = PageClient {
        base: base.clone(),
        http,
        cookie: set.split(';').next().unwrap().to_string(),
        csrf,
    };
    let r = c.req(Method::GET, "me").send().await.unwrap();
    assert_eq!(r.status(), 200);
    home.assert_no_panic();
}
