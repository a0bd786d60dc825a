//! rmcp's streamable HTTP client trait on the daemon's own `reqwest` 0.12 client, so the binary
//! keeps one HTTP stack (rmcp's ready-made client is for reqwest 0.13). Every request passes the
//! egress guard ([`crate::egress`], route `mcp`): the server's configured `url` is its endpoint,
//! reached even on a loopback or private address; nothing else is, and no redirect is followed.
//!
//! Wire behaviour (MCP spec 2025-06-18, "Transports › Streamable HTTP"): every JSON-RPC
//! message is a `POST` with `Accept: application/json, text/event-stream`; the answer is
//! `202`/`204` (accepted, nothing to read), a JSON body, or an SSE stream; the server's
//! `Mcp-Session-Id` header is sent back on later requests; `GET` opens the server's stream;
//! `DELETE` ends the session. A `404` on a request that carried a session id means the session
//! expired. Error bodies are read up to [`ERROR_BODY_LIMIT`] bytes for the message, JSON
//! answers up to [`JSON_BODY_LIMIT`], and one SSE event up to [`SSE_EVENT_LIMIT`] (a stream
//! whose event grows past it ends with an error), so a server cannot make the daemon buffer
//! without bound.

use crate::egress::{EgressClient, EgressError, EgressRequest};
use futures::stream::BoxStream;
use futures::StreamExt;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Sse, SseStream};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

/// Bytes of an error body kept for the message.
pub const ERROR_BODY_LIMIT: usize = 4096;
/// The largest JSON answer read, bytes.
pub const JSON_BODY_LIMIT: usize = 16 * 1024 * 1024;

/// The largest SSE event read, bytes (counted from the previous blank line).
pub const SSE_EVENT_LIMIT: usize = 16 * 1024 * 1024;

const SESSION: &str = "mcp-session-id";
const LAST_EVENT: &str = "last-event-id";
const ACCEPT: &str = "application/json, text/event-stream";

/// A client of the egress guard speaking streamable HTTP.
#[derive(Clone)]
pub struct HttpClient(pub EgressClient);

/// What went wrong talking HTTP.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{0}")]
    Reqwest(#[from] reqwest::Error),
    #[error("{0}")]
    Egress(#[from] EgressError),
}

type Result<T> = std::result::Result<T, StreamableHttpError<HttpError>>;

fn client_err(e: reqwest::Error) -> StreamableHttpError<HttpError> {
    StreamableHttpError::Client(HttpError::Reqwest(e))
}

fn send_err(e: EgressError) -> StreamableHttpError<HttpError> {
    StreamableHttpError::Client(HttpError::Egress(e))
}

fn with_headers<'a>(
    mut b: EgressRequest<'a>,
    session: Option<&str>,
    auth: Option<String>,
    custom: HashMap<HeaderName, HeaderValue>,
) -> EgressRequest<'a> {
    for (k, v) in custom {
        b = b.header(k.as_str(), v.as_bytes());
    }
    if let Some(s) = session {
        b = b.header(SESSION, s);
    }
    if let Some(a) = auth {
        b = b.bearer_auth(a);
    }
    b
}

fn media(ct: Option<&str>, want: &str) -> bool {
    ct.and_then(|c| c.split(';').next())
        .is_some_and(|c| c.trim().eq_ignore_ascii_case(want))
}

async fn read_limited(resp: reqwest::Response, limit: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut s = resp.bytes_stream();
    while let Some(chunk) = s.next().await {
        let chunk = chunk.map_err(client_err)?;
        if out.len() + chunk.len() > limit {
            let room = limit - out.len();
            out.extend_from_slice(&chunk[..room]);
            return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: limit });
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// Bytes since the last event boundary (`\n\n`) of a byte stream, or an error past `limit`.
fn bounded<S>(
    s: S,
    limit: usize,
) -> impl futures::Stream<Item = std::result::Result<bytes::Bytes, std::io::Error>>
where
    S: futures::Stream<Item = reqwest::Result<bytes::Bytes>>,
{
    let mut pending = 0usize;
    let mut last = 0u8;
    s.map(move |chunk| {
        let chunk = chunk.map_err(std::io::Error::other)?;
        for &b in chunk.iter() {
            if b == b'\n' && last == b'\n' {
                pending = 0;
            } else if b != b'\r' {
                pending += 1;
            }
            if b != b'\r' {
                last = b;
            }
        }
        if pending > limit {
            return Err(std::io::Error::other(format!(
                "an SSE event exceeded {limit} bytes"
            )));
        }
        Ok(chunk)
    })
}

fn sse(resp: reqwest::Response) -> BoxStream<'static, std::result::Result<Sse, SseError>> {
    SseStream::from_bytes_stream(bounded(resp.bytes_stream(), SSE_EVENT_LIMIT)).boxed()
}

