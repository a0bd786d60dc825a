//! HTTP client for `POST {base_url}/chat/completions` (OpenAI Chat Completions API, whole and
//! streamed answers) and `GET {base_url}/models` (used by `ethan doctor`).
//!
//! A streamed call ([`OpenAiClient::complete_streaming`]) sends `"stream": true` and
//! `"stream_options": {"include_usage": true}`, reads the Server-Sent Events ([`super::sse`])
//! and sends each piece of text to the turn's event sink. Its time limits: `timeout_secs` for
//! the connection and the response headers, then `idle_timeout_secs` for each read of the body
//! (before the first chunk and between two; no limit on the whole answer). A server that
//! refuses `stream` or `stream_options` (HTTP 400 naming the parameter) is remembered by the
//! client and its clones, and called without it.

mod body;

pub use body::message_json;

/// The streamed body this client sends for `messages` and `tools` (model `m`, cache key `k`):
/// for the tests that compare bodies built from kept messages with bodies built afresh.
#[cfg(test)]
pub(crate) fn body_bytes(messages: &[Cow<'_, ChatMessage>], tools: &[ToolSpec]) -> Vec<u8> {
    Body::new("m", Some("k"), messages, tools)
        .streamed(true)
        .to_bytes()
}

use super::held_text::HeldText;
use super::http::error_message;
use super::http_core::Core;
use super::sse::ChunkAssembler;
use super::streamed::{self, Shown, StreamReader, StreamWire};
use super::types::{ChatMessage, ToolSpec};
use super::{tolerant, Completion, FinishReason, ModelProvider, ProviderError, MAX_RETRIES};
use crate::config::{ModelConfig, ModelEndpoint, Secret};
use crate::metrics::Metrics;
use body::Body;
use ethan_core::event::{EventSink, TurnEvent};
use ethan_core::provider::Usage;
use serde_json::Value;
use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Chat Completions client. Cheap to clone; clones share what they learnt about the server.
#[derive(Clone)]
pub struct OpenAiClient {
    /// The HTTP clients, limits, retries ([`MAX_RETRIES`] unless
    /// [`Self::with_retries_and_metrics`] says otherwise) and metrics.
    core: Core,
    api_key: Secret,
    model: String,
    /// The server refused `stream`: streamed calls are made as whole ones.
    stream_refused: Arc<AtomicBool>,
    /// The server refused `stream_options`: streamed calls are made without it.
    stream_options_refused: Arc<AtomicBool>,
    /// Send a `prompt_cache_key` per conversation ([`super::cache_key`]).
    cache_key: bool,
    /// The system prompts' JSON written lately.
    prompts: body::Prompts,
}

/// A parameter of streamed calls that a server refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refused {
    Stream,
    StreamOptions,
}

impl OpenAiClient {
    /// A client for `cfg.base_url` (`model.*` keys: `timeout_secs` for whole answers and the
    /// headers of streamed ones, `idle_timeout_secs` between the chunks of streamed ones).
    ///
    /// # Errors
    /// [`ProviderError::Connect`] when the HTTP client cannot be built (TLS setup).
    pub fn new(cfg: &ModelConfig) -> Result<Self, ProviderError> {
        Self::for_endpoint(&cfg.primary(), cfg)
    }

