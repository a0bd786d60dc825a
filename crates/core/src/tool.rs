//! What a tool is ([`Tool`], declared by a [`ToolDecl`]), what it gets ([`ToolContext`]) and
//! returns ([`ToolOutput`] or [`ToolError`]), and how a turn tracks private data ([`Taint`]) and
//! data leaving the machine ([`Egress`]).
//!
//! Every failure is a [`ToolError`] with an [`ErrorKind`] and a text the model can act on.

pub use crate::assessment::Assessment;
use crate::channel::{ChannelKind, ChatRef};
use crate::clock::ClockRef;
use crate::store::StorageRef;
use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;
use std::path::PathBuf;

mod decl;
mod outcome;

pub use decl::{CallPlan, ToolDecl};
pub use outcome::{ToolError, ToolOutput, ToolResult};

/// The `approved_actions` entry set when the owner approved an always-ask call on a protected
/// path (`$ETHAN_HOME`, credential places, secret-looking files); file tools then let it through.
pub const PROTECTED_PATHS_APPROVED: &str = "protected_paths";

/// The `approved_actions` entry set when a call went through consent and was allowed: the owner
/// approved it (once, or by a session grant) or an unattended job was authorised for the tool.
/// A shell command without it runs offline.
pub const CONSENTED: &str = "consented";

/// How much a tool can change the world. A tool has side effects exactly when its risk is not
/// `ReadOnly`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    ReadOnly,
    Write,
    Exec,
    Dangerous,
}

impl Risk {
    pub fn has_side_effects(self) -> bool {
        self != Risk::ReadOnly
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::ReadOnly => "read_only",
            Risk::Write => "write",
            Risk::Exec => "exec",
            Risk::Dangerous => "dangerous",
        }
    }
}

/// Why a call failed, for the model and the audit log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The arguments were malformed or did not match the schema.
    Validation,
    /// Policy, consent or the replay guard refused the call.
    Denied,
    /// The call ran out of time.
    Timeout,
    /// Something the tool relies on failed (a file system error, a remote service).
    Dependency,
    /// A bug or broken invariant inside the daemon.
    Internal,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Validation => "validation",
            ErrorKind::Denied => "denied",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Dependency => "dependency",
            ErrorKind::Internal => "internal",
        }
    }
}

/// What a running tool knows about its call. Trust fields (`is_owner`, `unattended`) are set by
/// the daemon only, never from a platform payload or the model.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// Unique per call.
    pub execution_id: String,
    /// One per turn.
    pub trace_id: String,
    pub session_key: String,
    pub channel: ChannelKind,
    pub chat_id: String,
    pub user_id: String,
    pub is_owner: bool,
    /// 1-based attempt number (retries of read-only tools).
    pub attempt: u32,
    pub idempotency_key: String,
    pub unattended: bool,
    /// For unattended runs: the side-effect tools the job may use.
    pub allowed_tools: Option<Vec<String>>,
    /// Where relative paths resolve and commands run (`tools.workspace`).
    pub workspace: PathBuf,
    /// `$ETHAN_HOME`, which tools may not touch outside the workspace (`None` in tests that do
    /// not care).
    pub ethan_home: Option<PathBuf>,
    /// The tools this turn may use (for `find_tools`).
    pub catalog: std::sync::Arc<[ToolSummary]>,
    /// The chat the turn answers in (where approvals are asked); `None` off-chat.
    pub chat: Option<ChatRef>,
    /// What consent approved beyond the call itself (e.g. `protected_paths` after an always-ask
    /// approval of a secret file). Set by the consent step only.
    pub approved_actions: Vec<String>,
    /// The turn's live event stream (web consent asks there); `None` elsewhere.
    pub events: Option<crate::event::EventSink>,
    /// Whether private data has entered this turn (shared by every call of the turn).
    pub taint: Taint,
    /// The tool's own assessment of this call ([`Tool::assess`]), set by the executor before
    /// consent; `None` before that, and for tools that assess nothing.
    pub assessment: Option<Assessment>,
    /// The store and the clock the daemon lends its tools.
    pub services: Services,
    /// The model that proposed the call (for the audit); empty outside a model turn.
    pub model: String,
    /// Set when the call comes from a sub-agent (`delegate`): who it is, as approvals show it
    /// (e.g. `sub-agent "research" (depth 1)`); `None` for the person's own turn.
    pub sub_agent: Option<String>,
}

/// What the daemon lends a tool beyond the call: the store (`None` where there is none, e.g. a
/// benchmark) and the clock. A tool never opens the daemon's database itself.
#[derive(Clone)]
pub struct Services {
    pub store: Option<StorageRef>,
    pub clock: ClockRef,
    /// Runs sub-agents for `delegate` (the agent loop of this turn); `None` where there is none.
    pub delegator: Option<std::sync::Arc<dyn Delegator>>,
    /// Asked before each call with side effects runs; `None`: the turn may always act.
    pub fence: Option<std::sync::Arc<dyn Fence>>,
    /// What the sandbox found at start (the default: nothing probed, every command asks).
    pub sandbox: std::sync::Arc<crate::sandbox::SandboxSettings>,
}

