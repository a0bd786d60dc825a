//! The one headless Chromium of the daemon and the browser sessions in it.
//!
//! - The browser is started on the first browser call ([`BrowserHub::session`]), with its
//!   profile in `$ETHAN_HOME/browser/profile` (wiped before start and after close), and closed
//!   by a watchdog after `tools.browser.idle_secs` without a call; the next call starts it again.
//! - A browser session is an isolated browser context (`Target.createBrowserContext`: its own
//!   cookies, storage and cache, kept in memory) per Ethan session ([`ToolContext::session_key`]);
//!   closing it disposes the context, so nothing of it is left. Downloads are denied per
//!   context (`Browser.setDownloadBehavior{behavior: deny}`).
//! - Every request a page makes, navigations and redirects included, is paused by the CDP Fetch
//!   domain (pattern `*`, request stage) and judged by the SSRF guard of `web_fetch` before it
//!   may continue ([`judge`]); a refused one fails with `BlockedByClient` and is listed on the
//!   tab, so the tools can say what was stopped. A tab the page opens itself (a popup) has no
//!   interceptor of ours, so its requests stay paused: fail closed.
//!
//! [`ToolContext::session_key`]: crate::tools::ToolContext

use crate::config::BrowserConfig;
use crate::tools::ssrf::SsrfGuard;
use chromiumoxide::cdp::browser_protocol::browser::{
    BrowserContextId, SetDownloadBehaviorBehavior, SetDownloadBehaviorParams,
};
use chromiumoxide::cdp::browser_protocol::fetch::{
    ContinueRequestParams, EventRequestPaused, FailRequestParams,
};
use chromiumoxide::cdp::browser_protocol::network::ErrorReason;
use chromiumoxide::cdp::browser_protocol::target::{
    CreateBrowserContextParams, CreateTargetParams,
};
use chromiumoxide::{Browser, Page};
use futures::StreamExt;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex as StdMutex, Weak};
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// Names tried on `PATH` when `tools.browser.executable` is empty, in order.
pub const EXECUTABLE_NAMES: &[&str] = &["chromium", "chromium-browser", "google-chrome"];

/// The browser binary `cfg` names, or the first of [`EXECUTABLE_NAMES`] on `PATH`; `None` when
/// there is none (the tools then say how to install one, `ethan doctor` warns).
pub fn find_executable(cfg: &BrowserConfig) -> Option<PathBuf> {
    let named = cfg.executable.trim();
    if !named.is_empty() {
        let p = Path::new(named);
        if p.components().count() > 1 {
            return p.is_file().then(|| p.to_path_buf());
        }
        return on_path(named);
    }
    EXECUTABLE_NAMES.iter().find_map(|n| on_path(n))
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Why a browser call could not be carried out; the text is for the model.
#[derive(Debug, thiserror::Error)]
pub enum BrowserError {
    #[error(
        "no browser found: install Chromium (Debian/Ubuntu: apt install chromium) or set \
         tools.browser.executable"
    )]
    NotInstalled,
    #[error("the browser could not be started: {0}")]
    Launch(String),
    #[error("the browser did not do it: {0}")]
    Cdp(String),
    #[error("{0}")]
    Usage(String),
}

impl From<chromiumoxide::error::CdpError> for BrowserError {
    fn from(e: chromiumoxide::error::CdpError) -> Self {
        BrowserError::Cdp(e.to_string())
    }
}

/// A tab of a browser session: its page, and the requests the guard stopped since the last
/// look ([`Tab::take_blocked`]).
pub struct Tab {
    pub id: u32,
    pub page: Arc<Page>,
    blocked: Arc<StdMutex<Vec<String>>>,
    interceptor: tokio::task::JoinHandle<()>,
}

