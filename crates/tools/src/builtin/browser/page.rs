//! `browser_page{action, …}`: act on the current tab of this conversation's browser session.
//!
//! | action | arguments | what | its own question | data leaving (asked once private data entered the session) |
//! |---|---|---|---|---|
//! | `goto` | `url` | load the URL, then as `read` | — | the URL |
//! | `read` | | readable text + numbered interactive elements | — | — |
//! | `click` | `element` | click element N of the last `read` | per site (`click`) | which element, to the page's site |
//! | `type` | `element`, `text`, `submit?` | replace the field's text (Enter after, with `submit`) | per site (`type`); every time for a secret-shaped text | the text |
//! | `select` | `element`, `value` | choose an option of a `<select>` | per site (`select`) | the value |
//! | `screenshot` | | the viewport as a PNG (a JPEG, scaled down if need be, to fit `media.max_image_bytes`), saved under `$ETHAN_HOME/browser/screenshots/`; shown to a model with `model.vision` with the next request | — | — |
//! | `wait` | `text?`, `ms?` | until `text` shows (at most `ms`, default 10 s) or `ms` passed | — | the text |
//! | `eval_readonly` | `expression` | a JavaScript expression evaluated with `throwOnSideEffect` | — | the expression |
//!
//! Text handed to a page is data leaving the machine when the page has a server (an empty
//! `about:blank` tab has none): [`crate::CallPlan::egress`] names it, so in a session that read private
//! data it is asked for, shown (secret shapes redacted), and keyed by action and the real
//! origin of the document ([`Site`]: a `blob:` document's is the origin inside it, an
//! `about:blank` one's that of the page that made it). The tool's own question (a click can buy
//! something) is separate: an approval of one never stands in for the other
//! (the consent rule, docs/ARCHITECTURE.md).
//!
//! Both questions name the session's last read ([`View`]: its tab, document and elements), taken
//! once per call before consent ([`Tool::assess`]); the action then runs only on that tab while it
//! still shows that read, and on the element as it was shown — so what the owner approved is
//! what is touched, or nothing is. In a session that read private data, `click`, `type` and
//! `select` open the tab's network for the action only ([`BrowserHub::window`]).
//!
//! The tool's risk is `write` (it can have side effects), so it runs alone, never in a job
//! unless the job was allowed it, and never for a non-owner.

use super::act::{self, MAX_WAIT_MS};
use super::hub::{BrowserHub, Site, View};
use super::view;
use super::{fail, home};
use crate::args::{opt_bool, opt_u64, req_str};
use crate::{Assessment, Egress, ErrorKind, Tool, ToolContext};
use crate::{CallPlan, ToolDecl, ToolError, ToolOutput};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::sync::Arc;
use std::sync::LazyLock;
use std::time::Duration;

pub struct BrowserPage(pub Arc<BrowserHub>);

fn action(args: &Value) -> &str {
    args.get("action").and_then(Value::as_str).unwrap_or("")
}

fn element_arg(args: &Value) -> Option<u64> {
    args.get("element").and_then(Value::as_u64)
}

fn str_arg<'a>(args: &'a Value, key: &str) -> &'a str {
    args.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The text an action hands to the page (`type`, `select`, `wait`, `eval_readonly`), if any.
fn handed_text(args: &Value) -> Option<&str> {
    let key = match action(args) {
        "type" | "wait" => "text",
        "select" => "value",
        "eval_readonly" => "expression",
        _ => return None,
    };
    args.get(key).and_then(Value::as_str)
}

/// `s` as an approval shows it: credential shapes redacted.
fn shown(s: &str) -> String {
    crate::redact::redact_shapes(s).into_owned()
}

/// The actions that act on what the last read showed.
fn on_the_read(act: &str) -> bool {
    matches!(act, "click" | "type" | "select" | "wait" | "eval_readonly")
}

impl BrowserPage {
    /// The read this call acts on: the one taken before consent ([`Tool::assess`]), so the
    /// approval and the action name the same; the session's last one outside the executor.
    fn bound(&self, ctx: &ToolContext) -> Option<View> {
        match ctx
            .assessment
            .as_ref()
            .and_then(|a| a.get::<Option<View>>())
        {
            Some(v) => v.clone(),
            None => self.0.view(&ctx.session_key),
        }
    }

    /// ` "label"` of element `n` in the bound read, or nothing.
    fn label(&self, ctx: &ToolContext, n: u64) -> String {
        self.bound(ctx)
            .and_then(|v| v.labels.get(&n).cloned())
            .map(|l| format!(" \"{l}\""))
            .unwrap_or_default()
    }

