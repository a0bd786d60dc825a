//! Step: one model request of a turn. The history is compacted when the request would pass
//! 70 % of `model.context_tokens` and the turn's own messages kept under the whole of it; the
//! request goes to the chain (streamed into the [`Sink`] when someone watches); the call is
//! recorded in the usage ledger (before its tool calls run, or with the turn's end when it
//! ends the turn) and the rest of the turn pinned to the model that answered.
//! The result ([`StepResult`]) is the turn's end (an answer, a stop, a failure), the model's
//! tool calls, or a request to ask again after the whole history was folded. The iteration
//! cap is decided here too ([`cap`]).

use super::sink::Sink;
use super::{Offer, Window};
use crate::agent::{budget, prompt, Agent, TurnInput, TurnOutcome, CUT_OFF_NOTE};
use crate::memory::compact::{self, Compactor};
use crate::memory::{chars_of, message_chars};
use crate::provider::ProviderError;
use crate::tools::ToolContext;
use ethan_core::event::TurnEvent;
use ethan_core::message::{ChatMessage, Role, ToolCall};
use ethan_core::provider::Completion;
use ethan_core::store::UsageRecord;
use std::borrow::Cow;
use tokio_util::sync::CancellationToken;

/// What one model request gave.
#[derive(Debug, PartialEq)]
pub(super) enum StepResult {
    /// The turn ends (the answer is in the turn's messages, when there is one).
    Done(TurnOutcome),
    /// The request was too long and the whole history was folded: ask again.
    Retry,
    /// The model proposed these calls (its message is in the turn's messages).
    Calls(Vec<ToolCall>),
}

/// The end of a turn that made `iterations` requests with tool calls, when `max_iter` is
/// reached.
pub(super) fn cap(iterations: u32, max_iter: u32) -> Option<TurnOutcome> {
    (iterations >= max_iter).then(|| {
        TurnOutcome::IterationCap(format!(
            "I stopped after {max_iter} tool steps without reaching an answer. \
             Tell me to continue, or narrow the request."
        ))
    })
}

/// A request's messages: the system prompt, the summary, the kept `history` as shown (borrowed;
/// a person's message is a copy with its time stamp in front) and the turn's messages.
fn request<'w>(
    system: &ChatMessage,
    summary: Option<ChatMessage>,
    history: &'w [(i64, ChatMessage)],
    turn: Vec<ChatMessage>,
    zone: chrono_tz::Tz,
) -> Vec<Cow<'w, ChatMessage>> {
    let mut messages = Vec::with_capacity(2 + history.len() + turn.len());
    messages.push(Cow::Owned(system.clone()));
    messages.extend(summary.map(Cow::Owned));
    messages.extend(history.iter().map(|(_, m)| prompt::shown(m, zone)));
    messages.extend(
        turn.into_iter()
            .map(|m| Cow::Owned(prompt::stamped(m, zone))),
    );
    messages
}

/// What a step works with besides the turn's changing state.
pub(super) struct Step<'a> {
    pub agent: &'a Agent,
    pub input: &'a TurnInput,
    pub compactor: &'a Compactor<'a>,
    pub cancel: &'a CancellationToken,
}

