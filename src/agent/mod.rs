//! The agent loop: one turn of a session. Build the messages (system prompt with the session's
//! memory snapshot, the summary of what compaction folded away, the history since it, the new
//! input), call the model with the tools exposed to this turn, execute the tool calls it
//! proposes, feed the results back, and repeat until a final answer or
//! `model.max_tool_iterations`. Before every request the history is compacted when it would
//! pass 70 % of `model.context_tokens`, and the request is kept under the whole of it
//! ([`crate::memory`]). The turn's messages are stored when it ends (answered, failed or
//! stopped), in one transaction, so the history never holds a tool call without its result.
//! A turn over a daily token budget is answered without calling the model, and every model call
//! that returns is recorded in the usage ledger ([`budget`]).

pub mod agents;
pub mod budget;
pub mod delegate;
pub mod pictures;
pub mod prompt;

use crate::config::Loaded;
use crate::memory::compact::{self, Compactor};
use crate::memory::summarise::Summariser;
use crate::memory::{chars_of, message_chars, provenance, snapshot};
use crate::provider::{Chain, ModelProvider, ProviderError};
use crate::tools::builtin::memory::Visible;
use crate::tools::executor::{Executor, Progress};
use crate::tools::policy::{Audience, Policy};
use crate::tools::{ToolContext, ToolSummary};
use ethan_channels::ChannelKind;
use ethan_core::message::{ChatMessage, Role};
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