    /// What an action on element `n` does, as the owner reads it.
    fn act_text(&self, args: &Value, ctx: &ToolContext) -> String {
        let n = element_arg(args).unwrap_or(0);
        let label = self.label(ctx, n);
        match action(args) {
            "click" => format!("click element {n}{label}"),
            "type" => {
                let submit = if args.get("submit").and_then(Value::as_bool) == Some(true) {
                    " and press Enter"
                } else {
                    ""
                };
                format!(
                    "type {:?} into element {n}{label}{submit}",
                    shown(str_arg(args, "text"))
                )
            }
            "select" => format!(
                "select {:?} in element {n}{label}",
                shown(str_arg(args, "value"))
            ),
            "wait" => format!(
                "wait until the page shows {:?} (the tools look for it in their own world; the \
                 page cannot read it, but it can watch the wait)",
                shown(str_arg(args, "text"))
            ),
            _ => format!(
                "evaluate in the page's own JavaScript world, where its scripts can see what it \
                 calls: {}",
                shown(str_arg(args, "expression"))
            ),
        }
    }
}

#[async_trait]
impl Tool for BrowserPage {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "browser_page",
                "Act on the current browser tab: goto{url} (load and read), read (readable text plus \
                 numbered interactive elements), click{element}, type{element, text, submit?}, \
                 select{element, value}, screenshot, wait{text?, ms?}, eval_readonly{expression} \
                 (JavaScript without side effects). Element numbers come from the last read.",
                json!({
                    "type": "object",
                    "properties": {
                        "action": {"type": "string", "enum": [
                            "goto", "read", "click", "type", "select", "screenshot", "wait", "eval_readonly"
                        ]},
                        "url": {"type": "string", "description": "goto: the http(s) URL"},
                        "element": {"type": "integer", "minimum": 1, "description": "click/type/select: the element number from read"},
                        "text": {"type": "string", "description": "type: the text to enter; wait: text to wait for"},
                        "submit": {"type": "boolean", "description": "type: press Enter afterwards"},
                        "value": {"type": "string", "description": "select: the option's value or visible text"},
                        "ms": {"type": "integer", "minimum": 0, "maximum": MAX_WAIT_MS, "description": "wait: milliseconds"},
                        "expression": {"type": "string", "description": "eval_readonly: a JavaScript expression"}
                    },
                    "required": ["action"],
                    "additionalProperties": false
                }),
            )
            // What the pages show is the web's, not the owner's; a page of the owner's network marks
            // the turn through the egress guard instead ([`view::mark_private`]).
            .not_private()
            .timeout(Duration::from_secs(60))
        });
        &DECL
    }
    fn describe(&self, args: &Value, ctx: &ToolContext) -> CallPlan {
        CallPlan {
            consent: self.consent_check(args, ctx),
            scope: self.consent_scope(args, ctx),
            always: self.consent_always(args, ctx),
            egress: self.egress(args, ctx),
            ..CallPlan::of(self.decl(), args)
        }
    }
    /// The session's last read, once, for the hooks and `run` of this call.
    async fn assess(&self, args: &Value, ctx: &ToolContext) -> Option<Assessment> {
        on_the_read(action(args)).then(|| Assessment::new(self.0.view(&ctx.session_key)))
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let _busy = self.0.busy();
        self.0.note_taint(&ctx.session_key, &ctx.taint);
        let r = self.act(&args, ctx).await;
        view::mark_private(&self.0, &ctx.session_key, &ctx.taint).await;
        r
    }
}

impl BrowserPage {
    /// `click`, `type` and `select` act on a site (a form can buy something); the rest only
    /// look.
    fn consent_check(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
        if !matches!(action(args), "click" | "type" | "select") {
            return None;
        }
        let page = match self.bound(ctx) {
            Some(v) if !v.url.is_empty() => format!("{} (tab {})", v.url, v.tab),
            _ => "the current page".to_string(),
        };
        Some(format!("browser: {} on {page}", self.act_text(args, ctx)))
    }
    /// One approval covers one action on one origin (the bound read's) for the session; a
    /// document the tools cannot name an origin for is its own scope.
    fn consent_scope(&self, args: &Value, ctx: &ToolContext) -> String {
        let site = self.bound(ctx).map(|v| v.site).unwrap_or_default();
        match site {
            Site::None => format!("{}:site:none", action(args)),
            Site::Origin(o) => format!("{}:site:{o}", action(args)),
            Site::Opaque(u) => format!("{}:opaque:{u}", action(args)),
        }
    }
    /// Handing a page a secret-shaped text (an API key, a token) asks every time.
    fn consent_always(&self, args: &Value, _ctx: &ToolContext) -> bool {
        handed_text(args)
            .is_some_and(|t| matches!(crate::redact::redact_shapes(t), std::borrow::Cow::Owned(_)))
    }
    /// A navigation carries its URL out; a click, or text handed to a page with a server,
    /// carries data to that site.
    fn egress(&self, args: &Value, ctx: &ToolContext) -> Option<Egress> {
        let act = action(args);
        match act {
            "goto" => args
                .get("url")
                .and_then(Value::as_str)
                .map(|u| super::egress_of("goto", u)),
            "click" | "type" | "select" | "wait" | "eval_readonly" => {
                if act == "wait" && args.get("text").and_then(Value::as_str).is_none() {
                    return None;
                }
                let view = self.bound(ctx)?;
                let scope = match &view.site {
                    // An empty tab: no server to receive anything.
                    Site::None => return None,
                    Site::Origin(o) => format!("{act}:origin:{o}"),
                    Site::Opaque(u) => format!("{act}:opaque:{u}"),
                };
                Some(Egress {
                    destination: format!(
                        "browser: {}\non {} (tab {}, site: {})",
                        self.act_text(args, ctx),
                        view.url,
                        view.tab,
                        view.site.shown()
                    ),
                    scope,
                })
            }
            _ => None,
        }
    }
}

