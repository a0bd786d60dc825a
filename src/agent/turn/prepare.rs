//! Prepare: everything a turn needs before its first model request, in this order — the daily
//! budgets (over one: the refusal, nothing stored), the session, its kv marks and what was
//! stored after the window its worker kept (one store step), the history window with its
//! compaction state (the kept one brought up to date, else loaded whole) and the memory
//! snapshot (together), the tools the turn may use, the system prompt, the context its tool
//! calls start from with the session's taint marked, and the models to ask.

use super::sink::Sink;
use super::{KeptWindow, Marks, Offer, Prepared, Session, Window};
use crate::agent::{
    agents, budget, delegate, prompt, window, Agent, TurnInput, TurnOutcome, TurnReply, START_KEYS,
};
use crate::memory::{compact, provenance, snapshot};
use crate::tools::builtin::memory::Visible;
use crate::tools::policy::Audience;
use crate::tools::{Taint, ToolContext, ToolSummary};
use ethan_core::event::TurnEvent;
use ethan_core::message::{ChatMessage, Role};
use ethan_core::store::{HeldWindow, WindowDelta};
use std::collections::BTreeSet;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The turn, ready for its first request; `Err`: the turn's reply without a request (a daily
/// budget is used up, or the store is unavailable).
pub(super) async fn prepare(
    agent: &Agent,
    input: &TurnInput,
    cancel: &CancellationToken,
    sink: &Sink<'_>,
    kept: &mut KeptWindow,
) -> Result<Prepared, TurnReply> {
    let limit = agent.config.config.model.history_messages as usize;
    let (id, [earlier, outside, compaction, snapshot], delta) =
        start(agent, input, sink, kept.mark(), limit).await?;
    let group = input
        .chat
        .as_ref()
        .is_some_and(|c| c.kind == ethan_channels::ChatKind::Group);
    let chosen = agent.choose_agent(input);
    let memory_on = chosen.memory_on(group);
    let visible = Visible::of(
        input.channel,
        group,
        &input.chat_id,
        &input.user_id,
        input.is_owner,
    );
    let mut session = Session {
        id,
        group,
        owner: budget::call_owner(input),
        // Only a person's own conversation: not a job's, not a sub-agent's (its "user" is the
        // parent model).
        extract_into: visible
            .personal
            .clone()
            .filter(|_| memory_on && !input.unattended && input.child.is_none()),
        budget_chars: compact::budget_chars(agent.config.config.model.context_tokens),
        marks: Marks::default(),
    };
    let memory = async {
        if memory_on {
            let now = chrono::Utc::now().timestamp();
            let config = &agent.config.config.memory;
            snapshot::for_session(&agent.store, config, &session.id, snapshot, &visible, now).await
        } else {
            snapshot::Snapshot::default()
        }
    };
    // Private data seen earlier in the session (`earlier`) counts, even once the call that read
    // it has left the history window (the answers may still repeat it); so does outside text
    // seen earlier (`outside`: memory_save then asks). `/new` starts clean.
    // The window: the one the session's worker kept, brought up to date by the start's delta,
    // else loaded whole.
    let compactor = session.compactor(agent);
    let compaction = compactor.state(compaction);
    let read_after = compaction.upto;
    let resumed = kept.resume(&session.id, read_after, limit, delta);
    let window = async {
        match resumed {
            Some(history) => history,
            None => compactor.history(read_after, limit).await,
        }
    };
    let (mut history, memory, sandbox) = tokio::join!(window, memory, agent.sandbox.settings());
    drop(compactor);
    // What each request derives from a message, made once as it enters the window.
    let wanted = window::Wanted::of(&agent.config.config);
    window::derive(&mut history, wanted);
    session.marks.outside_recorded = outside.is_some();
    session.marks.outside = outside.or_else(|| provenance::outside_in(&history));
    let mut whole = None;
    if !input.is_owner && history.iter().any(|(_, m)| !visible_to_all(m)) {
        // A group's history is shared: someone who is not the owner gets the chat and the bot's
        // visible answers, never the owner's tool calls and their results.
        let narrowed = without_tool_traffic(&history);
        whole = Some(std::mem::replace(&mut history, narrowed));
    }
    let (offer, catalog) = offer(agent, input, &chosen, memory_on, &memory, wanted.zone);
    let mut ctx = agent.base_context(input, catalog, sandbox);
    if let Some(me) = agent.me.upgrade() {
        ctx.services.delegator = Some(Arc::new(delegate::Children::new(
            me,
            input,
            &offer.allowed,
            cancel,
        )));
    }
    session.marks.earlier_recorded = earlier.is_some();
    session.marks.earlier = earlier.or_else(|| private_reads_in(&history, &offer.registry));
    mark(
        &ctx.taint,
        input,
        memory.personal,
        &session.marks,
        &offer.active,
    );
    let mut asked = ChatMessage::user_with_images(input.text.clone(), input.images.clone());
    asked.sent_at = Some(chrono::Utc::now().timestamp());
    let window = Window {
        compaction,
        history,
        whole,
        read_after,
        turn: vec![asked],
        trimmed: false,
    };
    Ok(Prepared {
        session,
        window,
        offer,
        ctx,
    })
}

