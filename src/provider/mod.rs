//! The model provider: an OpenAI-compatible Chat Completions client (OpenAI, DeepSeek, Qwen,
//! Moonshot, OpenRouter, vLLM, llama.cpp, Ollama all speak it) with tool calls.
//!
//! `POST {model.base_url}/chat/completions` with `Authorization: Bearer <api_key>`. 429, 5xx,
//! timeouts, dropped connections and unreadable bodies are retried with bounded exponential
//! backoff (at most [`MAX_RETRIES`] retries; `Retry-After` honoured up to 30 s); a context-length
//! error is reported as [`ProviderError::ContextLength`] so the agent can shorten the history.

pub mod openai;
pub mod types;

pub use openai::OpenAiClient;

/// Retries after the first attempt for transient failures.
pub const MAX_RETRIES: u32 = 3;

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
    #[error("cannot reach the model endpoint {url}: {message}")]
    Connect { url: String, message: String },
    #[error("the model endpoint sent an unreadable answer: {0}")]
    BadResponse(String),
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
            ProviderError::Connect { .. } => "I can't reach the model service right now.".into(),
            ProviderError::BadResponse(_) => {
                "The model service sent an answer I couldn't read; please try again.".into()
            }
        }
    }

    /// Whether another attempt may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            ProviderError::Http { status, .. } => *status == 429 || *status >= 500,
            ProviderError::Timeout(_)
            | ProviderError::Connect { .. }
            | ProviderError::BadResponse(_) => true,
            ProviderError::ContextLength(_) | ProviderError::Auth { .. } => false,
        }
    }
}
