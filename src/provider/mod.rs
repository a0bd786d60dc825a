//! The model providers: an OpenAI-compatible Chat Completions client ([`openai`]; OpenAI,
//! DeepSeek, Qwen, Moonshot, OpenRouter, vLLM, llama.cpp, Ollama all speak it) and an Anthropic
//! Messages client ([`anthropic`]), both with tool calls; [`connect`] picks one by
//! `model.provider`.
//!
//! OpenAI: `POST {model.base_url}/chat/completions` with `Authorization: Bearer <api_key>`.
//! Anthropic: `POST {model.base_url}/v1/messages` with `x-api-key`. 429, 5xx, timeouts,
//! dropped connections and unreadable bodies are retried with bounded exponential backoff (at
//! most [`MAX_RETRIES`] retries; `Retry-After` honoured up to 30 s); a context-length error is
//! reported as [`ProviderError::ContextLength`] so the agent can shorten the history. The
//! answer's stop reason is read into [`Completion::finish_reason`] ([`FinishReason::Length`]:
//! cut off by the output-length limit). Answers can also be streamed (`stream: true`, [`sse`]
//! framing): their text goes to the turn's event sink as it arrives. [`chain`] puts the
//! primary and its `model.fallback` entries behind one provider with a circuit breaker each.

pub mod anthropic;
pub mod cache_key;
pub mod chain;
mod held_text;
mod http;
mod http_core;
pub mod openai;
pub mod probe;
pub mod sse;
mod streamed;
pub mod tolerant;
pub mod types;

pub use anthropic::AnthropicClient;
pub use chain::Chain;
pub use openai::OpenAiClient;

use crate::config::{ModelConfig, ModelEndpoint, ProviderKind};
use crate::metrics::Metrics;
use std::sync::Arc;

/// Retries after the first attempt for transient failures.
pub const MAX_RETRIES: u32 = 3;

pub use ethan_core::provider::{Completion, FinishReason, ModelProvider, ProviderError};

/// A client for endpoint `ep` (the primary or a fallback entry), speaking its provider's wire
/// protocol, with the time limits of `cfg` and [`MAX_RETRIES`] retries.
///
/// # Errors
/// [`ProviderError::Connect`] when the HTTP client cannot be built.
pub fn connect(
    ep: &ModelEndpoint,
    cfg: &ModelConfig,
) -> Result<Arc<dyn ModelProvider>, ProviderError> {
    connect_with_retries(ep, cfg, MAX_RETRIES, &Default::default())
}

/// [`connect`] with at most `retries` retries of a transient failure (0: one attempt), its
/// requests timed in `metrics`.
///
/// # Errors
/// As [`connect`].
pub fn connect_with_retries(
    ep: &ModelEndpoint,
    cfg: &ModelConfig,
    retries: u32,
    metrics: &Arc<Metrics>,
) -> Result<Arc<dyn ModelProvider>, ProviderError> {
    Ok(match ep.provider {
        ProviderKind::Openai => Arc::new(
            OpenAiClient::for_endpoint(ep, cfg)?.with_retries_and_metrics(retries, metrics.clone()),
        ),
        ProviderKind::Anthropic => Arc::new(
            AnthropicClient::for_endpoint(ep, cfg)?
                .with_retries_and_metrics(retries, metrics.clone()),
        ),
    })
}

/// The fallback chain of `cfg`: the primary endpoint, then `model.fallback` ([`Chain`]);
/// every request timed in `metrics`.
///
/// # Errors
/// As [`connect`], for the first endpoint that fails.
pub fn chain(cfg: &ModelConfig, metrics: &Arc<Metrics>) -> Result<Chain, ProviderError> {
    Chain::from_config(cfg, |ep, retries| {
        connect_with_retries(ep, cfg, retries, metrics)
    })
}
