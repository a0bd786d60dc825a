//! The browser tools on a real headless Chromium (Debian's `chromium`, installed by `.ci/run`)
//! against pages served on loopback from `tests/fixtures/browser/`; `127.0.0.1` is the host
//! `tools.web_fetch.allow_private` lets through, `127.0.0.2` is a second loopback address it
//! does not list:
//! - a page whose text JavaScript builds is read (and `web_fetch` does not see that text);
//! - through the daemon, a form is filled and sent after the owner's approval (one question
//!   for the site), and the loopback server receives it;
//! - a redirect to, and an image from, the refused address are stopped there, and that server
//!   gets no request;
//! - through the daemon, a non-owner's model call of a browser tool is refused and no page is
//!   loaded.
//!
//! Without a browser on this machine the tests print why and return; under CI (`CI` set) a
//! missing browser fails them instead, so they never pass silently where they should run.

use crate::support::{Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use axum::extract::{OriginalUri, State};
use axum::response::{Html, IntoResponse, Redirect};
use axum::routing::{get, post};
use ethan::config::{BrowserConfig, WebFetchConfig};
use ethan::egress::{EgressGuard, SystemLookup};
use ethan::tools::builtin::browser::hub::{find_executable, BrowserHub};
use ethan::tools::builtin::browser::page::BrowserPage;
use ethan::tools::web_fetch::WebFetch;
use ethan::tools::{ErrorKind, Tool, ToolContext, ToolResult};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const OWNER: i64 = 218485655;
const STRANGER: i64 = 4242;
const WAIT: Duration = Duration::from_secs(90);
const CALL_LIMIT: Duration = Duration::from_secs(60);

/// Whether a browser can be found; prints why not (and fails under CI).
pub(crate) fn browser_or_skip(test: &str) -> bool {
    if find_executable(&BrowserConfig::default()).is_some() {
        return true;
    }
    let msg = format!(
        "SKIPPED {test}: no Chromium on PATH (chromium, chromium-browser, google-chrome); \
         install it with `apt-get install chromium` to run the browser tests"
    );
    assert!(
        std::env::var_os("CI").is_none(),
        "{msg} — CI must have it (.ci/run installs it)"
    );
    eprintln!("{msg}");
    false
}

/// The loopback site: the fixture pages, `/submit` (records form bodies), `/redirect` (to the
/// refused address); and the refused server, which records every request it gets.
struct Sites {
    allowed: SocketAddr,
    refused: SocketAddr,
    submitted: Arc<Mutex<Vec<String>>>,
    refused_hits: Arc<Mutex<Vec<String>>>,
}

impl Sites {
    async fn start() -> Sites {
        let refused_hits = Arc::new(Mutex::new(Vec::new()));
        let hits = refused_hits.clone();
        let refused_app = axum::Router::new().fallback(move |OriginalUri(uri): OriginalUri| {
            let hits = hits.clone();
            async move {
                hits.lock().unwrap().push(uri.to_string());
                "private"
            }
        });
        let l2 = tokio::net::TcpListener::bind("127.0.0.2:0")
            .await
            .expect("bind 127.0.0.2 (loopback)");
        let refused = l2.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(l2, refused_app).await;
        });

        let submitted = Arc::new(Mutex::new(Vec::new()));
        let fixtures =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/browser");
        let page = move |name: &'static str| {
            let text = std::fs::read_to_string(fixtures.join(name))
                .unwrap()
                .replace("{{PRIVATE}}", &refused.to_string());
            move || async move { Html(text) }
        };
        async fn submit(State(s): State<Arc<Mutex<Vec<String>>>>, body: String) -> Html<String> {
            s.lock().unwrap().push(body);
            Html("<html><head><title>Thanks</title></head><body><p>Thanks, your order is in.</p></body></html>".into())
        }
        let app = axum::Router::new()
            .route("/rendered.html", get(page("rendered.html")))
            .route("/form.html", get(page("form.html")))
            .route("/image.html", get(page("image.html")))
            .route("/submit", post(submit))
            .route(
                "/redirect",
                get(move || async move {
                    Redirect::temporary(&format!("http://{refused}/secret")).into_response()
                }),
            )
            .with_state(submitted.clone());
        let l1 = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let allowed = l1.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(l1, app).await;
        });
        Sites {
            allowed,
            refused,
            submitted,
            refused_hits,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.allowed)
    }
}

