//! What `browser_page` does in a tab besides navigating ([`super::navigate`]) and taking a
//! screenshot ([`super::shot`]): click, type, select, wait, evaluate. Finding an element,
//! checking it, clearing a field and waiting for text run in the tools' own world ([`super::world`]); clicks and keys are real
//! input events (`Input.dispatchMouseEvent`, `Input.insertText`, `Input.dispatchKeyEvent`), so
//! the page sees what a person's click or typing would give it, and nothing of what the tools
//! looked for.
//!
//! Every action names the read it acts on (its id, [`super::view`]): an element of another
//! document, or of another read of the same one, is not found. A click lands in the document the
//! approval named or nowhere: an element that is or holds a frame (`iframe`, `frame`, `object`,
//! `embed`) is refused, and just before the press the node under the point is asked of the
//! browser itself (`DOM.getNodeForLocation`, through shadow roots): one of another frame, or a
//! frame's own element, is refused.

use super::hub::{BrowserHub, Tab};
use super::view::{self, refused_note, settle};
use super::world::{self, js_str};
use crate::{ErrorKind, Taint};
use crate::{ToolError, ToolOutput};
use chromiumoxide::cdp::browser_protocol::dom::{DescribeNodeParams, GetNodeForLocationParams};
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchKeyEventParams, DispatchKeyEventType, DispatchMouseEventParams, DispatchMouseEventType,
    InsertTextParams, MouseButton,
};
use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use chromiumoxide::layout::Point;
use serde::Deserialize;
use serde_json::Value;
use std::time::Duration;

/// How long an action waits for the page to finish loading after it.
const SETTLE: Duration = Duration::from_secs(10);
/// Longest `wait`.
pub const MAX_WAIT_MS: u64 = 20_000;
/// Longest result of `eval_readonly`, in characters.
const MAX_EVAL_CHARS: usize = 20_000;

/// After an interaction: wait for what it started, then say where the page is now.
async fn after(
    hub: &BrowserHub,
    key: &str,
    tab: &Tab,
    taint: &Taint,
    did: String,
) -> Result<ToolOutput, ToolError> {
    tokio::time::sleep(Duration::from_millis(300)).await;
    settle(tab, SETTLE).await;
    match view::read(hub, key, tab, taint).await {
        Ok(text) => Ok(ToolOutput::new(format!("{did}. The page now:\n\n{text}"))),
        Err(e) => Ok(ToolOutput::new(format!(
            "{did}; the page could not be read after it: {e}"
        ))),
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

/// Elements that hold another document: a click on them lands in that document.
const FRAMES: &str = "iframe,frame,object,embed,fencedframe,portal";

/// Element `n` of the read `read`, if this document's tools' world still has that read: the
/// preamble of every script that acts on an element.
const ELEMENT_JS: &str = r#"const t = globalThis.__ethan;
  if (!t || t.read !== read) return wrap('another page');
  const e = t.els[n];
  if (!e || !e.isConnected) return wrap('gone');
  if (!t.same(n)) return wrap('changed');"#;

/// Scroll element `n` of the read `read` into view and find where a click lands on it; refused
/// when it is gone, when it is or holds a frame (the click would land in another document), or
/// when something else covers that point (a click there would hit another element than the one
/// the owner approved). With `at` (a point found before), only checks that point again.
fn target_js(n: u64, read: &str, at: Option<(f64, f64)>) -> String {
    let at = at.map_or("null".into(), |(x, y)| format!("[{x}, {y}]"));
    format!(
        r#"((n, read, at) => {{
  const wrap = err => ({{err}});
  {ELEMENT_JS}
  if (e.matches('{FRAMES}') || e.querySelector('{FRAMES}')) return wrap('frame');
  if (!at) e.scrollIntoView({{block: 'center', inline: 'center', behavior: 'instant'}});
  const r = e.getBoundingClientRect();
  if (r.width === 0 && r.height === 0) return wrap('hidden');
  const x = at ? at[0] : r.left + r.width / 2, y = at ? at[1] : r.top + r.height / 2;
  if (x < r.left || x > r.right || y < r.top || y > r.bottom) return wrap('moved');
  const top = document.elementFromPoint(x, y);
  const mine = t => t === e || e.contains(t) ||
    (e.labels && Array.from(e.labels).some(l => l === t || l.contains(t)));
  if (top && top.matches('{FRAMES}')) return wrap('frame');
  if (!top || !mine(top)) {{
    const what = top ? top.tagName.toLowerCase() + (top.id ? '#' + top.id : '') : 'nothing';
    return wrap('covered by ' + what);
  }}
  return {{x, y}};
}})({n}, {read}, {at})"#,
        read = js_str(read),
    )
}

