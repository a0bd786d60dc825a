//! What a tool declares once ([`ToolDecl`]: its name, schema, risk, privacy, limits) and what
//! one call of it will do, for approval ([`CallPlan`]).
//!
//! The defaults deny: a declaration that says nothing more than its name, description and
//! schema is a side-effecting ([`Risk::Write`]) tool whose output is private, so its calls ask
//! and, once its output entered a turn, later calls that carry data out ask too.

use super::{Egress, Risk, ALL_INTERFACES};
use crate::channel::ChannelKind;
use serde_json::Value;
use std::time::Duration;

/// The static part of a tool, built once per tool: what the model is told and what the
/// engine's rules read. Build it with [`ToolDecl::new`] and the setters below.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDecl {
    /// `^[A-Za-z0-9_-]{1,64}$`.
    pub name: String,
    /// One or two sentences the model reads.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
    /// How much a call can change the world. Default: [`Risk::Write`] (side effects: it asks).
    pub risk: Risk,
    /// Whether the output is private data: it reads the machine or the owner's accounts
    /// (files, commands, search, knowledge, skills, Lark history and calendar, an MCP server).
    /// Once such a call ran in a session, successful or not, later calls that carry data out
    /// ask. Default: yes.
    pub reads_private: bool,
    /// Sent to the model up front (otherwise found through `find_tools`). Default: no.
    pub fast_path: bool,
    /// The interfaces on which this tool exists at all. Default: every one.
    pub interfaces: &'static [ChannelKind],
    /// Whether the model must get the output verbatim (ids, a file asked for exactly, a card,
    /// a sent message): a long output is then cut (head and tail), never replaced by a
    /// summary. Default: no.
    pub no_compress: bool,
    /// Time limit of one call ([`CallPlan::timeout`] may set another for given arguments).
    /// Default: 30 s.
    pub timeout: Duration,
    /// Retries after a failure, honoured for read-only tools only. Default: none.
    pub max_retries: u32,
}

impl ToolDecl {
    /// A tool with every default: side effects, private output, on every interface, found
    /// through `find_tools`, 30 s, no retries.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters,
            risk: Risk::Write,
            reads_private: true,
            fast_path: false,
            interfaces: ALL_INTERFACES,
            no_compress: false,
            timeout: Duration::from_secs(30),
            max_retries: 0,
        }
    }
    pub fn risk(mut self, risk: Risk) -> Self {
        self.risk = risk;
        self
    }
    /// Declares the output not private (it is the web's, or says only what the call did).
    pub fn not_private(mut self) -> Self {
        self.reads_private = false;
        self
    }
    pub fn fast_path(mut self) -> Self {
        self.fast_path = true;
        self
    }
    pub fn interfaces(mut self, interfaces: &'static [ChannelKind]) -> Self {
        self.interfaces = interfaces;
        self
    }
    pub fn no_compress(mut self) -> Self {
        self.no_compress = true;
        self
    }
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = retries;
        self
    }
}

/// What one call will do, as consent and the executor need it ([`crate::tool::Tool::describe`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallPlan {
    /// Whether the call needs consent: the description of what it will do, or `None`.
    /// Default: side-effect tools ask (`"<name> <args>"`), read-only tools do not.
    pub consent: Option<String>,
    /// What an "approve for this session" grant covers. Default: the tool name.
    pub scope: String,
    /// Ask every time and never remember (dangerous commands, secret files). Default: no.
    pub always: bool,
    /// Where the call would carry data off the machine, if it can (network fetches, searches,
    /// messages to others). After private data entered the turn, such a call asks the owner,
    /// showing [`Egress::destination`]. Default: it cannot.
    pub egress: Option<Egress>,
    /// The time limit for these arguments (e.g. the shell's own `timeout` argument). Default:
    /// [`ToolDecl::timeout`].
    pub timeout: Duration,
    /// What the call would act on beyond the words of its question: the files a protected path
    /// leads to, by device and inode. Not shown; after the owner said yes, the call is refused
    /// when this changed (a name re-linked to another file reads the same). Default: nothing.
    pub identity: Option<String>,
}

impl CallPlan {
    /// The plan of a call of a tool declared as `decl` that says nothing about its arguments.
    pub fn of(decl: &ToolDecl, args: &Value) -> Self {
        Self {
            consent: decl
                .risk
                .has_side_effects()
                .then(|| format!("{} {}", decl.name, args)),
            scope: decl.name.clone(),
            always: false,
            egress: None,
            timeout: decl.timeout,
            identity: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A tool that declares nothing beyond its name is private and side-effecting, and its
    /// calls ask, under the tool's name, once each time only when always-ask.
    #[test]
    fn a_bare_declaration_denies_by_default() {
        let d = ToolDecl::new("t", "d", json!({"type": "object"}));
        assert!(d.risk.has_side_effects() && d.reads_private);
        assert!(!d.fast_path && !d.no_compress && d.max_retries == 0);
        assert_eq!(d.interfaces, ALL_INTERFACES);
        let p = CallPlan::of(&d, &json!({"a": 1}));
        assert_eq!(p.consent.as_deref(), Some(r#"t {"a":1}"#));
        assert_eq!((p.scope.as_str(), p.always, p.egress), ("t", false, None));
        assert_eq!(p.timeout, Duration::from_secs(30));
        let r = d.risk(Risk::ReadOnly);
        assert_eq!(CallPlan::of(&r, &json!({})).consent, None);
    }
}
