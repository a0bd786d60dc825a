//! Driving the gateway's web page in a real headless Chromium (Debian's `chromium`, found as the
//! browser tools find it) over the DevTools protocol with `chromiumoxide`, and a plain HTTP
//! client of the page's API for the checks that need no browser.
//!
//! [`Chromium::launch`] returns `None` (after printing why) when no browser is installed, and
//! panics under CI (`CI` set), so the page tests never pass silently where they should run.

#![allow(dead_code)]

use chromiumoxide::cdp::browser_protocol::emulation::{
    MediaFeature, SetDeviceMetricsOverrideParams, SetEmulatedMediaParams,
};
use chromiumoxide::{Browser, BrowserConfig, Page};
use ethan::config::BrowserConfig as EthanBrowserConfig;
use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use std::time::Duration;
use tokio::time::Instant;

/// A headless Chromium of its own (profile in a temporary directory), closed on drop.
pub struct Chromium {
    pub browser: Browser,
    handler: tokio::task::JoinHandle<()>,
    _profile: tempfile::TempDir,
}

impl Chromium {
    /// Start one, or `None` when this machine has none (see the module docs).
    pub async fn launch(test: &str) -> Option<Chromium> {
        let Some(exe) =
            ethan::tools::builtin::browser::hub::find_executable(&EthanBrowserConfig::default())
        else {
            let msg = format!(
                "SKIPPED {test}: no Chromium on PATH; install it with `apt-get install chromium`"
            );
            assert!(std::env::var_os("CI").is_none(), "{msg} — CI must have it");
            eprintln!("{msg}");
            return None;
        };
        let profile = tempfile::tempdir().expect("a browser profile directory");
        let mut b = BrowserConfig::builder()
            .chrome_executable(exe)
            .user_data_dir(profile.path())
            .window_size(1200, 800)
            .launch_timeout(Duration::from_secs(30))
            .request_timeout(Duration::from_secs(30))
            .arg("--no-first-run")
            .arg("--disable-sync")
            .arg("--disable-background-networking")
            .arg("--disable-component-update")
            .arg("--proxy-server=direct://")
            .arg("--proxy-bypass-list=*");
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            b = b.no_sandbox();
        }
        let (browser, mut handler) = Browser::launch(b.build().expect("browser config"))
            .await
            .expect("launch Chromium");
        let handler = tokio::spawn(async move { while handler.next().await.is_some() {} });
        Some(Chromium {
            browser,
            handler,
            _profile: profile,
        })
    }

    /// A new tab on `url`, loaded.
    pub async fn open(&self, url: &str) -> Page {
        let page = self.browser.new_page(url).await.expect("open a tab");
        let _ = tokio::time::timeout(NAVIGATION, page.wait_for_navigation()).await;
        page
    }
}

impl Drop for Chromium {
    fn drop(&mut self) {
        self.handler.abort();
    }
}

/// The longest a navigation (a tab opened, a reload) is waited for. chromiumoxide waits for the
/// navigation's lifecycle event with no limit of its own, and a run that missed the event (seen
/// once under load in a CI run) waited forever; what the test needs next is waited for by
/// [`wait_for`], which has its own limit.
const NAVIGATION: Duration = Duration::from_secs(15);

/// The longest one evaluation in [`wait_for`] is waited for: one sent while the page navigates
/// can wait for an execution context that never comes; the poll then asks again.
const ONE_EVAL: Duration = Duration::from_secs(5);

/// Reload `page`, waiting for the navigation at most [`NAVIGATION`].
pub async fn reload(page: &Page) {
    match tokio::time::timeout(NAVIGATION, page.reload()).await {
        Ok(r) => {
            r.expect("reload the page");
        }
        Err(_) => eprintln!("the reload's navigation event did not come in {NAVIGATION:?}"),
    }
}

/// The value of `js` (an expression; a promise is awaited).
pub async fn eval<T: DeserializeOwned>(page: &Page, js: &str) -> T {
    let v = page
        .evaluate(js)
        .await
        .unwrap_or_else(|e| panic!("evaluating {js}: {e}"));
    v.into_value::<T>()
        .unwrap_or_else(|e| panic!("the value of {js}: {e}"))
}

