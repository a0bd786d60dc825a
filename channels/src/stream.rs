//! Streamed replies: the optional draft capability of a channel. While the model writes, the
//! daemon shows the answer so far in one place ([`Draft::update`]: a Telegram draft or edited
//! message, a Lark CardKit streaming card) and then turns it into the final reply
//! ([`Draft::finish`]). A channel without the capability returns `None` from
//! [`crate::Channel::open_draft`] and the daemon sends one final message, as before.
//!
//! Durability: a draft that lives in a platform message (Telegram edit mode, a Lark card) hands
//! its [`DraftHandle`] to the [`DraftLog`] *before* the first update of a message it created, so a
//! daemon restarted after a crash can open the draft again with
//! [`DraftTarget::resume`] and finish the answer in the same message instead of sending a
//! second one.

use crate::error::ChannelError;
use crate::model::{ChatRef, SentRef};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How a channel shows a reply while it is written (`channels.<name>.streaming`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamMode {
    /// The channel's best: Telegram drafts in private chats and edits in groups; Lark cards.
    #[default]
    Auto,
    /// Telegram `sendMessageDraft` (private chats only; groups fall back to edits).
    Draft,
    /// Telegram `sendMessage` then `editMessageText`.
    Edit,
    /// Lark CardKit streaming cards.
    Card,
    /// No streaming: one final message.
    Off,
}

impl StreamMode {
    /// Parse a config value: `auto`, `draft`, `edit`, `card`, `off` (also `false`, which is what
    /// YAML makes of an unquoted `off`, and `true` for `auto`).
    ///
    /// # Errors
    /// The value is none of these; the message lists the accepted ones.
    pub fn parse(value: &str) -> Result<StreamMode, String> {
        Ok(match value.trim().to_ascii_lowercase().as_str() {
            "auto" | "true" | "on" => StreamMode::Auto,
            "draft" => StreamMode::Draft,
            "edit" => StreamMode::Edit,
            "card" => StreamMode::Card,
            "off" | "false" | "no" | "none" => StreamMode::Off,
            other => {
                return Err(format!(
                    "unknown streaming mode {other:?}: expected auto, draft, edit, card or off"
                ))
            }
        })
    }
}

/// Where a streamed reply goes: the chat, the message it answers, and the key that makes its
/// sends idempotent (as [`crate::OutboundMessage::idempotency_key`]).
#[derive(Debug, Clone)]
pub struct DraftTarget {
    pub chat: ChatRef,
    pub reply_to: Option<String>,
    pub idempotency_key: Option<String>,
    /// The handle a previous run recorded for this reply (it crashed mid-stream): continue in
    /// that message or card.
    pub resume: Option<DraftHandle>,
}

/// What must survive a crash to finish a streamed reply in the place it started: the platform's
/// ids, as JSON only the adapter that wrote it reads (e.g. Telegram `{"message_ids":[…]}`, Lark
/// `{"card_id":…, "element_id":…}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DraftHandle(pub serde_json::Value);

/// Where a draft records its handle (the daemon's store, keyed by the inbound event).
#[async_trait]
pub trait DraftLog: Send + Sync {
    /// Record `handle` durably; returns once it is stored.
    ///
    /// # Errors
    /// [`ChannelError::Storage`] when the store failed (the draft goes on; a crash may then
    /// leave the message unfinished).
    async fn record(&self, handle: &DraftHandle) -> Result<(), ChannelError>;
}

/// The state of one tool call in the progress lines of a draft.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolState {
    Running,
    Done,
    Failed,
    Denied,
}

impl ToolState {
    /// The word shown after the tool's name.
    pub fn label(self) -> &'static str {
        match self {
            ToolState::Running => "running",
            ToolState::Done => "done",
            ToolState::Failed => "failed",
            ToolState::Denied => "denied",
        }
    }
}

/// One progress line: a tool call of the turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolLine {
    pub name: String,
    pub state: ToolState,
}

/// What a draft shows: a line per tool call so far, and the answer text written so far
/// (Markdown, possibly cut mid-sentence or mid-block).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DraftView {
    pub tools: Vec<ToolLine>,
    pub text: String,
}

impl DraftView {
    /// The progress lines as Markdown (`⚙️ shell — running`), one per call; empty without calls.
    pub fn progress_markdown(&self) -> String {
        self.tools
            .iter()
            .map(|t| {
                let icon = match t.state {
                    ToolState::Running => "⏳",
                    ToolState::Done => "✅",
                    ToolState::Failed => "⚠️",
                    ToolState::Denied => "⛔",
                };
                format!("{icon} `{}` {}", t.name, t.state.label())
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A reply being written, shown in place. Calls come from one task, in order:
/// any number of [`Draft::update`]s, then [`Draft::finish`] or [`Draft::abandon`].
#[async_trait]
pub trait Draft: Send {
    /// The least time between two updates (the platform's rate limit, or the configured
    /// interval); the daemon coalesces updates that come faster.
    fn interval(&self) -> Duration;

    /// Show `view`. A failed update is not fatal: the daemon logs it and goes on; the final
    /// answer still goes out with [`Draft::finish`].
    ///
    /// # Errors
    /// The platform refused or could not be reached.
    async fn update(&mut self, view: &DraftView) -> Result<(), ChannelError>;

    /// Deliver `markdown` as the complete reply, rendered exactly as a non-streamed reply of the
    /// channel, in place of the preview (the edited message, the card), or as a new message
    /// when the preview cannot hold it (a Telegram draft is only a preview). `tools` are the
    /// turn's progress lines, for channels that keep them above the answer (Lark cards).
    /// Calling it again with the same text after a crash shows the reply once.
    ///
    /// # Errors
    /// As [`crate::Channel::send`]; nothing is retried here.
    async fn finish(&mut self, markdown: &str, tools: &[ToolLine])
        -> Result<SentRef, ChannelError>;

    /// The turn ended without an answer to show (it was stopped): leave the preview as
    /// something that reads as finished, e.g. close a streaming card. Best effort.
    async fn abandon(&mut self) {}

    /// Every event of the turn, as it comes and before it is folded into the [`DraftView`]:
    /// for a channel that shows more than the text and the tool lines (the gateway's web page
    /// shows each call's summary, consent requests and cards). Must not block. Default: ignored.
    fn observe(&mut self, event: &ethan_core::event::TurnEvent) {
        let _ = event;
    }
}