async fn failure(resp: reqwest::Response) -> StreamableHttpError<HttpError> {
    let status = resp.status();
    let body = match read_limited(resp, ERROR_BODY_LIMIT).await {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(_) => String::new(),
    };
    StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!("HTTP {status}: {body}")))
}

impl StreamableHttpClient for HttpClient {
    type Error = HttpError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse> {
        let had_session = session_id.is_some();
        // Serialised as rmcp's codec for a child's stdin does (`serde_json::to_writer` into a
        // `BytesMut`), so the binary holds one serialiser of the message type, not two (22 KB
        // of code: BENCHMARKS.md, "Dependency code cut from the binary").
        let mut body = bytes::BytesMut::new();
        serde_json::to_writer(bytes::BufMut::writer(&mut body), &message)
            .map_err(|e| StreamableHttpError::Io(std::io::Error::other(e)))?;
        let b = self
            .0
            .post(uri.as_ref())
            .header("accept", ACCEPT)
            .header("content-type", "application/json")
            .body(body.freeze());
        let resp = with_headers(b, session_id.as_deref(), auth_header, custom_headers)
            .send()
            .await
            .map_err(send_err)?;
        let status = resp.status();
        if status == reqwest::StatusCode::ACCEPTED || status == reqwest::StatusCode::NO_CONTENT {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == reqwest::StatusCode::NOT_FOUND && had_session {
            return Err(StreamableHttpError::SessionExpired);
        }
        let awaits_nothing = matches!(
            message,
            ClientJsonRpcMessage::Notification(_)
                | ClientJsonRpcMessage::Response(_)
                | ClientJsonRpcMessage::Error(_)
        );
        if !status.is_success() {
            return Err(failure(resp).await);
        }
        let session = resp
            .headers()
            .get(SESSION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let ct = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        if media(ct.as_deref(), "text/event-stream") {
            return Ok(StreamableHttpPostResponse::Sse(sse(resp), session));
        }
        if media(ct.as_deref(), "application/json") {
            let body = read_limited(resp, JSON_BODY_LIMIT).await?;
            return match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                Ok(m) => Ok(StreamableHttpPostResponse::Json(m, session)),
                Err(_) if awaits_nothing => Ok(StreamableHttpPostResponse::Accepted),
                Err(e) => Err(StreamableHttpError::Deserialize(e)),
            };
        }
        if awaits_nothing {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        Err(StreamableHttpError::UnexpectedContentType(ct))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<()> {
        let b = self.0.delete(uri.as_ref());
        let resp = with_headers(b, Some(&session_id), auth_header, custom_headers)
            .send()
            .await
            .map_err(send_err)?;
        if resp.status() == reqwest::StatusCode::METHOD_NOT_ALLOWED || resp.status().is_success() {
            return Ok(());
        }
        Err(failure(resp).await)
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, std::result::Result<Sse, SseError>>> {
        let mut b = self.0.get(uri.as_ref()).header("accept", ACCEPT);
        if let Some(id) = last_event_id {
            b = b.header(LAST_EVENT, id);
        }
        let resp = with_headers(b, session_id.as_deref(), auth_header, custom_headers)
            .send()
            .await
            .map_err(send_err)?;
        if resp.status() == reqwest::StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if !resp.status().is_success() {
            return Err(failure(resp).await);
        }
        let ct = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        if !media(ct.as_deref(), "text/event-stream") {
            return Err(StreamableHttpError::UnexpectedContentType(ct));
        }
        Ok(sse(resp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_endless_sse_event_is_cut_off() {
        let ok = futures::stream::iter(vec![Ok(bytes::Bytes::from_static(
            b"data: 1\n\ndata: 2\n\n",
        ))]);
        let items: Vec<_> = bounded(ok, 8).collect().await;
        assert!(items.iter().all(|r| r.is_ok()));
        let long = futures::stream::iter(vec![
            Ok(bytes::Bytes::from_static(b"data: 1\n\n")),
            Ok(bytes::Bytes::from(vec![b'x'; 20])),
        ]);
        let items: Vec<_> = bounded(long, 8).collect().await;
        assert!(items[0].is_ok() && items[1].is_err());
    }
}