/// The session id, the kv values [`START_KEYS`] names (in order) and what was stored after
/// the kept window (`None`: none kept, or of another session).
type Started = (String, [Option<String>; 4], Option<WindowDelta>);

/// The budget check, then the session, what the turn reads of it in the kv table and what
/// followed the kept window (`held`, at most `limit` messages), in one store step.
async fn start(
    agent: &Agent,
    input: &TurnInput,
    sink: &Sink<'_>,
    held: Option<HeldWindow>,
    limit: usize,
) -> Result<Started, TurnReply> {
    // Over a daily token budget: one sentence, the model is not called, nothing is stored.
    if let Some(text) = budget::refusal(agent, input).await {
        sink.emit(TurnEvent::Text(text.clone()));
        return Err(TurnReply {
            outcome: TurnOutcome::Answer(text),
            cards: Vec::new(),
            refused: true,
        });
    }
    match agent
        .store
        .start_turn(&input.session_key, &START_KEYS, held.as_ref(), limit)
        .await
    {
        Ok(start) => {
            let mut values = start.values.into_iter();
            let mut next = || values.next().flatten();
            let values = [next(), next(), next(), next()];
            Ok((start.session_id, values, start.delta))
        }
        Err(e) => Err(TurnReply {
            outcome: TurnOutcome::Failed {
                user_message: "My database is unavailable; I can't answer right now.".into(),
                detail: e.to_string(),
            },
            cards: Vec::new(),
            refused: false,
        }),
    }
}