impl Default for Services {
    /// No store; the system clock; no sub-agents; no fence; no sandbox probed.
    fn default() -> Self {
        Self {
            store: None,
            clock: crate::clock::system(),
            delegator: None,
            fence: None,
            sandbox: Default::default(),
        }
    }
}

/// Whether a turn may still act. With replicas sharing a store, a turn runs while its replica
/// holds the session's lease; a replica that lost it (paused, or cut off from the database,
/// past the lease) must not cause a side effect for that turn: another replica runs it.
#[async_trait]
pub trait Fence: Send + Sync + std::fmt::Debug {
    /// `Err(why)` when the turn may no longer act (it is then cancelled); asks the store.
    async fn check(&self) -> Result<(), String>;
}

/// What `delegate` asks for: a task for a child agent, optionally a configured agent to run it
/// and the tools it may use; `approved` when the owner approved the call with that tool list
/// shown (only then may the child get tools with side effects).
#[derive(Debug, Clone, PartialEq)]
pub struct DelegateRequest {
    pub task: String,
    pub agent: Option<String>,
    pub tools: Option<Vec<String>>,
    pub approved: bool,
}

/// Runs sub-agents: the daemon's agent loop gives each turn one ([`Services::delegator`]).
#[async_trait]
pub trait Delegator: Send + Sync {
    /// The tools a child of this turn would get for `requested` (`None`: the default set),
    /// and which of them have side effects; `Err` says why the request cannot be met.
    fn plan(
        &self,
        requested: Option<&[String]>,
        agent: Option<&str>,
    ) -> Result<(Vec<String>, Vec<String>), String>;
    /// Run a child to its end and return its final answer as the tool's result.
    async fn run(
        &self,
        request: DelegateRequest,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError>;
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services")
            .field("store", &self.store.as_ref().map(|_| "…"))
            .finish_non_exhaustive()
    }
}

/// Whether private data has entered a turn: the output of a tool that reads the machine or the
/// owner's accounts ([`ToolDecl::reads_private`]), in this turn or earlier in the session (a
/// session stays marked until `/new`).
/// Once set, a call that can carry data off the machine ([`CallPlan::egress`]) asks the owner.
/// Clones share the flag; the first source is kept, for the approval text.
///
/// It also keeps, apart, whether text from outside the conversation reached the turn
/// ([`Taint::mark_untrusted`]: a tool's output, a fetched page, a file, an MCP result), which a
/// write to the person's memory must not take as the person's own words.
///
/// A turn's taint knows its session ([`Taint::of_session`]): the moment private data first
/// enters, every hook of the session's [`TaintHooks`] hears the session's key (the browser cuts
/// the session's pages off the network then, before anything that depends on the data can
/// happen).
#[derive(Debug, Clone, Default)]
pub struct Taint(std::sync::Arc<TaintState>);

#[derive(Debug, Default)]
struct TaintState {
    marks: std::sync::Mutex<Marks>,
    /// The session's key and who hears when private data first enters it.
    session: Option<(String, TaintHooks)>,
}

/// The first source of each kind of text that entered a turn.
#[derive(Debug, Default)]
struct Marks {
    private: Option<String>,
    untrusted: Option<String>,
}

type TaintHook = Box<dyn Fn(&str) -> bool + Send + Sync>;

/// What hears that private data entered a session: one list, owned by whoever builds the
/// turns (the tool registry, whose browser registers here) and given to each turn's
/// [`Taint::of_session`]. Clones share the list.
#[derive(Clone, Default)]
pub struct TaintHooks(std::sync::Arc<std::sync::Mutex<Vec<TaintHook>>>);

impl std::fmt::Debug for TaintHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaintHooks").finish_non_exhaustive()
    }
}

impl TaintHooks {
    fn list(&self) -> std::sync::MutexGuard<'_, Vec<TaintHook>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Call `hook` with the session key whenever private data first enters a turn of a session
    /// (a [`Taint::of_session`] given these hooks), at that moment. The hook answers whether it
    /// is still wanted (`false`: it is dropped, e.g. when what it served is gone). A hook must
    /// not register another.
    pub fn on_taint(&self, hook: impl Fn(&str) -> bool + Send + Sync + 'static) {
        self.list().push(Box::new(hook));
    }
}

impl Taint {
    /// The taint of a turn of the session `session_key`; `hooks` hear when private data first
    /// enters it.
    pub fn of_session(session_key: &str, hooks: &TaintHooks) -> Self {
        Self(std::sync::Arc::new(TaintState {
            marks: std::sync::Mutex::new(Marks::default()),
            session: Some((session_key.to_string(), hooks.clone())),
        }))
    }

    fn marks(&self) -> std::sync::MutexGuard<'_, Marks> {
        self.0.marks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Record that `source` (e.g. `file_read`) brought private data into the turn.
    pub fn mark(&self, source: &str) {
        let first = {
            let mut g = self.marks();
            let first = g.private.is_none();
            if first {
                g.private = Some(source.to_string());
            }
            first
        };
        if let (true, Some((session, hooks))) = (first, &self.0.session) {
            hooks.list().retain(|hook| hook(session));
        }
    }