impl Tab {
    /// The requests refused since the last call, each `URL: why`.
    pub fn take_blocked(&self) -> Vec<String> {
        std::mem::take(&mut *self.blocked.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl Drop for Tab {
    fn drop(&mut self) {
        self.interceptor.abort();
    }
}

/// One Ethan session's browser context and its tabs.
pub struct Session {
    context: BrowserContextId,
    pub tabs: Vec<Arc<Tab>>,
    /// The id of the current tab.
    pub current: Option<u32>,
    next_id: u32,
}

impl Session {
    pub fn current_tab(&self) -> Option<Arc<Tab>> {
        let id = self.current?;
        self.tabs.iter().find(|t| t.id == id).cloned()
    }
}

struct Running {
    browser: Browser,
    handler: tokio::task::JoinHandle<()>,
    profile: PathBuf,
    sessions: HashMap<String, Session>,
}

/// What the last look at a session's current page showed, kept for the consent hooks (which
/// cannot wait for the browser): the page's URL and host, and the labels of its numbered
/// elements.
#[derive(Debug, Clone, Default)]
pub struct View {
    pub url: String,
    pub host: String,
    pub labels: HashMap<u64, String>,
}

/// The daemon's browser, shared by the three browser tools.
pub struct BrowserHub {
    cfg: BrowserConfig,
    guard: SsrfGuard,
    running: Mutex<Option<Running>>,
    last_used: StdMutex<Instant>,
    views: StdMutex<HashMap<String, View>>,
    me: Weak<BrowserHub>,
}

impl BrowserHub {
    pub fn new(cfg: BrowserConfig, guard: SsrfGuard) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            cfg,
            guard,
            running: Mutex::new(None),
            last_used: StdMutex::new(Instant::now()),
            views: StdMutex::new(HashMap::new()),
            me: me.clone(),
        })
    }

    pub fn guard(&self) -> &SsrfGuard {
        &self.guard
    }

    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    /// The last view of `session_key`'s current page (see [`View`]).
    pub fn view(&self, session_key: &str) -> Option<View> {
        self.views
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(session_key)
            .cloned()
    }

    pub fn set_view(&self, session_key: &str, view: View) {
        self.views
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(session_key.to_string(), view);
    }

    /// Whether `session_key` has a browser session now.
    pub async fn has_session(&self, session_key: &str) -> bool {
        self.running
            .lock()
            .await
            .as_ref()
            .is_some_and(|r| r.sessions.contains_key(session_key))
    }

    /// Run `f` on `session_key`'s browser session, starting the browser and opening the session
    /// first when needed. `home` is `$ETHAN_HOME` (the profile goes under `browser/`).
    pub async fn session<T>(
        &self,
        session_key: &str,
        home: &Path,
        f: impl FnOnce(&mut Session) -> T,
    ) -> Result<T, BrowserError> {
        self.touch();
        let mut guard = self.running.lock().await;
        if guard.as_ref().is_some_and(|r| r.handler.is_finished()) {
            // The browser went away (crashed, killed): start afresh.
            if let Some(r) = guard.take() {
                close(r).await;
            }
        }
        if guard.is_none() {
            *guard = Some(self.launch(home).await?);
        }
        let Some(running) = guard.as_mut() else {
            return Err(BrowserError::Launch("no browser".into()));
        };
        if !running.sessions.contains_key(session_key) {
            let context = running
                .browser
                .create_browser_context(CreateBrowserContextParams::default())
                .await?;
            running
                .browser
                .execute(SetDownloadBehaviorParams {
                    behavior: SetDownloadBehaviorBehavior::Deny,
                    browser_context_id: Some(context.clone()),
                    download_path: None,
                    events_enabled: None,
                })
                .await?;
            running.sessions.insert(
                session_key.to_string(),
                Session {
                    context,
                    tabs: Vec::new(),
                    current: None,
                    next_id: 1,
                },
            );
        }
        let Some(session) = running.sessions.get_mut(session_key) else {
            return Err(BrowserError::Launch("no session".into()));
        };
        Ok(f(session))
    }

    /// Open a new tab (about:blank, guarded) in `session_key`'s session and make it current.
    pub async fn new_tab(&self, session_key: &str, home: &Path) -> Result<Arc<Tab>, BrowserError> {
        let context = self
            .session(session_key, home, |s| s.context.clone())
            .await?;
        let page = {
            let running = self.running.lock().await;
            let Some(r) = running.as_ref() else {
                return Err(BrowserError::Cdp("the browser closed".into()));
            };
            let mut params = CreateTargetParams::new("about:blank");
            params.browser_context_id = Some(context);
            r.browser.new_page(params).await?
        };
        let page = Arc::new(page);
        let blocked = Arc::new(StdMutex::new(Vec::new()));
        let interceptor = intercept(page.clone(), self.guard.clone(), blocked.clone()).await?;
        let tab = self
            .session(session_key, home, move |s| {
                let tab = Arc::new(Tab {
                    id: s.next_id,
                    page,
                    blocked,
                    interceptor,
                });
                s.next_id += 1;
                s.current = Some(tab.id);
                s.tabs.push(tab.clone());
                tab
            })
            .await?;
        Ok(tab)
    }

