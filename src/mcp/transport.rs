//! The two transports of a connection (a child over stdio, streamable HTTP) as one type, so
//! that rmcp's service loop (`serve_inner` and the handshake, some 50 KB of code for each
//! transport type it is given) is built once (BENCHMARKS.md, "Dependency code cut from the
//! binary"). Each call goes to the transport inside, unchanged; only the error is wrapped.

use super::http::{HttpClient, HttpError};
use futures::future::Either;
use futures::FutureExt;
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::streamable_http_client::StreamableHttpError;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess, Transport};
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
    #[error("{0}")]
    Child(#[source] std::io::Error),
    #[error("{0}")]
    Http(#[source] StreamableHttpError<HttpError>),
}

impl Transport<RoleClient> for McpTransport {
    type Error = McpTransportError;

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