    /// What first brought private data into the turn, if anything did.
    pub fn source(&self) -> Option<String> {
        self.marks().private.clone()
    }

    /// Record that `source` (e.g. `web_fetch`) brought text from outside the conversation into
    /// the turn: words that are not the person's, which injected instructions can hide in.
    pub fn mark_untrusted(&self, source: &str) {
        self.marks()
            .untrusted
            .get_or_insert_with(|| source.to_string());
    }

    /// What first brought outside text into the turn, if anything did.
    pub fn untrusted(&self) -> Option<String> {
        self.marks().untrusted.clone()
    }
}

/// Where a call would carry data off the machine ([`CallPlan::egress`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Egress {
    /// Everything that leaves, as the owner must see it: the full URL with its query, the
    /// search query and provider, the recipient and text.
    pub destination: String,
    /// What "approve for this session" covers: one host, one search provider, one recipient
    /// (e.g. `egress:host:example.com`).
    pub scope: String,
}

impl ToolContext {
    /// A context for the local owner at the terminal, working in `workspace` (tests, benchmarks,
    /// one-off runs). Every id is fresh; nothing is approved beyond the call itself.
    pub fn local(workspace: PathBuf) -> Self {
        Self {
            execution_id: uuid::Uuid::new_v4().to_string(),
            trace_id: uuid::Uuid::new_v4().simple().to_string(),
            session_key: "terminal:local".into(),
            channel: ChannelKind::Terminal,
            chat_id: "local".into(),
            user_id: "local".into(),
            is_owner: true,
            attempt: 1,
            idempotency_key: String::new(),
            unattended: false,
            allowed_tools: None,
            workspace,
            ethan_home: None,
            catalog: std::sync::Arc::from(Vec::<ToolSummary>::new()),
            chat: None,
            approved_actions: Vec::new(),
            events: None,
            taint: Taint::default(),
            assessment: None,
            services: Services::default(),
            model: String::new(),
            sub_agent: None,
        }
    }
}

/// A tool's name and description, as `find_tools` lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSummary {
    pub name: String,
    pub description: String,
}

/// Every interface; the default of [`ToolDecl::interfaces`].
pub const ALL_INTERFACES: &[ChannelKind] = &[
    ChannelKind::Terminal,
    ChannelKind::Web,
    ChannelKind::Telegram,
    ChannelKind::Lark,
];

/// A tool the model may call: what it is, once ([`Tool::decl`]), and what varies per call —
/// what a call will do, for approval ([`Tool::describe`]), the work that needs before consent
/// ([`Tool::assess`]) and the call itself ([`Tool::run`]).
#[async_trait]
pub trait Tool: Send + Sync {
    /// The tool's declaration: name, description, schema, risk, privacy, limits.
    fn decl(&self) -> &ToolDecl;
    /// What this call will do, for approval: the consent question or none, what a session
    /// grant covers, whether it asks every time, where data would leave, its time limit.
    /// Called after [`Tool::assess`], with its result in [`ToolContext::assessment`].
    /// Default: [`CallPlan::of`] (side-effect tools ask, nothing leaves).
    fn describe(&self, args: &Value, _ctx: &ToolContext) -> CallPlan {
        CallPlan::of(self.decl(), args)
    }
    /// Work `describe` and `run` need that may block (parsing, file-system checks), done once
    /// per call: the executor awaits it after validation and before consent, and keeps the
    /// result in [`ToolContext::assessment`] for `describe` and `run` of this call. It runs on
    /// the async runtime, so blocking work belongs in `tokio::task::spawn_blocking`. Default:
    /// nothing to assess.
    async fn assess(&self, _args: &Value, _ctx: &ToolContext) -> Option<Assessment> {
        None
    }
    /// Run with already-parsed arguments.
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A hook hears a session's key once, when private data first enters it; a turn without a
    /// session tells no one; a hook that answers `false` is not called again.
    #[test]
    fn taint_hooks_hear_the_first_mark_of_a_session_only() {
        let hooks = TaintHooks::default();
        let heard = Arc::new(Mutex::new(Vec::new()));
        let h = heard.clone();
        hooks.on_taint(move |key| {
            h.lock().unwrap().push(key.to_string());
            true
        });
        let once = Arc::new(Mutex::new(0));
        let o = once.clone();
        hooks.on_taint(move |_| {
            *o.lock().unwrap() += 1;
            false
        });

        let t = Taint::of_session("hook-test:a", &hooks);
        t.mark("file_read");
        t.mark("shell");
        t.clone().mark("web_fetch");
        Taint::default().mark("file_read");
        Taint::of_session("hook-test:b", &hooks).mark("file_read");
        Taint::of_session("hook-test:c", &TaintHooks::default()).mark("file_read");

        let heard: Vec<String> = heard
            .lock()
            .unwrap()
            .iter()
            .filter(|k| k.starts_with("hook-test:"))
            .cloned()
            .collect();
        assert_eq!(heard, ["hook-test:a", "hook-test:b"]);
        assert_eq!(t.source().as_deref(), Some("file_read"));
        assert_eq!(*once.lock().unwrap(), 1);
    }
}
