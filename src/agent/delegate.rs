//! Sub-agents: the [`Delegator`] each turn lends its `delegate` tool. A child is a turn of its
//! own, in a session of its own (`<parent session>/sub<depth>-<id>`, kept in the store; `ethan
//! audit --session` shows its calls and transcript), with:
//! - tools ⊆ the parent's: the tools the parent's turn may use (those sent up front and those it
//!   could find with `find_tools`), narrowed by the named agent, and only read-only ones unless
//!   the owner approved the `delegate` call with the list of tools that change things shown;
//! - depth ≤ [`MAX_DEPTH`] (a child at the deepest level has no `delegate`), at most
//!   [`MAX_CHILDREN`] at once per turn, its agent's iteration cap, the tool's time limit;
//! - the parent's person and chat: its consent requests go to the same person, saying they come
//!   from a sub-agent ([`ethan_core::tool::ToolContext::sub_agent`]); its calls are audited
//!   under a trace id that starts with the parent's;
//! - the parent's cancellation: `/stop` stops the children too.
//!
//! Only the child's final answer returns to the parent, as the `delegate` call's result.

use super::{Agent, ChildTurn, TurnInput, TurnOutcome};
use crate::tools::{ToolError, ToolOutput};
use ethan_core::tool::{DelegateRequest, Delegator, ErrorKind, ToolContext};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// The tool's name.
pub const TOOL: &str = "delegate";
/// How deep sub-agents nest: a child of a child is the last.
pub const MAX_DEPTH: u8 = 2;
/// Children of one turn running at once.
pub const MAX_CHILDREN: usize = 4;

/// The sub-agents of one turn.
pub struct Children {
    agent: Arc<Agent>,
    parent: TurnInput,
    /// The parent turn's tools.
    allowed: BTreeSet<String>,
    cancel: CancellationToken,
    running: Arc<Semaphore>,
    started: AtomicU32,
}

impl Children {
    pub fn new(
        agent: Arc<Agent>,
        parent: &TurnInput,
        allowed: &BTreeSet<String>,
        cancel: &CancellationToken,
    ) -> Self {
        Self {
            agent,
            parent: parent.clone(),
            allowed: allowed.clone(),
            cancel: cancel.clone(),
            running: Arc::new(Semaphore::new(MAX_CHILDREN)),
            started: AtomicU32::new(0),
        }
    }

    fn depth(&self) -> u8 {
        self.parent.child.as_ref().map_or(0, |c| c.depth)
    }

    fn has_side_effects(&self, tool: &str) -> bool {
        let registry = self.agent.executor.registry();
        registry
            .get(tool)
            .is_some_and(|t| t.decl().risk.has_side_effects())
    }
}

#[async_trait::async_trait]
impl Delegator for Children {
    fn plan(
        &self,
        requested: Option<&[String]>,
        agent: Option<&str>,
    ) -> Result<(Vec<String>, Vec<String>), String> {
        let depth = self.depth();
        if depth >= MAX_DEPTH {
            return Err(format!(
                "a sub-agent at depth {depth} cannot start another (at most {MAX_DEPTH} levels)"
            ));
        }
        if let Some(name) = agent {
            if self.agent.agents.named(name).is_none() {
                let mut known = vec![super::agents::DEFAULT];
                known.extend(self.agent.agents.names());
                return Err(format!(
                    "there is no agent named {name:?} (the agents are: {})",
                    known.join(", ")
                ));
            }
        }
        let mut base = self.allowed.clone();
        if depth + 1 >= MAX_DEPTH {
            base.remove(TOOL);
        }
        let tools: Vec<String> = match requested {
            Some(list) => {
                let mut out = Vec::new();
                for t in list {
                    if !base.contains(t) {
                        return Err(format!(
                            "{t:?} is not among the tools of this conversation, so a sub-agent \
                             cannot have it (they are: {})",
                            base.iter().cloned().collect::<Vec<_>>().join(", ")
                        ));
                    }
                    if !out.contains(t) {
                        out.push(t.clone());
                    }
                }
                out
            }
            // By default: the read-only ones.
            None => base
                .iter()
                .filter(|t| !self.has_side_effects(t))
                .cloned()
                .collect(),
        };
        let side = tools
            .iter()
            .filter(|t| self.has_side_effects(t))
            .cloned()
            .collect();
        Ok((tools, side))
    }

    async fn run(
        &self,
        request: DelegateRequest,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let (mut tools, side) = match self.plan(request.tools.as_deref(), request.agent.as_deref())
        {
            Ok(p) => p,
            Err(why) => return Err(ToolError::new(ErrorKind::Validation, why)),
        };
        if !request.approved {
            tools.retain(|t| !side.contains(t));
        }
        let Ok(_permit) = self.running.clone().try_acquire_owned() else {
            return Err(ToolError::new(
                ErrorKind::Denied,
                format!(
                    "{MAX_CHILDREN} sub-agents are already running in this turn; wait for their \
                     answers before starting another"
                ),
            ));
        };
        let n = self.started.fetch_add(1, Ordering::Relaxed) + 1;
        let depth = self.depth() + 1;
        let id = uuid::Uuid::new_v4().simple().to_string();
        let session_key = format!("{}/sub{depth}-{}", self.parent.session_key, &id[..8]);
        let name = request
            .agent
            .clone()
            .unwrap_or_else(|| super::agents::DEFAULT.to_string());
        let label = format!("sub-agent {name:?} (depth {depth})");
        let child = TurnInput {
            session_key: session_key.clone(),
            text: request.task.clone(),
            trace_id: format!("{}/{n}", self.parent.trace_id),
            // Its text is not streamed into the parent's answer; its consent asks in the chat.
            events: None,
            model: None,
            // The task may carry what the parent read: private data in the parent makes the
            // child's calls that send data out ask, as the parent's would.
            images: Vec::new(),
            private_input: ctx
                .taint
                .source()
                .map(|s| format!("{s}, in the conversation that started this sub-agent")),
            // Marked anyway: a sub-agent's task is the parent model's words (see run_turn).
            outside_input: None,
            child: Some(ChildTurn {
                agent: request.agent.clone(),
                tools: tools.iter().cloned().collect(),
                depth,
                label: label.clone(),
            }),
            ..self.parent.clone()
        };
        tracing::info!(
            "{label} started in {session_key} with tools [{}]",
            tools.join(", ")
        );
        let cancel = self.cancel.child_token();
        let outcome = Box::pin(self.agent.run_turn_with_cards(&child, &cancel))
            .await
            .outcome;
        let transcript = format!("[{label}; its transcript: ethan audit --session {session_key}]");
        match outcome {
            TurnOutcome::Answer(text) => Ok(ToolOutput::new(format!("{text}\n\n{transcript}"))),
            TurnOutcome::IterationCap(text) => Ok(ToolOutput::new(format!(
                "(the sub-agent reached its step limit)\n{text}\n\n{transcript}"
            ))),
            TurnOutcome::Stopped => Err(ToolError::new(
                ErrorKind::Denied,
                format!("the sub-agent was stopped before it answered {transcript}"),
            )),
            TurnOutcome::Failed { user_message, .. } => Err(ToolError::new(
                ErrorKind::Dependency,
                format!("the sub-agent failed: {user_message} {transcript}"),
            )),
        }
    }
}
