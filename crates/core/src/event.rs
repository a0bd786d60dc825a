//! Progress of a turn as it happens ([`TurnEvent`]), for a live view such as the gateway's SSE
//! stream, and the sender tools and consent use to report it ([`EventSink`]).

/// Progress of a turn, for a live view (the gateway's SSE stream).
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEvent {
    /// The final answer text, once, when the turn ends with an answer.
    Text(String),
    /// A piece of answer text as the model writes it (streamed model calls only); appended to
    /// the pieces before it.
    Delta(String),
    /// Forget the pieces of [`TurnEvent::Delta`] text since the last model call started: that
    /// call is being retried from the beginning, or its text was a preamble to tool calls.
    DeltaReset,
    ToolStart {
        id: String,
        name: String,
        /// One line saying what the call does (e.g. the command of `shell`), secrets redacted,
        /// at most 80 characters; empty when the arguments say nothing short.
        summary: String,
    },
    ToolEnd {
        id: String,
        name: String,
        ms: u64,
        ok: bool,
        /// Policy, consent or the replay guard refused the call.
        denied: bool,
    },
    /// A consent question for the person watching (web consent).
    ConsentRequest {
        request_id: String,
        tool: String,
        description: String,
        always: bool,
    },
    /// A card as A2UI messages.
    Ui(Vec<serde_json::Value>),
}

/// A sender of [`TurnEvent`]s; sending never blocks and a gone receiver is ignored.
pub type EventSink = tokio::sync::mpsc::UnboundedSender<TurnEvent>;