    /// A client for endpoint `ep` (the primary or a fallback entry) with the time limits of
    /// `cfg`.
    ///
    /// # Errors
    /// As [`OpenAiClient::new`].
    pub fn for_endpoint(ep: &ModelEndpoint, cfg: &ModelConfig) -> Result<Self, ProviderError> {
        let base_url = ep.base_url.trim_end_matches('/').to_string();
        Ok(Self {
            core: Core::new(&ep.base_url, base_url, cfg, MAX_RETRIES)?,
            api_key: ep.api_key.clone(),
            model: ep.name.clone(),
            stream_refused: Arc::new(AtomicBool::new(false)),
            stream_options_refused: Arc::new(AtomicBool::new(false)),
            cache_key: super::cache_key::sends_key(cfg.prompt_cache_key, &ep.base_url),
            prompts: body::Prompts::default(),
        })
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    /// The same client, retrying a transient failure at most `retries` times (0: one
    /// attempt), its requests timed in `metrics` (the daemon's registry).
    pub fn with_retries_and_metrics(mut self, retries: u32, metrics: Arc<Metrics>) -> Self {
        self.core.max_retries = retries;
        self.core.metrics = metrics;
        self
    }

    /// `c` with this client's model name as the one that answered.
    fn with_model(&self, mut c: Completion) -> Completion {
        c.model = self.model.clone();
        c
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.request_with(&self.core.http, method, path)
    }

    fn request_with(
        &self,
        http: &reqwest::Client,
        method: reqwest::Method,
        path: &str,
    ) -> reqwest::RequestBuilder {
        let rb = http.request(method, format!("{}{}", self.core.base_url, path));
        if self.api_key.is_empty() {
            rb
        } else {
            rb.bearer_auth(self.api_key.expose())
        }
    }

    /// The conversation's `prompt_cache_key`, when this endpoint gets one.
    fn conversation_key(&self, messages: &[Cow<'_, ChatMessage>]) -> Option<String> {
        self.cache_key
            .then(|| super::cache_key::conversation_key(messages))
            .flatten()
    }

    /// A whole answer for `body`, retried on transient failures (its text written once).
    async fn complete_body(&self, body: Body<'_>) -> Result<Completion, ProviderError> {
        let bytes = bytes::Bytes::from(body.to_bytes());
        let request = || {
            self.request(reqwest::Method::POST, "/chat/completions")
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(bytes.clone())
        };
        let parse =
            |text: &str| parse_completion(text, body.offers_tools()).map(|c| self.with_model(c));
        self.core.whole(request, classify_error, parse).await
    }

    /// [`ModelProvider::complete_streaming`] for a request body without the streaming keys.
    async fn stream_body(
        &self,
        base: Body<'_>,
        deltas: &EventSink,
    ) -> Result<Completion, ProviderError> {
        let mut wire = Streaming {
            client: self,
            base,
            sent: Sent::default(),
        };
        if let Some(c) = streamed::stream(&self.core, &mut wire, deltas).await? {
            return Ok(c);
        }
        // The server refused `stream`.
        let c = self.complete_body(base).await?;
        send_whole_text(&c, deltas);
        Ok(c)
    }
}

/// The streaming parameters the last request of a streamed call carried.
#[derive(Debug, Default, Clone, Copy)]
struct Sent {
    stream: bool,
    stream_options: bool,
}

/// A streamed call's side of this API ([`streamed`]): the body without the streaming keys, and
/// what the last request added.
struct Streaming<'a, 'b> {
    client: &'a OpenAiClient,
    base: Body<'b>,
    sent: Sent,
}

impl StreamWire for Streaming<'_, '_> {
    type Reader = Reading;

    fn model(&self) -> &str {
        &self.client.model
    }

    /// The body with `"stream": true` and `stream_options`, unless the server refused them.
    fn request(&mut self, http: &reqwest::Client) -> Option<reqwest::RequestBuilder> {
        if self.client.stream_refused.load(Ordering::Relaxed) {
            return None;
        }
        let options = !self.client.stream_options_refused.load(Ordering::Relaxed);
        let body = self.base.streamed(options);
        self.sent = Sent {
            stream: true,
            stream_options: options,
        };
        let request = self
            .client
            .request_with(http, reqwest::Method::POST, "/chat/completions")
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_bytes());
        Some(request)
    }

    fn classify(&self, status: u16, text: &str) -> ProviderError {
        classify_error(status, text)
    }

    /// A refused parameter is remembered by the client and its clones.
    fn refused(&mut self, status: u16, text: &str) -> bool {
        let Some(what) = refused_parameter(status, text, self.sent) else {
            return false;
        };
        let (flag, name) = match what {
            Refused::Stream => (&self.client.stream_refused, "stream"),
            Refused::StreamOptions => (&self.client.stream_options_refused, "stream_options"),
        };
        if !flag.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "the model endpoint {} refuses `{name}`; calling it without `{name}` from now on",
                self.client.core.base_url
            );
        }
        true
    }

    fn whole(&self, text: &str) -> Result<Completion, ProviderError> {
        parse_completion(text, self.base.offers_tools())
    }

    fn reader(&self) -> Reading {
        let offered_tools = self.base.offers_tools();
        Reading {
            assembler: ChunkAssembler::default(),
            held: HeldText::new(offered_tools),
            offered_tools,
        }
    }
}