/// What the model is offered (the tools, the system prompt with the skills and the memory
/// snapshot, the models), and the catalog of the turn's tools for `find_tools`.
fn offer(
    agent: &Agent,
    input: &TurnInput,
    chosen: &agents::Chosen<'_>,
    memory_on: bool,
    memory: &snapshot::Snapshot,
    zone: chrono_tz::Tz,
) -> (Offer, Arc<[ToolSummary]>) {
    let audience = Audience {
        channel: input.channel,
        is_owner: input.is_owner,
        unattended: input.unattended,
        allowed_tools: input.allowed_tools.clone(),
    };
    let registry = agent.executor.registry();
    let allowed = agent.turn_tools(input, &audience, chosen, memory_on, &registry);
    // Sent up front: the fast path, in name order; the rest is found with find_tools and
    // appended as found, so the tools already offered keep their place in the request.
    let active: Vec<String> = agent
        .policy
        .initial(&registry, &allowed)
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
        .unwrap_or(&agent.config.config.model.system_prompt);
    let mut system_text = prompt::system_prompt(&agent.config, custom, input.channel, &allowed);
    if allowed.contains("skill_read") {
        let (skills, _) = agent.skills.load(&agent.config.home.join("skills"));
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
    let models = agent.models_for(input, chosen);
    let offer = Offer {
        system: ChatMessage::system(system_text),
        allowed,
        active,
        registry,
        models,
        max_iter: chosen
            .config
            .and_then(|c| c.max_tool_iterations)
            .unwrap_or(agent.config.config.model.max_tool_iterations),
        zone,
    };
    (offer, catalog)
}

/// Mark on the turn's `taint` what the session and the input brought in, in this order: the
/// person's remembered facts in the prompt, private data earlier in the session, a private
/// file in the input; outside text in the input, earlier in the session, in an offered tool's
/// description, and a sub-agent's task. The first private mark is the one approvals name.
fn mark(taint: &Taint, input: &TurnInput, memory_personal: bool, marks: &Marks, active: &[String]) {
    if memory_personal {
        // The person's remembered facts are in the prompt: private data, like a file read.
        taint.mark("memory (facts remembered about you)");
    }
    if let Some(source) = &marks.earlier {
        taint.mark(&format!("{source}, earlier in this conversation"));
    }
    if let Some(source) = &input.private_input {
        taint.mark(source);
        taint.mark_untrusted(source);
    }
    if let Some(source) = &input.outside_input {
        taint.mark_untrusted(source);
    }
    if let Some(source) = &marks.outside {
        taint.mark_untrusted(&format!("{source}, earlier in this conversation"));
    }
    if let Some(tool) = provenance::foreign_description(active) {
        taint.mark_untrusted(&format!("the description of {tool}"));
    }
    if input.child.is_some() {
        // A sub-agent's "user" is its parent model: none of its words are a person's.
        taint.mark_untrusted("a sub-agent's task, written by the model");
    }
}

impl Agent {
    /// The context every tool call of `input`'s turn starts from (each call gets its own copy
    /// with its id, attempt and idempotency key).
    fn base_context(
        &self,
        input: &TurnInput,
        catalog: Arc<[ToolSummary]>,
        sandbox: Arc<ethan_core::sandbox::SandboxSettings>,
    ) -> ToolContext {
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
                sandbox,
                ..Default::default()
            },
            taint: Taint::of_session(&input.session_key, self.executor.registry().taint_hooks()),
            assessment: None,
            model: String::new(),
            sub_agent: input.child.as_ref().map(|c| c.label.clone()),
        }
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
    fn models_for(&self, input: &TurnInput, chosen: &agents::Chosen<'_>) -> crate::provider::Chain {
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
}

/// The history (with the messages' ids) without tool calls and tool results: user messages and
/// the assistant's visible text only (an assistant message that only called tools is dropped).
fn without_tool_traffic(history: &[(i64, ChatMessage)]) -> Vec<(i64, ChatMessage)> {
    history
        .iter()
        .filter(|(_, m)| visible_to_all(m))
        .cloned()
        .collect()
}

/// Whether `m` is part of the chat everyone in it saw: not a tool result, not a step that
/// called tools (its text may quote a tool result: dropped whole), not an empty answer.
fn visible_to_all(m: &ChatMessage) -> bool {
    match m.role {
        Role::Tool => false,
        Role::Assistant if !m.tool_calls.is_empty() => false,
        Role::Assistant => m.content.as_deref().is_some_and(|c| !c.trim().is_empty()),
        _ => true,
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use ethan_channels::ChannelKind;

    fn input() -> TurnInput {
        TurnInput {
            session_key: "telegram:1".into(),
            channel: ChannelKind::Telegram,
            chat_id: "1".into(),
            user_id: "1".into(),
            is_owner: true,
            text: "hi".into(),
            trace_id: "t".into(),
            chat: None,
            unattended: false,
            allowed_tools: None,
            events: None,
            model: None,
            job_id: None,
            images: Vec::new(),
            private_input: None,
            outside_input: None,
            child: None,
            fence: None,
        }
    }

    fn marked(input: &TurnInput, memory: bool, marks: &Marks, active: &[&str]) -> Taint {
        let taint = Taint::default();
        let active: Vec<String> = active.iter().map(|s| s.to_string()).collect();
        mark(&taint, input, memory, marks, &active);
        taint
    }

    #[test]
    fn the_first_private_mark_is_memory_then_the_session_then_the_input() {
        let mut input = input();
        input.private_input = Some("a file the owner sent in the chat".into());
        let marks = Marks {
            earlier: Some("file_read".into()),
            ..Marks::default()
        };
        let all = marked(&input, true, &marks, &[]);
        assert_eq!(
            all.source().as_deref(),
            Some("memory (facts remembered about you)")
        );
        let no_memory = marked(&input, false, &marks, &[]);
        assert_eq!(
            no_memory.source().as_deref(),
            Some("file_read, earlier in this conversation")
        );
        let input_only = marked(&input, false, &Marks::default(), &[]);
        assert_eq!(
            input_only.source().as_deref(),
            Some("a file the owner sent in the chat")
        );
        // A private file is outside text as well.
        assert_eq!(
            input_only.untrusted().as_deref(),
            Some("a file the owner sent in the chat")
        );
        assert_eq!(
            marked(&self::input(), false, &Marks::default(), &[]).source(),
            None
        );
    }

    #[test]
    fn outside_text_is_marked_from_the_input_the_session_an_mcp_tool_or_a_parent_model() {
        let plain = self::input();
        let earlier = Marks {
            outside: Some("web_fetch".into()),
            ..Marks::default()
        };
        let mut forwarded = self::input();
        forwarded.outside_input = Some("a forwarded message".into());
        let untrusted =
            |i: &TurnInput, m: &Marks, active: &[&str]| marked(i, false, m, active).untrusted();
        assert_eq!(
            untrusted(&forwarded, &earlier, &[]).as_deref(),
            Some("a forwarded message")
        );
        assert_eq!(
            untrusted(&plain, &earlier, &["mcp__docs__search"]).as_deref(),
            Some("web_fetch, earlier in this conversation")
        );
        assert_eq!(
            untrusted(&plain, &Marks::default(), &["shell", "mcp__docs__search"]).as_deref(),
            Some("the description of mcp__docs__search")
        );
        let mut child = self::input();
        child.child = Some(crate::agent::ChildTurn {
            agent: None,
            tools: BTreeSet::new(),
            depth: 1,
            label: "sub-agent".into(),
        });
        assert_eq!(
            untrusted(&child, &Marks::default(), &[]).as_deref(),
            Some("a sub-agent's task, written by the model")
        );
        assert_eq!(untrusted(&plain, &Marks::default(), &["shell"]), None);
        // Outside text alone is not private data.
        assert_eq!(marked(&forwarded, false, &earlier, &[]).source(), None);
    }

    #[test]
    fn someone_not_the_owner_gets_the_chat_without_the_tool_traffic() {
        let mut calling = ChatMessage::assistant("Reading your mail");
        calling.tool_calls = vec![ethan_core::message::ToolCall {
            id: "c1".into(),
            name: "lark_messages".into(),
            arguments: "{}".into(),
        }];
        let history = vec![
            ChatMessage::user("what's new?"),
            calling,
            ChatMessage::tool("c1", "private mail"),
            ChatMessage::assistant(" "),
            ChatMessage::assistant("Nothing new."),
        ];
        let history: Vec<_> = history
            .into_iter()
            .enumerate()
            .map(|(i, m)| (i as i64, m))
            .collect();
        let kept: Vec<_> = without_tool_traffic(&history)
            .into_iter()
            .map(|(id, m)| (id, m.content.unwrap()))
            .collect();
        assert_eq!(
            kept,
            [
                (0, "what's new?".to_string()),
                (4, "Nothing new.".to_string())
            ]
        );
    }
}