fn emit(events: &Option<EventSink>, e: TurnEvent) {
    if let Some(tx) = events {
        let _ = tx.send(e);
    }
}

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
    /// What the sandbox found at start, lent to every call's context.
    pub sandbox: Arc<ethan_core::sandbox::SandboxSettings>,
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
        let mut cards: Vec<ethan_cards::Ui> = Vec::new();
        // Over a daily token budget: one sentence, the model is not called, nothing is stored.
        if let Some(text) = budget::refusal(self, input).await {
            emit(&input.events, TurnEvent::Text(text.clone()));
            return TurnReply {
                outcome: TurnOutcome::Answer(text),
                cards,
                refused: true,
            };
        }
        // The session and what the turn reads of it in the kv table, in one store step.
        let started = self.store.start_turn(&input.session_key, &START_KEYS).await;
        let (session_id, [earlier, outside, compaction, snapshot]) = match started {
            Ok((id, values)) => {
                let mut values = values.into_iter();
                let mut next = || values.next().flatten();
                (id, [next(), next(), next(), next()])
            }
            Err(e) => {
                return TurnReply {
                    outcome: TurnOutcome::Failed {
                        user_message: "My database is unavailable; I can't answer right now."
                            .into(),
                        detail: e.to_string(),
                    },
                    cards,
                    refused: false,
                }
            }
        };
        let limit = self.config.config.model.history_messages as usize;
        let group = input
            .chat
            .as_ref()
            .is_some_and(|c| c.kind == ethan_channels::ChatKind::Group);
        let chosen = self.choose_agent(input);
        let memory_on = chosen.memory_on(group);
        let visible = Visible::of(
            input.channel,
            group,
            &input.chat_id,
            &input.user_id,
            input.is_owner,
        );
        let budget_chars = compact::budget_chars(self.config.config.model.context_tokens);
        let compactor = Compactor {
            store: &self.store,
            summariser: &self.summariser,
            session_id: &session_id,
            owner: budget::call_owner(input),
            group,
            // Only a person's own conversation: not a job's, not a sub-agent's (its "user" is
            // the parent model).
            extract_into: visible
                .personal
                .clone()
                .filter(|_| memory_on && !input.unattended && input.child.is_none()),
            budget_chars,
        };
        let taint_key = format!("{TAINT_PREFIX}{session_id}");
        let memory = async {
            if memory_on {
                snapshot::for_session(
                    &self.store,
                    &self.config.config.memory,
                    &session_id,
                    snapshot,
                    &visible,
                    chrono::Utc::now().timestamp(),
                )
                .await
            } else {
                snapshot::Snapshot::default()
            }
        };
        // Private data seen earlier in the session (`earlier`) counts, even once the call that
        // read it has left the history window (the answers may still repeat it); so does outside
        // text seen earlier (`outside`: memory_save then asks). `/new` starts clean.
        let ((mut compaction, mut history), memory) =
            tokio::join!(compactor.load(compaction, limit), memory);
        let outside_recorded = outside.is_some();
        let outside = outside.or_else(|| provenance::outside_in(&history));
        if !input.is_owner {
            // A group's history is shared: someone who is not the owner gets the chat and the
            // bot's visible answers, never the owner's tool calls and their results.
            history = without_tool_traffic(history);
        }
        let audience = Audience {
            channel: input.channel,
            is_owner: input.is_owner,
            unattended: input.unattended,
            allowed_tools: input.allowed_tools.clone(),
        };
        let registry_snapshot = self.executor.registry();
        let registry: &crate::tools::registry::Registry = &registry_snapshot;
        let allowed = self.turn_tools(input, &audience, &chosen, memory_on, registry);
        // Sent up front: the fast path, in name order; the rest is found with find_tools and
        // appended as found, so the tools already offered keep their place in the request.
        let mut active: Vec<String> = self
            .policy
            .initial(registry, &allowed)
            .into_iter()
            .collect();
        let catalog: Arc<[ToolSummary]> = allowed
            .iter()
            .filter_map(|n| registry.get(n))
            .map(|t| ToolSummary {
                name: t.decl().name.to_string(),
                description: t.decl().description.to_string(),
            })
            .collect();
        let custom = chosen
            .config
            .map(|c| c.system_prompt.as_str())
            .filter(|p| !p.trim().is_empty())
            .unwrap_or(&self.config.config.model.system_prompt);
        let mut system_text = prompt::system_prompt(&self.config, custom, input.channel, &allowed);
        if allowed.contains("skill_read") {
            let (skills, _) = crate::skills::load(&self.config.home.join("skills"));
            let section = crate::skills::prompt_section(&skills);
            if !section.is_empty() {
                system_text.push_str("\n\n");
                system_text.push_str(&section);
            }
        }
        if !memory.text.is_empty() {
            system_text.push_str("\n\n");
            system_text.push_str(&memory.text);
        }
        let system = ChatMessage::system(system_text);
        let mut base_ctx = self.base_context(input, catalog);
        if let Some(me) = self.me.upgrade() {
            base_ctx.services.delegator = Some(Arc::new(delegate::Children::new(
                me, input, &allowed, cancel,
            )));
        }
        let recorded = earlier.is_some();
        let earlier = earlier.or_else(|| private_reads_in(&history, registry));
        if memory.personal {
            // The person's remembered facts are in the prompt: private data, like a file read.
            base_ctx.taint.mark("memory (facts remembered about you)");
        }
        if let Some(source) = &earlier {
            base_ctx
                .taint
                .mark(&format!("{source}, earlier in this conversation"));
        }

        if let Some(source) = &input.private_input {
            base_ctx.taint.mark(source);
            base_ctx.taint.mark_untrusted(source);
        }
        if let Some(source) = &input.outside_input {
            base_ctx.taint.mark_untrusted(source);
        }
        if let Some(source) = &outside {
            base_ctx
                .taint
                .mark_untrusted(&format!("{source}, earlier in this conversation"));
        }
        if let Some(tool) = provenance::foreign_description(&active) {
            base_ctx
                .taint
                .mark_untrusted(&format!("the description of {tool}"));
        }
        if input.child.is_some() {
            // A sub-agent's "user" is its parent model: none of its words are a person's.
            base_ctx
                .taint
                .mark_untrusted("a sub-agent's task, written by the model");
        }

        let mut models = self.models_for(input, &chosen);
        let mut asked = ChatMessage::user_with_images(input.text.clone(), input.images.clone());
        asked.sent_at = Some(chrono::Utc::now().timestamp());
        let mut turn = vec![asked];
        let zone = crate::usage::zone(&self.config.config);
        let max_iter = chosen
            .config
            .and_then(|c| c.max_tool_iterations)
            .unwrap_or(self.config.config.model.max_tool_iterations);
        let mut trimmed = false;
        let mut iterations = 0u32;
        let outcome = loop {
            if iterations >= max_iter {
                break TurnOutcome::IterationCap(format!(
                    "I stopped after {max_iter} tool steps without reaching an answer. \
                     Tell me to continue, or narrow the request."
                ));
            }
            // Compaction first (when the request would pass 70 % of the budget), then the turn
            // itself kept under the whole budget.
            let fixed = message_chars(&system) + chars_of(&turn);
            tokio::select! {
                _ = compactor.fit(&mut compaction, &mut history, fixed) => {}
                _ = cancel.cancelled() => break TurnOutcome::Stopped,
            }
            let summary = compact::summary_message(&compaction);
            let mut sent_turn = turn.clone();
            let others = message_chars(&system)
                + summary.as_ref().map_or(0, message_chars)
                + history.iter().map(|(_, m)| message_chars(m)).sum::<usize>();
            let removed = compact::fit_turn(&mut sent_turn, others, budget_chars);
            if removed > 0 {
                tracing::warn!(
                    "removed {removed} tool result(s) of this turn from the request in {} to \
                     stay within model.context_tokens",
                    input.session_key
                );
            }
            let mut messages = Vec::with_capacity(2 + history.len() + turn.len());
            messages.push(system.clone());
            messages.extend(summary);
            messages.extend(
                history
                    .iter()
                    .map(|(_, m)| prompt::stamped(m.clone(), zone)),
            );
            messages.extend(sent_turn.into_iter().map(|m| prompt::stamped(m, zone)));
            let specs = registry.specs(&active);
            let call = async {
                match &input.events {
                    Some(events) => models.complete_streaming(&messages, &specs, events).await,
                    None => models.complete(&messages, &specs).await,
                }
            };
            let completion = tokio::select! {
                c = call => c,
                _ = cancel.cancelled() => break TurnOutcome::Stopped,
            };
            let completion = match completion {
                Ok(c) => c,
                Err(ProviderError::ContextLength(msg)) if !trimmed && !history.is_empty() => {
                    trimmed = true;
                    tracing::warn!(
                        "context too long ({msg}); summarising the whole history and retrying"
                    );
                    // The estimate was short of the model's count: fold every message so far
                    // into the summary (stored), so the next turns start small too.
                    tokio::select! {
                        _ = compactor.fit(&mut compaction, &mut history, budget_chars) => {}
                        _ = cancel.cancelled() => break TurnOutcome::Stopped,
                    }
                    if !history.is_empty() {
                        history = trim_history(history);
                    }
                    continue;
                }
                Err(ProviderError::Interrupted { shown, cause }) => {
                    // The person has seen `shown`: it stays, with a note, and is not replayed.
                    // A group saw none of it (crate::daemon::group_view): it may have been the
                    // preamble of tool calls, so it is neither posted nor kept there.
                    tracing::warn!(
                        "the streamed answer in {} broke off: {cause}",
                        input.session_key
                    );
                    let note = format!("(The answer broke off here: {})", cause.user_message());
                    let text = if group || shown.trim().is_empty() {
                        note
                    } else {
                        with_note(&shown, &note)
                    };
                    turn.push(ChatMessage::assistant(if group {
                        text.clone()
                    } else {
                        shown
                    }));
                    emit(&input.events, TurnEvent::Text(text.clone()));
                    break TurnOutcome::Answer(text);
                }
                Err(e) => {
                    break TurnOutcome::Failed {
                        user_message: e.user_message(),
                        detail: e.to_string(),
                    }
                }
            };
            let sent = crate::usage::Sent {
                messages: &messages,
                tools: &specs,
            };
            budget::record(self, input, sent, &completion).await;
            iterations += 1;
            tracing::debug!(model = %completion.model, "model answered in {}", input.session_key);
            // The audit of the calls below names the model that proposed them.
            base_ctx.model = completion.model.clone();
            // The rest of the turn starts at the model that answered: the results of its tool
            // calls go back to it (the chain still moves on if it fails).
            if let Some(pinned) = models.starting_at(&completion.model) {
                models = pinned;
            }
            let truncated = completion.truncated();
            let mut msg = completion.message;
            msg.role = Role::Assistant;
            if msg.tool_calls.is_empty() {
                let text = msg.content.clone().unwrap_or_default();
                let text = if text.trim().is_empty() {
                    "(The model returned an empty answer.)".to_string()
                } else {
                    text
                };
                // The history keeps the model's own words; the person is told it is incomplete.
                msg.content = Some(text.clone());
                turn.push(msg);
                let text = if truncated {
                    tracing::warn!(
                        "the answer in {} was cut off at the model's length limit",
                        input.session_key
                    );
                    with_cut_off_note(&text)
                } else {
                    text
                };
                emit(&input.events, TurnEvent::Text(text.clone()));
                break TurnOutcome::Answer(text);
            }
            // Text streamed before tool calls was a preamble, not the answer.
            if msg.content.as_deref().is_some_and(|t| !t.is_empty()) {
                emit(&input.events, TurnEvent::DeltaReset);
            }
            let calls = msg.tool_calls.clone();
            turn.push(msg);
            for c in &calls {
                emit(
                    &input.events,
                    TurnEvent::ToolStart {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        summary: self.call_summary(&c.arguments),
                    },
                );
            }
            let results = self
                .executor
                .execute_until(&calls, &allowed, &base_ctx, cancel)
                .await;
            match results {
                Ok(results) => {
                    let mut pictures = Vec::new();
                    for r in results {
                        emit(&input.events, tool_end(&r));
                        let name = r.tool.as_deref().unwrap_or(&r.requested);
                        // find_tools lists the descriptions of the turn's tools, an MCP
                        // server's among them.
                        let listed = name == crate::tools::policy::FIND_TOOLS
                            && provenance::foreign_description(&allowed).is_some();
                        if provenance::brings_outside_text(name) || listed {
                            base_ctx.taint.mark_untrusted(name);
                        }
                        if let Some(ui) = &r.result.ui {
                            match serde_json::from_value::<ethan_cards::Ui>(ui.clone()) {
                                Ok(ui) => {
                                    emit(
                                        &input.events,
                                        TurnEvent::Ui(ethan_cards::render_a2ui(&ui)),
                                    );
                                    cards.push(ui)
                                }
                                Err(e) => tracing::warn!("a tool returned an unreadable card: {e}"),
                            }
                        }
                        if let Some(names) =
                            r.result.metadata.get("activate").and_then(|v| v.as_array())
                        {
                            for n in names.iter().filter_map(|n| n.as_str()) {
                                if allowed.contains(n) && !active.iter().any(|a| a == n) {
                                    active.push(n.to_string());
                                }
                            }
                        }
                        tracing::info!(
                            tool = %r.requested,
                            ok = r.result.ok,
                            ms = r.elapsed_ms,
                            "tool call {}",
                            r.tool_call_id
                        );
                        if r.result.ok {
                            let cfg = &self.config.config;
                            let shown = pictures::of(
                                &r.result.metadata,
                                cfg.model.vision,
                                cfg.media.max_image_bytes,
                            )
                            .await;
                            pictures.extend(shown.into_iter().map(|p| (name.to_string(), p)));
                        }
                        turn.push(if r.result.ok {
                            ChatMessage::tool(r.tool_call_id, r.model_text)
                        } else {
                            ChatMessage::tool_error(r.tool_call_id, r.model_text)
                        });
                    }
                    // Pictures the tools returned (`file_read` of a saved photo, a screenshot,
                    // an MCP tool's image) follow the results, for this request only; the
                    // history keeps the text.
                    if !pictures.is_empty() {
                        turn.push(pictures::message(pictures));
                    }
                }
                Err(progress) => {
                    // What happened, call by call: a call that ran keeps its result (its side
                    // effects are real), the others say they were stopped or never started.
                    for (c, p) in calls.iter().zip(progress) {
                        let (text, ok) = match p {
                            Progress::Ran(r) => {
                                emit(&input.events, tool_end(&r));
                                if provenance::brings_outside_text(&r.requested) {
                                    base_ctx.taint.mark_untrusted(&r.requested);
                                }
                                (r.model_text, r.result.ok)
                            }
                            Progress::Stopped => (Progress::STOPPED_TEXT.to_string(), false),
                            Progress::NotStarted => (Progress::NOT_STARTED_TEXT.to_string(), false),
                        };
                        turn.push(if ok {
                            ChatMessage::tool(c.id.clone(), text)
                        } else {
                            ChatMessage::tool_error(c.id.clone(), text)
                        });
                    }
                    break TurnOutcome::Stopped;
                }
            }
        };
        match &outcome {
            TurnOutcome::IterationCap(t) => turn.push(ChatMessage::assistant(t.clone())),
            TurnOutcome::Stopped => turn.push(ChatMessage::assistant("(Stopped by the user.)")),
            TurnOutcome::Failed { detail, .. } => {
                tracing::error!("turn in {} failed: {detail}", input.session_key);
                // The question, and every call that ran before the model failed (their effects
                // are real, so the next turn must know them); no answer is recorded.
                turn.push(ChatMessage::assistant(
                    "(No answer: the model endpoint failed.)",
                ));
            }
            TurnOutcome::Answer(_) => {}
        }
        if let Err(e) = self.store.append_messages(&session_id, &turn).await {
            tracing::error!("cannot store the turn of {}: {e}", input.session_key);
        }
        if !outside_recorded {
            if let Some(source) = outside.or_else(|| base_ctx.taint.untrusted()) {
                provenance::record(&self.store, &session_id, &source).await;
            }
        }
        // Recorded once per session: the first source, as the tool's own name.
        if !recorded {
            if let Some(source) = earlier.or_else(|| base_ctx.taint.source()) {
                if let Err(e) = self.store.kv_set(&taint_key, &source).await {
                    tracing::warn!("cannot record the taint of {}: {e}", input.session_key);
                }
            }
        }
        TurnReply {
            outcome,
            cards,
            refused: false,
        }
    }
}

