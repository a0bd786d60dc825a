//! Tools that run commands: `shell`.

pub mod shell;
