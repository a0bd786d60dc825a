//! The adapter: one MCP server tool as a [`Tool`] of the registry, so it passes the same
//! validation, policy, consent, replay guard, time limit and audit as a built-in.
//!
//! Risk comes from the tool's `annotations` (MCP spec 2025-06-18, "Tools › Tool Annotations"),
//! read conservatively, because a server's hints are claims, not guarantees:
//! - `readOnlyHint: true` → [`Risk::ReadOnly`] (no question);
//! - else `destructiveHint: true` → [`Risk::Dangerous`], asked every time
//!   ([`CallPlan::always`]);
//! - anything else → [`Risk::Write`], asked once per session scope (`mcp__<server>__<tool>`).
//!
//! A tool without annotations, or whose `openWorldHint` is not `false` (the spec's default is
//! `true`), can carry data off the machine: [`CallPlan::egress`] names the server, so after private
//! data entered a turn such a call asks (the taint rule). Every MCP tool's output counts as
//! private data ([`ToolDecl::reads_private`]): a server is typically the owner's database, tracker
//! or mailbox, and the daemon cannot tell which. Consent texts show server, tool and the
//! arguments with every configured secret redacted.

use super::server::ServerHandle;
use crate::tools::redact::Redactor;
use crate::tools::{
    CallPlan, Egress, ErrorKind, Risk, Tool, ToolContext, ToolDecl, ToolError, ToolOutput,
};
use async_trait::async_trait;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// The hints of a tool's `annotations` object that decide its risk; `None`: absent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hints {
    /// Whether the tool had an `annotations` object at all.
    pub present: bool,
    pub read_only: Option<bool>,
    pub destructive: Option<bool>,
    pub open_world: Option<bool>,
}

impl Hints {
    /// Read `annotations` (any JSON; a non-object counts as absent).
    pub fn from_annotations(a: Option<&Value>) -> Self {
        let Some(a) = a.filter(|a| a.is_object()) else {
            return Self::default();
        };
        let b = |k: &str| a.get(k).and_then(Value::as_bool);
        Self {
            present: true,
            read_only: b("readOnlyHint"),
            destructive: b("destructiveHint"),
            open_world: b("openWorldHint"),
        }
    }

    /// The risk, as the module docs say.
    pub fn risk(&self) -> Risk {
        // Conservatively: a tool that says it is both read-only and destructive is destructive.
        if self.destructive == Some(true) {
            Risk::Dangerous
        } else if self.read_only == Some(true) {
            Risk::ReadOnly
        } else {
            Risk::Write
        }
    }

    /// Whether a call can reach outside the machine: no annotations, or `openWorldHint` not
    /// `false`.
    pub fn open_world(&self) -> bool {
        !self.present || self.open_world != Some(false)
    }
}

/// One tool of one MCP server, registered as `mcp__<server>__<tool>`.
pub struct McpTool {
    /// The registered name, the description, the `inputSchema` (`$schema` removed: the
    /// registry reads it as Draft 7), the risk of the hints, `mcp.servers.<name>.timeout_secs`
    /// ([`McpTool::declare`]).
    pub decl: ToolDecl,
    /// The server's own name for the tool (sent in `tools/call`).
    pub remote: String,
    pub hints: Hints,
    pub handle: Arc<ServerHandle>,
    pub redactor: Arc<Redactor>,
}

impl McpTool {
    /// The declaration of a server's tool: its output is private (every MCP tool's is), its
    /// risk is the hints'.
    pub fn declare(
        name: String,
        description: String,
        parameters: Value,
        hints: Hints,
        timeout: Duration,
    ) -> ToolDecl {
        ToolDecl::new(name, description, parameters)
            .risk(hints.risk())
            .timeout(timeout)
    }

    fn server(&self) -> &str {
        &self.handle.name
    }

    fn shown_args(&self, args: &Value) -> String {
        self.redactor.value(args).to_string()
    }
}

