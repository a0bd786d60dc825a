//! `browser_page{action, …}`: act on the current tab of this conversation's browser session.
//!
//! | action | arguments | what | asked |
//! |---|---|---|---|
//! | `goto` | `url` | load the URL, then as `read` | when private data entered the turn (egress) |
//! | `read` | | readable text + numbered interactive elements | as `goto` |
//! | `click` | `element` | click element N of the last `read` | once per site per session |
//! | `type` | `element`, `text`, `submit?` | replace the field's text (Enter after, with `submit`) | once per site; every time for a secret-shaped text |
//! | `select` | `element`, `value` | choose an option of a `<select>` | once per site per session |
//! | `screenshot` | | PNG of the viewport, saved under `$ETHAN_HOME/browser/screenshots/` | no |
//! | `wait` | `text?`, `ms?` | until `text` shows (at most `ms`, default 10 s) or `ms` passed | no |
//! | `eval_readonly` | `expression` | a JavaScript expression evaluated with `throwOnSideEffect` | no |
//!
//! The tool's risk is `write` (it can have side effects), so it runs alone, never in a job
//! unless the job was allowed it, and never for a non-owner; the read-only actions ask
//! nothing of their own ([`Tool::consent_check`] is `None` for them).

use super::hub::{BrowserHub, Tab};
use super::view::{self, blocked_note, host_of, settle};
use super::{egress_of, fail, home};
use crate::tools::args::{opt_bool, opt_u64, req_str};
use crate::tools::{Egress, ErrorKind, Risk, Taint, Tool, ToolContext, ToolResult};
use async_trait::async_trait;
use chromiumoxide::cdp::browser_protocol::page::CaptureScreenshotFormat;
use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use chromiumoxide::page::ScreenshotParams;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// How long an action waits for the page to finish loading after it.
const SETTLE: Duration = Duration::from_secs(10);
/// Longest `wait`.
const MAX_WAIT_MS: u64 = 20_000;
/// Longest result of `eval_readonly`, in characters.
const MAX_EVAL_CHARS: usize = 20_000;

pub struct BrowserPage(pub Arc<BrowserHub>);

fn action(args: &Value) -> &str {
    args.get("action").and_then(Value::as_str).unwrap_or("")
}

fn element_arg(args: &Value) -> Option<u64> {
    args.get("element").and_then(Value::as_u64)
}

/// Load `raw` in `tab` and read it; a navigation the guard stopped is `denied`.
pub(crate) async fn goto(
    hub: &BrowserHub,
    key: &str,
    tab: &Tab,
    raw: &str,
    taint: &Taint,
) -> ToolResult {
    let raw = raw.trim();
    let url = match reqwest::Url::parse(raw) {
        Ok(u) => u,
        Err(_) if !raw.contains("://") => match reqwest::Url::parse(&format!("https://{raw}")) {
            Ok(u) => u,
            Err(e) => {
                return ToolResult::err(ErrorKind::Validation, format!("{raw:?} is not a URL: {e}"))
            }
        },
        Err(e) => {
            return ToolResult::err(ErrorKind::Validation, format!("{raw:?} is not a URL: {e}"))
        }
    };
    if url.scheme() != "http" && url.scheme() != "https" {
        return ToolResult::err(
            ErrorKind::Validation,
            format!("{url} is not an http(s) URL; the browser opens http:// and https:// only"),
        );
    }
    if let Err(why) = super::hub::judge(hub.guard(), url.as_str()).await {
        return ToolResult::err(ErrorKind::Denied, format!("{url} refused: {why}"))
            .with_metadata(json!({"url": url.as_str()}));
    }
    let _ = tab.take_blocked();
    let nav = tab.page.goto(url.as_str()).await;
    if let Err(e) = nav {
        let blocked = tab.take_blocked();
        if !blocked.is_empty() {
            return ToolResult::err(
                ErrorKind::Denied,
                format!(
                    "{url} was not loaded: the private-address guard refused {}",
                    blocked.join("; ")
                ),
            )
            .with_metadata(json!({"url": url.as_str(), "refused": blocked}));
        }
        return ToolResult::err(
            ErrorKind::Dependency,
            format!("{url} could not be loaded: {e}"),
        );
    }
    settle(&tab.page, SETTLE).await;
    match view::read(hub, key, tab, taint).await {
        Ok(text) => ToolResult::ok(text),
        Err(e) => ToolResult::err(ErrorKind::Dependency, e),
    }
}

