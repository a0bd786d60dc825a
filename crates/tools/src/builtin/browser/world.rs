//! The tools' own JavaScript world in a page: an isolated world (CDP
//! `Page.createIsolatedWorld`) in the tab's main frame, where the scripts that read the page,
//! find and act on its elements and wait for text run. It shares the page's DOM but none of its
//! JavaScript: a page that replaces `String.prototype.includes`, `querySelector` or the
//! `innerText` getter changes them in its own world only, so it neither sees what the tools
//! look for nor rewrites what they read (the text the model gets, the element labels an
//! approval shows). The element list of the last read lives in this world too
//! (`globalThis.__ethan`), where the page cannot renumber it.
//!
//! A world lasts as long as its document: after a navigation the stored context is gone, a new
//! world is made on the next call, and the element numbers of the old page no longer exist.
//! Only `eval_readonly` runs in the page's own world (it is there to read the page's state).

use super::hub::Tab;
use chromiumoxide::cdp::browser_protocol::page::CreateIsolatedWorldParams;
use chromiumoxide::cdp::js_protocol::runtime::{EvaluateParams, ExecutionContextId};
use serde::de::DeserializeOwned;

/// The name the world is reported under (DevTools shows it; the page cannot see it).
const WORLD_NAME: &str = "ethan-tools";

/// A new isolated world in `tab`'s main frame.
async fn create(tab: &Tab) -> Result<ExecutionContextId, String> {
    let frame = tab
        .page
        .mainframe()
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the tab has no document")?;
    let mut p = CreateIsolatedWorldParams::new(frame);
    p.world_name = Some(WORLD_NAME.into());
    p.grant_univeral_access = Some(false);
    let r = tab.page.execute(p).await.map_err(|e| e.to_string())?;
    Ok(r.result.execution_context_id)
}

async fn evaluate_in(
    tab: &Tab,
    context: ExecutionContextId,
    expression: &str,
) -> Result<serde_json::Value, chromiumoxide::error::CdpError> {
    let mut p = EvaluateParams::new(expression);
    p.context_id = Some(context);
    p.return_by_value = Some(true);
    p.await_promise = Some(true);
    let r = tab.page.evaluate_expression(p).await?;
    Ok(r.value().cloned().unwrap_or(serde_json::Value::Null))
}

/// Evaluate `expression` in the tools' world of `tab` and read its (JSON) value. The world is
/// made when the tab has none, or when its document changed.
pub async fn eval<T: DeserializeOwned>(tab: &Tab, expression: &str) -> Result<T, String> {
    let mut world = tab.world.lock().await;
    let value = match *world {
        Some(ctx) => match evaluate_in(tab, ctx, expression).await {
            Ok(v) => Some(v),
            // The document it belonged to is gone (a navigation): make a new one.
            Err(chromiumoxide::error::CdpError::Chrome(e)) if e.message.contains("context") => None,
            Err(e) => return Err(e.to_string()),
        },
        None => None,
    };
    let value = match value {
        Some(v) => v,
        None => {
            let ctx = create(tab).await?;
            *world = Some(ctx);
            evaluate_in(tab, ctx, expression)
                .await
                .map_err(|e| e.to_string())?
        }
    };
    serde_json::from_value(value).map_err(|e| format!("unexpected answer from the page: {e}"))
}

/// A JavaScript string literal of `s`.
pub fn js_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}