    /// The current tab of `session_key`, opening the session and a tab when there is none.
    pub async fn current_tab(
        &self,
        session_key: &str,
        home: &Path,
    ) -> Result<Arc<Tab>, BrowserError> {
        match self.session(session_key, home, |s| s.current_tab()).await? {
            Some(t) => Ok(t),
            None => self.new_tab(session_key, home).await,
        }
    }

    /// Close `session_key`'s browser session: its tabs and its context (cookies, storage,
    /// cache). `false` when it had none.
    pub async fn close_session(&self, session_key: &str) -> bool {
        self.views
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(session_key);
        let mut guard = self.running.lock().await;
        let Some(running) = guard.as_mut() else {
            return false;
        };
        let Some(session) = running.sessions.remove(session_key) else {
            return false;
        };
        for tab in &session.tabs {
            let _ = (*tab.page).clone().close().await;
        }
        if let Err(e) = running
            .browser
            .dispose_browser_context(session.context.clone())
            .await
        {
            tracing::warn!("disposing a browser context: {e}");
        }
        true
    }

    /// Close the browser now (every session with it) and wipe its profile.
    pub async fn shutdown(&self) {
        self.views.lock().unwrap_or_else(|p| p.into_inner()).clear();
        if let Some(r) = self.running.lock().await.take() {
            close(r).await;
        }
    }

    async fn launch(&self, home: &Path) -> Result<Running, BrowserError> {
        let exe = find_executable(&self.cfg).ok_or(BrowserError::NotInstalled)?;
        let profile = home.join("browser").join("profile");
        let _ = std::fs::remove_dir_all(&profile);
        std::fs::create_dir_all(&profile)
            .map_err(|e| BrowserError::Launch(format!("{}: {e}", profile.display())))?;
        let mut builder = chromiumoxide::BrowserConfig::builder()
            .chrome_executable(&exe)
            .user_data_dir(&profile)
            .enable_request_intercept()
            .respect_https_errors()
            .launch_timeout(Duration::from_secs(30))
            .request_timeout(Duration::from_secs(30))
            // Cross-site frames stay in the page's process, where its interceptor sees them.
            .arg("--disable-site-isolation-trials")
            .arg("--disable-features=IsolateOrigins,site-per-process")
            .arg("--no-first-run")
            .arg("--disable-sync")
            .arg("--disable-background-networking")
            .arg("--disable-component-update");
        // Chromium refuses its own sandbox to root (containers, CI).
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            builder = builder.no_sandbox();
        }
        let config = builder.build().map_err(BrowserError::Launch)?;
        let (browser, mut handler) = Browser::launch(config)
            .await
            .map_err(|e| BrowserError::Launch(format!("{}: {e}", exe.display())))?;
        let handler = tokio::spawn(async move { while handler.next().await.is_some() {} });
        tracing::info!("browser started: {}", exe.display());
        self.spawn_watchdog();
        Ok(Running {
            browser,
            handler,
            profile,
            sessions: HashMap::new(),
        })
    }

    /// Close the browser once it was not used for `idle_secs`.
    fn spawn_watchdog(&self) {
        let me = self.me.clone();
        let idle = Duration::from_secs(self.cfg.idle_secs.max(1));
        let step = (idle / 4).clamp(Duration::from_millis(200), Duration::from_secs(30));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(step).await;
                let Some(hub) = me.upgrade() else { return };
                let since = hub
                    .last_used
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .elapsed();
                if since >= idle {
                    tracing::info!("browser idle for {} s: closed", since.as_secs());
                    hub.shutdown().await;
                    return;
                }
                if hub.running.lock().await.is_none() {
                    return;
                }
            }
        });
    }

    /// Whether the browser process is running now (tests, `list`).
    pub async fn is_running(&self) -> bool {
        self.running.lock().await.is_some()
    }
}

