//! The tool system: what a tool is ([`Tool`]), what it gets ([`ToolContext`]) and returns
//! ([`ToolResult`]), the [`registry`] of tools, and the [`executor`] that turns the model's
//! `tool_calls` (proposals) into results. Each builtin tool is a file of its own.
//!
//! Every failure is a [`ToolResult`] with an [`ErrorKind`] and a text the model can act on;
//! nothing a model sends can panic the agent loop.

pub mod args;
pub mod executor;
pub mod fd_find;
pub mod file_list;
pub mod file_read;
pub mod file_write;
pub mod find_tools;
pub mod knowledge_add;
pub mod knowledge_edit;
pub mod knowledge_read;
pub mod knowledge_search;
pub mod lark_calendar;
pub mod lark_common;
pub mod lark_messages;
pub mod lark_send;
pub mod paths;
pub mod policy;
pub mod redact;
pub mod registry;
pub mod replay;
pub mod rg_search;
pub mod schedule_create;
pub mod schedule_list;
pub mod schedule_pause;
pub mod schedule_remove;
pub mod schema;
pub mod shell;
pub mod spill;
pub mod ssrf;
#[cfg(feature = "test-tools")]
pub mod test_panic;
pub mod truncate;
pub mod ui_card;
pub mod web_fetch;
pub mod web_search;

pub use ethan_core::tool::{
    Assessment, Egress, ErrorKind, Risk, Taint, Tool, ToolContext, ToolResult, ToolSummary,
    ALL_INTERFACES, PROTECTED_PATHS_APPROVED,
};
