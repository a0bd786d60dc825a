//! `browser_session{action: open|close|list}`: the calling Ethan session's browser session, an
//! isolated browser context per tab (its own cookies, storage and cache). `close` wipes it,
//! every tab's network cut first. `list` shows this session's tabs only: another chat's
//! browsing is not this chat's business.

use super::hub::BrowserHub;
use super::{fail, home};
use crate::args::req_str;
use crate::ToolOutput;
use crate::{ErrorKind, Risk, Tool, ToolContext};
use crate::{ToolDecl, ToolError};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::sync::Arc;
use std::sync::LazyLock;
use std::time::Duration;

pub struct BrowserSession(pub Arc<BrowserHub>);

#[async_trait]
impl Tool for BrowserSession {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "browser_session",
                "Open, close or list this conversation's browser session (a real headless browser with \
                 its own cookies, for pages that need JavaScript, logins or clicks). `close` forgets \
                 everything it held. Use browser_page to navigate and read.",
                json!({
                    "type": "object",
                    "properties": {
                        "action": {"type": "string", "enum": ["open", "close", "list"]}
                    },
                    "required": ["action"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::ReadOnly)
            // It opens, closes or lists; it reads nothing of the owner's.
            .not_private()
            .timeout(Duration::from_secs(60))
        });
        &DECL
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let _busy = self.0.busy();
        let action = req_str(&args, "action")?;
        let key = ctx.session_key.as_str();
        self.0.note_taint(key, &ctx.taint);
        match action {
            "open" => {
                let existed = self.0.has_session(key).await;
                match self.0.current_tab(key, &home(ctx)).await {
                    Ok(tab) if existed => Ok(ToolOutput::new(format!(
                        "the browser session was already open (current tab {})",
                        tab.id
                    ))),
                    Ok(tab) => Ok(ToolOutput::new(format!(
                        "browser session opened with an empty tab {}; use browser_page \
                         {{action: goto, url}} to load a page",
                        tab.id
                    ))),
                    Err(e) => fail(e),
                }
            }
            "close" => {
                if self.0.close_session(key).await {
                    Ok(ToolOutput::new(
                        "browser session closed; its tabs, cookies and storage are gone",
                    ))
                } else {
                    Ok(ToolOutput::new("there was no browser session to close"))
                }
            }
            "list" => {
                if !self.0.has_session(key).await {
                    return Ok(ToolOutput::new(
                        "no browser session is open in this conversation",
                    ));
                }
                super::tab::list(&self.0, ctx).await
            }
            other => Err(ToolError::new(
                ErrorKind::Validation,
                format!("unknown action {other:?}; use open, close or list"),
            )),
        }
    }
}
