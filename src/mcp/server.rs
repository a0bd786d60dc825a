//! One server as the rest of the MCP client sees it: the [`Handler`] of its connection (it hears
//! `notifications/tools/list_changed`) and the [`ServerHandle`] its tools call through, whichever
//! connection is live. Below [`super::connect`], [`super::tool`] and [`super::manager`].

use crate::tools::ErrorKind;
use crate::tools::{ToolError, ToolOutput};
use rmcp::handler::client::ClientHandler;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{NotificationContext, Peer, RoleClient, ServiceError};
use serde_json::Value;
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::Notify;

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The client side of one connection: it hears `notifications/tools/list_changed`.
#[derive(Clone, Default)]
pub struct Handler {
    pub(super) changed: Arc<Notify>,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        self.changed.notify_one();
        std::future::ready(())
    }
}

/// What the tools of one server call through: the live connection, if there is one.
pub struct ServerHandle {
    /// The configured server name.
    pub name: String,
    peer: RwLock<Option<Peer<RoleClient>>>,
    /// The process group of the running child, if the server is a command.
    pub(super) pgid: Mutex<Option<u32>>,
}

impl ServerHandle {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            peer: RwLock::new(None),
            pgid: Mutex::new(None),
        }
    }

    pub(super) fn set_peer(&self, p: Option<Peer<RoleClient>>) {
        *self.peer.write().unwrap_or_else(|e| e.into_inner()) = p;
    }

    /// The process group id of the running child (a command server that is up), if any.
    pub fn pgid(&self) -> Option<u32> {
        *lock(&self.pgid)
    }

    fn not_running(&self) -> Result<ToolOutput, ToolError> {
        Err(ToolError::new(
            ErrorKind::Dependency,
            format!(
                "the MCP server {} is not running; it is being restarted",
                self.name
            ),
        ))
    }

    /// `resources/read` of `uri`: its contents as text ([`super::result::contents_text`]);
    /// every failure is a `dependency` error naming the server.
    pub async fn read_resource(&self, uri: &str) -> Result<ToolOutput, ToolError> {
        let peer = self.peer.read().unwrap_or_else(|e| e.into_inner()).clone();
        let Some(peer) = peer else {
            return self.not_running();
        };
        let params = rmcp::model::ReadResourceRequestParams::new(uri);
        match peer.read_resource(params).await {
            Ok(r) => {
                let v = serde_json::to_value(&r).unwrap_or(Value::Null);
                Ok(ToolOutput::new(super::result::contents_text(&v)))
            }
            Err(ServiceError::McpError(e)) => Err(ToolError::new(
                ErrorKind::Dependency,
                format!(
                    "the MCP server {} refused to read {uri}: {}",
                    self.name, e.message
                ),
            )),
            Err(ServiceError::TransportClosed | ServiceError::TransportSend(_)) => {
                self.not_running()
            }
            Err(e) => Err(ToolError::new(
                ErrorKind::Dependency,
                format!(
                    "reading {uri} from the MCP server {} failed: {e}",
                    self.name
                ),
            )),
        }
    }

    /// `tools/call` of `tool` with `arguments`; every failure is a `dependency` error naming the
    /// server.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Option<serde_json::Map<String, Value>>,
    ) -> Result<ToolOutput, ToolError> {
        self.call_with_pictures(tool, arguments).await.0
    }

    /// [`ServerHandle::call`], with the answer's images ([`super::pictures::decode`]).
    pub async fn call_with_pictures(
        &self,
        tool: &str,
        arguments: Option<serde_json::Map<String, Value>>,
    ) -> (Result<ToolOutput, ToolError>, Vec<(&'static str, Vec<u8>)>) {
        let peer = self.peer.read().unwrap_or_else(|e| e.into_inner()).clone();
        let Some(peer) = peer else {
            return (self.not_running(), Vec::new());
        };
        let mut params = CallToolRequestParams::new(tool.to_string());
        if let Some(a) = arguments {
            params = params.with_arguments(a);
        }
        let r = match peer.call_tool(params).await {
            Ok(r) => {
                let v = serde_json::to_value(&r).unwrap_or(Value::Null);
                let result = super::result::convert(&self.name, &v);
                let pictures = if result.is_ok() {
                    super::pictures::decode(&v)
                } else {
                    Vec::new()
                };
                return (result, pictures);
            }
            Err(ServiceError::McpError(e)) => Err(ToolError::new(
                ErrorKind::Dependency,
                format!(
                    "the MCP server {} refused the call: {}",
                    self.name, e.message
                ),
            )),
            Err(ServiceError::TransportClosed | ServiceError::TransportSend(_)) => {
                self.not_running()
            }
            Err(e) => Err(ToolError::new(
                ErrorKind::Dependency,
                format!("the call to the MCP server {} failed: {e}", self.name),
            )),
        };
        (r, Vec::new())
    }
}