impl Agent {
    /// The agent that answers `input`: the one a sub-agent's `delegate` named, else the
    /// bindings' choice ([`agents::Agents::resolve`]).
    /// The context every tool call of `input`'s turn starts from (each call gets its own copy
    /// with its id, attempt and idempotency key).
    fn base_context(&self, input: &TurnInput, catalog: Arc<[ToolSummary]>) -> ToolContext {
        ToolContext {
            execution_id: String::new(),
            trace_id: input.trace_id.clone(),
            session_key: input.session_key.clone(),
            channel: input.channel,
            chat_id: input.chat_id.clone(),
            user_id: input.user_id.clone(),
            is_owner: input.is_owner,
            attempt: 1,
            idempotency_key: String::new(),
            unattended: input.unattended,
            allowed_tools: input.allowed_tools.clone(),
            workspace: self.config.workspace(),
            ethan_home: Some(self.config.home.clone()),
            catalog,
            chat: input.chat.clone(),
            approved_actions: Vec::new(),
            events: input.events.clone(),
            services: ethan_core::tool::Services {
                store: Some(self.store.clone()),
                fence: input.fence.clone(),
                sandbox: self.sandbox.clone(),
                ..Default::default()
            },
            taint: crate::tools::Taint::of_session(
                &input.session_key,
                self.executor.registry().taint_hooks(),
            ),
            assessment: None,
            model: String::new(),
            sub_agent: input.child.as_ref().map(|c| c.label.clone()),
        }
    }

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

