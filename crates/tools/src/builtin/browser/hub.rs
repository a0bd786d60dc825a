//! The one headless Chromium of the daemon and the browser sessions in it.
//!
//! - The browser is started on the first browser call ([`BrowserHub::session`]), with its
//!   profile in `$ETHAN_HOME/browser/profile` (wiped before start and after close), and closed
//!   by a watchdog after `tools.browser.idle_secs` without a call (never while a call runs:
//!   [`BrowserHub::busy`]); the next call starts it again.
//! - A browser session is the tabs of one Ethan session ([`ToolContext::session_key`]). Each tab
//!   is an isolated browser context of its own (`Target.createBrowserContext`: its own cookies,
//!   storage, cache and workers, kept in memory) with a proxy of its own, so everything a tab's
//!   pages do — their popups, frames and workers included — is told apart from every other
//!   tab's; closing a tab or the session disposes its context, so nothing of it is left.
//!   Downloads are denied per context (`Browser.setDownloadBehavior{behavior: deny}`).
//! - Chromium's only way out is the egress guard's proxy ([`ethan_egress::proxy`]): each
//!   context is created with its proxy (`proxyServer`, and `proxyBypassList` `<-loopback>` so
//!   loopback is not bypassed), the browser's default context with one that refuses
//!   everything, and the browser is started with the flags that close its direct paths
//!   ([`launch_args`]: QUIC off, WebRTC without unproxied UDP, no DNS prefetch or network
//!   prediction, no background networking). WebSockets, workers, service workers, popups,
//!   iframes, prefetches, beacons and pre-connects all go through the proxy by construction;
//!   what it refuses is listed for the tools to report ([`BrowserProxy::take_refused`]).
//! - A tab's proxy holds its pages to a [`Zone`]: where the tools navigated it. A tab the tools
//!   opened on a public site reaches public addresses only, never the owner's network (a host
//!   of `allow_private`); a tab the tools opened on a host of `allow_private` reaches that host
//!   only. When the tools navigate a tab to another zone it gets a fresh context
//!   ([`BrowserHub::rezone`]), so nothing a page left behind (a worker, a cookie) is there.
//! - Once private data entered the session ([`BrowserHub::taint`], told at once through
//!   [`BrowserHub::hear_taint`]), the proxy of every tab not held to a host of the owner's
//!   network is closed, which cuts what its pages had open; from then on such a tab reaches the
//!   network only while a tool acts on it ([`BrowserHub::window`]: `goto`, `click`, `type`,
//!   `select`, each asked or granted). Every tab is closed only after its network is. So
//!   nothing a page can observe afterwards — a tab closing, the tools' timing, its own timers —
//!   reaches a server outside the owner's network unasked. (A tab held to one host of the
//!   owner's network keeps its network: all it reaches is that host.)
//!
//! [`ToolContext::session_key`]: crate::ToolContext

use crate::settings::BrowserConfig;
use chromiumoxide::cdp::browser_protocol::browser::{
    BrowserContextId, SetDownloadBehaviorBehavior, SetDownloadBehaviorParams,
};
use chromiumoxide::cdp::browser_protocol::target::{
    CreateBrowserContextParams, CreateTargetParams, SetAutoAttachParams,
};
use chromiumoxide::cdp::js_protocol::runtime::ExecutionContextId;
use chromiumoxide::{Browser, Page};
use ethan_egress::proxy::{BrowserProxy, Zone};
use ethan_egress::EgressGuard;
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

/// A tab of a browser session: its page, its own browser context and proxy, the zone its
/// pages are held to, and the tools' own JavaScript world in it ([`super::world`]).
pub struct Tab {
    pub id: u32,
    pub page: Arc<Page>,
    context: BrowserContextId,
    pub(crate) proxy: Arc<BrowserProxy>,
    /// The isolated world the tools' scripts run in, while its document lasts.
    pub(crate) world: Mutex<Option<ExecutionContextId>>,
}

impl Tab {
    /// Where its pages may connect.
    pub fn zone(&self) -> Zone {
        self.proxy.zone().cloned().unwrap_or(Zone::Public)
    }
}

/// One Ethan session's tabs.
pub struct Session {
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
    /// The browser process and the protocol relay to it ([`super::relay`]).
    child: chromiumoxide::async_process::Child,
    relay: tokio::task::JoinHandle<()>,
    profile: PathBuf,
    sessions: HashMap<String, Session>,
    /// The default context's proxy, which refuses everything (kept for the browser's life).
    _default_proxy: BrowserProxy,
}