/// JavaScript string literal of `s`.
fn js_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

async fn find(tab: &Tab, n: u64) -> Result<chromiumoxide::Element, ToolResult> {
    tab.page
        .find_element(format!("[data-ethan-el=\"{n}\"]"))
        .await
        .map_err(|_| {
            ToolResult::err(
                ErrorKind::Validation,
                format!(
                    "element {n} is not on the page (it changed, or was never listed); call \
                     browser_page {{action: read}} for the current numbers"
                ),
            )
        })
}

/// After an interaction: wait for what it started, then say where the page is now.
async fn after(hub: &BrowserHub, key: &str, tab: &Tab, taint: &Taint, did: String) -> ToolResult {
    tokio::time::sleep(Duration::from_millis(300)).await;
    settle(&tab.page, SETTLE).await;
    match view::read(hub, key, tab, taint).await {
        Ok(text) => ToolResult::ok(format!("{did}. The page now:\n\n{text}")),
        Err(e) => ToolResult::ok(format!("{did}; the page could not be read after it: {e}")),
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
    /// `click`, `type` and `select` act on a site (a form can buy something); the rest only
    /// look.
    fn consent_check(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
        let act = action(args);
        if !matches!(act, "click" | "type" | "select") {
            return None;
        }
        let view = self.0.view(&ctx.session_key).unwrap_or_default();
        let n = element_arg(args).unwrap_or(0);
        let label = view
            .labels
            .get(&n)
            .map(|l| format!(" \"{l}\""))
            .unwrap_or_default();
        let page = if view.url.is_empty() {
            "the current page".to_string()
        } else {
            view.url.clone()
        };
        Some(match act {
            "click" => format!("browser: click element {n}{label} on {page}"),
            "type" => {
                let text = args.get("text").and_then(Value::as_str).unwrap_or("");
                let shown = crate::tools::redact::redact_shapes(text);
                let submit = if args.get("submit").and_then(Value::as_bool) == Some(true) {
                    " and press Enter"
                } else {
                    ""
                };
                format!("browser: type {shown:?} into element {n}{label}{submit} on {page}")
            }
            _ => {
                let v = args.get("value").and_then(Value::as_str).unwrap_or("");
                format!("browser: select {v:?} in element {n}{label} on {page}")
            }
        })
    }
    /// One approval covers one site (the current page's host) for the session.
    fn consent_scope(&self, _args: &Value, ctx: &ToolContext) -> String {
        let host = self
            .0
            .view(&ctx.session_key)
            .map(|v| v.host)
            .unwrap_or_default();
        format!("browser:site:{host}")
    }
    /// Typing a value shaped like a secret (a key, a token, a password pattern) asks every time.
    fn consent_always(&self, args: &Value, _ctx: &ToolContext) -> bool {
        action(args) == "type"
            && args.get("text").and_then(Value::as_str).is_some_and(|t| {
                matches!(
                    crate::tools::redact::redact_shapes(t),
                    std::borrow::Cow::Owned(_)
                )
            })
    }
    /// A navigation carries its URL out; a read or an interaction talks to the current site.
    fn egress(&self, args: &Value, ctx: &ToolContext) -> Option<Egress> {
        match action(args) {
            "goto" => args.get("url").and_then(Value::as_str).map(egress_of),
            "read" | "click" | "type" | "select" => {
                let url = self.0.view(&ctx.session_key)?.url;
                (!url.is_empty()).then(|| egress_of(&url))
            }
            _ => None,
        }
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolResult {
        let act = match req_str(&args, "action") {
            Ok(a) => a.to_string(),
            Err(e) => return e,
        };
        let key = ctx.session_key.as_str();
        let tab = match self.0.current_tab(key, &home(ctx)).await {
            Ok(t) => t,
            Err(e) => return fail(e),
        };
        // An approval named the site of the last look: act only while the tab still shows it.
        if matches!(act.as_str(), "click" | "type" | "select") {
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
        let need_element = || {
            element_arg(&args).ok_or_else(|| {
                ToolResult::err(
                    ErrorKind::Validation,
                    format!("{act} needs `element`, a number from browser_page {{action: read}}"),
                )
            })
        };
        match act.as_str() {
            "goto" => match req_str(&args, "url") {
                Ok(url) => goto(&self.0, key, &tab, url, &ctx.taint).await,
                Err(e) => e,
            },
            "read" => match view::read(&self.0, key, &tab, &ctx.taint).await {
                Ok(text) => ToolResult::ok(text),
                Err(e) => ToolResult::err(ErrorKind::Dependency, e),
            },
            "click" => {
                let n = match need_element() {
                    Ok(n) => n,
                    Err(e) => return e,
                };
                let el = match find(&tab, n).await {
                    Ok(e) => e,
                    Err(e) => return e,
                };
                if let Err(e) = el.click().await {
                    return ToolResult::err(
                        ErrorKind::Dependency,
                        format!("element {n} could not be clicked: {e}"),
                    );
                }
                after(
                    &self.0,
                    key,
                    &tab,
                    &ctx.taint,
                    format!("clicked element {n}"),
                )
                .await
            }
            "type" => {
                let n = match need_element() {
                    Ok(n) => n,
                    Err(e) => return e,
                };
                let text = match req_str(&args, "text") {
                    Ok(t) => t.to_string(),
                    Err(e) => return e,
                };
                let submit = match opt_bool(&args, "submit") {
                    Ok(s) => s.unwrap_or(false),
                    Err(e) => return e,
                };
                let el = match find(&tab, n).await {
                    Ok(e) => e,
                    Err(e) => return e,
                };
                let typed = async {
                    el.click().await?;
                    el.call_js_fn(
                        "function() { if ('value' in this) { this.value = ''; } \
                         else if (this.isContentEditable) { this.textContent = ''; } }",
                        false,
                    )
                    .await?;
                    el.type_str(&text).await?;
                    if submit {
                        el.press_key("Enter").await?;
                    }
                    Ok::<_, chromiumoxide::error::CdpError>(())
                }
                .await;
                if let Err(e) = typed {
                    return ToolResult::err(
                        ErrorKind::Dependency,
                        format!("could not type into element {n}: {e}"),
                    );
                }
                let did = format!(
                    "typed {} characters into element {n}{}",
                    text.chars().count(),
                    if submit { " and pressed Enter" } else { "" }
                );
                after(&self.0, key, &tab, &ctx.taint, did).await
            }
            "select" => {
                let n = match need_element() {
                    Ok(n) => n,
                    Err(e) => return e,
                };
                let value = match req_str(&args, "value") {
                    Ok(v) => v.to_string(),
                    Err(e) => return e,
                };
                let el = match find(&tab, n).await {
                    Ok(e) => e,
                    Err(e) => return e,
                };
                let js = format!(
                    "function() {{ const v = {}; if (this.tagName !== 'SELECT') return 'not a select'; \
                     const o = Array.from(this.options).find(o => o.value === v || o.text.trim() === v); \
                     if (!o) return 'no option ' + JSON.stringify(v) + '; options: ' + \
                     Array.from(this.options).map(o => o.value).join(', '); \
                     this.value = o.value; \
                     this.dispatchEvent(new Event('input', {{bubbles: true}})); \
                     this.dispatchEvent(new Event('change', {{bubbles: true}})); return 'ok'; }}",
                    js_str(&value)
                );
                let r = el
                    .call_js_fn(js, false)
                    .await
                    .ok()
                    .and_then(|r| r.result.value)
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_else(|| "the page did not answer".into());
                if r != "ok" {
                    return ToolResult::err(ErrorKind::Validation, format!("element {n}: {r}"));
                }
                after(
                    &self.0,
                    key,
                    &tab,
                    &ctx.taint,
                    format!("selected {value:?} in element {n}"),
                )
                .await
            }
            "screenshot" => {
                let png = match tab
                    .page
                    .screenshot(
                        ScreenshotParams::builder()
                            .format(CaptureScreenshotFormat::Png)
                            .build(),
                    )
                    .await
                {
                    Ok(p) => p,
                    Err(e) => {
                        return ToolResult::err(
                            ErrorKind::Dependency,
                            format!("the screenshot failed: {e}"),
                        )
                    }
                };
                let dir = home(ctx).join("browser").join("screenshots");
                let name = format!(
                    "{}-{}.png",
                    chrono::Utc::now().format("%Y%m%dT%H%M%S%.3f"),
                    &ctx.execution_id.chars().take(8).collect::<String>()
                );
                let path = dir.join(name);
                let saved = std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&path, &png));
                if let Err(e) = saved {
                    return ToolResult::err(
                        ErrorKind::Internal,
                        format!(
                            "the screenshot could not be saved to {}: {e}",
                            path.display()
                        ),
                    );
                }
                let url = tab.page.url().await.ok().flatten().unwrap_or_default();
                ToolResult::ok(format!(
                    "A screenshot of {url} was taken ({} bytes, PNG) and saved to {}. This \
                     model is not shown images; use browser_page {{action: read}} for the \
                     page's text.",
                    png.len(),
                    path.display()
                ))
                .with_metadata(json!({"path": path.display().to_string()}))
            }
            "wait" => {
                let ms = match opt_u64(&args, "ms") {
                    Ok(m) => m,
                    Err(e) => return e,
                };
                let text = args.get("text").and_then(Value::as_str).map(str::to_string);
                let limit = Duration::from_millis(ms.unwrap_or(10_000).min(MAX_WAIT_MS));
                let Some(text) = text else {
                    tokio::time::sleep(limit).await;
                    return ToolResult::ok(format!("waited {} ms", limit.as_millis()));
                };
                let js = format!(
                    "document.body ? document.body.innerText.includes({}) : false",
                    js_str(&text)
                );
                let start = std::time::Instant::now();
                loop {
                    let seen = tab
                        .page
                        .evaluate(js.as_str())
                        .await
                        .ok()
                        .and_then(|r| r.into_value::<bool>().ok())
                        .unwrap_or(false);
                    if seen {
                        return ToolResult::ok(format!(
                            "{text:?} is on the page (after {} ms)",
                            start.elapsed().as_millis()
                        ));
                    }
                    if start.elapsed() >= limit {
                        return ToolResult::err(
                            ErrorKind::Timeout,
                            format!("{text:?} did not show within {} ms", limit.as_millis()),
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
            "eval_readonly" => {
                let expr = match req_str(&args, "expression") {
                    Ok(e) => e.to_string(),
                    Err(e) => return e,
                };
                let mut p = EvaluateParams::new(expr);
                p.throw_on_side_effect = Some(true);
                p.return_by_value = Some(true);
                p.timeout = Some(chromiumoxide::cdp::js_protocol::runtime::TimeDelta::new(
                    2000.0,
                ));
                match tab.page.evaluate_expression(p).await {
                    Ok(r) => {
                        let v = r.value().cloned().unwrap_or(Value::Null);
                        let mut s = match &v {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        if s.chars().count() > MAX_EVAL_CHARS {
                            s = s.chars().take(MAX_EVAL_CHARS).collect::<String>() + " …(cut)";
                        }
                        ToolResult::ok(s + &blocked_note(&tab))
                    }
                    Err(e) => ToolResult::err(
                        ErrorKind::Validation,
                        format!(
                            "the expression failed or could have side effects (only read-only \
                             JavaScript is run): {e}"
                        ),
                    ),
                }
            }
            other => ToolResult::err(ErrorKind::Validation, format!("unknown action {other:?}")),
        }
    }
}
