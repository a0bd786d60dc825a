//! The one headless Chromium of the daemon and the browser sessions in it.
//!
//! - The browser is started on the first browser call ([`BrowserHub::session`]), with its
//!   profile in `$ETHAN_HOME/browser/profile` (wiped before start and after close), and closed
//!   by a watchdog after `tools.browser.idle_secs` without a call; the next call starts it again.
//! - A browser session is an isolated browser context (`Target.createBrowserContext`: its own
//!   cookies, storage and cache, kept in memory) per Ethan session ([`ToolContext::session_key`]);
//!   closing it disposes the context, so nothing of it is left. Downloads are denied per
//!   context (`Browser.setDownloadBehavior{behavior: deny}`).
//! - Chromium's only way out is the egress guard's proxy ([`crate::egress::proxy`]): each
//!   context is created with a proxy of its own (`proxyServer`, and `proxyBypassList`
//!   `<-loopback>` so loopback is not bypassed), the browser's default context with one that
//!   refuses everything, and the browser is started with the flags that close its direct paths
//!   ([`launch_args`]: QUIC off, WebRTC without unproxied UDP, no DNS prefetch or network
//!   prediction, no background networking). WebSockets, workers, service workers, popups,
//!   iframes, prefetches, beacons and pre-connects all go through the proxy by construction;
//!   what it refuses is listed for the tools to report ([`BrowserHub::take_refused`]).
//!
//! [`ToolContext::session_key`]: crate::tools::ToolContext

use crate::config::BrowserConfig;
use crate::egress::proxy::BrowserProxy;
use crate::egress::EgressGuard;
use chromiumoxide::cdp::browser_protocol::browser::{
    BrowserContextId, SetDownloadBehaviorBehavior, SetDownloadBehaviorParams,
};
use chromiumoxide::cdp::browser_protocol::target::{
    CreateBrowserContextParams, CreateTargetParams, SetAutoAttachParams,
};
use chromiumoxide::cdp::js_protocol::runtime::ExecutionContextId;
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

/// A tab of a browser session: its page, and the tools' own JavaScript world in it
/// ([`super::world`]).
pub struct Tab {
    pub id: u32,
    pub page: Arc<Page>,
    /// The isolated world the tools' scripts run in, while its document lasts.
    pub(crate) world: Mutex<Option<ExecutionContextId>>,
}

/// One Ethan session's browser context, its proxy and its tabs.
pub struct Session {
    context: BrowserContextId,
    proxy: Arc<BrowserProxy>,
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
    /// The default context's proxy, which refuses everything (kept for the browser's life).
    _default_proxy: BrowserProxy,
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
    guard: EgressGuard,
    running: Mutex<Option<Running>>,
    last_used: StdMutex<Instant>,
    views: StdMutex<HashMap<String, View>>,
    me: Weak<BrowserHub>,
}

