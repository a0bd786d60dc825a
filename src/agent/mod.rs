//! The agent: what a turn of a session is asked with ([`TurnInput`]), how it ends
//! ([`TurnOutcome`], [`TurnReply`]), and the [`Agent`] that runs it. A turn builds the
//! messages (system prompt with the session's memory snapshot, the summary of what compaction
//! folded away, the history since it, the new input), calls the model with the tools exposed to
//! this turn, executes the tool calls it proposes, feeds the results back, and repeats until a
//! final answer or `model.max_tool_iterations`. Before every request the history is compacted
//! when it would pass 70 % of `model.context_tokens`, and the request is kept under the whole of
//! it ([`crate::memory`]). The turn's messages are stored when it ends (answered, failed or
//! stopped), in one transaction, so the history never holds a tool call without its result.
//! A turn over a daily token budget is answered without calling the model, and every model call
//! that returns is recorded in the usage ledger ([`budget`]). The turn itself is in `turn`, one
//! module per stage: prepare, step, run the calls, fold the results, persist.

pub mod agents;
pub mod budget;
pub mod delegate;
pub mod pictures;
pub mod prompt;
mod turn;
pub mod window;

pub use window::KeptWindow;

use crate::config::Loaded;
use crate::memory::compact;
use crate::memory::provenance;
use crate::memory::summarise::Summariser;
use crate::provider::Chain;
use crate::tools::executor::Executor;
use crate::tools::policy::{Audience, Policy};
use ethan_channels::ChannelKind;
use ethan_core::store::StorageRef;
use std::collections::BTreeSet;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Who is asking, and where.
#[derive(Debug, Clone)]
pub struct TurnInput {
    pub session_key: String,
    pub channel: ChannelKind,
    pub chat_id: String,
    pub user_id: String,
    pub is_owner: bool,
    pub text: String,
    /// Stable per inbound event (so a re-run after a crash has the same trace), else random.
    pub trace_id: String,
    /// The chat to answer (and ask approvals) in; `None` for the terminal.
    pub chat: Option<ethan_channels::ChatRef>,
    /// A scheduled job's run: no person to ask; read-only tools plus `allowed_tools`.
    pub unattended: bool,
    /// For unattended runs: the side-effect tools the job was authorised to use.
    pub allowed_tools: Option<Vec<String>>,
    /// Where to report progress as it happens (the gateway's event stream); `None` = nobody.
    pub events: Option<EventSink>,
    /// The model to ask first (a scheduled job's `model`: the primary's or a fallback entry's
    /// name); `None` = the chain's order.
    pub model: Option<String>,
    /// The scheduled job this turn is a run of (its model calls are recorded under it); `None`
    /// for a person's turn.
    pub job_id: Option<String>,
    /// Pictures sent with `text`, for a model with vision ([`crate::media`]); sent with this
    /// turn's requests only, never stored.
    pub images: Vec<ethan_core::message::ImagePart>,
    /// What brought private data into the turn with the input itself (the owner's file sent
    /// in the chat, [`crate::media`]): the turn starts tainted, so a call that carries data
    /// off the machine asks the owner. `None` for plain text.
    pub private_input: Option<String>,
    /// What in the input itself is text from outside the conversation, not the person's words
    /// (a forwarded message, a file's name or content, [`crate::media::notes::outside`]): a
    /// `memory_save` or `memory_forget` in this session then asks the owner. `None` for plain
    /// text.
    pub outside_input: Option<String>,
    /// A sub-agent's turn: the agent named by `delegate` (else the bindings choose), the tools
    /// it may use (a subset of its parent's), its depth (1 or 2) and how approvals name it.
    pub child: Option<ChildTurn>,
    /// Asked before each call with side effects ([`ethan_core::tool::Fence`]): with replicas,
    /// whether this replica still holds the session's lease. `None`: always allowed.
    pub fence: Option<Arc<dyn ethan_core::tool::Fence>>,
}

/// What makes a turn a sub-agent's ([`TurnInput::child`]).
#[derive(Debug, Clone)]
pub struct ChildTurn {
    pub agent: Option<String>,
    pub tools: BTreeSet<String>,
    pub depth: u8,
    /// `sub-agent "research" (depth 1)`.
    pub label: String,
}

pub use ethan_core::event::{EventSink, TurnEvent};

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnOutcome {
    /// The model's final answer (Markdown).
    Answer(String),
    /// The tool-iteration cap was reached; the text says so.
    IterationCap(String),
    /// `/stop` cancelled it.
    Stopped,
    /// The model endpoint failed for good; `user_message` is for the person, `detail` for logs.
    Failed {
        user_message: String,
        detail: String,
    },
}

