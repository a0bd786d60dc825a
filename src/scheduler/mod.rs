//! Scheduled jobs: the agent runs a prompt on a schedule, unattended, and posts the result (a
//! "digest") into a chat.
//!
//! - [`schedule`]: cron (5-field POSIX), interval and one-shot `at` schedules, with checks whose
//!   errors say what is wrong;
//! - [`tz`]: time zones (job → config `timezone` → system) and the daylight-saving rules;
//! - [`job`]: creating, describing, pausing and removing jobs (used by the `schedule_*` tools
//!   and `ethan jobs`);
//! - [`runner`]: the loop (claim each slot once in SQLite, misfire grace, restore at start) and
//!   the execution of a run;
//! - [`delivery`]: the digest and its delivery with retries.
//!
//! Storage is `crate::store::jobs`. The daemon starts the loop with [`start`].

pub mod delivery;
pub mod job;
pub mod runner;
pub mod schedule;
pub mod tz;

#[cfg(test)]
mod tests;

use crate::agent::Agent;
use crate::config::Loaded;
use crate::store::Store;
use ethan_channels::{Channel, ChannelKind};
use runner::{JobExecutor, Scheduler, SchedulerOptions, SystemClock};
use std::collections::HashMap;
use std::sync::Arc;

/// Start the scheduler of `ethan run` on the daemon's store, agent and channels; it stops when
/// `shutdown` turns true.
pub fn start(
    loaded: &Loaded,
    store: Store,
    agent: Arc<Agent>,
    channels: HashMap<ChannelKind, Arc<dyn Channel>>,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let opts = SchedulerOptions::from_config(&loaded.config);
    let exec = Arc::new(JobExecutor::new(
        agent,
        channels,
        store.clone(),
        delivery::RetryPolicy::default(),
    ));
    let scheduler = Arc::new(Scheduler::new(store, Arc::new(SystemClock), opts));
    tokio::spawn(scheduler.run(exec, shutdown))
}

/// The database of the daemon whose home is `home` (tools open it per call).
pub fn open_store(home: &std::path::Path) -> Result<Store, crate::store::StoreError> {
    Store::open(&home.join("ethan.db"))
}
