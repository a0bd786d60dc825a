//! Integration tests of the card model and its renderers (`cargo test -p ethan-cards --test all`).

mod common;
mod suite;