impl TurnOutcome {
    /// A short name for metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            TurnOutcome::Answer(_) => "answer",
            TurnOutcome::IterationCap(_) => "iteration_cap",
            TurnOutcome::Stopped => "stopped",
            TurnOutcome::Failed { .. } => "failed",
        }
    }

    /// The text to show the person, if any.
    pub fn reply_text(&self) -> Option<&str> {
        match self {
            TurnOutcome::Answer(t) | TurnOutcome::IterationCap(t) => Some(t),
            TurnOutcome::Failed { user_message, .. } => Some(user_message),
            TurnOutcome::Stopped => None,
        }
    }
}

/// A finished turn: how it ended and the cards to show.
#[derive(Debug, Clone)]
pub struct TurnReply {
    pub outcome: TurnOutcome,
    pub cards: Vec<ethan_cards::Ui>,
    /// The model was not called: a daily token budget is used up (the outcome is the sentence
    /// saying so).
    pub refused: bool,
}

pub struct Agent {
    /// The models: the primary and its fallbacks ([`crate::provider::Chain`]).
    pub models: Chain,
    pub executor: Executor,
    pub policy: Policy,
    /// The store ([`ethan_core::store::Storage`]).
    pub store: StorageRef,
    pub config: Arc<Loaded>,
    /// The summary model's requests (compaction, facts to keep).
    pub summariser: Summariser,
    /// The configured agents and bindings.
    pub agents: agents::Agents,
    /// This agent itself, for the sub-agents its turns start ([`delegate`]).
    pub me: std::sync::Weak<Agent>,
    /// What the sandbox finds at start (awaited by a turn's preparation), lent to every
    /// call's context.
    pub sandbox: ethan_core::sandbox::SandboxProbe,
    /// The skills parsed so far, listed in each turn's system prompt without parsing their
    /// front matter again.
    pub skills: crate::skills::Parsed,
}

impl Agent {
    /// The tools `audience` may use (the exposure policy, `tools::engine::policy`).
    pub fn allowed_tools(&self, audience: &Audience) -> BTreeSet<String> {
        self.policy.allowed(&self.executor.registry(), audience)
    }

    /// Run one turn to its end. Never panics on model output; every failure is an outcome.
    pub async fn run_turn(&self, input: &TurnInput, cancel: &CancellationToken) -> TurnOutcome {
        self.run_turn_with_cards(input, cancel).await.outcome
    }

    /// Run one turn; also returns the cards (`ui_card`) its tools produced, in order, for the
    /// channel to show before the answer.
    pub async fn run_turn_with_cards(
        &self,
        input: &TurnInput,
        cancel: &CancellationToken,
    ) -> TurnReply {
        turn::run(self, input, cancel, &mut KeptWindow::default()).await
    }

    /// [`Agent::run_turn_with_cards`] for a session's worker: the turn starts from the window
    /// `kept` holds from the session's previous turn (reading only what was stored after it)
    /// and leaves its own there for the next.
    pub async fn run_turn_kept(
        &self,
        input: &TurnInput,
        cancel: &CancellationToken,
        kept: &mut KeptWindow,
    ) -> TurnReply {
        turn::run(self, input, cancel, kept).await
    }

    /// The agent that answers `input`: the one a sub-agent's `delegate` named, else the
    /// bindings' choice ([`agents::Agents::resolve`]).
    pub fn choose_agent(&self, input: &TurnInput) -> agents::Chosen<'_> {
        if let Some(name) = input.child.as_ref().and_then(|c| c.agent.as_deref()) {
            if let Some(c) = self.agents.named(name) {
                return c;
            }
        }
        self.agents.resolve(agents::Place {
            channel: input.channel.as_str(),
            chat_id: &input.chat_id,
            thread: input.chat.as_ref().and_then(|c| c.thread.as_deref()),
            sender: &input.user_id,
        })
    }
}

/// The kv key of the private-data mark of a session is this prefix and the session id.
pub const TAINT_PREFIX: &str = "taint:";

/// The kv keys a turn reads with its start ([`ethan_core::store::SessionStore::start_turn`]), by
/// prefix: the private-data mark, the outside-text mark, the compaction state, the memory
/// snapshot.
const START_KEYS: [&str; 4] = [
    TAINT_PREFIX,
    provenance::MARK_PREFIX,
    compact::KEY_PREFIX,
    crate::tools::builtin::memory::SNAPSHOT_PREFIX,
];

/// The note added to an answer the model's length limit cut off.
pub const CUT_OFF_NOTE: &str = "… (the answer was cut off at the model's length limit)";
