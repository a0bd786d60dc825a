//! Tools that run commands: `shell` (and, in test builds, `test_unapproved_shell`).

pub mod shell;
mod shell_decl;
#[cfg(feature = "test-tools")]
pub mod unapproved;
