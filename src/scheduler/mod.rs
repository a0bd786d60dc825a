//! Running scheduled jobs: the agent runs a prompt on a schedule, unattended, and posts the
//! result (a "digest") into a chat. What a job is and when it is due live below the agent, in
//! [`crate::jobs`] (re-exported here as [`job`] and [`schedule`]) and [`crate::tz`].
//!
//! - [`runner`]: the loop (claim each slot once in SQLite, misfire grace, restore at start) and
//!   the execution of a run;
//! - [`delivery`]: the digest and its delivery with retries.
//!
//! Storage is `crate::store::jobs`. The daemon starts the loop with [`start`].

pub mod delivery;
pub mod runner;

pub use crate::jobs::{job, schedule};
pub use crate::tz;

#[cfg(test)]
mod tests;

use crate::agent::Agent;
use crate::config::Loaded;
use crate::store::prelude::*;
use crate::store::DaemonStoreRef;
use ethan_channels::{Channel, ChannelKind};
use runner::{JobExecutor, Scheduler, SchedulerOptions, SystemClock};
use std::collections::HashMap;
use std::sync::Arc;

/// Start the scheduler of `ethan run` on the daemon's store, agent and channels; it stops when
/// `shutdown` turns true.
pub fn start(
    loaded: &Loaded,
    store: DaemonStoreRef,
    agent: Arc<Agent>,
    channels: HashMap<ChannelKind, Arc<dyn Channel>>,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let opts = SchedulerOptions::from_config(&loaded.config);
    let exec = Arc::new(JobExecutor::new(
        agent,
        channels,
        store.shared(),
        delivery::RetryPolicy::default(),
    ));
    let scheduler = Arc::new(Scheduler::new(store.shared(), Arc::new(SystemClock), opts));
    tokio::spawn(scheduler.run(exec, shutdown))
}