/// Who a page a tool acts on can send to: the origin of its document.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Site {
    /// An empty tab (`about:blank` with no origin): nothing to send to.
    #[default]
    None,
    /// The document's origin (`https://example.com`, `http://127.0.0.1:8080`): that of its
    /// URL, or, for a `blob:` or `about:` document, of the page that made it.
    Origin(String),
    /// A document whose origin the tools cannot name (opaque, not `about:blank`): the tools do
    /// not act on it.
    Opaque(String),
}

impl Site {
    /// The site of a document at `url` whose `location.origin` is `origin`.
    pub fn of(url: &str, origin: &str) -> Site {
        let tuple = |u: &reqwest::Url| {
            let o = u.origin();
            o.is_tuple().then(|| o.ascii_serialization())
        };
        let parsed = reqwest::Url::parse(url).ok();
        if let Some(o) = parsed.as_ref().and_then(tuple) {
            // http(s), and blob: (whose origin is the one inside it).
            return Site::Origin(o);
        }
        if let Some(o) = reqwest::Url::parse(origin).ok().as_ref().and_then(tuple) {
            // about:blank, about:srcdoc, a javascript: document: the origin it inherited.
            return Site::Origin(o);
        }
        if url == "about:blank" {
            Site::None
        } else {
            Site::Opaque(url.to_string())
        }
    }

    /// `http://host:port` as an approval shows it; empty for none.
    pub fn shown(&self) -> &str {
        match self {
            Site::None => "",
            Site::Origin(o) | Site::Opaque(o) => o,
        }
    }
}

/// What the last read of a session showed, kept for the consent hooks (which cannot wait for
/// the browser) and to bind an action to it: the tab and the read (an id the read left in the
/// tools' world of that document), the document's URL and site, and the labels of its numbered
/// elements. An action runs only while that tab is current and shows that very document.
#[derive(Debug, Clone, Default)]
pub struct View {
    pub tab: u32,
    pub read: String,
    pub url: String,
    pub site: Site,
    pub labels: HashMap<u64, String>,
}

/// The network side of one session's browsing, reachable without waiting for the browser (the
/// taint hook is synchronous): whether private data entered it, and its tabs' proxies.
#[derive(Default)]
struct Net {
    tainted: bool,
    proxies: Vec<std::sync::Weak<BrowserProxy>>,
}

/// Whether a tab's proxy is closed once private data entered the session: a tab held to one
/// host of the owner's network ([`Zone::OwnersHost`]) is not, since everything it can reach is
/// that host — nothing its pages send leaves the owner's network. (It is still cut before the
/// tab closes, like every tab.)
fn gated(proxy: &BrowserProxy) -> bool {
    !matches!(proxy.zone(), Some(Zone::OwnersHost(_)))
}

/// A tab's network opened for one action of the tools in a tainted session; closed again (its
/// connections cut) when dropped.
pub struct Window(Option<Arc<BrowserProxy>>);

impl Drop for Window {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            p.set_open(false);
        }
    }
}

/// A browser call in progress ([`BrowserHub::busy`]).
pub struct Busy<'a>(&'a BrowserHub);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.touch();
        self.0
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The daemon's browser, shared by the three browser tools.
pub struct BrowserHub {
    cfg: BrowserConfig,
    guard: EgressGuard,
    running: Mutex<Option<Running>>,
    last_used: StdMutex<Instant>,
    views: StdMutex<HashMap<String, View>>,
    nets: StdMutex<HashMap<String, Net>>,
    /// The largest picture the model is shown, bytes (`media.max_image_bytes`).
    image_limit: std::sync::atomic::AtomicU64,
    /// Who turns a page's HTML into text ([`BrowserHub::set_page_reader`]; none: not read).
    pages: StdMutex<Arc<dyn crate::page_reader::PageReader>>,
    /// Browser calls in progress ([`BrowserHub::busy`]); the watchdog never closes under one.
    in_flight: Arc<std::sync::atomic::AtomicUsize>,
    me: Weak<BrowserHub>,
}

/// The image limit of a hub until [`BrowserHub::set_image_limit`] (`media.max_image_bytes`'s
/// default).
pub const DEFAULT_IMAGE_LIMIT: u64 = 5_000_000;

