//! The model provider seam: [`ModelProvider`] turns a conversation (provider-neutral
//! [`ChatMessage`]s) and the tools on offer into the next assistant message. Each provider
//! (OpenAI-compatible Chat Completions today) translates to and from its own wire format.
//!
//! A request's messages are each a `Cow`: borrowed from the session's kept window when sent as
//! kept (no copy of the history per request), owned when made for the request (a time stamp
//! in front of a person's text, the system prompt, the turn's own messages).

use crate::event::EventSink;
use crate::message::{ChatMessage, ToolSpec};
use async_trait::async_trait;
use std::borrow::Cow;

/// `messages`, each owned: a request of messages made for it alone.
pub fn owned(messages: impl IntoIterator<Item = ChatMessage>) -> Vec<Cow<'static, ChatMessage>> {
    messages.into_iter().map(Cow::Owned).collect()
}

/// A completion: the assistant message and the reason the model stopped.
#[derive(Debug, Clone)]
pub struct Completion {
    pub message: ChatMessage,
    /// Why the model stopped; `None` when the provider did not say.
    pub finish_reason: Option<FinishReason>,
    /// The tokens of the call as the provider reported them; `None` when it did not.
    pub usage: Option<Usage>,
    /// The model that answered (its configured name); empty when the provider did not say.
    pub model: String,
}

/// The tokens one model call used, as the provider reported them. `input_tokens` counts every
/// token of the prompt, those read from or written to the provider's prompt cache included
/// (OpenAI `prompt_tokens`; Anthropic `input_tokens` + `cache_read_input_tokens` +
/// `cache_creation_input_tokens`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Of `input_tokens`: read from the prompt cache (OpenAI
    /// `prompt_tokens_details.cached_tokens`; Anthropic `cache_read_input_tokens`).
    pub cache_read_tokens: u64,
    /// Of `input_tokens`: written to the prompt cache (Anthropic
    /// `cache_creation_input_tokens`; OpenAI reports none).
    pub cache_write_tokens: u64,
}

impl Usage {
    /// Input and output together: what budgets count.
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// Adds `other` to `self`.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_read_tokens = self
            .cache_read_tokens
            .saturating_add(other.cache_read_tokens);
        self.cache_write_tokens = self
            .cache_write_tokens
            .saturating_add(other.cache_write_tokens);
    }
}

impl Completion {
    /// Whether the answer was cut off by the model's output-length limit
    /// ([`FinishReason::Length`]): the text is incomplete.
    pub fn truncated(&self) -> bool {
        self.finish_reason == Some(FinishReason::Length)
    }
}

/// Why the model stopped generating, provider-neutral.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    /// A natural end of the answer (OpenAI `stop`).
    Stop,
    /// The model asked for tool calls (OpenAI `tool_calls`, legacy `function_call`).
    ToolCalls,
    /// The output-length limit (`max_tokens`, or the model's own) cut the answer off (OpenAI
    /// `length`).
    Length,
    /// The provider's content filter withheld or cut the answer (OpenAI `content_filter`).
    ContentFilter,
    /// Any other reason, as the provider spelled it.
    Other(String),
}

impl FinishReason {
    /// The reason for a wire value such as OpenAI's `finish_reason` (`stop`, `tool_calls`,
    /// `function_call`, `length`, `content_filter`; anything else is [`FinishReason::Other`]).
    pub fn parse(wire: &str) -> FinishReason {
        match wire {
            "stop" => FinishReason::Stop,
            "tool_calls" | "function_call" => FinishReason::ToolCalls,
            "length" => FinishReason::Length,
            "content_filter" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_string()),
        }
    }
}

