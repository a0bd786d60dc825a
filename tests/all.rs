//! Ethan's integration tests: the real `ethan` binary and the library against loopback fakes
//! (`support`), one module per concern under `suite/`. One test binary, so a clean build links once:
//!
//! ```text
//! cargo test --test all                      # every integration test
//! cargo test --test all telegram_dm::        # one file's tests
//! ```

mod suite;
mod support;

/// The page reader and the file readers start the daemon's helper from the running binary
/// (`current_exe`): this test binary answers as it when started so.
#[ctor::ctor(unsafe)]
fn helper_in_tests() {
    ethan::helper::main_if_helper();
}