impl Step<'_> {
    /// One request: the model's answer or calls go into `window.turn`; the answering model is
    /// pinned in `offer` and named in `ctx` (the audit of the calls names it). The call's row
    /// in the usage ledger is written before its tool calls run; a call that ends the turn
    /// leaves it in `unrecorded`, for the turn's end to write with the turn.
    pub(super) async fn run(
        &self,
        window: &mut Window,
        offer: &mut Offer,
        ctx: &mut ToolContext,
        sink: &Sink<'_>,
        unrecorded: &mut Vec<UsageRecord>,
    ) -> StepResult {
        let Some((summary, sent_turn)) = self.fit(window, offer).await else {
            return StepResult::Done(TurnOutcome::Stopped);
        };
        let messages = request(
            &offer.system,
            summary,
            &window.history,
            sent_turn,
            offer.zone,
        );
        let specs = offer.registry.specs(&offer.active);
        let completion = tokio::select! {
            c = sink.complete(&offer.models, &messages, &specs) => c,
            _ = self.cancel.cancelled() => return StepResult::Done(TurnOutcome::Stopped),
        };
        let completion = match completion {
            Ok(c) => c,
            Err(e) => return self.failed(e, window, sink).await,
        };
        let sent = crate::usage::Sent {
            messages: &messages,
            tools: &specs,
        };
        let record = budget::usage(self.agent, self.input, sent, &completion);
        let session = &self.input.session_key;
        tracing::debug!(model = %completion.model, "model answered in {session}");
        // The audit of the calls below names the model that proposed them.
        ctx.model = completion.model.clone();
        // The rest of the turn starts at the model that answered: the results of its tool
        // calls go back to it (the chain still moves on if it fails).
        if let Some(pinned) = offer.models.starting_at(&completion.model) {
            offer.models = pinned;
        }
        let result = answered(completion, &mut window.turn, sink, session);
        match result {
            StepResult::Calls(_) => budget::record(self.agent, &record).await,
            _ => unrecorded.push(record),
        }
        result
    }

    /// The history compacted and the turn cut to fit the request: the summary to send and the
    /// turn's messages as sent (`None`: stopped meanwhile).
    async fn fit(
        &self,
        window: &mut Window,
        offer: &Offer,
    ) -> Option<(Option<ChatMessage>, Vec<ChatMessage>)> {
        // Compaction first (when the request would pass 70 % of the budget), then the turn
        // itself kept under the whole budget.
        // The window is counted once, again only if compaction changed it.
        let system = &offer.system;
        let system_chars = message_chars(system);
        let fixed = system_chars + chars_of(&window.turn);
        let mut history_chars = compact::history_chars(&window.history);
        let (state, history) = (&mut window.compaction, &mut window.history);
        tokio::select! {
            compacted = self.compactor.fit_counted(state, history, fixed, history_chars) => {
                if compacted {
                    history_chars = compact::history_chars(&window.history);
                }
            }
            _ = self.cancel.cancelled() => return None,
        }
        let summary = compact::summary_message(&window.compaction);
        let mut sent_turn = window.turn.clone();
        let others = system_chars + summary.as_ref().map_or(0, message_chars) + history_chars;
        let removed = compact::fit_turn(&mut sent_turn, others, self.compactor.budget_chars);
        if removed > 0 {
            tracing::warn!(
                "removed {removed} tool result(s) of this turn from the request in {} to stay \
                 within model.context_tokens",
                self.input.session_key
            );
        }
        Some((summary, sent_turn))
    }

    /// A request that failed: folded and asked again once when it was too long, the shown part
    /// kept when a stream broke off, else the turn fails.
    async fn failed(&self, e: ProviderError, window: &mut Window, sink: &Sink<'_>) -> StepResult {
        let session = &self.input.session_key;
        match e {
            ProviderError::ContextLength(msg) if !window.trimmed && !window.history.is_empty() => {
                window.trimmed = true;
                tracing::warn!(
                    "context too long ({msg}); summarising the whole history and retrying"
                );
                // The estimate was short of the model's count: fold every message so far into
                // the summary (stored), so the next turns start small too.
                let budget = self.compactor.budget_chars;
                tokio::select! {
                    _ = self.compactor.fit(&mut window.compaction, &mut window.history, budget) => {}
                    _ = self.cancel.cancelled() => return StepResult::Done(TurnOutcome::Stopped),
                }
                if !window.history.is_empty() {
                    window.history = trim_history(std::mem::take(&mut window.history));
                }
                StepResult::Retry
            }
            ProviderError::Interrupted { shown, cause } => {
                tracing::warn!("the streamed answer in {session} broke off: {cause}");
                let note = format!("(The answer broke off here: {})", cause.user_message());
                let (kept, text) = broken_off(shown, &note, self.compactor.group);
                window.turn.push(ChatMessage::assistant(kept));
                sink.emit(TurnEvent::Text(text.clone()));
                StepResult::Done(TurnOutcome::Answer(text))
            }
            e => StepResult::Done(TurnOutcome::Failed {
                user_message: e.user_message(),
                detail: e.to_string(),
            }),
        }
    }
}

/// A streamed answer that broke off after `shown` was shown: what the history keeps and what
/// the person is told. The person has seen `shown`: it stays, with the note, and is not
/// replayed. A group saw none of it (crate::daemon::group_view): it may have been the preamble
/// of tool calls, so it is neither posted nor kept there.
fn broken_off(shown: String, note: &str, group: bool) -> (String, String) {
    let text = if group || shown.trim().is_empty() {
        note.to_string()
    } else {
        with_note(&shown, note)
    };
    (if group { text.clone() } else { shown }, text)
}

