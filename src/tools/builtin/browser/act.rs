//! What `browser_page` (and `browser_tab new`) do in a tab: navigate, click, type, select, wait,
//! evaluate, screenshot. Finding an element, checking it, clearing a field and waiting for text
//! run in the tools' own world ([`super::world`]); clicks and keys are real input events
//! (`Input.dispatchMouseEvent`, `Input.insertText`, `Input.dispatchKeyEvent`), so the page sees
//! what a person's click or typing would give it, and nothing of what the tools looked for.

use super::hub::{BrowserHub, Tab};
use super::view::{self, refused_note, settle};
use super::world::{self, js_str};
use crate::tools::{ErrorKind, Taint, ToolContext, ToolResult};
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchKeyEventParams, DispatchKeyEventType, InsertTextParams,
};
use chromiumoxide::cdp::browser_protocol::page::CaptureScreenshotFormat;
use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use chromiumoxide::layout::Point;
use chromiumoxide::page::ScreenshotParams;
use serde::Deserialize;
use serde_json::{json, Value};
use std::time::Duration;

/// How long an action waits for the page to finish loading after it.
const SETTLE: Duration = Duration::from_secs(10);
/// Longest `wait`.
pub const MAX_WAIT_MS: u64 = 20_000;
/// Longest result of `eval_readonly`, in characters.
const MAX_EVAL_CHARS: usize = 20_000;

/// Parse a `goto` URL; a bare `example.com/page` gets `https://`.
pub fn parse_url(raw: &str) -> Result<reqwest::Url, ToolResult> {
    let raw = raw.trim();
    let url = match reqwest::Url::parse(raw) {
        Ok(u) => Ok(u),
        Err(_) if !raw.contains("://") => reqwest::Url::parse(&format!("https://{raw}")),
        Err(e) => Err(e),
    }
    .map_err(|e| ToolResult::err(ErrorKind::Validation, format!("{raw:?} is not a URL: {e}")))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(ToolResult::err(
            ErrorKind::Validation,
            format!("{url} is not an http(s) URL; the browser opens http:// and https:// only"),
        ));
    }
    Ok(url)
}

/// Load `raw` in `tab` and read it. A navigation the egress guard stops (the URL, or where it
/// redirects) is `denied`, naming what was refused and why.
pub(crate) async fn goto(
    hub: &BrowserHub,
    key: &str,
    tab: &Tab,
    raw: &str,
    taint: &Taint,
) -> ToolResult {
    let url = match parse_url(raw) {
        Ok(u) => u,
        Err(e) => return e,
    };
    if let Err(why) = hub.guard().judge(&url).await {
        return ToolResult::err(ErrorKind::Denied, format!("{url} refused: {why}"))
            .with_metadata(json!({"url": url.as_str()}));
    }
    let _ = hub.take_refused(key).await;
    let nav = tab.page.goto(url.as_str()).await;
    let refused = hub.peek_refused(key).await;
    let now = tab.page.url().await.ok().flatten().unwrap_or_default();
    // The page itself was refused: the navigation failed with refusals on record, or the tab
    // shows the guard's refusal of the URL it ended on (a plain-HTTP redirect).
    let stopped = (nav.is_err() && !refused.is_empty())
        || refused.iter().any(|r| r.starts_with(&format!("{now}: ")));
    if stopped {
        let refused = hub.take_refused(key).await;
        return ToolResult::err(
            ErrorKind::Denied,
            format!(
                "{url} was not loaded: the egress guard refused {}",
                refused.join("; ")
            ),
        )
        .with_metadata(json!({"url": url.as_str(), "refused": refused}));
    }
    if let Err(e) = nav {
        return ToolResult::err(
            ErrorKind::Dependency,
            format!("{url} could not be loaded: {e}"),
        );
    }
    settle(tab, SETTLE).await;
    match view::read(hub, key, tab, taint).await {
        Ok(text) => ToolResult::ok(text),
        Err(e) => ToolResult::err(ErrorKind::Dependency, e),
    }
}

