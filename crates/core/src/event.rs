//! Progress of a turn as it happens ([`TurnEvent`]), for a live view such as the gateway's SSE
//! stream, and the sender tools and consent use to report it ([`EventSink`]).

/// Progress of a turn, for a live view (the gateway's SSE stream).
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEvent {
    /// Answer text (the whole answer when the endpoint does not stream).
    Text(String),
    ToolStart {
        id: String,
        name: String,
    },
    ToolEnd {
        id: String,
        name: String,
        ms: u64,
        ok: bool,
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
