//! What a scheduled job is, below the agent and the scheduler that runs it:
//!
//! - [`schedule`]: cron (5-field POSIX), interval and one-shot `at` schedules, with checks whose
//!   errors say what is wrong;
//! - [`job`]: creating, describing, pausing and removing jobs (used by the `schedule_*` tools
//!   and `ethan jobs`).
//!
//! Time zones are [`crate::tz`]; storage is `crate::store::jobs`; running jobs is
//! `crate::scheduler`.

pub mod job;
pub mod schedule;
