//! Browser tools on a real headless Chromium: `browser_session`, `browser_tab`, `browser_page`.
//! Pages built by JavaScript, logins and forms, which `web_fetch` (static HTML) cannot do.
//!
//! The CDP client is `chromiumoxide` 0.9 (crates.io, MIT/Apache-2.0): the maintained line of
//! the Rust DevTools clients (0.9.1, 2025; tokio-only since 0.7, so it shares the daemon's
//! runtime), typed bindings for the whole protocol (Fetch interception, browser contexts,
//! download behaviour), and it launches a browser the user installed — the `fetcher` feature,
//! which downloads one, stays off. Its forks (`spider_chrome` and others) follow the crawler
//! needs of their owners and pin their own protocol revision; `headless_chrome` is sync
//! (threads). Chromium comes from the user's distribution ([`hub::find_executable`]).
//!
//! - [`hub`]: the one browser per daemon, started on first use, closed after
//!   `tools.browser.idle_secs`, one isolated context per tab whose only way out is the egress
//!   guard's proxy ([`ethan_egress::proxy`]), held to where the tools navigated it and cut off
//!   once private data entered the session but while a tool acts on it; downloads denied.
//! - [`world`]: the tools' own JavaScript world in a page, which page scripts cannot observe or
//!   patch; [`view`]: reading a rendered page (readable text + numbered interactive elements);
//!   [`navigate`]: loading a URL in a tab of the right zone, stopping a redirect to another site
//!   after a private read; [`act`]: clicking, typing, selecting, waiting, evaluating;
//!   [`shot`]: a screenshot the model with vision is shown, sized to its limit.
//! - [`relay`]: starting Chromium, and the protocol relay that puts its newer messages in the
//!   shape the client reads.
//! - [`session`], [`tab`], [`page`]: the three tools.
//!
//! Governance (docs/tools.md, "Browser tools"): none of them is offered to a non-owner on a chat
//! platform (they are not in the policy's `NON_OWNER`); a navigation, and text handed to a page
//! (`type`, `select`, `wait`, `eval_readonly`) or a click, count as data leaving
//! ([`crate::CallPlan::egress`]), keyed by the real origin of the document; `click`, `type`,
//! `select` are side effects asked once per action and origin per session; handing a page a
//! secret-shaped value asks every time. An approval is bound to the tab, the read and the
//! element it names ([`hub::View`]).

pub mod act;
pub mod hub;
pub mod navigate;
pub mod page;
pub mod relay;
pub mod session;
pub mod shot;
pub mod tab;
pub mod view;
pub mod world;

use crate::{ErrorKind, ToolContext};
use crate::{ToolError, ToolOutput};
use hub::BrowserError;
use std::path::PathBuf;

/// `$ETHAN_HOME` of the call (the profile goes under `browser/`), or a folder under the
/// system's temporary directory where the context has none (tests, one-off runs).
pub(crate) fn home(ctx: &ToolContext) -> PathBuf {
    ctx.ethan_home
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("ethan-browser"))
}

pub(crate) fn fail(e: BrowserError) -> Result<ToolOutput, ToolError> {
    let kind = match e {
        BrowserError::NotInstalled | BrowserError::Launch(_) | BrowserError::Cdp(_) => {
            ErrorKind::Dependency
        }
        BrowserError::Usage(_) => ErrorKind::Validation,
    };
    Err(ToolError::new(kind, e.to_string()))
}

/// The egress of a navigation to `raw` by `action` (the whole URL leaves; an approval covers
/// that action toward one origin, where it lands without a redirect to another:
/// [`navigate::goto`]).
pub(crate) fn egress_of(action: &str, raw: &str) -> crate::Egress {
    let site = navigate::parse_url(raw)
        .ok()
        .map(|u| u.origin())
        .filter(|o| o.is_tuple())
        .map(|o| o.ascii_serialization())
        .unwrap_or_else(|| raw.trim().to_string());
    crate::Egress {
        destination: format!("browser GET {} (site: {site})", raw.trim()),
        scope: format!("{action}:origin:{site}"),
    }
}
