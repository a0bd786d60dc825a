//! The built-in tools, grouped by family. Each tool is a file of its own; the engine
//! ([`super::engine`]) knows them only through the `Tool` trait.

pub mod agents;
#[cfg(feature = "browser")]
pub mod browser;
pub mod exec;
pub mod files;
pub mod knowledge;
pub mod lark;
pub mod memory;
pub mod schedule;
pub mod search;
#[cfg(feature = "test-tools")]
pub mod test_panic;
pub mod ui;
pub mod web;