/// A model API.
#[async_trait]
pub trait ModelProvider: Send + Sync {
    /// The next assistant message for `messages`, offering `tools`; retried inside on transient
    /// failures.
    ///
    /// # Errors
    /// [`ProviderError`]: the context is too long, the key is refused, the endpoint failed or
    /// could not be reached, or its answer could not be read.
    async fn complete(
        &self,
        messages: &[Cow<'_, ChatMessage>],
        tools: &[ToolSpec],
    ) -> Result<Completion, ProviderError>;

    /// Like [`ModelProvider::complete`], and the answer's text is also sent to `deltas` piece
    /// by piece as the model writes it ([`crate::event::TurnEvent::Delta`]; a retry that starts
    /// over first sends [`crate::event::TurnEvent::DeltaReset`]). The completion returned is the
    /// whole message, as `complete` would return it.
    ///
    /// When the stream fails for good after pieces were sent, the pieces are not withdrawn: the
    /// error is [`ProviderError::Interrupted`] with the text shown, so the person keeps it and
    /// no other model starts over.
    ///
    /// The default sends no pieces: a provider that cannot stream answers all at once.
    async fn complete_streaming(
        &self,
        messages: &[Cow<'_, ChatMessage>],
        tools: &[ToolSpec],
        deltas: &EventSink,
    ) -> Result<Completion, ProviderError> {
        let _ = deltas;
        self.complete(messages, tools).await
    }

    /// Whether the endpoint answers and accepts the key, spending no tokens where the API
    /// allows it (`ethan doctor`): one line saying what answered.
    ///
    /// # Errors
    /// As [`ModelProvider::complete`].
    async fn check(&self) -> Result<String, ProviderError> {
        Ok("not checked (this provider has no check)".into())
    }
}

/// Why a model request failed. [`ProviderError::user_message`] is the one sentence a person sees;
/// `Display` is the detail for the log.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("the conversation is longer than the model's context window: {0}")]
    ContextLength(String),
    #[error("the model endpoint rejected the API key (HTTP {status}): {message}")]
    Auth { status: u16, message: String },
    #[error("the model endpoint answered HTTP {status}: {message}")]
    Http { status: u16, message: String },
    #[error("the model endpoint did not answer within {0} s")]
    Timeout(u64),
    /// A streamed answer stopped: no chunk for this many seconds (`model.idle_timeout_secs`).
    #[error("the model endpoint sent nothing for {0} s while streaming its answer")]
    Stalled(u64),
    #[error("cannot reach the model endpoint {url}: {message}")]
    Connect { url: String, message: String },
    #[error("the model endpoint sent an unreadable answer: {0}")]
    BadResponse(String),
    /// A streamed answer failed for good after `shown` had been sent to the person as
    /// [`crate::event::TurnEvent::Delta`]s (and was not withdrawn).
    #[error("the streamed answer broke off after {} characters: {cause}", shown.chars().count())]
    Interrupted {
        shown: String,
        cause: Box<ProviderError>,
    },
}

impl ProviderError {
    /// A short sentence for the person in the chat.
    pub fn user_message(&self) -> String {
        match self {
            ProviderError::ContextLength(_) => {
                "This conversation got too long for the model. Send /new to start a fresh one."
                    .into()
            }
            ProviderError::Auth { .. } => {
                "The model service rejected my API key, so I can't answer right now.".into()
            }
            ProviderError::Http { status, .. } if *status == 429 => {
                "The model service is rate-limiting me; please try again in a minute.".into()
            }
            ProviderError::Http { status, .. } => {
                format!(
                    "The model service returned an error (HTTP {status}); please try again later."
                )
            }
            ProviderError::Timeout(_) => {
                "The model took too long to answer; please try again.".into()
            }
            ProviderError::Stalled(_) => {
                "The model stopped answering midway; please try again.".into()
            }
            ProviderError::Connect { .. } => "I can't reach the model service right now.".into(),
            ProviderError::BadResponse(_) => {
                "The model service sent an answer I couldn't read; please try again.".into()
            }
            ProviderError::Interrupted { cause, .. } => cause.user_message(),
        }
    }

    /// Whether another attempt may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            // 408 and 429 ask for another try; any other 4xx would be refused again.
            ProviderError::Http { status, .. } => {
                *status == 408 || *status == 429 || *status >= 500
            }
            ProviderError::Timeout(_)
            | ProviderError::Stalled(_)
            | ProviderError::Connect { .. }
            | ProviderError::BadResponse(_) => true,
            ProviderError::ContextLength(_)
            | ProviderError::Auth { .. }
            | ProviderError::Interrupted { .. } => false,
        }
    }

    /// Whether another endpoint or model may answer where this one failed (the fallback
    /// chain moves on): it could not be reached, timed out, stalled, was rate-limited, failed
    /// (5xx, 408), refused the key (401/403), did not know the model or path (404), or sent
    /// an unreadable answer. Not for a request refused as invalid (400, 422, context length):
    /// another model would refuse it too. Never after text was shown ([`Interrupted`]).
    ///
    /// [`Interrupted`]: ProviderError::Interrupted
    pub fn may_fall_back(&self) -> bool {
        match self {
            ProviderError::Http { status, .. } => {
                matches!(*status, 404 | 408 | 429) || *status >= 500
            }
            ProviderError::Auth { .. }
            | ProviderError::Timeout(_)
            | ProviderError::Stalled(_)
            | ProviderError::Connect { .. }
            | ProviderError::BadResponse(_) => true,
            ProviderError::ContextLength(_) | ProviderError::Interrupted { .. } => false,
        }
    }
}
