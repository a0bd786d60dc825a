//! The one consent rule: which questions a call asks, and which of them a session grant answers.
//!
//! A call can ask two separate questions:
//! - its **own** ([`CallPlan::consent`]): it has a side effect, is always asked (a dangerous
//!   command, a secret file), or acts on a site — with the grant it would earn, keyed by the tool
//!   and its [`CallPlan::scope`];
//! - **data leaving** ([`CallPlan::egress`]), once private data entered the session
//!   ([`ethan_core::tool::Taint`]) — with the grant keyed by the tool and the destination's scope.
//!
//! Each is answered only by a grant of its own kind and tool ([`Grant::covers`]): an approval of
//! data leaving never stands in for the tool's own question, and a tool's approval never covers
//! data leaving. So a tainted turn never asks less than a clean one: the clean turn's question
//! is still there, with one more beside it. When both are outstanding they are asked together,
//! in one approval that shows both; "approve for this session" then grants each. A
//! [`CallPlan::always`] call is asked every time and never granted.

use super::grants::{Grant, Grants};
use ethan_core::tool::CallPlan;
use ethan_core::tool::{Egress, Tool, ToolContext};

/// The questions a call asks, before or after the session's grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Questions {
    /// The call's own question (its description) and the grant it would earn.
    pub own: Option<(String, Grant)>,
    /// Data leaving: what first brought private data into the session, where the data goes,
    /// and the grant it would earn.
    pub egress: Option<(String, Egress, Grant)>,
    /// Asked every time, never granted.
    pub always: bool,
    /// The tool's own description of the call, shown beside an egress question even when its
    /// own question is granted.
    context: Option<String>,
}

impl Questions {
    /// What a call of `tool` whose plan is `plan` ([`Tool::describe`]) asks in `ctx`, before
    /// any grant; `None` when nothing.
    pub fn of(tool: &dyn Tool, plan: &CallPlan, ctx: &ToolContext) -> Option<Self> {
        let name = &tool.decl().name;
        let plan = plan.clone();
        let own = plan
            .consent
            .clone()
            .map(|d| (d, Grant::own(name, &plan.scope)));
        let egress = ctx.taint.source().and_then(|source| {
            plan.egress.map(|e| {
                let grant = Grant::egress(name, &e.scope);
                (source, e, grant)
            })
        });
        if own.is_none() && egress.is_none() {
            return None;
        }
        Some(Self {
            own,
            egress,
            always: plan.always,
            context: plan.consent,
        })
    }

    /// The questions left once the session's grants answered what they cover (an always-ask
    /// call keeps both).
    pub async fn outstanding(mut self, grants: &Grants, session_key: &str) -> Self {
        if self.always {
            return self;
        }
        if let Some((_, g)) = &self.own {
            if grants.is_granted(session_key, g).await {
                self.own = None;
            }
        }
        if let Some((_, _, g)) = &self.egress {
            if grants.is_granted(session_key, g).await {
                self.egress = None;
            }
        }
        self
    }

    /// Whether nothing is left to ask.
    pub fn answered(&self) -> bool {
        self.own.is_none() && self.egress.is_none()
    }

    /// The grants an "approve for this session" of these questions gives (none for an
    /// always-ask call).
    pub fn grants(&self) -> Vec<Grant> {
        if self.always {
            return Vec::new();
        }
        let own = self.own.iter().map(|(_, g)| g.clone());
        let egress = self.egress.iter().map(|(_, _, g)| g.clone());
        own.chain(egress).collect()
    }

    /// The approval text: why it asks and exactly what leaves, then what the call does.
    pub fn description(&self) -> String {
        match (&self.own, &self.egress) {
            (_, Some((source, e, _))) => {
                let mut d = format!(
                    "This conversation has read private data ({source}); this call sends data \
                     off the machine:\n{}",
                    e.destination
                );
                let own = self.own.as_ref().map(|(d, _)| d).or(self.context.as_ref());
                if let Some(own) = own.filter(|o| !o.trim().is_empty()) {
                    d.push('\n');
                    d.push_str(own);
                }
                d
            }
            (Some((d, _)), None) => d.clone(),
            (None, None) => String::new(),
        }
    }
}
