//! Shared loopback fakes for Ethan's integration tests.
//!
//! Include from a test file with `mod support;`. Everything here runs in-process on the test's
//! tokio runtime (use `#[tokio::test(flavor = "multi_thread")]`), binds `127.0.0.1:0`, and bounds
//! every wait in time, so a misbehaving daemon makes a test fail instead of hang.
//!
//! - [`telegram::FakeTelegram`]: a Telegram Bot API server (`/bot{token}/{method}`) with
//!   long-polling `getUpdates`, recorded calls and error injection.
//! - [`lark::FakeLark`]: a Lark/Feishu Open API (token, send/reply, bot info) plus the event
//!   long connection speaking real pbbp2 frames, with ACK capture and fault injection; its
//!   CardKit routes (streaming cards) live in [`lark::cardkit`].
//! - [`model::ScriptedModel`]: an OpenAI-compatible Chat Completions server answering from a
//!   script of [`model::Step`]s, which also checks the tool-call protocol of every request.
//! - [`gateway`]: a client of the daemon's HTTP gateway (`POST /api/chat` as SSE events).
//! - [`anthropic::FakeAnthropic`]: an Anthropic Messages API server answering from a script of
//!   [`anthropic::AStep`]s (whole messages or SSE streams), which validates every request
//!   (headers, alternation, tool-use pairing, cache breakpoints, thinking blocks given back).
//! - [`daemon`]: [`daemon::TestHome`] (a temporary `ETHAN_HOME`), [`daemon::Daemon`] (the real
//!   `ethan run` process), [`daemon::run_cli`] and [`daemon::wait_until`].

#![allow(dead_code, unused_imports)]

pub mod anthropic;
pub mod daemon;
pub mod gateway;
pub mod lark;
pub mod model;
pub mod prompt_cache;
pub mod search_fakes;
pub mod store;
pub mod telegram;
pub mod web_page;

pub use daemon::{run_cli, run_cli_with_env, wait_until, Daemon, TestHome};
pub use model::{ScriptedModel, Step};
pub use telegram::FakeTelegram;

/// Seconds since the Unix epoch, for `date` / `created` fields.
pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}