#[async_trait]
impl Tool for McpTool {
    fn decl(&self) -> &ToolDecl {
        &self.decl
    }
    fn describe(&self, args: &Value, _ctx: &ToolContext) -> CallPlan {
        let risk = self.decl.risk;
        let consent = risk.has_side_effects().then(|| {
            format!(
                "the MCP server {} runs its tool {} with {}",
                self.server(),
                self.decl.name,
                self.shown_args(args)
            )
        });
        let egress = self.hints.open_world().then(|| Egress {
            destination: format!(
                "the MCP server {}, which can reach outside this machine: its tool {} with {}",
                self.server(),
                self.decl.name,
                self.shown_args(args)
            ),
            scope: format!("egress:mcp:{}", self.server()),
        });
        CallPlan {
            consent,
            always: risk == Risk::Dangerous,
            egress,
            ..CallPlan::of(self.decl(), args)
        }
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let arguments = match args {
            Value::Object(m) => Some(m),
            Value::Null => None,
            other => {
                return Err(ToolError::new(
                    ErrorKind::Validation,
                    format!("the arguments must be a JSON object, not {other}"),
                ))
            }
        };
        let (result, pictures) = self
            .handle
            .call_with_pictures(&self.remote, arguments)
            .await;
        match &ctx.ethan_home {
            Some(home) => {
                let stem: String = ctx
                    .execution_id
                    .chars()
                    .filter(char::is_ascii_alphanumeric)
                    .take(8)
                    .collect();
                result.map(|o| super::pictures::attach(o, pictures, home, &stem))
            }
            None => result,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn risk_follows_the_annotations_conservatively() {
        let h = |v: Value| Hints::from_annotations(Some(&v));
        assert_eq!(h(json!({"readOnlyHint": true})).risk(), Risk::ReadOnly);
        // Contradictory claims: the more dangerous one wins.
        assert_eq!(
            h(json!({"readOnlyHint": true, "destructiveHint": true})).risk(),
            Risk::Dangerous
        );
        assert_eq!(h(json!({"destructiveHint": true})).risk(), Risk::Dangerous);
        assert_eq!(h(json!({"readOnlyHint": false})).risk(), Risk::Write);
        assert_eq!(h(json!({})).risk(), Risk::Write);
        assert_eq!(Hints::from_annotations(None).risk(), Risk::Write);
        assert_eq!(h(json!("junk")).risk(), Risk::Write);
        assert_eq!(h(json!({"readOnlyHint": "yes"})).risk(), Risk::Write);
    }

    #[test]
    fn consent_and_egress_name_the_server_and_redact_arguments() {
        let hints = Hints::from_annotations(None);
        let (name, schema) = ("mcp__srv__send".to_string(), json!({"type": "object"}));
        let t = McpTool {
            decl: McpTool::declare(name, String::new(), schema, hints, Duration::from_secs(60)),
            remote: "send".into(),
            hints,
            handle: Arc::new(super::super::server::ServerHandle::new("srv")),
            redactor: Arc::new(Redactor::new(vec!["hunter2-secret".into()])),
        };
        let ctx = ToolContext::local(std::env::temp_dir());
        let args = json!({"text": "my hunter2-secret"});
        let plan = t.describe(&args, &ctx);
        let c = plan.consent.unwrap();
        assert!(c.contains("srv") && c.contains("send"), "{c}");
        assert!(!c.contains("hunter2-secret"), "{c}");
        let e = plan.egress.unwrap();
        assert_eq!(e.scope, "egress:mcp:srv");
        assert!(e
            .destination
            .contains("the MCP server srv, which can reach outside this machine"));
        assert!(!e.destination.contains("hunter2-secret"));
        assert!(t.decl.reads_private && !plan.always);
        assert_eq!(t.decl.timeout, Duration::from_secs(60));
    }

    #[test]
    fn open_world_unless_said_otherwise() {
        assert!(Hints::from_annotations(None).open_world());
        assert!(Hints::from_annotations(Some(&json!({}))).open_world());
        assert!(Hints::from_annotations(Some(&json!({"openWorldHint": true}))).open_world());
        assert!(!Hints::from_annotations(Some(&json!({"openWorldHint": false}))).open_world());
    }
}
