//! Local search tools built on ripgrep's crates: `rg_search` (contents) and `fd_find` (names).

mod common;
pub mod fd_find;
pub mod rg_search;
