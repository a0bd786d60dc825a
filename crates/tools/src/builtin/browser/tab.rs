//! `browser_tab{action: new|close|list|switch, url?, tab?}`: the tabs of this conversation's
//! browser session. `new` with a `url` loads it (a navigation: it passes the egress guard and
//! counts as data leaving, like `web_fetch`). `close` cuts the tab's network before the tab
//! closes, so a page hears nothing of its closing through the network; `new`, `switch` and
//! `close` leave no read of another tab for an action to act on.

use super::hub::BrowserHub;
use super::{egress_of, fail, home, view};
use crate::args::{opt_u64, req_str};
use crate::{CallPlan, ToolDecl, ToolError, ToolOutput};
use crate::{Egress, ErrorKind, Risk, Tool, ToolContext};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::sync::Arc;
use std::sync::LazyLock;
use std::time::Duration;

pub struct BrowserTab(pub Arc<BrowserHub>);

fn no_such_tab() -> Result<ToolOutput, ToolError> {
    Err(ToolError::new(
        ErrorKind::Validation,
        "no such tab; browser_tab {action: list} shows the tabs",
    ))
}

/// The session's tabs, one line each (`* ` marks the current one).
pub(crate) async fn list(hub: &BrowserHub, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let tabs = match hub
        .session(&ctx.session_key, &home(ctx), |s| {
            (s.tabs.clone(), s.current)
        })
        .await
    {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    if tabs.0.is_empty() {
        return Ok(ToolOutput::new("the browser session has no tabs"));
    }
    let mut out = String::new();
    for t in &tabs.0 {
        let url = t.page.url().await.ok().flatten().unwrap_or_default();
        let title = t.page.get_title().await.ok().flatten().unwrap_or_default();
        let mark = if Some(t.id) == tabs.1 { "* " } else { "  " };
        out.push_str(&format!("{mark}tab {}: {title} <{url}>\n", t.id));
    }
    Ok(ToolOutput::new(out.trim_end().to_string()))
}

#[async_trait]
impl Tool for BrowserTab {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "browser_tab",
                "Tabs of this conversation's browser session: `new` (optionally loading `url`), `close` \
                 (`tab`, default the current one), `list`, `switch` (`tab`). browser_page acts on the \
                 current tab.",
                json!({
                    "type": "object",
                    "properties": {
                        "action": {"type": "string", "enum": ["new", "close", "list", "switch"]},
                        "url": {"type": "string", "description": "new: the http(s) URL to load"},
                        "tab": {"type": "integer", "minimum": 1, "description": "close/switch: the tab number"}
                    },
                    "required": ["action"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::ReadOnly)
            // What the pages show is the web's; a page of the owner's network marks the turn through
            // the egress guard instead ([`view::mark_private`]).
            .not_private()
            .timeout(Duration::from_secs(60))
        });
        &DECL
    }
    fn describe(&self, args: &Value, ctx: &ToolContext) -> CallPlan {
        CallPlan {
            egress: self.egress(args, ctx),
            ..CallPlan::of(self.decl(), args)
        }
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let _busy = self.0.busy();
        self.0.note_taint(&ctx.session_key, &ctx.taint);
        let r = self.act(&args, ctx).await;
        view::mark_private(&self.0, &ctx.session_key, &ctx.taint).await;
        r
    }
}

impl BrowserTab {
    fn egress(&self, args: &Value, _ctx: &ToolContext) -> Option<Egress> {
        let url = args.get("url").and_then(Value::as_str)?;
        Some(egress_of("new", url))
    }
}

impl BrowserTab {
    async fn act(&self, args: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let action = req_str(args, "action")?;
        let which = match opt_u64(args, "tab") {
            Ok(t) => t.map(|t| t as u32),
            Err(e) => return Err(e),
        };
        let key = ctx.session_key.as_str();
        let home = home(ctx);
        match action {
            "new" => {
                let tab = match self.0.new_tab(key, &home).await {
                    Ok(t) => t,
                    Err(e) => return fail(e),
                };
                match args.get("url").and_then(Value::as_str) {
                    Some(url) => super::navigate::goto(&self.0, ctx, tab, url).await,
                    None => {
                        self.0.clear_view(key);
                        Ok(ToolOutput::new(format!(
                            "tab {} opened (empty) and current",
                            tab.id
                        )))
                    }
                }
            }
            "list" => list(&self.0, ctx).await,
            "switch" => {
                let Some(id) = which else {
                    return Err(ToolError::new(ErrorKind::Validation, "switch needs `tab`"));
                };
                let found = self
                    .0
                    .session(key, &home, |s| {
                        let tab = s.tabs.iter().find(|t| t.id == id).cloned()?;
                        s.current = Some(id);
                        Some(tab)
                    })
                    .await;
                match found {
                    Err(e) => fail(e),
                    Ok(None) => no_such_tab(),
                    Ok(Some(t)) => {
                        self.0.clear_view(key);
                        match view::read(&self.0, key, &t, &ctx.taint).await {
                            Ok(text) => {
                                Ok(ToolOutput::new(format!("switched to tab {id}\n\n{text}")))
                            }
                            Err(e) => Err(ToolError::new(ErrorKind::Dependency, e)),
                        }
                    }
                }
            }
            // Its network is cut before it closes: a page hears nothing of it through the
            // network (in a session that read private data it could not anyway).
            "close" => match self.0.close_tab(key, &home, which).await {
                Err(e) => fail(e),
                Ok(None) => no_such_tab(),
                Ok(Some(id)) => Ok(ToolOutput::new(format!("tab {id} closed"))),
            },
            other => Err(ToolError::new(
                ErrorKind::Validation,
                format!("unknown action {other:?}; use new, close, list or switch"),
            )),
        }
    }
}