    /// The tools of this turn: the policy's for the sender, narrowed by the agent's own, by a
    /// sub-agent's tool list, without the memory tools when the agent uses no memory here and
    /// without `delegate` at the deepest level.
    fn turn_tools(
        &self,
        input: &TurnInput,
        audience: &Audience,
        chosen: &agents::Chosen<'_>,
        memory_on: bool,
        registry: &crate::tools::registry::Registry,
    ) -> BTreeSet<String> {
        let mut allowed = agents::narrow(
            self.allowed_tools(audience),
            chosen.policy,
            registry,
            audience,
        );
        if let Some(child) = &input.child {
            allowed.retain(|n| child.tools.contains(n) || n == crate::tools::policy::FIND_TOOLS);
            if child.depth >= delegate::MAX_DEPTH {
                allowed.remove(delegate::TOOL);
            }
        }
        if !memory_on {
            for t in ["memory_save", "memory_search", "memory_forget"] {
                allowed.remove(t);
            }
        }
        allowed
    }

    /// The chain a turn asks: from its `model` when that names an entry, else in order (an
    /// unknown name is logged and ignored).
    fn models_for(&self, input: &TurnInput, chosen: &agents::Chosen<'_>) -> Chain {
        let agent_model = chosen
            .config
            .map(|c| c.model.as_str())
            .filter(|m| !m.trim().is_empty());
        let Some(name) = input.model.as_deref().or(agent_model) else {
            return self.models.clone();
        };
        self.models.starting_at(name).unwrap_or_else(|| {
            tracing::warn!(
                "model {name:?} of {} is not configured (model.name or a model.fallback \
                 name); using {}",
                input.session_key,
                self.models.names().join(", ")
            );
            self.models.clone()
        })
    }