fn allow_cfg() -> WebFetchConfig {
    WebFetchConfig {
        allow_private: vec!["127.0.0.1".into()],
        ..Default::default()
    }
}

fn hub(idle_secs: u64) -> Arc<BrowserHub> {
    let hub = BrowserHub::new(
        BrowserConfig {
            executable: String::new(),
            idle_secs,
        },
        EgressGuard::new(&allow_cfg().allow_private, Arc::new(SystemLookup)),
    );
    hub.set_page_reader(Arc::new(ethan::media::page::ChildPages::alone()));
    hub
}

fn ctx(home: &std::path::Path) -> ToolContext {
    ToolContext {
        session_key: "terminal:browser-test".into(),
        ethan_home: Some(home.to_path_buf()),
        ..ToolContext::local(home.to_path_buf())
    }
}

async fn call(tool: &dyn Tool, ctx: &ToolContext, args: Value) -> ToolResult {
    tokio::time::timeout(CALL_LIMIT, tool.run(args, ctx))
        .await
        .expect("browser call finished in time")
        .into()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_built_by_javascript_is_read_where_web_fetch_sees_nothing() {
    if !browser_or_skip("a_page_built_by_javascript_is_read_where_web_fetch_sees_nothing") {
        return;
    }
    let sites = Sites::start().await;
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx(dir.path());
    let url = sites.url("/rendered.html");

    let fetched = call(
        &WebFetch::new(&allow_cfg())
            .reading_with(std::sync::Arc::new(ethan::media::page::ChildPages::alone())),
        &ctx,
        json!({ "url": url }),
    )
    .await;
    assert!(fetched.ok, "{fetched:?}");
    assert!(!fetched.output.contains("pineapple"), "{}", fetched.output);

    let hub = hub(300);
    let page = BrowserPage(hub.clone());
    let r = call(&page, &ctx, json!({"action": "goto", "url": url})).await;
    assert!(r.ok, "{r:?}");
    assert!(
        r.output
            .contains("The secret word of this page is pineapple"),
        "{}",
        r.output
    );
    assert!(
        r.output.contains("# Rendered by script") || r.output.contains("Built in the browser"),
        "{}",
        r.output
    );
    // The link is numbered for the model.
    assert!(
        r.output.contains("[1] a \"Go to the order form\""),
        "{}",
        r.output
    );
    // `read` gives the same text again; the page is private data (an allowed private host).
    let again = call(&page, &ctx, json!({"action": "read"})).await;
    assert!(again.output.contains("pineapple"), "{}", again.output);
    assert!(ctx.taint.source().is_some_and(|s| s.contains("127.0.0.1")));
    // Read-only JavaScript runs; JavaScript with a side effect does not.
    let ro = call(
        &page,
        &ctx,
        json!({"action": "eval_readonly", "expression": "document.title"}),
    )
    .await;
    assert_eq!(ro.output, "Rendered by script", "{ro:?}");
    let rw = call(
        &page,
        &ctx,
        json!({"action": "eval_readonly", "expression": "document.title = 'changed'"}),
    )
    .await;
    assert!(!rw.ok, "{rw:?}");
    // A screenshot is a file and a note.
    let shot = call(&page, &ctx, json!({"action": "screenshot"})).await;
    assert!(shot.ok, "{shot:?}");
    let path = shot.metadata["path"].as_str().unwrap().to_string();
    assert!(std::fs::metadata(&path).unwrap().len() > 100);
    assert!(shot.output.contains("saved to"), "{}", shot.output);
    // The profile is under $ETHAN_HOME/browser/ while it runs, gone once the browser closed.
    assert!(dir.path().join("browser/profile").is_dir());
    hub.shutdown().await;
    assert!(!dir.path().join("browser/profile").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_redirect_to_and_an_image_from_a_refused_address_are_stopped() {
    if !browser_or_skip("a_redirect_to_and_an_image_from_a_refused_address_are_stopped") {
        return;
    }
    let sites = Sites::start().await;
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx(dir.path());
    let hub = hub(300);
    let page = BrowserPage(hub.clone());

    // The allowed site redirects to the refused address: the navigation stops there.
    let r = call(
        &page,
        &ctx,
        json!({"action": "goto", "url": sites.url("/redirect")}),
    )
    .await;
    assert!(!r.ok, "{r:?}");
    assert_eq!(r.error_kind, Some(ErrorKind::Denied), "{r:?}");
    let err = r.error.clone().unwrap_or_default();
    assert!(
        err.contains(&sites.refused.to_string()) && err.contains("loopback"),
        "{err}"
    );

    // A direct navigation there is refused before the browser is asked.
    let r = call(
        &page,
        &ctx,
        json!({"action": "goto", "url": format!("http://{}/x", sites.refused)}),
    )
    .await;
    assert_eq!(r.error_kind, Some(ErrorKind::Denied), "{r:?}");

    // A page of the allowed site loads, its image from the refused address does not.
    let r = call(
        &page,
        &ctx,
        json!({"action": "goto", "url": sites.url("/image.html")}),
    )
    .await;
    assert!(r.ok, "{r:?}");
    assert!(r.output.contains("Holiday pictures"), "{}", r.output);
    assert!(
        r.output.contains("refused by the egress guard")
            && r.output
                .contains(&format!("http://{}/pixel.png", sites.refused)),
        "{}",
        r.output
    );
    assert!(
        sites.refused_hits.lock().unwrap().is_empty(),
        "the refused server was reached: {:?}",
        sites.refused_hits.lock().unwrap()
    );
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_browser_closes_after_idle_secs_and_starts_again() {
    if !browser_or_skip("the_browser_closes_after_idle_secs_and_starts_again") {
        return;
    }
    let sites = Sites::start().await;
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx(dir.path());
    let hub = hub(1);
    let page = BrowserPage(hub.clone());
    let r = call(
        &page,
        &ctx,
        json!({"action": "goto", "url": sites.url("/form.html")}),
    )
    .await;
    assert!(r.ok, "{r:?}");
    assert!(hub.is_running().await);
    let deadline = Instant::now() + Duration::from_secs(20);
    while hub.is_running().await {
        assert!(Instant::now() < deadline, "the idle browser was not closed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(!dir.path().join("browser/profile").exists());
    // The session went with it: a read starts a fresh browser on an empty tab.
    let r = call(&page, &ctx, json!({"action": "read"})).await;
    assert!(r.ok, "{r:?}");
    assert!(r.output.contains("about:blank"), "{}", r.output);
    hub.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Through the daemon (Telegram fake, scripted model).

fn config(home: &TestHome, tg: &FakeTelegram, model: &ScriptedModel, open: bool) {
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: m\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: off\n    dm_policy: {}\n\
         owners: [\"telegram:{OWNER}\"]\n\
         tools:\n  web_fetch:\n    allow_private: [\"127.0.0.1\"]\n  browser:\n    idle_secs: 60\n",
        model.base_url(),
        tg.token(),
        tg.base_url(),
        if open { "open" } else { "allowlist" }
    ));
}

/// Approval requests the bot posted: (chat, text, callback data of the buttons).
fn approvals(tg: &FakeTelegram) -> Vec<(i64, String, Vec<String>)> {
    tg.sent_messages()
        .iter()
        .filter_map(|m| {
            let row = m["reply_markup"]["inline_keyboard"][0].as_array()?;
            Some((
                m["chat_id"].as_i64().unwrap_or_default(),
                m["text"].as_str().unwrap_or_default().to_string(),
                row.iter()
                    .filter_map(|b| b["callback_data"].as_str().map(str::to_string))
                    .collect(),
            ))
        })
        .collect()
}

/// Approve every question "for this session" until a message contains `final_text`.
async fn drive(tg: &FakeTelegram, final_text: &str) -> Vec<String> {
    let deadline = Instant::now() + WAIT;
    let mut answered = 0;
    loop {
        let asked = approvals(tg);
        for (chat, _, buttons) in &asked[answered..] {
            let data = buttons
                .iter()
                .find(|b| b.starts_with("ap:s:"))
                .or_else(|| buttons.iter().find(|b| b.starts_with("ap:o:")))
                .expect("an approve button");
            let id = tg.next_update_id();
            tg.push_update(FakeTelegram::callback_update(id, OWNER, *chat, data));
        }
        answered = asked.len();
        if tg
            .sent_messages()
            .iter()
            .any(|m| m["text"].as_str().is_some_and(|t| t.contains(final_text)))
        {
            return asked.into_iter().map(|a| a.1).collect();
        }
        assert!(
            Instant::now() < deadline,
            "no {final_text:?} within {WAIT:?}; calls:\n{}",
            tg.describe_calls()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn tool_results(model: &ScriptedModel) -> Vec<String> {
    model
        .last_request()
        .map(|r| {
            r["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m["role"] == "tool")
                .map(|m| m["content"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_form_is_sent_after_the_owners_approval() {
    if !browser_or_skip("a_form_is_sent_after_the_owners_approval") {
        return;
    }
    let sites = Sites::start().await;
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let form = sites.url("/form.html");
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "b1",
            "browser_page",
            &json!({"action": "goto", "url": form}).to_string(),
        ),
        Step::tool_call(
            "b2",
            "browser_page",
            &json!({"action": "type", "element": 1, "text": "Ada Lovelace"}).to_string(),
        ),
        Step::tool_call(
            "b3",
            "browser_page",
            &json!({"action": "click", "element": 2}).to_string(),
        ),
        Step::text("done: order sent"),
    ])
    .await;
    config(&home, &tg, &model, false);
    tg.push_text(OWNER, OWNER, "order the book for me");
    let mut daemon = Daemon::start(&home);

    let asked = drive(&tg, "done: order sent").await;
    // One question per action on the site: typing, approved for the session, does not cover
    // the click (a grant names its action).
    assert_eq!(asked.len(), 2, "{asked:#?}");
    assert!(
        asked[0].contains("Ada Lovelace")
            && asked[0].contains("Your name")
            && asked[0].contains(&form),
        "{}",
        asked[0]
    );
    assert!(
        asked[1].contains("click element 2") && asked[1].contains("Send order"),
        "{}",
        asked[1]
    );
    assert_eq!(
        *sites.submitted.lock().unwrap(),
        vec!["name=Ada+Lovelace".to_string()],
        "the form did not arrive"
    );
    let results = tool_results(&model);
    assert!(
        results[2].contains("Thanks, your order is in"),
        "{}",
        results[2]
    );
    model.assert_protocol_ok();
    daemon.stop();
    home.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_non_owner_has_no_browser_tools() {
    if !browser_or_skip("a_non_owner_has_no_browser_tools") {
        return;
    }
    let sites = Sites::start().await;
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let page = sites.url("/rendered.html");
    let model = ScriptedModel::start(vec![
        Step::tool_call("f1", "find_tools", &json!({"query": "browser"}).to_string()),
        Step::tool_call(
            "b1",
            "browser_page",
            &json!({"action": "goto", "url": page}).to_string(),
        ),
        Step::tool_call(
            "b2",
            "browser_session",
            &json!({"action": "open"}).to_string(),
        ),
        Step::text("done: stranger"),
    ])
    .await;
    config(&home, &tg, &model, true);
    tg.push_text(STRANGER, STRANGER, "open a page for me");
    let mut daemon = Daemon::start(&home);
    let deadline = Instant::now() + WAIT;
    while !tg.sent_messages().iter().any(|m| {
        m["text"]
            .as_str()
            .is_some_and(|t| t.contains("done: stranger"))
    }) {
        assert!(
            Instant::now() < deadline,
            "no answer; calls:\n{}",
            tg.describe_calls()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for req in model.requests() {
        let tools = req["tools"].to_string();
        assert!(
            !tools.contains("browser_"),
            "a browser tool was offered: {tools}"
        );
    }
    let results = tool_results(&model);
    assert!(
        !results[0].contains("browser_"),
        "find_tools offered: {}",
        results[0]
    );
    for r in &results[1..] {
        assert!(r.starts_with("Error"), "{r}");
    }
    assert!(
        approvals(&tg).is_empty(),
        "nobody is asked for a stranger's call"
    );
    assert!(
        !home.path().join("browser/profile").exists(),
        "a browser was started for a stranger"
    );
    model.assert_protocol_ok();
    daemon.stop();
    home.assert_no_panic();
}
