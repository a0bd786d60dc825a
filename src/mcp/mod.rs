//! Model Context Protocol servers (MCP spec 2025-06-18): their tools appear beside the
//! built-ins as `mcp__<server>__<tool>` and pass the same registry check, validation, policy,
//! consent, replay guard, time limit and audit.
//!
//! - [`names`]: the registered names;
//! - [`connect`]: a child over stdio (cleared environment, own process group) or streamable
//!   HTTP ([`http`]: rmcp's client trait on the daemon's reqwest), and the handshake;
//!   [`transport`]: the two as one type, for one copy of rmcp's service loop;
//! - [`server`]: a connection's handler and the handle a server's tools call through;
//! - [`tool`]: the adapter, and the risk read from the annotations; [`resources`]:
//!   `mcp_resource_read`, the one governed tool reading every server's resources;
//! - [`result`]: a `tools/call` answer as a tool result; [`pictures`]: its images, saved for a
//!   model with vision;
//! - [`manager`]: the lifecycle (start in the background, restarts, `tools/list_changed`,
//!   pings, shutdown) and the registry swap; [`lifecycle`]: its rules (backoff, list caps, ping).

pub mod connect;
pub mod http;
pub mod lifecycle;
pub mod manager;
pub mod names;
pub mod pictures;
pub mod resources;
pub mod result;
pub mod server;
pub mod tool;
pub mod transport;

pub use manager::McpManager;