    /// What a tool call does, in one line for progress views ([`TurnEvent::ToolStart`]): the
    /// first of its string arguments that says the most (`command`, `path`, `query`, `url`, …,
    /// else the first string), secrets redacted, at most 80 characters.
    fn call_summary(&self, arguments: &str) -> String {
        const KEYS: [&str; 8] = [
            "command", "cmd", "path", "query", "url", "pattern", "action", "name",
        ];
        let Ok(serde_json::Value::Object(args)) = serde_json::from_str(arguments) else {
            return String::new();
        };
        let text = KEYS
            .iter()
            .find_map(|k| args.get(*k).and_then(|v| v.as_str()))
            .or_else(|| args.values().find_map(|v| v.as_str()))
            .unwrap_or_default();
        let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let redacted = self.executor.redactor().text(&one_line);
        let mut out: String = redacted.chars().take(80).collect();
        if out.chars().count() < redacted.chars().count() {
            out.pop();
            out.push('…');
        }
        out
    }
}

/// The [`TurnEvent::ToolEnd`] of a call that ran.
fn tool_end(r: &crate::tools::executor::CallOutcome) -> TurnEvent {
    TurnEvent::ToolEnd {
        id: r.tool_call_id.clone(),
        name: r.tool.clone().unwrap_or_else(|| r.requested.clone()),
        ms: r.elapsed_ms,
        ok: r.result.ok,
        denied: r.result.error_kind == Some(crate::tools::ErrorKind::Denied),
    }
}