/// What [`ELEMENT_JS`] answers when the element cannot be acted on.
const ELEMENT_ERRORS: &[&str] = &["another page", "gone", "changed"];

fn element_error(n: u64, why: &str) -> ToolError {
    let text = match why {
        "another page" => format!(
            "the current tab is not the page last read (the page changed, or another tab is \
             current), so element {n} was not touched; call browser_page {{action: read}}"
        ),
        "frame" => format!(
            "element {n} is, holds or lies under a frame (another document, perhaps of another \
             site), so a click on it could land there and it was not clicked"
        ),
        "moved" => format!(
            "element {n} moved as the click was about to land, so it was not clicked; call \
             browser_page {{action: read}}"
        ),
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
    ToolError::new(ErrorKind::Validation, text)
}

async fn target(tab: &Tab, n: u64, read: &str, at: Option<Point>) -> Result<Point, ToolError> {
    let js = target_js(n, read, at.map(|p| (p.x, p.y)));
    let t: Target = world::eval(tab, &js)
        .await
        .map_err(|e| ToolError::new(ErrorKind::Dependency, e))?;
    match t.err {
        Some(why) => Err(element_error(n, &why)),
        None => Ok(Point { x: t.x, y: t.y }),
    }
}

/// Whether the node the browser finds at `at` is of the tab's main frame and not a frame's own
/// element (through shadow roots, which the page's own hit test would not show).
async fn lands_in_the_page(tab: &Tab, at: Point) -> Result<bool, String> {
    let main = tab.page.mainframe().await.map_err(|e| e.to_string())?;
    let mut p = GetNodeForLocationParams::new(at.x.round() as i64, at.y.round() as i64);
    p.include_user_agent_shadow_dom = Some(true);
    p.ignore_pointer_events_none = Some(false);
    let hit = tab.page.execute(p).await.map_err(|e| e.to_string())?;
    if main.is_none_or(|m| m != hit.result.frame_id) {
        return Ok(false);
    }
    let d = DescribeNodeParams {
        backend_node_id: Some(hit.result.backend_node_id),
        ..Default::default()
    };
    let node = tab.page.execute(d).await.map_err(|e| e.to_string())?;
    let name = node.result.node.node_name.to_ascii_lowercase();
    Ok(!FRAMES.split(',').any(|f| f == name))
}

fn mouse(kind: DispatchMouseEventType, at: Point) -> DispatchMouseEventParams {
    let press = !matches!(kind, DispatchMouseEventType::MouseMoved);
    let mut m = DispatchMouseEventParams::new(kind, at.x, at.y);
    if press {
        m.button = Some(MouseButton::Left);
        m.click_count = Some(1);
    }
    m
}

/// Click element `n` of the read `read`: found and checked in the tools' world, the mouse moved
/// there, the point checked again (the page's hit test and the browser's), then pressed.
pub(crate) async fn click(
    hub: &BrowserHub,
    key: &str,
    tab: &Tab,
    n: u64,
    read: &str,
    taint: &Taint,
) -> Result<ToolOutput, ToolError> {
    let at = target(tab, n, read, None).await?;
    let pressed = async {
        tab.page
            .execute(mouse(DispatchMouseEventType::MouseMoved, at))
            .await
            .map_err(|e| e.to_string())?;
        if let Err(refused) = target(tab, n, read, Some(at)).await {
            return Ok(Err(refused));
        }
        if !lands_in_the_page(tab, at).await? {
            return Ok(Err(element_error(n, "frame")));
        }
        for kind in [
            DispatchMouseEventType::MousePressed,
            DispatchMouseEventType::MouseReleased,
        ] {
            tab.page
                .execute(mouse(kind, at))
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok::<_, String>(Ok(()))
    }
    .await;
    match pressed {
        Ok(Ok(())) => {}
        Ok(Err(refused)) => return Err(refused),
        Err(e) => {
            return Err(ToolError::new(
                ErrorKind::Dependency,
                format!("element {n} could not be clicked: {e}"),
            ))
        }
    }
    after(hub, key, tab, taint, format!("clicked element {n}")).await
}

/// Focus element `n` of the read `read` and empty it, in the tools' world; `"ok"` or why not.
fn focus_js(n: u64, read: &str) -> String {
    format!(
        r#"((n, read) => {{
  const wrap = err => err;
  {ELEMENT_JS}
  e.scrollIntoView({{block: 'center', inline: 'center', behavior: 'instant'}});
  e.focus();
  if (document.activeElement !== e) return 'not focusable';
  if ('value' in e) {{ e.value = ''; }}
  else if (e.isContentEditable) {{ e.textContent = ''; }}
  else return 'not a text field';
  return 'ok';
}})({n}, {read})"#,
        read = js_str(read),
    )
}

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
    (n, read): (u64, &str),
    text: &str,
    submit: bool,
    taint: &Taint,
) -> Result<ToolOutput, ToolError> {
    match world::eval::<String>(tab, &focus_js(n, read)).await {
        Ok(s) if s == "ok" => {}
        Ok(s) if ELEMENT_ERRORS.contains(&s.as_str()) => return Err(element_error(n, &s)),
        Ok(s) => {
            return Err(ToolError::new(
                ErrorKind::Validation,
                format!("element {n}: {s}"),
            ));
        }
        Err(e) => return Err(ToolError::new(ErrorKind::Dependency, e)),
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
        return Err(ToolError::new(
            ErrorKind::Dependency,
            format!("could not type into element {n}: {e}"),
        ));
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
    (n, read): (u64, &str),
    value: &str,
    taint: &Taint,
) -> Result<ToolOutput, ToolError> {
    let js = format!(
        r#"((n, read, v) => {{
  const wrap = err => err;
  {ELEMENT_JS}
  if (e.tagName !== 'SELECT') return 'not a select';
  const o = Array.from(e.options).find(o => o.value === v || o.text.trim() === v);
  if (!o) return 'no option ' + JSON.stringify(v) + '; options: ' +
    Array.from(e.options).map(o => o.value).join(', ');
  e.value = o.value;
  e.dispatchEvent(new Event('input', {{bubbles: true}}));
  e.dispatchEvent(new Event('change', {{bubbles: true}}));
  return 'ok';
}})({n}, {}, {})"#,
        js_str(read),
        js_str(value)
    );
    match world::eval::<String>(tab, &js).await {
        Ok(s) if s == "ok" => {}
        Ok(s) if ELEMENT_ERRORS.contains(&s.as_str()) => return Err(element_error(n, &s)),
        Ok(s) => {
            return Err(ToolError::new(
                ErrorKind::Validation,
                format!("element {n}: {s}"),
            ))
        }
        Err(e) => return Err(ToolError::new(ErrorKind::Dependency, e)),
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
pub(crate) async fn wait_for(
    tab: &Tab,
    text: &str,
    limit: Duration,
) -> Result<ToolOutput, ToolError> {
    let js = format!(
        "document.body ? document.body.innerText.includes({}) : false",
        js_str(text)
    );
    let start = std::time::Instant::now();
    loop {
        if world::eval::<bool>(tab, &js).await.unwrap_or(false) {
            return Ok(ToolOutput::new(format!(
                "{text:?} is on the page (after {} ms)",
                start.elapsed().as_millis()
            )));
        }
        if start.elapsed() >= limit {
            return Err(ToolError::new(
                ErrorKind::Timeout,
                format!("{text:?} did not show within {} ms", limit.as_millis()),
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Evaluate `expr` in the page's own world with `throwOnSideEffect` (it is there to read the
/// page's state; whatever would change the page or send a request is refused by V8).
pub(crate) async fn eval_readonly(tab: &Tab, expr: &str) -> Result<ToolOutput, ToolError> {
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
            Ok(ToolOutput::new(s + &refused_note(tab)))
        }
        Err(e) => Err(ToolError::new(
            ErrorKind::Validation,
            format!(
                "the expression failed or could have side effects (only read-only \
                 JavaScript is run): {e}"
            ),
        )),
    }
}
