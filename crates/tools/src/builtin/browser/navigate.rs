//! Loading a URL in a tab (`browser_page goto`, `browser_tab new` with a URL), judged like
//! `web_fetch`:
//! - http(s) only, and the URL passes the egress guard before anything is loaded;
//! - the tab is moved to the URL's [`Zone`] first ([`BrowserHub::rezone`]): a page the tools open
//!   on a host of `allow_private` gets a context that reaches that host only, a public page one
//!   that never reaches the owner's network;
//! - after private data entered the conversation, the owner approved this URL's origin, not
//!   wherever it redirects: a server redirect of the main frame to another origin is not
//!   followed (CDP `Fetch` holds the tab's document requests while it loads, and fails the one
//!   that came from a redirect elsewhere) and goes back to the model, whose next `goto` asks;
//! - in a tainted session the tab's network is open for the load only ([`BrowserHub::window`]).

use super::hub::{BrowserHub, Tab};
use super::view::{self, settle};
use crate::{ErrorKind, ToolContext};
use crate::{ToolError, ToolOutput};
use chromiumoxide::cdp::browser_protocol::fetch::{
    ContinueRequestParams, DisableParams, EnableParams, EventRequestPaused, FailRequestParams,
    RequestPattern, RequestStage,
};
use chromiumoxide::cdp::browser_protocol::network::{ErrorReason, ResourceType};
use chromiumoxide::Page;
use ethan_egress::proxy::Zone;
use futures::StreamExt;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a navigation waits for the page to finish loading.
const SETTLE: Duration = Duration::from_secs(10);

/// Parse a `goto` URL; a bare `example.com/page` gets `https://`.
pub fn parse_url(raw: &str) -> Result<reqwest::Url, ToolError> {
    let raw = raw.trim();
    let url = match reqwest::Url::parse(raw) {
        Ok(u) => Ok(u),
        Err(_) if !raw.contains("://") => reqwest::Url::parse(&format!("https://{raw}")),
        Err(e) => Err(e),
    }
    .map_err(|e| ToolError::new(ErrorKind::Validation, format!("{raw:?} is not a URL: {e}")))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(ToolError::new(
            ErrorKind::Validation,
            format!("{url} is not an http(s) URL; the browser opens http:// and https:// only"),
        ));
    }
    Ok(url)
}

/// Load `raw` in `tab` (of the session of `ctx`) and read it. A navigation the egress guard
/// stops (the URL, or where it redirects) is `denied`, naming what was refused and why; so is,
/// after a private read, a redirect to another site.
pub(crate) async fn goto(
    hub: &BrowserHub,
    ctx: &ToolContext,
    tab: Arc<Tab>,
    raw: &str,
) -> Result<ToolOutput, ToolError> {
    let key = ctx.session_key.as_str();
    let url = parse_url(raw)?;
    if let Err(why) = hub.guard().judge(&url).await {
        return Err(
            ToolError::new(ErrorKind::Denied, format!("{url} refused: {why}"))
                .with_metadata(json!({"url": url.as_str()})),
        );
    }
    let zone = Zone::of_url(hub.guard(), &url);
    let tab = match hub.rezone(key, &super::home(ctx), tab, zone).await {
        Ok(t) => t,
        Err(e) => return super::fail(e),
    };
    let _open = hub.window(key, &tab);
    let _ = tab.proxy.take_refused();
    // After a private read the owner approved this origin only (web_fetch's rule).
    let held = if ctx.taint.source().is_some() {
        match RedirectStop::start(&tab, &url).await {
            Ok(h) => Some(h),
            Err(e) => {
                return Err(ToolError::new(
                    ErrorKind::Dependency,
                    format!("{url} was not loaded: its redirects could not be watched ({e})"),
                ))
            }
        }
    } else {
        None
    };
    let nav = tab.page.goto(url.as_str()).await;
    let elsewhere = match held {
        Some(h) => h.finish().await,
        None => None,
    };
    if let Some(next) = elsewhere {
        return Err(ToolError::new(
            ErrorKind::Denied,
            format!(
                "{url} redirected to another site, {next}; it was not followed because this \
                 conversation has read private data. Call browser_page goto on {next} if you \
                 need it (the owner will be asked)."
            ),
        )
        .with_metadata(json!({"url": url.as_str(), "redirected_to": next})));
    }
    let refused = tab.proxy.peek_refused();
    let now = tab.page.url().await.ok().flatten().unwrap_or_default();
    // The page itself was refused: the navigation failed with refusals on record, or the tab
    // shows the guard's refusal of the URL it ended on (a plain-HTTP redirect).
    let stopped = (nav.is_err() && !refused.is_empty())
        || refused.iter().any(|r| r.starts_with(&format!("{now}: ")));
    if stopped {
        let refused = tab.proxy.take_refused();
        return Err(ToolError::new(
            ErrorKind::Denied,
            format!(
                "{url} was not loaded: the egress guard refused {}",
                refused.join("; ")
            ),
        )
        .with_metadata(json!({"url": url.as_str(), "refused": refused})));
    }
    if let Err(e) = nav {
        return Err(ToolError::new(
            ErrorKind::Dependency,
            format!("{url} could not be loaded: {e}"),
        ));
    }
    settle(&tab, SETTLE).await;
    match view::read(hub, key, &tab, &ctx.taint).await {
        Ok(text) => Ok(ToolOutput::new(text)),
        Err(e) => Err(ToolError::new(ErrorKind::Dependency, e)),
    }
}