/// The note added to an answer the model's length limit cut off.
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

pub const CUT_OFF_NOTE: &str = "… (the answer was cut off at the model's length limit)";

/// `text` (Markdown) followed by [`CUT_OFF_NOTE`] in a paragraph of its own; a code block the
/// cut left open is closed first, so the note is not shown as code.
fn with_cut_off_note(text: &str) -> String {
    with_note(text, CUT_OFF_NOTE)
}

/// `text` with a closing fence if a code block is left open, then `note` as its own paragraph.
fn with_note(text: &str, note: &str) -> String {
    let mut out = text.trim_end().to_string();
    if let Some(fence) = open_fence(&out) {
        out.push('\n');
        out.push_str(&fence);
    }
    out.push_str("\n\n");
    out.push_str(note);
    out
}

/// The fence (e.g. "```") of a fenced code block still open at the end of `markdown`, if any.
fn open_fence(markdown: &str) -> Option<String> {
    let mut open: Option<String> = None;
    for line in markdown.lines() {
        let line = line.trim_start();
        let run = |c: char| line.chars().take_while(|&x| x == c).count();
        let (c, n) = if line.starts_with('`') {
            ('`', run('`'))
        } else if line.starts_with('~') {
            ('~', run('~'))
        } else {
            continue;
        };
        if n < 3 {
            continue;
        }
        match &open {
            None => open = Some(c.to_string().repeat(n)),
            // A closing fence: the same character, at least as long, nothing after it.
            Some(f) if f.starts_with(c) && n >= f.len() && line[n..].trim().is_empty() => {
                open = None
            }
            Some(_) => {}
        }
    }
    open
}