/// One streamed answer being read: its chunks put together, and the text that may be a call
/// kept back ([`HeldText`]). Every event counts as progress: a server sending nothing but
/// keep-alive comments stalls.
struct Reading {
    assembler: ChunkAssembler,
    held: HeldText,
    offered_tools: bool,
}

impl StreamReader for Reading {
    /// One `data` payload into the assembler; its text piece, once it cannot be a call
    /// written as text, to the sink.
    fn take(&mut self, data: &str, shown: &mut Shown<'_>) -> Result<bool, ProviderError> {
        if let Some(piece) = self.assembler.push(data)? {
            if let Some(text) = self.held.push(&piece) {
                shown.send(text);
            }
        }
        Ok(true)
    }

    fn is_done(&self) -> bool {
        self.assembler.is_done()
    }

    /// A server that sent its last chunk but neither `[DONE]` nor closed.
    fn is_complete(&self) -> bool {
        self.assembler.is_complete()
    }

    /// The text kept back is sent when the answer has no tool calls.
    fn finish(mut self, shown: &mut Shown<'_>) -> Result<Completion, ProviderError> {
        if !self.assembler.is_complete() {
            return Err(ProviderError::BadResponse(
                "the stream ended before its last chunk (no finish_reason, no [DONE])".into(),
            ));
        }
        let usage = self.assembler.usage().and_then(usage_of);
        let mut c = self.assembler.into_completion(self.offered_tools)?;
        c.usage = usage;
        if let Some(rest) = self.held.finish(!c.message.tool_calls.is_empty()) {
            shown.send(rest);
        }
        Ok(c)
    }
}

fn classify_error(status: u16, text: &str) -> ProviderError {
    let message = error_message(text);
    let lower = text.to_ascii_lowercase();
    if status == 400
        && (lower.contains("context_length_exceeded")
            || lower.contains("maximum context length")
            || lower.contains("context length")
            || lower.contains("too many tokens"))
    {
        return ProviderError::ContextLength(message);
    }
    if status == 401 || status == 403 {
        return ProviderError::Auth { status, message };
    }
    ProviderError::Http { status, message }
}

