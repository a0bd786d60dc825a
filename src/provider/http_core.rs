//! The HTTP core both model clients ([`super::openai`], [`super::anthropic`]) stand on: the two
//! HTTP clients (whole answers bounded by `timeout_secs`, streamed ones per read), the retry
//! policy, one whole-answer attempt (send, read capped, a failing status mapped by the client's
//! own error rule, `Retry-After` kept), the start of a streamed attempt (headers within
//! `timeout_secs`), the reading of a stream's body under the idle timeout, the total time and
//! the size cap, and the latency metric; a whole answer's retries ([`Core::whole`]). The
//! streamed retry loop is [`super::streamed`]. Each client builds its requests and reads its
//! wire format; nothing else.

use super::http::{read_capped, read_rest, retry_after, transport_error, Retries};
use super::http::{MAX_STREAM_BYTES, MAX_STREAM_TIME};
use super::ProviderError;
use crate::metrics::Metrics;
use std::sync::Arc;
use std::time::Duration;

/// What one client's requests share. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Core {
    /// Whole answers: `timeout_secs` bounds each request.
    pub http: reqwest::Client,
    /// Streamed answers: no total limit (bounded per read instead).
    pub stream_http: reqwest::Client,
    /// Without a trailing `/`.
    pub base_url: String,
    pub timeout_secs: u64,
    pub idle_timeout_secs: u64,
    /// First backoff delay; doubled per retry.
    pub backoff: Duration,
    /// Retries after the first attempt for transient failures.
    pub max_retries: u32,
    /// Where requests are timed (`ethan_model_request_seconds`).
    pub metrics: Arc<Metrics>,
}