/// The history (with the messages' ids) without tool calls and tool results: user messages and
/// the assistant's visible text only (an assistant message that only called tools is dropped).
fn without_tool_traffic(history: Vec<(i64, ChatMessage)>) -> Vec<(i64, ChatMessage)> {
    history
        .into_iter()
        .filter_map(|(id, m)| match m.role {
            Role::Tool => None,
            // A step that called tools is not an answer the chat saw (its text may quote a
            // tool result): dropped whole.
            Role::Assistant if !m.tool_calls.is_empty() => None,
            Role::Assistant => m
                .content
                .as_deref()
                .is_some_and(|c| !c.trim().is_empty())
                .then_some((id, m)),
            _ => Some((id, m)),
        })
        .collect()
}

/// The first tool in `history` whose result is private data ([`crate::tools::ToolDecl::reads_private`]);
/// a tool no longer registered (a removed MCP server's) counts as private, as one that declares
/// nothing does.
fn private_reads_in(
    history: &[(i64, ChatMessage)],
    registry: &crate::tools::registry::Registry,
) -> Option<String> {
    history
        .iter()
        .flat_map(|(_, m)| m.tool_calls.iter())
        .map(|c| c.name.as_str())
        .find(|name| {
            registry
                .resolve(name)
                .and_then(|n| registry.get(n))
                .is_none_or(|t| t.decl().reads_private)
        })
        .map(str::to_string)
}

/// Keep the newer half of the history, starting at a user message.
fn trim_history(history: Vec<(i64, ChatMessage)>) -> Vec<(i64, ChatMessage)> {
    let half = history.len() / 2;
    match history
        .iter()
        .enumerate()
        .skip(half.max(1))
        .find(|(_, (_, m))| m.role == Role::User)
    {
        Some((i, _)) => history[i..].to_vec(),
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trimming_starts_at_a_user_message() {
        let h = vec![
            ChatMessage::user("1"),
            ChatMessage::assistant("a"),
            ChatMessage::user("2"),
            ChatMessage::assistant("b"),
            ChatMessage::tool("x", "r"),
            ChatMessage::user("3"),
        ];
        let h = h
            .into_iter()
            .enumerate()
            .map(|(i, m)| (i as i64, m))
            .collect();
        let t = trim_history(h);
        assert_eq!(t[0].1.content.as_deref(), Some("3"));
        assert!(trim_history(vec![(1, ChatMessage::user("only"))]).is_empty());
    }

    #[test]
    fn cut_off_note_follows_the_text_outside_any_code_block() {
        assert_eq!(
            with_cut_off_note("Half an answer\n"),
            format!("Half an answer\n\n{CUT_OFF_NOTE}")
        );
        let code = with_cut_off_note("Look:\n```rust\nfn main() {");
        assert_eq!(
            code,
            format!("Look:\n```rust\nfn main() {{\n```\n\n{CUT_OFF_NOTE}")
        );
        // A closed block stays as it is; a longer fence needs a long enough closer.
        assert_eq!(open_fence("```\na\n```\nafter"), None);
        assert_eq!(open_fence("````md\n```\nstill code"), Some("````".into()));
        assert_eq!(open_fence("~~~\ncode"), Some("~~~".into()));
    }
}
