//! The consent step of the executor as a trait ([`ConsentGate`]): the executor asks it before a
//! call runs; the daemon's consent service implements it per channel. [`display`]: how every
//! approval shows a call's description (the same text on every interface).

pub mod display;

use crate::tool::{CallPlan, Tool, ToolContext, ToolResult};
use async_trait::async_trait;
use serde_json::Value;

/// Step 6: asks whether a call that passed validation and the replay guard may run, on `plan`,
/// the tool's own [`Tool::describe`] of this very call (worked out once by the executor, after
/// the call's assessment). Returns `Err(result)` (kind `denied`) to refuse it, or how the call
/// got its yes ([`Consented`]).
#[async_trait]
pub trait ConsentGate: Send + Sync {
    async fn check(
        &self,
        tool: &dyn Tool,
        args: &Value,
        plan: &CallPlan,
        ctx: &mut ToolContext,
    ) -> Result<Consented, ToolResult>;
}

/// How a call that may run got past the consent step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consented {
    /// Nobody was asked just now: the call needed no yes, or a session grant or a job's
    /// authorisation covered it.
    Unasked,
    /// The owner was asked and said yes, on the plan's description. Time passed while they
    /// decided, so the executor describes the call again before it runs and refuses it if the
    /// description changed.
    Asked,
}
