//! Fetching a file a chat platform holds for the bot, bounded in size and time.
//!
//! The first request goes to the URL the channel adapter built from its configured base URL
//! (`channels.telegram.api_url`, `channels.lark.base_url`), which the owner chose, so it may be
//! a loopback or private address (a self-hosted Bot API server, a test fake). Redirects are
//! followed here, one hop at a time, at most [`MAX_REDIRECTS`], and every hop is judged by the
//! SSRF guard of `web_fetch` ([`crate::tools::ssrf`], with `tools.web_fetch.allow_private` as
//! its exemptions): an IP-literal target is checked before connecting and a host name is
//! resolved through the guard's resolver, so a redirect can never reach a loopback, private,
//! link-local or metadata address. The bearer token (Lark) goes to the first URL only.
//!
//! A body over the limit is refused from its `Content-Length` before it is read, and cut off
//! (an error, not a truncated file) when it grows past the limit without one.

use crate::tools::ssrf::{find_refusal, Lookup, SsrfGuard, SystemLookup};
use ethan_channels::MediaSource;
use futures::StreamExt;
use std::sync::Arc;
use std::time::Duration;

/// Redirects followed before giving up.
pub const MAX_REDIRECTS: usize = 3;

/// Why a download failed; the text is written for the model and the logs (never with the
/// URL, which may hold the bot token).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    #[error("the file is larger than {limit} bytes")]
    TooLarge { limit: u64 },
    #[error("the download took longer than {0} s")]
    Timeout(u64),
    #[error("a redirect was refused: {0}")]
    Refused(String),
    #[error("the platform answered HTTP {0}")]
    Status(u16),
    #[error("the download failed: {0}")]
    Transport(String),
}

/// The HTTP clients and the guard for downloads.
pub struct Fetcher {
    /// For the platform's own URL (no redirects followed by the client).
    direct: reqwest::Client,
    /// For redirect targets: names resolved through the guard, no proxy (the guard must see
    /// the real destination).
    guarded: reqwest::Client,
    guard: SsrfGuard,
    timeout: Duration,
}

impl Fetcher {
    /// `allow_private`: hosts exempt from the guard (`tools.web_fetch.allow_private`).
    pub fn new(allow_private: &[String], timeout: Duration) -> Self {
        Self::with_lookup(allow_private, timeout, Arc::new(SystemLookup))
    }

    pub fn with_lookup(
        allow_private: &[String],
        timeout: Duration,
        lookup: Arc<dyn Lookup>,
    ) -> Self {
        let guard = SsrfGuard::new(allow_private, lookup);
        let base = || {
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .connect_timeout(Duration::from_secs(10))
                .timeout(timeout)
        };
        let direct = base().build().unwrap_or_default();
        let guarded = base()
            .dns_resolver(guard.resolver())
            .no_proxy()
            .build()
            .unwrap_or_default();
        Self {
            direct,
            guarded,
            guard,
            timeout,
        }
    }

    /// Download `src`, at most `max_bytes` bytes, within the fetcher's time limit.
    pub async fn fetch(&self, src: &MediaSource, max_bytes: u64) -> Result<Vec<u8>, FetchError> {
        let secs = self.timeout.as_secs().max(1);
        match tokio::time::timeout(self.timeout, self.fetch_inner(src, max_bytes)).await {
            Ok(r) => r,
            Err(_) => Err(FetchError::Timeout(secs)),
        }
    }

    async fn fetch_inner(&self, src: &MediaSource, max_bytes: u64) -> Result<Vec<u8>, FetchError> {
        let mut url = reqwest::Url::parse(&src.url)
            .map_err(|e| FetchError::Transport(format!("not a URL: {e}")))?;
        let mut hops = 0usize;
        let resp = loop {
            let req = if hops == 0 {
                let r = self.direct.get(url.clone());
                match &src.bearer {
                    Some(t) => r.bearer_auth(t),
                    None => r,
                }
            } else {
                self.guard
                    .check_url(&url)
                    .map_err(|e| FetchError::Refused(e.0))?;
                self.guarded.get(url.clone())
            };
            let resp = req.send().await.map_err(|e| self.transport(e))?;
            if !resp.status().is_redirection() {
                break resp;
            }
            let Some(location) = resp
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
            else {
                return Err(FetchError::Status(resp.status().as_u16()));
            };
            let next = url
                .join(location.trim())
                .map_err(|e| FetchError::Transport(format!("a redirect to a bad location: {e}")))?;
            hops += 1;
            if hops > MAX_REDIRECTS {
                return Err(FetchError::Transport(format!(
                    "more than {MAX_REDIRECTS} redirects"
                )));
            }
            url = next;
        };
        if !resp.status().is_success() {
            return Err(FetchError::Status(resp.status().as_u16()));
        }
        if resp.content_length().is_some_and(|n| n > max_bytes) {
            return Err(FetchError::TooLarge { limit: max_bytes });
        }
        let mut body = Vec::new();
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| self.transport(e))?;
            if body.len() as u64 + chunk.len() as u64 > max_bytes {
                return Err(FetchError::TooLarge { limit: max_bytes });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    fn transport(&self, e: reqwest::Error) -> FetchError {
        if let Some(r) = find_refusal(&e) {
            return FetchError::Refused(r.0);
        }
        if e.is_timeout() {
            return FetchError::Timeout(self.timeout.as_secs().max(1));
        }
        // Without the URL: it may carry the bot token.
        FetchError::Transport(e.without_url().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::response::IntoResponse;

    async fn serve(app: axum::Router) -> String {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(l, app).await;
        });
        format!("http://{addr}")
    }

    fn src(url: String) -> MediaSource {
        MediaSource {
            url,
            bearer: Some("t-secret".into()),
            size: None,
        }
    }

    #[tokio::test]
    async fn the_platform_url_may_be_loopback_but_a_redirect_to_it_is_refused() {
        let app = axum::Router::new()
            .route(
                "/file",
                axum::routing::get(|h: axum::http::HeaderMap| async move {
                    let auth = h.get("authorization").and_then(|v| v.to_str().ok());
                    assert_eq!(auth, Some("Bearer t-secret"));
                    "bytes"
                }),
            )
            .route(
                "/moved",
                axum::routing::get(|| async {
                    axum::response::Redirect::temporary("http://127.0.0.1:9/file").into_response()
                }),
            )
            .route("/big", axum::routing::get(|| async { vec![b'x'; 2048] }));
        let base = serve(app).await;
        let f = Fetcher::new(&[], Duration::from_secs(5));
        assert_eq!(
            f.fetch(&src(format!("{base}/file")), 100).await.unwrap(),
            b"bytes"
        );
        let err = f
            .fetch(&src(format!("{base}/moved")), 100)
            .await
            .unwrap_err();
        assert!(matches!(err, FetchError::Refused(_)), "{err:?}");
        let err = f
            .fetch(&src(format!("{base}/big")), 1000)
            .await
            .unwrap_err();
        assert_eq!(err, FetchError::TooLarge { limit: 1000 });
    }
}