/// After an interaction: wait for what it started, then say where the page is now.
async fn after(hub: &BrowserHub, key: &str, tab: &Tab, taint: &Taint, did: String) -> ToolResult {
    tokio::time::sleep(Duration::from_millis(300)).await;
    settle(tab, SETTLE).await;
    match view::read(hub, key, tab, taint).await {
        Ok(text) => ToolResult::ok(format!("{did}. The page now:\n\n{text}")),
        Err(e) => ToolResult::ok(format!("{did}; the page could not be read after it: {e}")),
    }
}

/// What the tools' world says about element `n` before acting on it.
#[derive(Debug, Deserialize)]
struct Target {
    #[serde(default)]
    err: Option<String>,
    #[serde(default)]
    x: f64,
    #[serde(default)]
    y: f64,
}

/// Scroll element `n` of the last read into view and find where a click lands on it; refused
/// when it is gone, or when something else covers that point (a click there would hit another
/// element than the one the owner approved).
const TARGET_JS: &str = r#"((n) => {
  const t = globalThis.__ethan, e = t && t.els[n];
  if (!e || !e.isConnected) return {err: 'gone'};
  if (!t.same(n)) return {err: 'changed'};
  e.scrollIntoView({block: 'center', inline: 'center', behavior: 'instant'});
  const r = e.getBoundingClientRect();
  if (r.width === 0 && r.height === 0) return {err: 'hidden'};
  const x = r.left + r.width / 2, y = r.top + r.height / 2;
  const top = document.elementFromPoint(x, y);
  const mine = t => t === e || e.contains(t) ||
    (e.labels && Array.from(e.labels).some(l => l === t || l.contains(t)));
  if (!top || !mine(top)) {
    const what = top ? top.tagName.toLowerCase() + (top.id ? '#' + top.id : '') : 'nothing';
    return {err: 'covered by ' + what};
  }
  return {x, y};
})"#;

fn element_error(n: u64, why: &str) -> ToolResult {
    let text = match why {
        "gone" => format!(
            "element {n} is not on the page (it changed, or was never listed); call \
             browser_page {{action: read}} for the current numbers"
        ),
        "hidden" => format!("element {n} is not visible now; call browser_page {{action: read}}"),
        "changed" => format!(
            "element {n} changed since the last read (its kind, label or link is not what was \
             shown), so nothing was done; call browser_page {{action: read}}"
        ),
        other => format!(
            "element {n} is {other} at the point a click would land, so it was not clicked \
             (another element would get it); call browser_page {{action: read}}"
        ),
    };
    ToolResult::err(ErrorKind::Validation, text)
}

async fn target(tab: &Tab, n: u64) -> Result<Point, ToolResult> {
    let t: Target = world::eval(tab, &format!("{TARGET_JS}({n})"))
        .await
        .map_err(|e| ToolResult::err(ErrorKind::Dependency, e))?;
    match t.err {
        Some(why) => Err(element_error(n, &why)),
        None => Ok(Point { x: t.x, y: t.y }),
    }
}

pub(crate) async fn click(
    hub: &BrowserHub,
    key: &str,
    tab: &Tab,
    n: u64,
    taint: &Taint,
) -> ToolResult {
    let at = match target(tab, n).await {
        Ok(p) => p,
        Err(e) => return e,
    };
    if let Err(e) = tab.page.click(at).await {
        return ToolResult::err(
            ErrorKind::Dependency,
            format!("element {n} could not be clicked: {e}"),
        );
    }
    after(hub, key, tab, taint, format!("clicked element {n}")).await
}

/// Focus element `n` and empty it, in the tools' world; `"ok"` or why not.
const FOCUS_JS: &str = r#"((n) => {
  const t = globalThis.__ethan, e = t && t.els[n];
  if (!e || !e.isConnected) return 'gone';
  if (!t.same(n)) return 'changed';
  e.scrollIntoView({block: 'center', inline: 'center', behavior: 'instant'});
  e.focus();
  if (document.activeElement !== e) return 'not focusable';
  if ('value' in e) { e.value = ''; }
  else if (e.isContentEditable) { e.textContent = ''; }
  else return 'not a text field';
  return 'ok';
})"#;