impl BrowserHub {
    pub fn new(cfg: BrowserConfig, guard: EgressGuard) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            cfg,
            guard,
            running: Mutex::new(None),
            last_used: StdMutex::new(Instant::now()),
            views: StdMutex::new(HashMap::new()),
            nets: StdMutex::new(HashMap::new()),
            image_limit: DEFAULT_IMAGE_LIMIT.into(),
            pages: StdMutex::new(Arc::new(crate::page_reader::NoPageReader)),
            in_flight: Arc::default(),
            me: me.clone(),
        })
    }

    /// Close a session's pages' network the moment private data enters the session (`hooks`:
    /// those of the turns this browser serves).
    pub fn hear_taint(self: &Arc<Self>, hooks: &ethan_core::tool::TaintHooks) {
        let me = Arc::downgrade(self);
        hooks.on_taint(move |session_key| match me.upgrade() {
            Some(hub) => {
                hub.taint_if_browsing(session_key);
                true
            }
            None => false,
        });
    }

    pub fn guard(&self) -> &EgressGuard {
        &self.guard
    }

    /// The largest screenshot the model is shown, bytes ([`super::shot`]).
    pub fn image_limit(&self) -> u64 {
        self.image_limit.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn set_image_limit(&self, bytes: u64) {
        self.image_limit
            .store(bytes.max(1), std::sync::atomic::Ordering::Relaxed);
    }

    /// Pages' HTML read by `pages` (the daemon's: its limited child process).
    pub fn set_page_reader(&self, pages: Arc<dyn crate::page_reader::PageReader>) {
        *self.pages.lock().unwrap_or_else(|p| p.into_inner()) = pages;
    }

    pub fn page_reader(&self) -> Arc<dyn crate::page_reader::PageReader> {
        self.pages.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn nets(&self) -> std::sync::MutexGuard<'_, HashMap<String, Net>> {
        self.nets.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Private data entered `session_key`: every tab's proxy closes (cutting what its pages
    /// had open), and stays closed but while a tool acts on the tab ([`BrowserHub::window`]),
    /// for the rest of the browser session.
    pub fn taint(&self, session_key: &str) {
        let mut nets = self.nets();
        let net = nets.entry(session_key.to_string()).or_default();
        Self::close_all(net);
    }

    /// [`BrowserHub::taint`] for a session that has tabs (the hook hears every session).
    fn taint_if_browsing(&self, session_key: &str) {
        if let Some(net) = self.nets().get_mut(session_key) {
            Self::close_all(net);
        }
    }

    fn close_all(net: &mut Net) {
        net.tainted = true;
        net.proxies.retain(|p| match p.upgrade() {
            Some(p) => {
                if gated(&p) {
                    p.set_open(false);
                }
                true
            }
            None => false,
        });
    }

    /// Mark `session_key` tainted when the call's turn is ([`BrowserHub::taint`]); every browser
    /// call starts with it.
    pub fn note_taint(&self, session_key: &str, taint: &crate::Taint) {
        if taint.source().is_some() {
            self.taint(session_key);
        }
    }

    /// Whether private data entered `session_key` while it had a browser session.
    pub fn tainted(&self, session_key: &str) -> bool {
        self.nets().get(session_key).is_some_and(|n| n.tainted)
    }

    /// Open `tab`'s network for one action of the tools, when the session is tainted (it is
    /// open anyway otherwise); closed again when the [`Window`] is dropped.
    pub fn window(&self, session_key: &str, tab: &Tab) -> Window {
        if !self.tainted(session_key) || !gated(&tab.proxy) {
            return Window(None);
        }
        tab.proxy.set_open(true);
        Window(Some(tab.proxy.clone()))
    }

    /// The first host of the owner's network (`allow_private`) `session_key`'s pages reached:
    /// what the pages show may then hold private data (the taint rule).
    pub async fn private_reached(&self, session_key: &str) -> Option<String> {
        let running = self.running.lock().await;
        running
            .as_ref()?
            .sessions
            .get(session_key)?
            .tabs
            .iter()
            .find_map(|t| t.proxy.private_reached())
    }

    /// A browser call in progress: until the guard is dropped the browser is not idle (a call
    /// longer than `idle_secs`, a slow page on a loaded machine, is not cut off under it), and
    /// its end counts as a use.
    pub fn busy(&self) -> Busy<'_> {
        self.in_flight
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.touch();
        Busy(self)
    }

    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    fn views(&self) -> std::sync::MutexGuard<'_, HashMap<String, View>> {
        self.views.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The last view of `session_key` (see [`View`]).
    pub fn view(&self, session_key: &str) -> Option<View> {
        self.views().get(session_key).cloned()
    }

    pub fn set_view(&self, session_key: &str, view: View) {
        self.views().insert(session_key.to_string(), view);
    }

    /// Forget the last view: the current tab changed without a read of it.
    pub fn clear_view(&self, session_key: &str) {
        self.views().remove(session_key);
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
        running
            .sessions
            .entry(session_key.to_string())
            .or_insert_with(|| Session {
                tabs: Vec::new(),
                current: None,
                next_id: 1,
            });
        let Some(session) = running.sessions.get_mut(session_key) else {
            return Err(BrowserError::Launch("no session".into()));
        };
        Ok(f(session))
    }

    /// A new page (about:blank) in a context of its own whose proxy holds it to `zone`; closed
    /// from the start when the session is tainted.
    async fn open_page(
        &self,
        session_key: &str,
        zone: Zone,
    ) -> Result<(BrowserContextId, Arc<BrowserProxy>, Arc<Page>), BrowserError> {
        let proxy = BrowserProxy::start_in(self.guard.clone(), session_key, zone)
            .await
            .map(Arc::new)
            .map_err(|e| BrowserError::Launch(format!("the browser's proxy: {e}")))?;
        {
            let mut nets = self.nets();
            let net = nets.entry(session_key.to_string()).or_default();
            if net.tainted && gated(&proxy) {
                proxy.set_open(false);
            }
            net.proxies.push(Arc::downgrade(&proxy));
        }
        let running = self.running.lock().await;
        let Some(r) = running.as_ref() else {
            return Err(BrowserError::Cdp("the browser closed".into()));
        };
        let context = r
            .browser
            .create_browser_context(
                CreateBrowserContextParams::builder()
                    .proxy_server(proxy.url())
                    .proxy_bypass_list(PROXY_BYPASS)
                    .build(),
            )
            .await?;
        let made = async {
            r.browser
                .execute(SetDownloadBehaviorParams {
                    behavior: SetDownloadBehaviorBehavior::Deny,
                    browser_context_id: Some(context.clone()),
                    download_path: None,
                    events_enabled: None,
                })
                .await?;
            let mut params = CreateTargetParams::new("about:blank");
            params.browser_context_id = Some(context.clone());
            let page = r.browser.new_page(params).await?;
            // chromiumoxide attaches to what a page starts (workers, service workers, frames)
            // with `waitForDebuggerOnStart`, and leaves a service worker paused for good; what
            // the page starts runs at once instead (through the tab's proxy like the page).
            let mut attach = SetAutoAttachParams::new(true, false);
            attach.flatten = Some(true);
            page.execute(attach).await?;
            Ok::<_, BrowserError>(page)
        }
        .await;
        match made {
            Ok(page) => Ok((context, proxy, Arc::new(page))),
            Err(e) => {
                let _ = r.browser.dispose_browser_context(context).await;
                Err(e)
            }
        }
    }

    /// Open a new tab (about:blank, a public one) in `session_key`'s session and make it current.
    pub async fn new_tab(&self, session_key: &str, home: &Path) -> Result<Arc<Tab>, BrowserError> {
        self.session(session_key, home, |_| ()).await?;
        let (context, proxy, page) = self.open_page(session_key, Zone::Public).await?;
        let tab = self
            .session(session_key, home, move |s| {
                let tab = Arc::new(Tab {
                    id: s.next_id,
                    page,
                    context,
                    proxy,
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

    /// `tab` held to `zone`: itself when it is already, else a fresh tab of the same number in
    /// a new context of that zone, which takes its place (the old one is closed, its network
    /// first). What a page of one zone left behind (workers, storage) never runs in another.
    pub async fn rezone(
        &self,
        session_key: &str,
        home: &Path,
        tab: Arc<Tab>,
        zone: Zone,
    ) -> Result<Arc<Tab>, BrowserError> {
        if tab.zone() == zone {
            return Ok(tab);
        }
        let (context, proxy, page) = self.open_page(session_key, zone).await?;
        let fresh = Arc::new(Tab {
            id: tab.id,
            page,
            context,
            proxy,
            world: Mutex::new(None),
        });
        let put = fresh.clone();
        let old = self
            .session(session_key, home, move |s| {
                let pos = s.tabs.iter().position(|t| t.id == put.id)?;
                Some(std::mem::replace(&mut s.tabs[pos], put))
            })
            .await?;
        match old {
            Some(old) => self.dispose(&old).await,
            // Closed meanwhile: the fresh one goes too.
            None => {
                self.dispose(&fresh).await;
                return Err(BrowserError::Usage(format!("tab {} was closed", tab.id)));
            }
        }
        Ok(fresh)
    }

    /// Close `tab`: its network first (nothing its pages send as they close gets out), then its
    /// page and its context.
    async fn dispose(&self, tab: &Tab) {
        tab.proxy.set_open(false);
        let _ = (*tab.page).clone().close().await;
        let running = self.running.lock().await;
        if let Some(r) = running.as_ref() {
            if let Err(e) = r.browser.dispose_browser_context(tab.context.clone()).await {
                tracing::debug!("disposing a tab's browser context: {e}");
            }
        }
    }

    /// Close tab `which` (default: the current one) of `session_key`; the next one becomes
    /// current. `None` when there is no such tab.
    pub async fn close_tab(
        &self,
        session_key: &str,
        home: &Path,
        which: Option<u32>,
    ) -> Result<Option<u32>, BrowserError> {
        let removed = self
            .session(session_key, home, |s| {
                let id = which.or(s.current)?;
                let pos = s.tabs.iter().position(|t| t.id == id)?;
                let tab = s.tabs.remove(pos);
                if s.current == Some(id) {
                    s.current = s.tabs.last().map(|t| t.id);
                }
                Some(tab)
            })
            .await?;
        let Some(tab) = removed else {
            return Ok(None);
        };
        if self.view(session_key).is_some_and(|v| v.tab == tab.id) {
            self.clear_view(session_key);
        }
        self.dispose(&tab).await;
        Ok(Some(tab.id))
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

    /// Close `session_key`'s browser session: its tabs and their contexts (cookies, storage,
    /// cache), each tab's network first. `false` when it had none.
    pub async fn close_session(&self, session_key: &str) -> bool {
        self.clear_view(session_key);
        if let Some(net) = self.nets().get_mut(session_key) {
            // Cut every tab at once, before the first one closes.
            net.proxies
                .iter()
                .filter_map(std::sync::Weak::upgrade)
                .for_each(|p| p.set_open(false));
        }
        let session = {
            let mut guard = self.running.lock().await;
            guard.as_mut().and_then(|r| r.sessions.remove(session_key))
        };
        self.nets().remove(session_key);
        let Some(session) = session else {
            return false;
        };
        for tab in &session.tabs {
            self.dispose(tab).await;
        }
        true
    }

    /// Close the browser now (every session with it) and wipe its profile; every tab's network
    /// is cut first.
    pub async fn shutdown(&self) {
        self.views().clear();
        for net in self.nets().values() {
            net.proxies
                .iter()
                .filter_map(std::sync::Weak::upgrade)
                .for_each(|p| p.set_open(false));
        }
        self.nets().clear();
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
        let handler_config = chromiumoxide::handler::HandlerConfig {
            ignore_https_errors: false,
            viewport: Some(Default::default()),
            request_timeout: Duration::from_secs(30),
            ..Default::default()
        };
        let launched = super::relay::launch(&config, handler_config, Duration::from_secs(30))
            .await
            .map_err(|e| BrowserError::Launch(format!("{}: {e}", exe.display())))?;
        let (browser, mut handler) = (launched.browser, launched.handler);
        let handler = tokio::spawn(async move { while handler.next().await.is_some() {} });
        tracing::info!("browser started: {}", exe.display());
        self.spawn_watchdog();
        Ok(Running {
            browser,
            handler,
            child: launched.child,
            relay: launched.relay,
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
                let busy = hub.in_flight.load(std::sync::atomic::Ordering::SeqCst) > 0;
                if since >= idle && !busy {
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
    let _ = tokio::time::timeout(Duration::from_secs(5), r.child.wait()).await;
    let _ = r.child.kill().await;
    let _ = r.child.wait().await;
    r.handler.abort();
    r.relay.abort();
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