async fn close(mut r: Running) {
    r.sessions.clear();
    if let Err(e) = r.browser.close().await {
        tracing::debug!("closing the browser: {e}");
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), r.browser.wait()).await;
    let _ = r.browser.kill().await;
    r.handler.abort();
    let _ = std::fs::remove_dir_all(&r.profile);
}

/// Pause every request of `page` and let through only what the guard allows.
async fn intercept(
    page: Arc<Page>,
    guard: SsrfGuard,
    blocked: Arc<StdMutex<Vec<String>>>,
) -> Result<tokio::task::JoinHandle<()>, BrowserError> {
    let mut events = page.event_listener::<EventRequestPaused>().await?;
    Ok(tokio::spawn(async move {
        while let Some(ev) = events.next().await {
            let page = page.clone();
            let guard = guard.clone();
            let blocked = blocked.clone();
            tokio::spawn(async move {
                let id = ev.request_id.clone();
                let verdict = judge(&guard, &ev.request.url).await;
                let sent = match verdict {
                    Ok(()) => page.execute(ContinueRequestParams::new(id)).await.map(drop),
                    Err(why) => {
                        tracing::info!("browser request refused: {} ({why})", ev.request.url);
                        blocked
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(format!("{}: {why}", ev.request.url));
                        page.execute(FailRequestParams::new(id, ErrorReason::BlockedByClient))
                            .await
                            .map(drop)
                    }
                };
                if let Err(e) = sent {
                    tracing::debug!("answering a paused request: {e}");
                }
            });
        }
    }))
}

/// Whether a page may request `url`: `data:`, `blob:` and `about:` stay inside the browser;
/// `http(s)` must pass the SSRF guard (IP literals by [`SsrfGuard::check_url`], names by
/// resolving them through [`SsrfGuard::resolve`]); every other scheme is refused.
pub async fn judge(guard: &SsrfGuard, url: &str) -> Result<(), String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("not a valid URL ({e})"))?;
    match parsed.scheme() {
        "data" | "blob" | "about" => return Ok(()),
        "http" | "https" => {}
        s => return Err(format!("the browser tools do not open {s}: URLs")),
    }
    guard.check_url(&parsed).map_err(|r| r.0)?;
    let host = parsed.host_str().unwrap_or_default();
    guard.resolve(host).await.map(drop).map_err(|e| {
        match crate::tools::ssrf::find_refusal(e.as_ref() as &(dyn std::error::Error + 'static)) {
            Some(r) => r.0,
            None => format!("{host} could not be resolved ({e})"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ssrf::StaticLookup;

    #[tokio::test]
    async fn the_guard_judges_page_requests() {
        let lookup = StaticLookup::new()
            .with("localhost", &["127.0.0.1".parse().unwrap()])
            .with("example.com", &["93.184.216.34".parse().unwrap()])
            .with("sneaky.test", &["10.0.0.5".parse().unwrap()]);
        let guard = SsrfGuard::new(&["localhost".to_string()], Arc::new(lookup));
        assert!(judge(&guard, "http://localhost:8080/a").await.is_ok());
        assert!(judge(&guard, "https://example.com/").await.is_ok());
        assert!(judge(&guard, "data:text/plain,hi").await.is_ok());
        let e = judge(&guard, "http://127.0.0.2:9/x.png").await.unwrap_err();
        assert!(e.contains("loopback"), "{e}");
        let e = judge(&guard, "http://sneaky.test/").await.unwrap_err();
        assert!(e.contains("private"), "{e}");
        let e = judge(&guard, "file:///etc/passwd").await.unwrap_err();
        assert!(e.contains("file:"), "{e}");
        assert!(judge(&guard, "http://169.254.169.254/latest")
            .await
            .is_err());
    }

    #[test]
    fn a_named_executable_that_does_not_exist_is_not_found() {
        let cfg = BrowserConfig {
            executable: "/nonexistent/chromium".into(),
            idle_secs: 300,
        };
        assert!(find_executable(&cfg).is_none());
        let cfg = BrowserConfig {
            executable: "sh".into(),
            idle_secs: 300,
        };
        assert!(find_executable(&cfg).is_some());
    }
}
