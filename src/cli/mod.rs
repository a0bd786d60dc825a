//! Subcommands other than `run`: the terminal chat, `doctor`, `tools list`.

pub mod chat;
pub mod doctor;
pub mod tools;
