//! Fetching a file a chat platform holds for the bot, bounded in size and time, through the
//! egress guard ([`crate::egress`], route `media_download`).
//!
//! The first request goes to the URL the channel adapter built from its configured base URL
//! (`channels.telegram.api_url`, `channels.lark.base_url`): those base URLs are the owner's
//! configured endpoints, reached on their own host and port even on a loopback or private
//! address (a self-hosted Bot API server, a test fake). Redirects are followed here, one hop at
//! a time, at most [`MAX_REDIRECTS`], and every hop is judged by the guard like any tool's
//! request: the address rule (with `tools.web_fetch.allow_private` as its exemptions) on every
//! address a name resolves to, and the connection made to a checked address only, so a redirect
//! can never reach a loopback, private, link-local or metadata address. The bearer token (Lark)
//! goes to the first URL only.
//!
//! A body over the limit is refused from its `Content-Length` before it is read, and cut off
//! (an error, not a truncated file) when it grows past the limit without one.

use crate::egress::{
    EgressClient, EgressError, EgressGuard, Endpoint, Lookup, Route, SystemLookup,
};
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
    #[error("refused by the egress guard: {0}")]
    Refused(String),
    #[error("the platform answered HTTP {0}")]
    Status(u16),
    #[error("the download failed: {0}")]
    Transport(String),
}

/// The HTTP client for downloads.
pub struct Fetcher {
    client: Result<EgressClient, String>,
    timeout: Duration,
}

impl Fetcher {
    /// `allow_private`: hosts exempt from the guard (`tools.web_fetch.allow_private`);
    /// `platforms`: the chat platforms' configured base URLs.
    pub fn new(allow_private: &[String], platforms: &[String], timeout: Duration) -> Self {
        Self::with_lookup(allow_private, platforms, timeout, Arc::new(SystemLookup))
    }

    pub fn with_lookup(
        allow_private: &[String],
        platforms: &[String],
        timeout: Duration,
        lookup: Arc<dyn Lookup>,
    ) -> Self {
        Self::guarded(EgressGuard::new(allow_private, lookup), platforms, timeout)
    }

    /// Downloads through `guard` (the daemon's: [`crate::egress::Egress::guard`]).
    pub fn guarded(guard: EgressGuard, platforms: &[String], timeout: Duration) -> Self {
        let endpoints = Endpoint::all_of(platforms.iter().map(String::as_str));
        let client = EgressClient::new(&guard, Route::MediaDownload, endpoints, |b| {
            b.connect_timeout(Duration::from_secs(10)).timeout(timeout)
        });
        Self { client, timeout }
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
        let client = self
            .client
            .as_ref()
            .map_err(|e| FetchError::Transport(e.clone()))?;
        let mut hops = 0usize;
        let resp = loop {
            let mut req = client.get(url.as_str());
            if let (0, Some(t)) = (hops, &src.bearer) {
                req = req.bearer_auth(t);
            }
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
            let chunk = chunk.map_err(|e| self.transport(EgressError::Http(e)))?;
            if body.len() as u64 + chunk.len() as u64 > max_bytes {
                return Err(FetchError::TooLarge { limit: max_bytes });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    fn transport(&self, e: EgressError) -> FetchError {
        let e = match e {
            EgressError::Refused(r) => return FetchError::Refused(r.0),
            EgressError::Http(e) => e,
        };
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
        let f = Fetcher::new(&[], std::slice::from_ref(&base), Duration::from_secs(5));
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
