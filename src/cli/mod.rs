//! Subcommands other than `run`: the terminal chat, `doctor`, `tools list`, `audit`.

pub mod audit;
pub mod chat;
pub mod doctor;
pub mod owner;
pub mod tools;