/// The model's answer: the final one when it calls no tools (its text in the turn, the person
/// told when it was cut off), else its calls (a text streamed before them was a preamble).
fn answered(
    completion: Completion,
    turn: &mut Vec<ChatMessage>,
    sink: &Sink<'_>,
    session: &str,
) -> StepResult {
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
            tracing::warn!("the answer in {session} was cut off at the model's length limit");
            with_cut_off_note(&text)
        } else {
            text
        };
        sink.emit(TurnEvent::Text(text.clone()));
        return StepResult::Done(TurnOutcome::Answer(text));
    }
    // Text streamed before tool calls was a preamble, not the answer.
    if msg.content.as_deref().is_some_and(|t| !t.is_empty()) {
        sink.emit(TurnEvent::DeltaReset);
    }
    let calls = msg.tool_calls.clone();
    turn.push(msg);
    StepResult::Calls(calls)
}

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
    use ethan_core::provider::FinishReason;

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

    #[test]
    fn the_cap_ends_the_turn_once_the_steps_with_calls_reach_it() {
        assert_eq!(cap(0, 3), None);
        assert_eq!(cap(2, 3), None);
        let Some(TurnOutcome::IterationCap(text)) = cap(3, 3) else {
            panic!("no cap at the limit");
        };
        assert!(text.contains("after 3 tool steps"), "{text}");
        // A limit of 0: not even one request.
        assert!(cap(0, 0).is_some());
    }

    fn completion(message: ChatMessage, finish_reason: Option<FinishReason>) -> Completion {
        Completion {
            message,
            finish_reason,
            usage: None,
            model: "m".into(),
        }
    }

    fn events(rx: &mut tokio::sync::mpsc::UnboundedReceiver<TurnEvent>) -> Vec<TurnEvent> {
        std::iter::from_fn(|| rx.try_recv().ok()).collect()
    }

    #[test]
    fn an_answer_ends_the_step_the_history_keeping_the_models_words() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let sink = Sink::new(Some(&tx));
        let mut turn = Vec::new();
        let c = completion(ChatMessage::assistant("Half"), Some(FinishReason::Length));
        let shown = format!("Half\n\n{CUT_OFF_NOTE}");
        assert_eq!(
            answered(c, &mut turn, &sink, "s"),
            StepResult::Done(TurnOutcome::Answer(shown.clone()))
        );
        assert_eq!(turn[0].content.as_deref(), Some("Half"));
        assert_eq!(events(&mut rx), vec![TurnEvent::Text(shown)]);
        // An empty answer says so, in the history too, as the assistant's whatever the
        // provider's message said its role was.
        let c = completion(ChatMessage::user("   "), None);
        let said = "(The model returned an empty answer.)".to_string();
        let end = answered(c, &mut turn, &sink, "s");
        assert_eq!(end, StepResult::Done(TurnOutcome::Answer(said.clone())));
        assert_eq!(turn[1].role, Role::Assistant);
        assert_eq!(turn[1].content.as_deref(), Some(said.as_str()));
    }

    #[test]
    fn calls_go_on_and_a_streamed_preamble_is_withdrawn() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let sink = Sink::new(Some(&tx));
        let call = ToolCall {
            id: "c1".into(),
            name: "shell".into(),
            arguments: "{}".into(),
        };
        let mut msg = ChatMessage::assistant("Let me look.");
        msg.tool_calls = vec![call.clone()];
        let mut turn = Vec::new();
        let end = answered(completion(msg, None), &mut turn, &sink, "s");
        assert_eq!(end, StepResult::Calls(vec![call.clone()]));
        assert_eq!(turn[0].tool_calls, vec![call.clone()]);
        assert_eq!(events(&mut rx), vec![TurnEvent::DeltaReset]);
        // No text before the calls: nothing to withdraw.
        let mut msg = ChatMessage::assistant("");
        msg.tool_calls = vec![call];
        answered(completion(msg, None), &mut turn, &sink, "s");
        assert!(events(&mut rx).is_empty());
        assert_eq!(turn.len(), 2);
    }

    #[test]
    fn a_broken_stream_keeps_what_the_person_saw_and_a_group_only_the_note() {
        let note = "(The answer broke off here: timeout)";
        let (kept, told) = broken_off("The first half".into(), note, false);
        assert_eq!(kept, "The first half");
        assert_eq!(told, format!("The first half\n\n{note}"));
        let (kept, told) = broken_off("A preamble".into(), note, true);
        assert_eq!((kept.as_str(), told.as_str()), (note, note));
        let (kept, told) = broken_off(" ".into(), note, false);
        assert_eq!((kept.as_str(), told.as_str()), (" ", note));
    }
}
