//! `browser_page{action, …}`: act on the current tab of this conversation's browser session.
//!
//! | action | arguments | what | its own question | data leaving (asked once private data entered the session) |
//! |---|---|---|---|---|
//! | `goto` | `url` | load the URL, then as `read` | — | the URL |
//! | `read` | | readable text + numbered interactive elements | — | — |
//! | `click` | `element` | click element N of the last `read` | per site (`click`) | which element, to the page's site |
//! | `type` | `element`, `text`, `submit?` | replace the field's text (Enter after, with `submit`) | per site (`type`); every time for a secret-shaped text | the text |
//! | `select` | `element`, `value` | choose an option of a `<select>` | per site (`select`) | the value |
//! | `screenshot` | | PNG of the viewport, saved under `$ETHAN_HOME/browser/screenshots/` | — | — |
//! | `wait` | `text?`, `ms?` | until `text` shows (at most `ms`, default 10 s) or `ms` passed | — | the text |
//! | `eval_readonly` | `expression` | a JavaScript expression evaluated with `throwOnSideEffect` | — | the expression |
//!
//! Text handed to a page is data leaving the machine when the page has a server (an
//! `about:blank` tab has none): [`Tool::egress`] names it, so in a session that read private
//! data it is asked for, shown (secret shapes redacted), and keyed by action and site. The
//! tool's own question (a click can buy something) is separate: an approval of one never
//! stands in for the other ([`crate::consent`]).
//!
//! The tool's risk is `write` (it can have side effects), so it runs alone, never in a job
//! unless the job was allowed it, and never for a non-owner.

use super::act::{self, MAX_WAIT_MS};
use super::hub::BrowserHub;
use super::view::{self, host_of};
use super::{fail, home};
use crate::tools::args::{opt_bool, opt_u64, req_str};
use crate::tools::{Egress, ErrorKind, Risk, Tool, ToolContext, ToolResult};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::sync::Arc;
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
    crate::tools::redact::redact_shapes(s).into_owned()
}

impl BrowserPage {
    /// ` "label"` of element `n` in the last read of the session, or nothing.
    fn label(&self, ctx: &ToolContext, n: u64) -> String {
        self.0
            .view(&ctx.session_key)
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
    fn name(&self) -> &str {
        "browser_page"
    }
    fn description(&self) -> &str {
        "Act on the current browser tab: goto{url} (load and read), read (readable text plus \
         numbered interactive elements), click{element}, type{element, text, submit?}, \
         select{element, value}, screenshot, wait{text?, ms?}, eval_readonly{expression} \
         (JavaScript without side effects). Element numbers come from the last read."
    }
    fn parameters(&self) -> Value {
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
        })
    }
    fn risk(&self) -> Risk {
        Risk::Write
    }
    fn timeout(&self) -> Duration {
        Duration::from_secs(60)
    }
    /// What the pages show is the web's, not the owner's; a page of the owner's network marks
    /// the turn through the egress guard instead ([`view::mark_private`]).
    fn reads_private(&self) -> bool {
        false
    }
    /// `click`, `type` and `select` act on a site (a form can buy something); the rest only
    /// look.
    fn consent_check(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
        if !matches!(action(args), "click" | "type" | "select") {
            return None;
        }
        let view = self.0.view(&ctx.session_key).unwrap_or_default();
        let page = if view.url.is_empty() {
            "the current page".to_string()
        } else {
            view.url.clone()
        };
        Some(format!("browser: {} on {page}", self.act_text(args, ctx)))
    }
    /// One approval covers one action on one site (the current page's host) for the session.
    fn consent_scope(&self, args: &Value, ctx: &ToolContext) -> String {
        let host = self
            .0
            .view(&ctx.session_key)
            .map(|v| v.host)
            .unwrap_or_default();
        format!("{}:site:{host}", action(args))
    }
    /// Handing a page a secret-shaped text (an API key, a token) asks every time.
    fn consent_always(&self, args: &Value, _ctx: &ToolContext) -> bool {
        handed_text(args).is_some_and(|t| {
            matches!(
                crate::tools::redact::redact_shapes(t),
                std::borrow::Cow::Owned(_)
            )
        })
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
                let view = self.0.view(&ctx.session_key)?;
                if view.host.is_empty() {
                    // about:blank, data: — no server to receive anything.
                    return None;
                }
                Some(Egress {
                    destination: format!(
                        "browser: {}\non {} (host: {})",
                        self.act_text(args, ctx),
                        view.url,
                        view.host
                    ),
                    scope: format!("{act}:host:{}", view.host),
                })
            }
            _ => None,
        }
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolResult {
        let r = self.act(&args, ctx).await;
        view::mark_private(&self.0, &ctx.session_key, &ctx.taint).await;
        r
    }
}

