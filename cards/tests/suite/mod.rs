//! The cards crate's tests, one module per renderer, linked into one binary.

mod a2ui;
mod lark;
mod render;
mod telegram;
