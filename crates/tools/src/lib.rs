//! The tool system. What a tool is ([`Tool`], declared by a [`ToolDecl`]), what it gets
//! ([`ToolContext`]) and returns ([`ToolOutput`] or [`ToolError`]) are defined in `ethan-core`
//! and re-exported here. Two halves:
//! - [`engine`]: the [`registry`] of tools and the [`executor`] that turns the model's tool calls
//!   (proposals) into results — policy, schema, replay guard, consent, timeout, audit,
//!   redaction, spill, truncation;
//! - [`builtin`]: the built-in tools by family (exec, files, search, web, schedule, knowledge,
//!   lark, ui), each a file of its own. [`args`] holds the argument helpers they share;
//!   [`skills`] the skills `skill_read` returns and the system prompt lists; [`jobs`] what a
//!   scheduled job is (the `schedule_*` tools create them, the scheduler runs them); [`settings`]
//!   the tools' sections of the configuration, which the config reads and re-exports.
//!
//! Every failure is a [`ToolError`] with an [`ErrorKind`] and a text the model can act on;
//! nothing a model sends can panic the agent loop.

pub mod args;
pub mod builtin;
pub mod engine;
pub mod jobs;
pub mod settings;
pub mod skills;
#[cfg(test)]
mod swapper;

// The old flat paths (`crate::shell`, `crate::executor`, …) stay valid.
pub use builtin::agents::{delegate, skill_read};
pub use builtin::exec::shell;
pub use builtin::files::{file_list, file_read, file_write, paths};
pub use builtin::knowledge::{knowledge_add, knowledge_edit, knowledge_read, knowledge_search};
pub use builtin::lark::{lark_calendar, lark_common, lark_messages, lark_send};
pub use builtin::memory::{history_search, memory_forget, memory_save, memory_search};
pub use builtin::schedule::{schedule_create, schedule_list, schedule_pause, schedule_remove};
pub use builtin::search::{fd_find, rg_search};
#[cfg(feature = "test-tools")]
pub use builtin::test_panic;
pub use builtin::ui::{find_tools, ui_card};
pub use builtin::web::{page_reader, web_fetch, web_search};
pub use engine::{executor, policy, redact, registry, replay, schema, setup, spill, truncate};

pub use ethan_core::tool::{
    Assessment, CallPlan, Egress, ErrorKind, Risk, Taint, Tool, ToolContext, ToolDecl, ToolError,
    ToolOutput, ToolResult, ToolSummary, ALL_INTERFACES, PROTECTED_PATHS_APPROVED,
};

/// The unit tests start the sandbox helper from the test binary (the shell tool runs its
/// commands through it).
#[cfg(test)]
#[ctor::ctor(unsafe)]
fn helper_in_unit_tests() {
    let mut args = std::env::args_os();
    if args.nth(1).as_deref() != Some(std::ffi::OsStr::new(ethan_sandbox::helper::HELPER_ARG)) {
        return;
    }
    let mode = args.next();
    let code = match mode.as_deref().and_then(|m| m.to_str()) {
        Some("shell") => match ethan_sandbox::helper::read_spec() {
            Ok(s) => ethan_sandbox::helper::shell_main(&s),
            Err(e) => ethan_sandbox::helper::setup_failed(None, &e),
        },
        Some("probe") => {
            let report = ethan_sandbox::helper::probe_here();
            println!("{}", serde_json::to_string(&report).unwrap_or_default());
            0
        }
        m => ethan_sandbox::helper::setup_failed(None, &format!("unknown mode {m:?}")),
    };
    std::process::exit(code);
}
