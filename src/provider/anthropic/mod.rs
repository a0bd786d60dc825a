//! HTTP client for the Anthropic Messages API: `POST {base_url}/v1/messages` (whole and
//! streamed answers) and `GET {base_url}/v1/models` (used by `ethan doctor`), API version
//! `2023-06-01`.
//!
//! It owns the requests, their headers (`x-api-key`, or `Authorization: Bearer` for an OAuth
//! token `sk-ant-oat…`; `anthropic-version`); the wire shapes are in [`wire`], the assembly of
//! stream events in [`stream`], the retries and the reading of streams in the core both
//! clients share ([`super::http_core`], [`super::streamed`]).
//!
//! Retries: 408, 429, 529 (`overloaded_error`), 5xx, timeouts, dropped connections, unreadable
//! bodies and streams that end before `message_stop` are retried with bounded exponential
//! backoff (at most [`MAX_RETRIES`] retries; `Retry-After` honoured up to 30 s); any other 4xx
//! is not. A streamed call has the limits of the OpenAI client: `timeout_secs` for the
//! connection and the response headers, then `idle_timeout_secs` between two events (`ping`
//! events do not count), at most 8 MiB and 30 minutes in all.

pub mod stream;
pub mod wire;

use super::http_core::Core;
use super::streamed::{self, Shown, StreamReader, StreamWire};
use super::types::{ChatMessage, ToolSpec};
use super::{Completion, ModelProvider, ProviderError, MAX_RETRIES};
use crate::config::{ModelConfig, ModelEndpoint, Secret};
use crate::metrics::Metrics;
use ethan_core::event::EventSink;
use serde_json::Value;
use std::borrow::Cow;
use std::sync::Arc;
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
    /// The HTTP clients, limits, retries ([`MAX_RETRIES`] unless
    /// [`Self::with_retries_and_metrics`] says otherwise) and metrics; its base URL is the
    /// host, without a trailing `/` or `/v1` (e.g. `https://api.anthropic.com`).
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

    /// The same client, retrying a transient failure at most `retries` times (0: one
    /// attempt), its requests timed in `metrics` (the daemon's registry).
    pub fn with_retries_and_metrics(mut self, retries: u32, metrics: Arc<Metrics>) -> Self {
        self.core.max_retries = retries;
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

    async fn complete_body(&self, body: &Value) -> Result<Completion, ProviderError> {
        let request = || {
            let request = self.request(&self.core.http, reqwest::Method::POST, "/messages");
            request.json(body)
        };
        let parse = |text: &str| self.parse_whole(text);
        self.core.whole(request, wire::classify_error, parse).await
    }

    fn parse_whole(&self, text: &str) -> Result<Completion, ProviderError> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| ProviderError::BadResponse(format!("not JSON ({e})")))?;
        if v.get("type").and_then(Value::as_str) == Some("error") {
            return Err(wire::stream_error(&v));
        }
        wire::parse_message(&v).map(|c| self.with_model(c))
    }

    async fn stream_body(
        &self,
        body: &Value,
        deltas: &EventSink,
    ) -> Result<Completion, ProviderError> {
        let mut wire = Streaming { client: self, body };
        // This API always streams.
        streamed::stream(&self.core, &mut wire, deltas)
            .await?
            .ok_or_else(|| ProviderError::BadResponse("the answer was not streamed".into()))
    }
}

/// A streamed call's side of this API ([`streamed`]): its one request body.
struct Streaming<'a> {
    client: &'a AnthropicClient,
    body: &'a Value,
}

impl StreamWire for Streaming<'_> {
    type Reader = EventAssembler;

    fn model(&self) -> &str {
        &self.client.model
    }

    fn request(&mut self, http: &reqwest::Client) -> Option<reqwest::RequestBuilder> {
        let request = self
            .client
            .request(http, reqwest::Method::POST, "/messages");
        Some(request.json(self.body))
    }

    fn classify(&self, status: u16, text: &str) -> ProviderError {
        wire::classify_error(status, text)
    }

    fn whole(&self, text: &str) -> Result<Completion, ProviderError> {
        self.client.parse_whole(text)
    }

    fn reader(&self) -> EventAssembler {
        EventAssembler::default()
    }
}

/// Only events other than `ping` count as progress.
impl StreamReader for EventAssembler {
    fn take(&mut self, data: &str, shown: &mut Shown<'_>) -> Result<bool, ProviderError> {
        Ok(match self.push(data)? {
            Event::Text(piece) => {
                shown.send(piece);
                true
            }
            Event::Ping => false,
            Event::Other => true,
        })
    }

    fn is_done(&self) -> bool {
        EventAssembler::is_done(self)
    }

    fn finish(self, _shown: &mut Shown<'_>) -> Result<Completion, ProviderError> {
        self.into_completion()
    }
}

#[async_trait::async_trait]
impl ModelProvider for AnthropicClient {
    /// One answer (`POST /v1/messages`), retried on transient failures.
    ///
    /// # Errors
    /// [`ProviderError`]: the key is refused (401/403, [`ProviderError::Auth`]), the prompt is
    /// too long ([`ProviderError::ContextLength`]), another HTTP error, a timeout, an
    /// unreachable endpoint, or an unreadable answer (after the retries).
    async fn complete(
        &self,
        messages: &[Cow<'_, ChatMessage>],
        tools: &[ToolSpec],
    ) -> Result<Completion, ProviderError> {
        let body = wire::request_body(&self.model, self.max_tokens, messages, tools, false);
        self.core.timed(self.complete_body(&body)).await
    }

    /// One answer, streamed: each piece of text goes to `deltas` as
    /// [`ethan_core::event::TurnEvent::Delta`] as it arrives. Retried like
    /// [`ModelProvider::complete`]; a retry after pieces were sent first sends
    /// [`ethan_core::event::TurnEvent::DeltaReset`]. A server answering with a whole JSON
    /// message is read as such, its text sent as one piece.
    ///
    /// # Errors
    /// As [`ModelProvider::complete`]; [`ProviderError::Stalled`] when no event came for
    /// `idle_timeout_secs` (after the retries); [`ProviderError::Interrupted`] (without a
    /// reset: the person keeps the text) when it failed for good after text was sent.
    async fn complete_streaming(
        &self,
        messages: &[Cow<'_, ChatMessage>],
        tools: &[ToolSpec],
        deltas: &EventSink,
    ) -> Result<Completion, ProviderError> {
        let body = wire::request_body(&self.model, self.max_tokens, messages, tools, true);
        self.core.timed(self.stream_body(&body, deltas)).await
    }

    /// `GET {base_url}/v1/models`: whether the endpoint answers and accepts the key (no
    /// tokens spent). A 404 (a proxy without the list) counts as answering.
    ///
    /// # Errors
    /// As [`ModelProvider::complete`] (401/403: [`ProviderError::Auth`]).
    async fn check(&self) -> Result<String, ProviderError> {
        let request = self.request(&self.core.http, reqwest::Method::GET, "/models");
        let (status, text) = self.core.ask(request).await?;
        let core = &self.core;
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

#[cfg(test)]
mod tests;