/// Why `tab` may not be acted on as the read `view` (`None`: it may): another tab is current,
/// the document or read changed, or the document has no origin the tools can name.
async fn unbound(view: Option<&View>, tab: &super::hub::Tab) -> Option<ToolError> {
    let now = || async { tab.page.url().await.ok().flatten().unwrap_or_default() };
    let Some(view) = view else {
        return Some(ToolError::new(
            ErrorKind::Validation,
            format!(
                "the current tab (tab {}, {}) is not the page last read; call browser_page \
                 {{action: read}} first",
                tab.id,
                now().await
            ),
        ));
    };
    if view.tab != tab.id || !view::same_read(tab, &view.read).await {
        return Some(ToolError::new(
            ErrorKind::Validation,
            format!(
                "the current tab (tab {}, {}) is not the page last read (tab {}, {}); nothing \
                 was done. Call browser_page {{action: read}} first",
                tab.id,
                now().await,
                view.tab,
                view.url
            ),
        ));
    }
    if let Site::Opaque(url) = &view.site {
        return Some(ToolError::new(
            ErrorKind::Denied,
            format!(
                "{url} has no origin the tools can name (an opaque document), so they do not \
                 act on it; load an http(s) page with browser_page goto"
            ),
        ));
    }
    None
}

impl BrowserPage {
    async fn act(&self, args: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let act = match req_str(args, "action") {
            Ok(a) => a.to_string(),
            Err(e) => return Err(e),
        };
        let key = ctx.session_key.as_str();
        let tab = match self.0.current_tab(key, &home(ctx)).await {
            Ok(t) => t,
            Err(e) => return fail(e),
        };
        // An approval named the last read: act only on its tab while it still shows it.
        let view = self.bound(ctx);
        let read = view.as_ref().map(|v| v.read.clone()).unwrap_or_default();
        let needs_view = on_the_read(&act) && (act != "wait" || args.get("text").is_some());
        if needs_view {
            if let Some(refused) = unbound(view.as_ref(), &tab).await {
                return Err(refused);
            }
        }
        let element = || {
            element_arg(args).ok_or_else(|| {
                ToolError::new(
                    ErrorKind::Validation,
                    format!("{act} needs `element`, a number from browser_page {{action: read}}"),
                )
            })
        };
        let (hub, taint) = (&*self.0, &ctx.taint);
        // Acting sends: in a tainted session the tab's network is open for this action only.
        let _open =
            matches!(act.as_str(), "click" | "type" | "select").then(|| hub.window(key, &tab));
        match act.as_str() {
            "goto" => match req_str(args, "url") {
                Ok(url) => super::navigate::goto(hub, ctx, tab.clone(), url).await,
                Err(e) => Err(e),
            },
            "read" => match view::read(hub, key, &tab, taint).await {
                Ok(text) => Ok(ToolOutput::new(text)),
                Err(e) => Err(ToolError::new(ErrorKind::Dependency, e)),
            },
            "click" => match element() {
                Ok(n) => act::click(hub, key, &tab, n, &read, taint).await,
                Err(e) => Err(e),
            },
            "type" => {
                let typed = element().and_then(|n| {
                    let text = req_str(args, "text")?;
                    let submit = opt_bool(args, "submit")?.unwrap_or(false);
                    Ok((n, text, submit))
                });
                match typed {
                    Ok((n, text, submit)) => {
                        act::type_text(hub, key, &tab, (n, &read), text, submit, taint).await
                    }
                    Err(e) => Err(e),
                }
            }
            "select" => match element().and_then(|n| Ok((n, req_str(args, "value")?))) {
                Ok((n, value)) => act::select(hub, key, &tab, (n, &read), value, taint).await,
                Err(e) => Err(e),
            },
            "screenshot" => super::shot::screenshot(hub, &tab, ctx).await,
            "wait" => {
                let ms = opt_u64(args, "ms")?;
                let limit = Duration::from_millis(ms.unwrap_or(10_000).min(MAX_WAIT_MS));
                match args.get("text").and_then(Value::as_str) {
                    Some(text) => act::wait_for(&tab, text, limit).await,
                    None => {
                        tokio::time::sleep(limit).await;
                        Ok(ToolOutput::new(format!("waited {} ms", limit.as_millis())))
                    }
                }
            }
            "eval_readonly" => match req_str(args, "expression") {
                Ok(expr) => act::eval_readonly(&tab, expr).await,
                Err(e) => Err(e),
            },
            other => Err(ToolError::new(
                ErrorKind::Validation,
                format!("unknown action {other:?}"),
            )),
        }
    }
}
