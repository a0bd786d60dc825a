//! The two transports of a connection (a child over stdio, streamable HTTP) as one type, so
//! that rmcp's service loop (`serve_inner` and the handshake, some 50 KB of code for each
//! transport type it is given) is built once (BENCHMARKS.md, "Dependency code cut from the
//! binary"). Each call goes to the transport inside, unchanged; only the error is wrapped, its
//! message saying which transport it was (rmcp's messages name the transport type, once
//! `TokioChildProcess` or `WorkerTransport<…>`, now "MCP").

use super::http::{HttpClient, HttpError};
use futures::future::Either;
use futures::FutureExt;
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::streamable_http_client::StreamableHttpError;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess, Transport};
use std::borrow::Cow;
use std::future::Future;

/// A server's transport.
pub enum McpTransport {
    Child(TokioChildProcess),
    Http(StreamableHttpClientTransport<HttpClient>),
}

/// The error of the transport inside: its message, and it as the source (rmcp looks for an
/// HTTP authorisation challenge among the sources).
#[derive(Debug, thiserror::Error)]
pub enum McpTransportError {
    #[error("the server's stdio: {0}")]
    Child(#[source] std::io::Error),
    #[error("streamable HTTP: {0}")]
    Http(#[source] StreamableHttpError<HttpError>),
}

impl Transport<RoleClient> for McpTransport {
    type Error = McpTransportError;

    fn name() -> Cow<'static, str> {
        "MCP".into()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        match self {
            Self::Child(t) => {
                Either::Left(t.send(item).map(|r| r.map_err(McpTransportError::Child)))
            }
            Self::Http(t) => {
                Either::Right(t.send(item).map(|r| r.map_err(McpTransportError::Http)))
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        match self {
            Self::Child(t) => t.receive().await,
            Self::Http(t) => t.receive().await,
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        match self {
            Self::Child(t) => t.close().await.map_err(McpTransportError::Child),
            Self::Http(t) => t.close().await.map_err(McpTransportError::Http),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error;

    #[test]
    fn an_error_names_its_transport_and_keeps_the_cause_as_source() {
        let e = McpTransportError::Child(std::io::Error::other("broken pipe"));
        assert_eq!(e.to_string(), "the server's stdio: broken pipe");
        assert_eq!(e.source().unwrap().to_string(), "broken pipe");
        let e = McpTransportError::Http(StreamableHttpError::SessionExpired);
        assert_eq!(e.to_string(), "streamable HTTP: Session expired (HTTP 404)");
        assert_eq!(<McpTransport as Transport<RoleClient>>::name(), "MCP");
    }
}
