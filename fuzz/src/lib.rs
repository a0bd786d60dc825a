//! Fuzz entry points for Ethan. The checks live in `checks.rs` so that the crash-regression
//! tests (`tests/suite/fuzz_regressions.rs`) run the very same code in CI.

mod checks;
pub use checks::*;