impl BrowserHub {
    pub fn new(cfg: BrowserConfig, guard: EgressGuard) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            cfg,
            guard,
            running: Mutex::new(None),
            last_used: StdMutex::new(Instant::now()),
            views: StdMutex::new(HashMap::new()),
            me: me.clone(),
        })
    }

    pub fn guard(&self) -> &EgressGuard {
        &self.guard
    }

    /// The proxy of `session_key`'s browser context, if it has one.
    async fn proxy_of(&self, session_key: &str) -> Option<Arc<BrowserProxy>> {
        self.running
            .lock()
            .await
            .as_ref()
            .and_then(|r| r.sessions.get(session_key))
            .map(|s| s.proxy.clone())
    }

    /// What the proxy of `session_key` refused since the last look, each `destination: why`.
    pub async fn take_refused(&self, session_key: &str) -> Vec<String> {
        match self.proxy_of(session_key).await {
            Some(p) => p.take_refused(),
            None => Vec::new(),
        }
    }

    /// What the proxy of `session_key` refused since the last look, left in place.
    pub async fn peek_refused(&self, session_key: &str) -> Vec<String> {
        match self.proxy_of(session_key).await {
            Some(p) => p.peek_refused(),
            None => Vec::new(),
        }
    }

    /// The first host of the owner's network (`allow_private`) `session_key`'s pages reached:
    /// what the pages show may then hold private data (the taint rule).
    pub async fn private_reached(&self, session_key: &str) -> Option<String> {
        self.proxy_of(session_key).await?.private_reached()
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
            // Its own proxy: every connection of the context is judged, and attributed to it.
            let proxy = BrowserProxy::start(self.guard.clone(), session_key)
                .await
                .map_err(|e| BrowserError::Launch(format!("the browser's proxy: {e}")))?;
            let context = running
                .browser
                .create_browser_context(
                    CreateBrowserContextParams::builder()
                        .proxy_server(proxy.url())
                        .proxy_bypass_list(PROXY_BYPASS)
                        .build(),
                )
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
                    proxy: Arc::new(proxy),
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
        // chromiumoxide attaches to what a page starts (workers, service workers, frames) with
        // `waitForDebuggerOnStart`, and leaves a service worker paused for good; what the page
        // starts runs at once instead (its connections go through the proxy like the page's).
        let mut attach = SetAutoAttachParams::new(true, false);
        attach.flatten = Some(true);
        page.execute(attach).await?;
        let page = Arc::new(page);
        let tab = self
            .session(session_key, home, move |s| {
                let tab = Arc::new(Tab {
                    id: s.next_id,
                    page,
                    world: Mutex::new(None),
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
        std::fs::create_dir_all(profile.join("Default"))
            .map_err(|e| BrowserError::Launch(format!("{}: {e}", profile.display())))?;
        // Network prediction (pre-resolving and pre-connecting to links) off in the profile too.
        let _ = std::fs::write(
            profile.join("Default").join("Preferences"),
            r#"{"net":{"network_prediction_options":2}}"#,
        );
        // The default context (never used by the tools) gets a proxy that refuses everything.
        let default_proxy = BrowserProxy::refusing(
            self.guard.clone(),
            "the browser's default context is not used by any conversation",
        )
        .await
        .map_err(|e| BrowserError::Launch(format!("the browser's proxy: {e}")))?;
        let mut builder = chromiumoxide::BrowserConfig::builder()
            .chrome_executable(&exe)
            .user_data_dir(&profile)
            .disable_default_args()
            .args(launch_args(&default_proxy.url()))
            .respect_https_errors()
            .launch_timeout(Duration::from_secs(30))
            .request_timeout(Duration::from_secs(30));
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
            _default_proxy: default_proxy,
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

/// The proxy bypass list of every context: nothing bypasses the proxy, loopback included
/// (Chromium bypasses loopback and `<local>` by default; `<-loopback>` turns that off).
pub const PROXY_BYPASS: &str = "<-loopback>";

/// The command line of the browser: what a headless browser needs (from chromiumoxide's
/// defaults), the proxy for the default context, and every switch that closes a path around
/// the proxy — QUIC (UDP), WebRTC's unproxied UDP, DNS prefetch and network prediction,
/// background networking (component updates, safe browsing, metrics, domain reliability,
/// autofill's server).
pub fn launch_args(default_proxy: &str) -> Vec<String> {
    // chromiumoxide adds the leading `--` to each.
    [
        format!("proxy-server={default_proxy}"),
        format!("proxy-bypass-list={PROXY_BYPASS}"),
        "disable-quic".into(),
        "force-webrtc-ip-handling-policy=disable_non_proxied_udp".into(),
        "webrtc-ip-handling-policy=disable_non_proxied_udp".into(),
        "dns-prefetch-disable".into(),
        "disable-background-networking".into(),
        "disable-component-update".into(),
        "disable-domain-reliability".into(),
        "disable-client-side-phishing-detection".into(),
        "disable-sync".into(),
        "no-pings".into(),
        "metrics-recording-only".into(),
        "no-first-run".into(),
        "no-default-browser-check".into(),
        "disable-default-apps".into(),
        "disable-breakpad".into(),
        "disable-dev-shm-usage".into(),
        "disable-hang-monitor".into(),
        "disable-popup-blocking".into(),
        "disable-prompt-on-repost".into(),
        "disable-background-timer-throttling".into(),
        "disable-backgrounding-occluded-windows".into(),
        "disable-renderer-backgrounding".into(),
        "disable-ipc-flooding-protection".into(),
        "disable-component-extensions-with-background-pages".into(),
        "disable-features=TranslateUI,NetworkPrediction,NetworkTimeServiceQuerying,\
         OptimizationHints,MediaRouter,DialMediaRouteProvider,InterestFeedContentSuggestions,\
         AutofillServerCommunication"
            .into(),
        "enable-automation".into(),
        "password-store=basic".into(),
        "use-mock-keychain".into(),
        "force-color-profile=srgb".into(),
        "lang=en_US".into(),
    ]
    .into_iter()
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