/// A tab's document requests held while the tools load a URL: one of the main frame that comes
/// from a redirect to another origin than the URL's is failed, and remembered.
struct RedirectStop {
    page: Arc<Page>,
    task: tokio::task::JoinHandle<()>,
    stopped: Arc<Mutex<Option<String>>>,
}

impl RedirectStop {
    async fn start(tab: &Tab, url: &reqwest::Url) -> Result<Self, String> {
        let page = tab.page.clone();
        let main = page.mainframe().await.map_err(|e| e.to_string())?;
        let mut events = page
            .event_listener::<EventRequestPaused>()
            .await
            .map_err(|e| e.to_string())?;
        let pattern = RequestPattern {
            url_pattern: Some("*".into()),
            resource_type: Some(ResourceType::Document),
            request_stage: Some(RequestStage::Request),
        };
        page.execute(EnableParams {
            patterns: Some(vec![pattern]),
            handle_auth_requests: None,
        })
        .await
        .map_err(|e| e.to_string())?;
        let origin = url.origin();
        let stopped = Arc::new(Mutex::new(None));
        let (p, s) = (page.clone(), stopped.clone());
        let task = tokio::spawn(async move {
            while let Some(ev) = events.next().await {
                let next = reqwest::Url::parse(&ev.request.url).ok();
                let leaves = ev.redirected_request_id.is_some()
                    && main.as_ref().is_none_or(|m| *m == ev.frame_id)
                    && next.is_none_or(|n| n.origin() != origin);
                let id = ev.request_id.clone();
                let answered = if leaves {
                    tracing::info!("browser: a redirect to another site not followed");
                    s.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert_with(|| ev.request.url.clone());
                    p.execute(FailRequestParams::new(id, ErrorReason::BlockedByClient))
                        .await
                        .map(drop)
                } else {
                    p.execute(ContinueRequestParams::new(id)).await.map(drop)
                };
                if let Err(e) = answered {
                    tracing::debug!("answering a held document request: {e}");
                }
            }
        });
        Ok(Self {
            page,
            task,
            stopped,
        })
    }

    /// Stop holding requests; the redirect target that was not followed, if any.
    async fn finish(self) -> Option<String> {
        if let Err(e) = self.page.execute(DisableParams::default()).await {
            tracing::debug!("releasing the held document requests: {e}");
        }
        self.task.abort();
        self.stopped
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }
}