/// Whether an error answer to a streamed request refuses one of its streaming parameters:
/// HTTP 400 (or 422) whose `error.param` or `error.message` names `stream_options` or `stream`
/// (e.g. "stream is not supported", "Unrecognized request argument supplied: stream"), and
/// the request carried that parameter (`sent`).
fn refused_parameter(status: u16, text: &str, sent: Sent) -> Option<Refused> {
    if status != 400 && status != 422 {
        return None;
    }
    let parsed: Option<Value> = serde_json::from_str(text).ok();
    let param = parsed
        .as_ref()
        .and_then(|v| v.pointer("/error/param"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let message = error_message(text).to_ascii_lowercase();
    let words: Vec<&str> = message
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .collect();
    let names = |p: &str| param == p || words.contains(&p);
    if sent.stream_options && names("stream_options") {
        Some(Refused::StreamOptions)
    } else if sent.stream
        && (names("stream")
            || [
                "streaming is not supported",
                "streaming not supported",
                "does not support streaming",
                "streaming is disabled",
                "streaming is not enabled",
            ]
            .iter()
            .any(|p| message.contains(p)))
    {
        Some(Refused::Stream)
    } else {
        None
    }
}

/// Sends the text of a whole answer as one [`TurnEvent::Delta`]; whether there was any.
fn send_whole_text(c: &Completion, deltas: &EventSink) -> bool {
    match c.message.content.as_deref().filter(|t| !t.is_empty()) {
        Some(text) => {
            let _ = deltas.send(TurnEvent::Delta(text.to_string()));
            true
        }
        None => false,
    }
}

#[async_trait::async_trait]
impl ModelProvider for OpenAiClient {
    /// One completion, retried on transient failures.
    async fn complete(
        &self,
        messages: &[Cow<'_, ChatMessage>],
        tools: &[ToolSpec],
    ) -> Result<Completion, ProviderError> {
        let key = self.conversation_key(messages);
        let body =
            Body::new(&self.model, key.as_deref(), messages, tools).with_prompts(&self.prompts);
        self.core.timed(self.complete_body(body)).await
    }

    /// One completion, streamed: each piece of text goes to `deltas` as
    /// [`TurnEvent::Delta`] as it arrives. Retried on transient failures like
    /// [`ModelProvider::complete`]; a retry after pieces were sent first sends
    /// [`TurnEvent::DeltaReset`]. A final failure after pieces were sent keeps them:
    /// [`ProviderError::Interrupted`], with no reset.
    ///
    /// A server that answers with a whole `application/json` completion is read as such and
    /// its text sent as one piece; so is every answer once the server refused `stream`.
    ///
    /// # Errors
    /// As [`ModelProvider::complete`], and [`ProviderError::Stalled`] when no chunk came for
    /// `model.idle_timeout_secs` (after the retries).
    async fn complete_streaming(
        &self,
        messages: &[Cow<'_, ChatMessage>],
        tools: &[ToolSpec],
        deltas: &EventSink,
    ) -> Result<Completion, ProviderError> {
        let key = self.conversation_key(messages);
        let base =
            Body::new(&self.model, key.as_deref(), messages, tools).with_prompts(&self.prompts);
        self.core.timed(self.stream_body(base, deltas)).await
    }

    /// `GET {base_url}/models`: whether the endpoint answers and accepts the key. A 404 (many
    /// compatible servers have no model list) counts as answering.
    async fn check(&self) -> Result<String, ProviderError> {
        let request = self.request(reqwest::Method::GET, "/models");
        let (status, text) = self.core.ask(request).await?;
        let core = &self.core;
        match status {
            200..=299 => Ok(format!("{} answers (model {})", core.base_url, self.model)),
            404 => Ok(format!(
                "{} answers (no /models list; model {})",
                core.base_url, self.model
            )),
            _ => Err(classify_error(status, &text)),
        }
    }
}

/// The completion of a whole (not streamed) answer; `offered_tools`: the request offered tools
/// (tool calls written as text are then taken as calls, see [`tolerant`]).
fn parse_completion(text: &str, offered_tools: bool) -> Result<Completion, ProviderError> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| ProviderError::BadResponse(format!("not JSON ({e})")))?;
    let choice = v
        .pointer("/choices/0")
        .ok_or_else(|| ProviderError::BadResponse("no choices[0] in the answer".into()))?;
    // Ids filled in and unique, calls written as text taken as calls.
    let message = tolerant::read_message(
        choice
            .get("message")
            .ok_or_else(|| ProviderError::BadResponse("no choices[0].message".into()))?,
        offered_tools,
    )
    .map_err(|e| ProviderError::BadResponse(format!("choices[0].message: {e}")))?;
    Ok(Completion {
        message,
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(FinishReason::parse),
        usage: v.get("usage").and_then(usage_of),
        model: String::new(),
    })
}

/// The tokens of an OpenAI `usage` object (`prompt_tokens`, `completion_tokens`,
/// `prompt_tokens_details.cached_tokens`); `None` when it has neither count.
fn usage_of(u: &Value) -> Option<Usage> {
    let n = |p: &str| u.pointer(p).and_then(Value::as_u64);
    let (input, output) = (n("/prompt_tokens"), n("/completion_tokens"));
    if input.is_none() && output.is_none() {
        return None;
    }
    Some(Usage {
        input_tokens: input.unwrap_or(0),
        output_tokens: output.unwrap_or(0),
        cache_read_tokens: n("/prompt_tokens_details/cached_tokens").unwrap_or(0),
        cache_write_tokens: 0,
    })
}

#[cfg(test)]
mod tests;
