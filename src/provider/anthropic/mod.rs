//! HTTP client for the Anthropic Messages API: `POST {base_url}/v1/messages` (whole and
//! streamed answers) and `GET {base_url}/v1/models` (used by `ethan doctor`), API version
//! `2023-06-01`.
//!
//! It owns the requests, their headers (`x-api-key`, or `Authorization: Bearer` for an OAuth
//! token `sk-ant-oat…`; `anthropic-version`), the retries and the reading of streams; the wire
//! shapes are in [`wire`], the assembly of stream events in [`stream`].
//!
//! Retries: 408, 429, 529 (`overloaded_error`), 5xx, timeouts, dropped connections, unreadable
//! bodies and streams that end before `message_stop` are retried with bounded exponential
//! backoff (at most [`MAX_RETRIES`] retries; `Retry-After` honoured up to 30 s); any other 4xx
//! is not. A streamed call has the limits of the OpenAI client: `timeout_secs` for the
//! connection and the response headers, then `idle_timeout_secs` between two events (`ping`
//! events do not count), at most 8 MiB and 30 minutes in all.

pub mod stream;
pub mod wire;

use super::http::is_event_stream;
use super::http_core::Core;
use super::sse::SseDecoder;
use super::types::{ChatMessage, ToolSpec};
use super::{Completion, ModelProvider, ProviderError, MAX_RETRIES};
use crate::config::{ModelConfig, ModelEndpoint, Secret};
use ethan_core::event::{EventSink, TurnEvent};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use stream::{Event, EventAssembler};

/// The `anthropic-version` header sent with every request.
pub const API_VERSION: &str = "2023-06-01";

/// The prefix of OAuth access tokens, sent as `Authorization: Bearer` instead of `x-api-key`.
const OAUTH_TOKEN_PREFIX: &str = "sk-ant-oat";

/// The beta flag the API asks for beside an OAuth token.
const OAUTH_BETA: &str = "oauth-2025-04-20";

/// Messages API client. Cheap to clone.
#[derive(Clone)]
pub struct AnthropicClient {
    /// The HTTP clients, limits, retries ([`MAX_RETRIES`] unless [`Self::with_max_retries`]
    /// says otherwise) and metrics; its base URL is the host, without a trailing `/` or `/v1`
    /// (e.g. `https://api.anthropic.com`).
    core: Core,
    api_key: Secret,
    model: String,
    max_tokens: u32,
}

impl AnthropicClient {
    /// A client for endpoint `ep` (`base_url` such as `https://api.anthropic.com`; one ending
    /// in `/v1` is taken too) with the limits of `cfg` (`timeout_secs` for whole answers and
    /// the headers of streamed ones, `idle_timeout_secs` between the events of streamed ones,
    /// `max_tokens` for every answer).
    ///
    /// # Errors
    /// [`ProviderError::Connect`] when the HTTP client cannot be built (TLS setup).
    pub fn for_endpoint(ep: &ModelEndpoint, cfg: &ModelConfig) -> Result<Self, ProviderError> {
        let base = ep.base_url.trim_end_matches('/');
        let base = base.strip_suffix("/v1").unwrap_or(base);
        Ok(Self {
            core: Core::new(&ep.base_url, base.to_string(), cfg, MAX_RETRIES)?,
            api_key: ep.api_key.clone(),
            model: ep.name.clone(),
            max_tokens: ep.max_tokens.unwrap_or(cfg.max_tokens).max(1),
        })
    }

    /// The same client, retrying a transient failure at most `n` times (0: one attempt).
    pub fn with_max_retries(mut self, n: u32) -> Self {
        self.core.max_retries = n;
        self
    }