fn key_event(kind: DispatchKeyEventType, text: Option<&str>) -> DispatchKeyEventParams {
    let mut p = DispatchKeyEventParams::new(kind);
    p.key = Some("Enter".into());
    p.code = Some("Enter".into());
    p.windows_virtual_key_code = Some(13);
    p.native_virtual_key_code = Some(13);
    p.text = text.map(str::to_string);
    p.unmodified_text = text.map(str::to_string);
    p
}

pub(crate) async fn type_text(
    hub: &BrowserHub,
    key: &str,
    tab: &Tab,
    n: u64,
    text: &str,
    submit: bool,
    taint: &Taint,
) -> ToolResult {
    match world::eval::<String>(tab, &format!("{FOCUS_JS}({n})")).await {
        Ok(s) if s == "ok" => {}
        Ok(s) if s == "gone" || s == "changed" => return element_error(n, &s),
        Ok(s) => {
            return ToolResult::err(ErrorKind::Validation, format!("element {n}: {s}"));
        }
        Err(e) => return ToolResult::err(ErrorKind::Dependency, e),
    }
    let typed = async {
        tab.page.execute(InsertTextParams::new(text)).await?;
        if submit {
            tab.page
                .execute(key_event(DispatchKeyEventType::KeyDown, Some("\r")))
                .await?;
            tab.page
                .execute(key_event(DispatchKeyEventType::KeyUp, None))
                .await?;
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
    after(hub, key, tab, taint, did).await
}

pub(crate) async fn select(
    hub: &BrowserHub,
    key: &str,
    tab: &Tab,
    n: u64,
    value: &str,
    taint: &Taint,
) -> ToolResult {
    let js = format!(
        r#"((n, v) => {{
  const t = globalThis.__ethan, e = t && t.els[n];
  if (!e || !e.isConnected) return 'gone';
  if (!t.same(n)) return 'changed';
  if (e.tagName !== 'SELECT') return 'not a select';
  const o = Array.from(e.options).find(o => o.value === v || o.text.trim() === v);
  if (!o) return 'no option ' + JSON.stringify(v) + '; options: ' +
    Array.from(e.options).map(o => o.value).join(', ');
  e.value = o.value;
  e.dispatchEvent(new Event('input', {{bubbles: true}}));
  e.dispatchEvent(new Event('change', {{bubbles: true}}));
  return 'ok';
}})({n}, {})"#,
        js_str(value)
    );
    match world::eval::<String>(tab, &js).await {
        Ok(s) if s == "ok" => {}
        Ok(s) if s == "gone" || s == "changed" => return element_error(n, &s),
        Ok(s) => return ToolResult::err(ErrorKind::Validation, format!("element {n}: {s}")),
        Err(e) => return ToolResult::err(ErrorKind::Dependency, e),
    }
    after(
        hub,
        key,
        tab,
        taint,
        format!("selected {value:?} in element {n}"),
    )
    .await
}

/// Wait until `text` shows on the page (looked for in the tools' world), at most `limit`.
pub(crate) async fn wait_for(tab: &Tab, text: &str, limit: Duration) -> ToolResult {
    let js = format!(
        "document.body ? document.body.innerText.includes({}) : false",
        js_str(text)
    );
    let start = std::time::Instant::now();
    loop {
        if world::eval::<bool>(tab, &js).await.unwrap_or(false) {
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

/// Evaluate `expr` in the page's own world with `throwOnSideEffect` (it is there to read the
/// page's state; whatever would change the page or send a request is refused by V8).
pub(crate) async fn eval_readonly(
    hub: &BrowserHub,
    key: &str,
    tab: &Tab,
    expr: &str,
) -> ToolResult {
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
            ToolResult::ok(s + &refused_note(hub, key).await)
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

pub(crate) async fn screenshot(tab: &Tab, ctx: &ToolContext) -> ToolResult {
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
            return ToolResult::err(ErrorKind::Dependency, format!("the screenshot failed: {e}"))
        }
    };
    let dir = super::home(ctx).join("browser").join("screenshots");
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
