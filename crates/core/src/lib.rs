//! Ethan's core: the types and traits every other part of the daemon agrees on, the one way a
//! task is spawned ([`task`]) and the one sort of cold call sites ([`sort`]); nothing else — no
//! I/O, no platform, no storage. It depends on no other crate of the workspace.
//!
//! - [`assessment`]: what a tool works out about one call before consent;
//! - [`channel`]: which interface and chat a message belongs to;
//! - [`tool`]: the `Tool` trait (a declaration once, a plan per call, a `Result` from `run`),
//!   its context and outcome, risk, error kinds, taint and egress;
//! - [`consent`]: the consent gate the executor asks before a call runs;
//! - [`event`]: the live events of a turn;
//! - [`message`]: the messages of a conversation in a provider-neutral form (the history the
//!   store keeps and the agent works with);
//! - [`provider`]: the model provider trait and its errors;
//! - [`store`]: the store traits (sessions, history, kv, audit, jobs, owners) and their records;
//! - [`clock`]: the wall clock tools and the scheduler read;
//! - [`net`]: a network failure in one line a person can act on (the model and Lark clients, the
//!   adapters);
//! - [`secret`]: a credential that never shows itself in logs, as the config reads it;
//! - [`knowledge`]: the knowledge base as the knowledge tools use it, and the notes and search
//!   results they exchange;
//! - [`task`]: spawning a task with its future boxed (one copy of tokio's task code);
//! - [`sort`]: stable sorting for cold call sites through one shared copy of the sort.

pub mod assessment;
pub mod channel;
pub mod clock;
pub mod consent;
pub mod event;
pub mod knowledge;
pub mod message;
pub mod net;
pub mod provider;
pub mod sandbox;
pub mod secret;
pub mod sort;
pub mod store;
pub mod task;
pub mod tool;

pub use channel::{ChannelKind, ChatKind, ChatRef};
pub use tool::{ErrorKind, Risk, Tool, ToolContext, ToolError, ToolOutput, ToolResult};
