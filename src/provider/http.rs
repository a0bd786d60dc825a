//! The pieces under the HTTP model clients' core ([`super::http_core`]): the wait before a
//! retry (`Retry-After`, else a doubling backoff), the error text of an answer, the reading of
//! a body under the idle timeout and the size cap, and the mapping of transport failures.
//!
//! Both APIs put the error's text at `error.message` of the body (OpenAI:
//! `{"error": {"message", "type", "code"}}`; Anthropic: `{"type": "error", "error": {"type",
//! "message"}}`).

use super::ProviderError;
use serde_json::Value;
use std::time::Duration;

/// The most a streamed answer may carry (bytes of the body): a server that sends more, or a
/// line that never ends, fails the request instead of growing the daemon's memory.
pub(crate) const MAX_STREAM_BYTES: usize = 8 << 20;

/// The longest a streamed answer may take in all, however steadily it comes: a model stuck
/// repeating itself is cut off.
pub(crate) const MAX_STREAM_TIME: Duration = Duration::from_secs(30 * 60);

/// The longest wait before a retry, whatever the server asks for.
const MAX_RETRY_WAIT: Duration = Duration::from_secs(30);

/// The wait before retry `attempt` (0-based): `Retry-After` if the server gave one, else
/// `backoff` doubled per attempt; at most 30 s.
pub(crate) fn retry_wait(
    backoff: Duration,
    attempt: u32,
    retry_after: Option<Duration>,
) -> Duration {
    retry_after
        .unwrap_or_else(|| backoff.saturating_mul(2u32.saturating_pow(attempt)))
        .min(MAX_RETRY_WAIT)
}

/// The `Retry-After` header in seconds, if any (the HTTP-date form is not read).
pub(crate) fn retry_after(resp: &reqwest::Response) -> Option<Duration> {
    resp.headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

/// `text` cut to 300 characters, with `…` when it was longer: error text for the log.
pub(crate) fn shorten(text: &str) -> String {
    let mut s: String = text.chars().take(300).collect();
    if s.len() < text.len() {
        s.push('…');
    }
    s
}

/// The `error.message` of an error body (or the `detail` of a FastAPI server's, such as
/// llama-cpp-python's 404), else the body itself; shortened ([`shorten`]).
pub(crate) fn error_message(text: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(text).ok();
    let msg = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("detail"))
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    shorten(&msg.unwrap_or_else(|| text.to_string()))
}

/// Whether a response is a Server-Sent Events stream (`Content-Type: text/event-stream`).
pub(crate) fn is_event_stream(resp: &reqwest::Response) -> bool {
    resp.headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().starts_with("text/event-stream"))
}

/// A transport failure of a request to `base_url` made with a `timeout_secs` limit:
/// [`ProviderError::Timeout`], [`ProviderError::Connect`], else (a body cut off midway, a reset
/// connection, …) [`ProviderError::BadResponse`].
pub(crate) fn transport_error(
    e: reqwest::Error,
    base_url: &str,
    timeout_secs: u64,
) -> ProviderError {
    if e.is_timeout() {
        ProviderError::Timeout(timeout_secs)
    } else if e.is_connect() {
        ProviderError::Connect {
            url: base_url.to_string(),
            message: ethan_channels::net::describe(&e),
        }
    } else {
        ProviderError::BadResponse(ethan_channels::net::describe(&e))
    }
}

/// The rest of a response body, each read bounded by `idle_timeout_secs`
/// ([`ProviderError::Stalled`]) and the whole by [`MAX_STREAM_BYTES`]
/// ([`ProviderError::BadResponse`]); transport failures as [`transport_error`].
pub(crate) async fn read_rest(
    resp: &mut reqwest::Response,
    idle_timeout_secs: u64,
    base_url: &str,
    timeout_secs: u64,
) -> Result<Vec<u8>, ProviderError> {
    let idle = Duration::from_secs(idle_timeout_secs);
    let mut out = Vec::new();
    loop {
        match tokio::time::timeout(idle, resp.chunk()).await {
            Err(_) => return Err(ProviderError::Stalled(idle_timeout_secs)),
            Ok(Err(e)) => return Err(transport_error(e, base_url, timeout_secs)),
            Ok(Ok(None)) => return Ok(out),
            Ok(Ok(Some(b))) if out.len() + b.len() > MAX_STREAM_BYTES => {
                return Err(ProviderError::BadResponse(format!(
                    "the answer exceeded {} MiB",
                    MAX_STREAM_BYTES >> 20
                )))
            }
            Ok(Ok(Some(b))) => out.extend_from_slice(&b),
        }
    }
}