impl Core {
    /// The core of a client of `base_url` with the limits of `cfg` and `max_retries` retries;
    /// `endpoint` is the configured URL named when the HTTP client cannot be built.
    pub fn new(
        endpoint: &str,
        base_url: String,
        cfg: &crate::config::ModelConfig,
        max_retries: u32,
    ) -> Result<Self, ProviderError> {
        let connect_error = |e: reqwest::Error| ProviderError::Connect {
            url: endpoint.to_string(),
            message: e.to_string(),
        };
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(cfg.timeout_secs))
            .build()
            .map_err(connect_error)?;
        let stream_http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(connect_error)?;
        Ok(Self {
            http,
            stream_http,
            base_url,
            timeout_secs: cfg.timeout_secs,
            idle_timeout_secs: cfg.idle_timeout_secs.max(1),
            backoff: Duration::from_millis(500),
            max_retries,
            metrics: Default::default(),
        })
    }

    pub fn retries(&self) -> Retries {
        Retries {
            max: self.max_retries,
            backoff: self.backoff,
        }
    }

    pub fn transport_error(&self, e: reqwest::Error) -> ProviderError {
        transport_error(e, &self.base_url, self.timeout_secs)
    }

    /// The rest of a response body, each read bounded by the idle timeout.
    pub async fn read_rest(&self, resp: &mut reqwest::Response) -> Result<Vec<u8>, ProviderError> {
        read_rest(
            resp,
            self.idle_timeout_secs,
            &self.base_url,
            self.timeout_secs,
        )
        .await
    }

    /// `call`, its duration recorded in the latency metric (`ok` / `error`).
    pub async fn timed<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, ProviderError>>,
    ) -> Result<T, ProviderError> {
        let started = std::time::Instant::now();
        let result = call.await;
        let outcome = if result.is_ok() { "ok" } else { "error" };
        self.metrics
            .model_latency
            .with_label_values(&[outcome])
            .observe(started.elapsed().as_secs_f64());
        result
    }

    /// A whole answer, retried on transient failures: `request` makes the request of each
    /// attempt, a failing status is mapped by `classify`, the body read by `parse`.
    pub async fn whole<T>(
        &self,
        request: impl Fn() -> reqwest::RequestBuilder,
        classify: impl Fn(u16, &str) -> ProviderError,
        parse: impl Fn(&str) -> Result<T, ProviderError>,
    ) -> Result<T, ProviderError> {
        let (request, classify, parse) = (&request, &classify, &parse);
        let once = move || async move {
            match self.whole_once(request(), classify).await {
                (Ok(text), _) => (parse(&text), None),
                (Err(e), retry_after) => (Err(e), retry_after),
            }
        };
        self.retries().run(once).await
    }

    /// A request asked once (`GET /models`): its status and its body, read capped (empty
    /// when unreadable).
    ///
    /// # Errors
    /// The request could not be sent ([`Core::transport_error`]).
    pub async fn ask(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<(u16, String), ProviderError> {
        let mut resp = request.send().await.map_err(|e| self.transport_error(e))?;
        let status = resp.status().as_u16();
        let text = read_capped(&mut resp, &self.base_url, self.timeout_secs)
            .await
            .unwrap_or_default();
        Ok((status, text))
    }

    /// One attempt of a whole answer: `request` sent, its body read (capped like a stream: a
    /// hostile or broken server cannot grow the daemon's memory), a failing status mapped by
    /// `classify` with the server's `Retry-After`.
    async fn whole_once(
        &self,
        request: reqwest::RequestBuilder,
        classify: impl Fn(u16, &str) -> ProviderError,
    ) -> (Result<String, ProviderError>, Option<Duration>) {
        let mut resp = match request.send().await {
            Ok(r) => r,
            Err(e) => return (Err(self.transport_error(e)), None),
        };
        let status = resp.status().as_u16();
        let retry_after = retry_after(&resp);
        let text = match read_capped(&mut resp, &self.base_url, self.timeout_secs).await {
            Ok(t) => t,
            Err(e) => return (Err(e), None),
        };
        if !(200..300).contains(&status) {
            return (Err(classify(status, &text)), retry_after);
        }
        (Ok(text), None)
    }

    /// Send the request of a streamed attempt: its headers must come within `timeout_secs`.
    pub async fn start_stream(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, ProviderError> {
        match tokio::time::timeout(Duration::from_secs(self.timeout_secs), request.send()).await {
            Err(_) => Err(ProviderError::Timeout(self.timeout_secs)),
            Ok(Err(e)) => Err(self.transport_error(e)),
            Ok(Ok(r)) => Ok(r),
        }
    }

    /// The body of a failed streamed attempt (lossily as text) and the server's `Retry-After`.
    pub async fn failure_text(
        &self,
        resp: &mut reqwest::Response,
    ) -> Result<(String, Option<Duration>), ProviderError> {
        let wait = retry_after(resp);
        let text = self.read_rest(resp).await?;
        Ok((String::from_utf8_lossy(&text).into_owned(), wait))
    }

    /// A reader of a streamed body, starting now.
    pub fn chunks(&self) -> Chunks {
        let now = tokio::time::Instant::now();
        Chunks {
            idle: Duration::from_secs(self.idle_timeout_secs),
            idle_secs: self.idle_timeout_secs,
            deadline: now + MAX_STREAM_TIME,
            last_event: now,
            received: 0,
        }
    }
}

/// The reading of a streamed body: each wait bounded by the idle timeout since the last event
/// (what counts as one is the client's: [`Chunks::progressed`]), the whole by
/// [`MAX_STREAM_TIME`] and [`MAX_STREAM_BYTES`].
pub(crate) struct Chunks {
    idle: Duration,
    idle_secs: u64,
    deadline: tokio::time::Instant,
    last_event: tokio::time::Instant,
    received: usize,
}

impl Chunks {
    /// The next piece of `resp`'s body; `None` at its end, or when the idle time passed and
    /// `whole` (the answer is complete already: a server that sent its last chunk but did not
    /// close).
    pub async fn next(
        &mut self,
        core: &Core,
        resp: &mut reqwest::Response,
        whole: bool,
    ) -> Result<Option<bytes::Bytes>, ProviderError> {
        let wait_until = (self.last_event + self.idle).min(self.deadline);
        let bytes = match tokio::time::timeout_at(wait_until, resp.chunk()).await {
            Err(_) if whole => return Ok(None),
            Err(_) if tokio::time::Instant::now() >= self.deadline => {
                return Err(ProviderError::BadResponse(format!(
                    "the streamed answer was still going after {} s",
                    MAX_STREAM_TIME.as_secs()
                )))
            }
            Err(_) => return Err(ProviderError::Stalled(self.idle_secs)),
            Ok(Err(e)) => return Err(core.transport_error(e)),
            Ok(Ok(None)) => return Ok(None),
            Ok(Ok(Some(b))) => b,
        };
        self.received += bytes.len();
        if self.received > MAX_STREAM_BYTES {
            return Err(ProviderError::BadResponse(format!(
                "the streamed answer exceeded {} MiB",
                MAX_STREAM_BYTES >> 20
            )));
        }
        Ok(Some(bytes))
    }

    /// An event came: the idle time starts again.
    pub fn progressed(&mut self) {
        self.last_event = tokio::time::Instant::now();
    }
}
