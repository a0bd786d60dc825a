//! Ethan: a self-hosted daemon that puts an LLM agent into the chats people already use
//! (Telegram, Lark/Feishu, the terminal and a web page), acting through a governed tool system.
//!
//! Data path: a channel adapter (crate `ethan-channels`) normalises a platform update into an
//! `InboundEvent` → [`daemon::router`] records it and queues it on its session's worker →
//! [`agent`] runs the turn against the model ([`provider`]) and the [`tools`] → the reply goes
//! back through the adapter. State lives in the store ([`store`]: one SQLite file, or PostgreSQL
//! for several replicas); settings in [`config`]. docs/ARCHITECTURE.md draws the whole map.

pub mod agent;
pub mod cli;
pub mod config;
pub mod consent;
pub mod daemon;
pub mod entry;
pub use ethan_egress as egress;
pub mod gateway;
pub mod helper;
pub use tools::jobs;
pub mod knowledge;
pub mod logging;
pub mod mcp;
pub mod media;
pub mod memory;
pub use ethan_metrics as metrics;
pub mod provider;
pub use ethan_sandbox as sandbox;
pub mod scheduler;
pub use tools::skills;
pub mod store;
pub mod tokens;
pub use ethan_tools as tools;
#[cfg(test)]
mod tool_checks;
pub use ethan_tz as tz;
pub mod usage;