impl BrowserPage {
    async fn act(&self, args: &Value, ctx: &ToolContext) -> ToolResult {
        let act = match req_str(args, "action") {
            Ok(a) => a.to_string(),
            Err(e) => return e,
        };
        let key = ctx.session_key.as_str();
        let tab = match self.0.current_tab(key, &home(ctx)).await {
            Ok(t) => t,
            Err(e) => return fail(e),
        };
        // An approval named the site of the last look: act only while the tab still shows it.
        if matches!(
            act.as_str(),
            "click" | "type" | "select" | "wait" | "eval_readonly"
        ) {
            let now = tab.page.url().await.ok().flatten().unwrap_or_default();
            let seen = self.0.view(key).map(|v| v.host).unwrap_or_default();
            if host_of(&now) != seen {
                return ToolResult::err(
                    ErrorKind::Validation,
                    format!(
                        "the current tab shows {now}, not the page last read; call \
                         browser_page {{action: read}} first"
                    ),
                );
            }
        }
        let element = || {
            element_arg(args).ok_or_else(|| {
                ToolResult::err(
                    ErrorKind::Validation,
                    format!("{act} needs `element`, a number from browser_page {{action: read}}"),
                )
            })
        };
        let (hub, taint) = (&*self.0, &ctx.taint);
        match act.as_str() {
            "goto" => match req_str(args, "url") {
                Ok(url) => act::goto(hub, key, &tab, url, taint).await,
                Err(e) => e,
            },
            "read" => match view::read(hub, key, &tab, taint).await {
                Ok(text) => ToolResult::ok(text),
                Err(e) => ToolResult::err(ErrorKind::Dependency, e),
            },
            "click" => match element() {
                Ok(n) => act::click(hub, key, &tab, n, taint).await,
                Err(e) => e,
            },
            "type" => {
                let typed = element().and_then(|n| {
                    let text = req_str(args, "text")?;
                    let submit = opt_bool(args, "submit")?.unwrap_or(false);
                    Ok((n, text, submit))
                });
                match typed {
                    Ok((n, text, submit)) => {
                        act::type_text(hub, key, &tab, n, text, submit, taint).await
                    }
                    Err(e) => e,
                }
            }
            "select" => match element().and_then(|n| Ok((n, req_str(args, "value")?))) {
                Ok((n, value)) => act::select(hub, key, &tab, n, value, taint).await,
                Err(e) => e,
            },
            "screenshot" => act::screenshot(&tab, ctx).await,
            "wait" => {
                let ms = match opt_u64(args, "ms") {
                    Ok(m) => m,
                    Err(e) => return e,
                };
                let limit = Duration::from_millis(ms.unwrap_or(10_000).min(MAX_WAIT_MS));
                match args.get("text").and_then(Value::as_str) {
                    Some(text) => act::wait_for(&tab, text, limit).await,
                    None => {
                        tokio::time::sleep(limit).await;
                        ToolResult::ok(format!("waited {} ms", limit.as_millis()))
                    }
                }
            }
            "eval_readonly" => match req_str(args, "expression") {
                Ok(expr) => act::eval_readonly(hub, key, &tab, expr).await,
                Err(e) => e,
            },
            other => ToolResult::err(ErrorKind::Validation, format!("unknown action {other:?}")),
        }
    }
}