/// Wait until the expression `js` is true in `page` (polled every 25 ms), at most `wait`.
pub async fn wait_for(page: &Page, js: &str, wait: Duration) {
    let deadline = Instant::now() + wait;
    loop {
        let ok = tokio::time::timeout(ONE_EVAL, page.evaluate(format!("Boolean({js})")))
            .await
            .ok()
            .and_then(Result::ok)
            .and_then(|v| v.into_value::<bool>().ok())
            .unwrap_or(false);
        if ok {
            return;
        }
        if Instant::now() >= deadline {
            let log: String = eval(
                page,
                "document.getElementById('log')?.innerText || document.body.innerText",
            )
            .await;
            panic!("timed out after {wait:?} waiting for {js}; the page shows:\n{log}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Type `text` into the element `selector` (a real key event per character).
pub async fn type_into(page: &Page, selector: &str, text: &str) {
    page.find_element(selector)
        .await
        .unwrap_or_else(|e| panic!("{selector}: {e}"))
        .click()
        .await
        .unwrap_or_else(|e| panic!("click {selector}: {e}"))
        .type_str(text)
        .await
        .unwrap_or_else(|e| panic!("type into {selector}: {e}"));
}

/// Click the element `selector`.
pub async fn click(page: &Page, selector: &str) {
    page.find_element(selector)
        .await
        .unwrap_or_else(|e| panic!("{selector}: {e}"))
        .click()
        .await
        .unwrap_or_else(|e| panic!("click {selector}: {e}"));
}

/// Sign in with `token` through the form (typed, then Enter) and wait for the app or the error.
pub async fn sign_in(page: &Page, token: &str) {
    wait_for(
        page,
        "!document.getElementById('signin').hidden",
        Duration::from_secs(20),
    )
    .await;
    type_into(page, "#token", token).await;
    page.find_element("#token")
        .await
        .unwrap()
        .press_key("Enter")
        .await
        .unwrap();
}

/// Type `text` in the composer and send it with Enter.
pub async fn send_message(page: &Page, text: &str) {
    type_into(page, "#input", text).await;
    page.find_element("#input")
        .await
        .unwrap()
        .press_key("Enter")
        .await
        .unwrap();
}

/// The page at a phone's width (390×844 CSS pixels) and in the system's dark mode.
pub async fn phone_in_dark_mode(page: &Page) {
    page.execute(
        SetDeviceMetricsOverrideParams::builder()
            .width(390)
            .height(844)
            .device_scale_factor(2.0)
            .mobile(true)
            .build()
            .unwrap(),
    )
    .await
    .expect("phone metrics");
    page.execute(
        SetEmulatedMediaParams::builder()
            .features(vec![MediaFeature::new("prefers-color-scheme", "dark")])
            .build(),
    )
    .await
    .expect("dark mode");
}

/// Record the lengths the streamed answer's text takes, as they change (`window.__growth`).
pub const WATCH_GROWTH: &str = "(() => {
  window.__growth = [];
  const note = () => {
    const t = document.querySelector('.msg.live .text');
    if (!t) return;
    const n = t.textContent.length;
    if (n && window.__growth[window.__growth.length - 1] !== n) window.__growth.push(n);
  };
  new MutationObserver(note).observe(document.getElementById('log'),
    { subtree: true, childList: true, characterData: true });
  return true;
})()";

/// A client of the page's API without a browser: a signed-in session's cookie and header.
pub struct PageClient {
    pub base: String,
    pub http: reqwest::Client,
    pub cookie: String,
    pub csrf: String,
}

impl PageClient {
    /// Sign in at `base` with `token` (as a browser on this machine would: `Origin` set).
    pub async fn sign_in(base: &str, token: &str) -> PageClient {
        let http = reqwest::Client::new();
        let r = http
            .post(format!("{base}/web/api/login"))
            .header("origin", base)
            .json(&json!({ "token": token }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "sign-in");
        let set = r
            .headers()
            .get("set-cookie")
            .expect("a session cookie")
            .to_str()
            .unwrap()
            .to_string();
        let cookie = set.split(';').next().unwrap().to_string();
        let body: Value = r.json().await.unwrap();
        PageClient {
            base: base.to_string(),
            http,
            cookie,
            csrf: body["csrf"].as_str().unwrap().to_string(),
        }
    }

    /// A request to `/web/api/{path}` with the session and this page's `Origin`.
    pub fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.bare(method, path).header("origin", &self.base)
    }

    /// A request to `/web/api/{path}` with the session and no `Origin`.
    pub fn bare(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}/web/api/{path}", self.base))
            .header("cookie", &self.cookie)
            .header("x-ethan-csrf", &self.csrf)
    }
}
