//! `delegate{task, agent?, tools?}`: hand a self-contained task to a sub-agent and get its final
//! answer back. The sub-agent runs through the turn's [`ethan_core::tool::Delegator`] (the agent
//! loop; the agent's `delegate` module sets its limits). A child gets read-only tools unless
//! the call names tools that change things: then the owner is asked first, shown that list (and
//! each change the child makes still asks on its own). Not offered to non-owners.

use crate::{CallPlan, ToolDecl};
use crate::{ErrorKind, Risk, Tool, ToolContext};
use crate::{ToolError, ToolOutput};
use async_trait::async_trait;
use ethan_core::tool::{DelegateRequest, CONSENTED};
use serde_json::{json, Value};
use std::sync::LazyLock;
use std::time::Duration;

/// The longest a sub-agent may work, in seconds.
pub const TIMEOUT_SECS: u64 = 600;

pub struct Delegate;

fn request(args: &Value) -> DelegateRequest {
    DelegateRequest {
        task: args
            .get("task")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        agent: args
            .get("agent")
            .and_then(Value::as_str)
            .map(str::to_string),
        tools: args.get("tools").and_then(Value::as_array).map(|a| {
            a.iter()
                .filter_map(|t| t.as_str().map(str::to_string))
                .collect()
        }),
        approved: false,
    }
}

#[async_trait]
impl Tool for Delegate {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "delegate",
                "Hand a self-contained task to a sub-agent that works on its own with a restricted set of \
                 tools (read-only unless you list others) and returns only its final answer. Write the \
                 task so it can be done without this conversation.",
                json!({
                    "type": "object",
                    "properties": {
                        "task": {"type": "string", "minLength": 1, "description": "What to do and what to answer."},
                        "agent": {"type": "string", "description": "A configured agent to run it (default: the default agent)."},
                        "tools": {
                            "type": "array", "items": {"type": "string"}, "maxItems": 64,
                            "description": "The tools it may use, from yours (default: your read-only tools)."
                        }
                    },
                    "required": ["task"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::ReadOnly)
            // Private (the default): the child's answer may carry what it read.
            .timeout(Duration::from_secs(TIMEOUT_SECS))
        });
        &DECL
    }
    fn describe(&self, args: &Value, ctx: &ToolContext) -> CallPlan {
        CallPlan {
            consent: self.consent_check(args, ctx),
            always: self.consent_always(args, ctx),
            ..CallPlan::of(self.decl(), args)
        }
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let Some(delegator) = ctx.services.delegator.clone() else {
            return Err(ToolError::new(
                ErrorKind::Dependency,
                "sub-agents are not available here",
            ));
        };
        let mut r = request(&args);
        if r.task.trim().is_empty() {
            return Err(ToolError::new(ErrorKind::Validation, "task is empty"));
        }
        r.approved = ctx.approved_actions.iter().any(|a| a == CONSENTED);
        delegator.run(r, ctx).await
    }
}

impl Delegate {
    fn consent_check(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
        let delegator = ctx.services.delegator.as_ref()?;
        let r = request(args);
        let (tools, side) = delegator
            .plan(r.tools.as_deref(), r.agent.as_deref())
            .ok()?;
        if side.is_empty() {
            return None;
        }
        let agent = r
            .agent
            .map(|a| format!(" (agent {a:?})"))
            .unwrap_or_default();
        Some(format!(
            "start a sub-agent{agent} that may use tools that change things: {} (each change it \
             makes still asks you); all its tools: {}; its task: {}",
            side.join(", "),
            tools.join(", "),
            r.task
        ))
    }
    fn consent_always(&self, _args: &Value, _ctx: &ToolContext) -> bool {
        // Each tool list is its own decision: never "approved for the session".
        true
    }
}