    /// Time requests in `metrics` (the daemon's registry) instead of a registry of its own.
    pub fn with_metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> Self {
        self.core.metrics = metrics;
        self
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    /// A request to `{base_url}/v1{path}` with the key and version headers (the key marked
    /// sensitive, so no HTTP log shows it).
    fn request(
        &self,
        http: &reqwest::Client,
        method: reqwest::Method,
        path: &str,
    ) -> reqwest::RequestBuilder {
        let rb = http
            .request(method, format!("{}/v1{path}", self.core.base_url))
            .header("anthropic-version", API_VERSION);
        let key = self.api_key.expose();
        if key.is_empty() {
            return rb;
        }
        let (name, value) = if key.starts_with(OAUTH_TOKEN_PREFIX) {
            (
                reqwest::header::AUTHORIZATION.as_str(),
                format!("Bearer {key}"),
            )
        } else {
            ("x-api-key", key.to_string())
        };
        match reqwest::header::HeaderValue::from_str(&value) {
            Ok(mut v) => {
                v.set_sensitive(true);
                let rb = rb.header(name, v);
                if key.starts_with(OAUTH_TOKEN_PREFIX) {
                    rb.header("anthropic-beta", OAUTH_BETA)
                } else {
                    rb
                }
            }
            // A key with characters a header cannot carry: sent without it (the API says 401).
            Err(_) => {
                tracing::warn!("the Anthropic API key has characters a header cannot carry");
                rb
            }
        }
    }

    /// `c` with this client's model name as the one that answered.
    fn with_model(&self, mut c: Completion) -> Completion {
        c.model = self.model.clone();
        c
    }

    /// One answer (`POST /v1/messages`), retried on transient failures.
    ///
    /// # Errors
    /// [`ProviderError`]: the key is refused (401/403, [`ProviderError::Auth`]), the prompt is
    /// too long ([`ProviderError::ContextLength`]), another HTTP error, a timeout, an
    /// unreachable endpoint, or an unreadable answer (after the retries).
    pub async fn complete(
        &self,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
    ) -> Result<Completion, ProviderError> {
        let body = wire::request_body(&self.model, self.max_tokens, messages, tools, false);
        self.core.timed(self.complete_body(&body)).await
    }

    async fn complete_body(&self, body: &Value) -> Result<Completion, ProviderError> {
        self.core.retries().run(|| self.complete_once(body)).await
    }

    async fn complete_once(
        &self,
        body: &Value,
    ) -> (Result<Completion, ProviderError>, Option<Duration>) {
        let request = self
            .request(&self.core.http, reqwest::Method::POST, "/messages")
            .json(body);
        match self.core.whole_once(request, wire::classify_error).await {
            (Ok(text), _) => (self.parse_whole(&text), None),
            (Err(e), retry_after) => (Err(e), retry_after),
        }
    }

    fn parse_whole(&self, text: &str) -> Result<Completion, ProviderError> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| ProviderError::BadResponse(format!("not JSON ({e})")))?;
        if v.get("type").and_then(Value::as_str) == Some("error") {
            return Err(wire::stream_error(&v));
        }
        wire::parse_message(&v).map(|c| self.with_model(c))
    }

    /// One answer, streamed: each piece of text goes to `deltas` as [`TurnEvent::Delta`] as it
    /// arrives. Retried like [`AnthropicClient::complete`]; a retry after pieces were sent
    /// first sends [`TurnEvent::DeltaReset`]. A server answering with a whole JSON message is
    /// read as such, its text sent as one piece.
    ///
    /// # Errors
    /// As [`AnthropicClient::complete`]; [`ProviderError::Stalled`] when no event came for
    /// `idle_timeout_secs` (after the retries); [`ProviderError::Interrupted`] (without a
    /// reset: the person keeps the text) when it failed for good after text was sent.
    pub async fn complete_streaming(
        &self,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
        deltas: &EventSink,
    ) -> Result<Completion, ProviderError> {
        let body = wire::request_body(&self.model, self.max_tokens, messages, tools, true);
        self.core.timed(self.stream_body(&body, deltas)).await
    }

    async fn stream_body(
        &self,
        body: &Value,
        deltas: &EventSink,
    ) -> Result<Completion, ProviderError> {
        let mut attempt = 0;
        loop {
            let mut shown = String::new();
            match self.stream_once(body, deltas, &mut shown).await {
                Ok(c) => return Ok(c),
                Err((e, retry_after)) => {
                    let retries = self.core.retries();
                    if let Some(e) = retries
                        .after_stream_failure(e, retry_after, attempt, shown, deltas)
                        .await
                    {
                        return Err(e);
                    }
                    attempt += 1;
                }
            }
        }
    }

    /// One streamed attempt; `shown` gathers the text sent to `deltas`. The error comes with
    /// the server's `Retry-After`, if any.
    async fn stream_once(
        &self,
        body: &Value,
        deltas: &EventSink,
        shown: &mut String,
    ) -> Result<Completion, (ProviderError, Option<Duration>)> {
        let request = self
            .request(&self.core.stream_http, reqwest::Method::POST, "/messages")
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .json(body);
        let mut resp = self
            .core
            .start_stream(request)
            .await
            .map_err(|e| (e, None))?;
        let status = resp.status().as_u16();
        if !(200..300).contains(&status) {
            let (text, wait) = self
                .core
                .failure_text(&mut resp)
                .await
                .map_err(|e| (e, None))?;
            return Err((wire::classify_error(status, &text), wait));
        }
        if !is_event_stream(&resp) {
            let whole = self
                .core
                .read_rest(&mut resp)
                .await
                .map_err(|e| (e, None))?;
            let text = String::from_utf8_lossy(&whole);
            let t = text.trim_start();
            if !(t.starts_with("event:") || t.starts_with("data:") || t.starts_with(':')) {
                // A whole message: its text as one piece.
                let c = self.parse_whole(&text).map_err(|e| (e, None))?;
                if let Some(t) = c.message.content.as_deref().filter(|t| !t.is_empty()) {
                    shown.push_str(t);
                    let _ = deltas.send(TurnEvent::Delta(t.to_string()));
                }
                return Ok(c);
            }
            // A stream under another content type.
            let mut decoder = SseDecoder::default();
            let mut assembler = EventAssembler::default();
            let mut datas = decoder.feed(&whole);
            datas.extend(decoder.finish());
            for data in datas {
                take(&mut assembler, &data, deltas, shown).map_err(|e| (e, None))?;
                if assembler.is_done() {
                    break;
                }
            }
            return self.assembled(assembler).map_err(|e| (e, None));
        }
        self.read_stream(&mut resp, deltas, shown)
            .await
            .map_err(|e| (e, None))
    }

    /// Reads the events of a streamed answer until `message_stop` (or the end of the body).
    async fn read_stream(
        &self,
        resp: &mut reqwest::Response,
        deltas: &EventSink,
        shown: &mut String,
    ) -> Result<Completion, ProviderError> {
        let mut decoder = SseDecoder::default();
        let mut assembler = EventAssembler::default();
        // Only events other than `ping` count as progress.
        let mut chunks = self.core.chunks();
        'read: loop {
            let Some(bytes) = chunks.next(&self.core, resp, false).await? else {
                break;
            };
            for data in decoder.feed(&bytes) {
                if take(&mut assembler, &data, deltas, shown)? != Event::Ping {
                    chunks.progressed();
                }
                if assembler.is_done() {
                    break 'read;
                }
            }
        }
        if !assembler.is_done() {
            for data in decoder.finish() {
                take(&mut assembler, &data, deltas, shown)?;
            }
        }
        self.assembled(assembler)
    }

    fn assembled(&self, assembler: EventAssembler) -> Result<Completion, ProviderError> {
        assembler.into_completion().map(|c| self.with_model(c))
    }

    /// `GET {base_url}/v1/models`: whether the endpoint answers and accepts the key (no
    /// tokens spent). A 404 (a proxy without the list) counts as answering.
    ///
    /// # Errors
    /// As [`AnthropicClient::complete`] (401/403: [`ProviderError::Auth`]).
    pub async fn check(&self) -> Result<String, ProviderError> {
        let mut resp = self
            .request(&self.core.http, reqwest::Method::GET, "/models")
            .send()
            .await
            .map_err(|e| self.core.transport_error(e))?;
        let status = resp.status().as_u16();
        let core = &self.core;
        let text = super::http::read_capped(&mut resp, &core.base_url, core.timeout_secs)
            .await
            .unwrap_or_default();
        match status {
            200..=299 => Ok(format!(
                "{} answers (Anthropic Messages API, model {})",
                core.base_url, self.model
            )),
            404 => Ok(format!(
                "{} answers (no /v1/models list; model {})",
                core.base_url, self.model
            )),
            _ => Err(wire::classify_error(status, &text)),
        }
    }
}

/// One `data` payload into the assembler; its text piece, if any, to `deltas`.
fn take(
    assembler: &mut EventAssembler,
    data: &str,
    deltas: &EventSink,
    shown: &mut String,
) -> Result<Event, ProviderError> {
    let event = assembler.push(data)?;
    if let Event::Text(piece) = &event {
        shown.push_str(piece);
        let _ = deltas.send(TurnEvent::Delta(piece.clone()));
    }
    Ok(event)
}

#[async_trait::async_trait]
impl ModelProvider for AnthropicClient {
    async fn complete(
        &self,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
    ) -> Result<Completion, ProviderError> {
        AnthropicClient::complete(self, messages, tools).await
    }

    async fn complete_streaming(
        &self,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
        deltas: &EventSink,
    ) -> Result<Completion, ProviderError> {
        AnthropicClient::complete_streaming(self, messages, tools, deltas).await
    }

    async fn check(&self) -> Result<String, ProviderError> {
        AnthropicClient::check(self).await
    }
}

#[cfg(test)]
mod tests;
