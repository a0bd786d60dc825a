//! What a scheduled job is, below the agent and the scheduler that runs it:
//!
//! - [`schedule`]: cron (5-field POSIX), interval and one-shot `at` schedules, with checks whose
//!   errors say what is wrong;
//! - [`job`]: creating, describing, pausing and removing jobs (used by the `schedule_*` tools
//!   and `ethan jobs`).
//!
//! Time zones are [`ethan_tz`]; the records and their storage are `ethan_core::store`'s
//! (`JobRecord`, `JobStore`); the daemon's scheduler runs the jobs. They live with the tools;
//! the crate root re-exports them as `jobs` for the scheduler and `ethan jobs`.

pub mod job;
pub mod schedule;
