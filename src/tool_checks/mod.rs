//! The tools' unit tests that need the daemon's own parts (the store, the configuration, the
//! consent gate): the tools crate does not depend on the daemon, so they run here, reaching the
//! tools through [`crate::tools`].

mod executor;
mod job;
mod memory_forget;
mod memory_save;
mod replay;
mod schedule_create;
mod schedule_pause;
mod shell;

use crate::tools::ToolContext;
use ethan_core::message::ToolCall;
use std::path::Path;

/// A local context in `dir` with the sandbox as probed once per test process.
fn ctx_in(dir: &Path) -> ToolContext {
    ToolContext {
        trace_id: "t".into(),
        session_key: "terminal:test".into(),
        services: ethan_core::tool::Services {
            sandbox: crate::sandbox::settings::testing::probed(),
            ..Default::default()
        },
        ..ToolContext::local(dir.to_path_buf())
    }
}

fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall::new(id, name, args)
}
