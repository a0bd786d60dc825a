//! Tools that run commands: `shell` (and, in test builds, `test_unapproved_shell`).

pub mod shell;
mod shell_decl;
mod shell_process;
#[cfg(feature = "test-tools")]
pub mod unapproved;