/// The body of a whole (not streamed) answer, at most [`MAX_STREAM_BYTES`]
/// ([`ProviderError::BadResponse`] beyond); its time is bounded by the request's own timeout
/// (`timeout_secs` of the client that sent it).
pub(crate) async fn read_capped(
    resp: &mut reqwest::Response,
    base_url: &str,
    timeout_secs: u64,
) -> Result<String, ProviderError> {
    let mut out = Vec::new();
    while let Some(b) = resp
        .chunk()
        .await
        .map_err(|e| transport_error(e, base_url, timeout_secs))?
    {
        if out.len() + b.len() > MAX_STREAM_BYTES {
            return Err(ProviderError::BadResponse(format!(
                "the answer exceeded {} MiB",
                MAX_STREAM_BYTES >> 20
            )));
        }
        out.extend_from_slice(&b);
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// How many times a transient failure is retried, and the first wait (doubled per retry).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Retries {
    pub max: u32,
    pub backoff: Duration,
}

impl Retries {
    /// After attempt `attempt` (0-based) failed with `e`: `Some(e)` when it is final (not
    /// transient, or no retry left), else `None` after waiting (`Retry-After` if given) and
    /// logging the retry. `what` names the request in the log line.
    pub(crate) async fn wait_or_give_up(
        &self,
        what: &str,
        e: ProviderError,
        retry_after: Option<Duration>,
        attempt: u32,
    ) -> Option<ProviderError> {
        if !(e.is_transient() && attempt < self.max) {
            return Some(e);
        }
        let wait = retry_wait(self.backoff, attempt, retry_after);
        tracing::warn!(
            "{what} failed ({e}); retry {}/{} in {} ms",
            attempt + 1,
            self.max,
            wait.as_millis()
        );
        tokio::time::sleep(wait).await;
        None
    }

    /// `once` until it answers or fails for good; `once` returns the result of one attempt
    /// and the server's `Retry-After`, if any.
    pub(crate) async fn run<T, F, Fut>(&self, mut once: F) -> Result<T, ProviderError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = (Result<T, ProviderError>, Option<Duration>)>,
    {
        let mut attempt = 0;
        loop {
            let (result, retry_after) = once().await;
            match result {
                Ok(v) => return Ok(v),
                Err(e) => {
                    if let Some(e) = self
                        .wait_or_give_up("model request", e, retry_after, attempt)
                        .await
                    {
                        return Err(e);
                    }
                    attempt += 1;
                }
            }
        }
    }

    /// After a streamed attempt failed with `e` having shown `shown`: the error to return
    /// when it is final — [`ProviderError::Interrupted`] when text was shown (not withdrawn:
    /// the person keeps it) — else `None` after withdrawing the text
    /// ([`ethan_core::event::TurnEvent::DeltaReset`]) and waiting for the retry.
    pub(crate) async fn after_stream_failure(
        &self,
        e: ProviderError,
        retry_after: Option<Duration>,
        attempt: u32,
        shown: String,
        deltas: &ethan_core::event::EventSink,
    ) -> Option<ProviderError> {
        if !(e.is_transient() && attempt < self.max) {
            return Some(if shown.is_empty() {
                e
            } else {
                ProviderError::Interrupted {
                    shown,
                    cause: Box::new(e),
                }
            });
        }
        if !shown.is_empty() {
            let _ = deltas.send(ethan_core::event::TurnEvent::DeltaReset);
        }
        self.wait_or_give_up("streamed model request", e, retry_after, attempt)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_waits_double_and_honour_retry_after_up_to_30_s() {
        let b = Duration::from_millis(500);
        assert_eq!(retry_wait(b, 0, None), Duration::from_millis(500));
        assert_eq!(retry_wait(b, 2, None), Duration::from_secs(2));
        assert_eq!(retry_wait(b, 40, None), Duration::from_secs(30));
        assert_eq!(
            retry_wait(b, 0, Some(Duration::from_secs(7))),
            Duration::from_secs(7)
        );
        assert_eq!(
            retry_wait(b, 0, Some(Duration::from_secs(700))),
            Duration::from_secs(30)
        );
    }

    #[test]
    fn error_messages_are_read_from_either_shape_and_shortened() {
        assert_eq!(
            error_message(r#"{"error":{"message":"bad key","type":"invalid"}}"#),
            "bad key"
        );
        assert_eq!(
            error_message(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            ),
            "Overloaded"
        );
        assert_eq!(error_message(r#"{"detail":"Not Found"}"#), "Not Found");
        let long = "x".repeat(400);
        let s = error_message(&long);
        assert_eq!(s.chars().count(), 301);
        assert!(s.ends_with('…'));
    }
}
