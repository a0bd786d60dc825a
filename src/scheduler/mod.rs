//! Running scheduled jobs: the agent runs a prompt on a schedule, unattended, and posts the
//! result (a "digest") into a chat. What a job is and when it is due live below the agent, in
//! [`crate::jobs`] (re-exported here as [`job`] and [`schedule`]) and [`crate::tz`].
//!
//! - [`runner`]: the loop (claim each slot once in SQLite, misfire grace, restore at start) and
//!   the execution of a run;
//! - [`delivery`]: the digest and its delivery with retries;
//! - [`lease`]: a run's lease on a shared store (PostgreSQL), and the fence on it;
//! - [`takeover`]: runs whose claimant is gone, marked `interrupted` and run again once.
//!
//! Storage is `crate::store::jobs`. The daemon starts the loop with [`start`].

pub mod delivery;
pub mod lease;
pub mod runner;
pub mod takeover;

pub use crate::jobs::{job, schedule};
pub use crate::tz;

#[cfg(test)]
mod tests;

use crate::agent::Agent;
use crate::config::Loaded;
use crate::store::prelude::*;
use crate::store::DaemonStoreRef;
use ethan_channels::{Channel, ChannelKind};
use runner::{Execute, JobExecutor, Scheduler, SchedulerOptions, SystemClock};
use std::collections::HashMap;
use std::sync::Arc;

/// Start the scheduler of `ethan run` on the daemon's store, agent and channels; it stops when
/// `shutdown` turns true.
pub fn start(
    loaded: &Loaded,
    store: DaemonStoreRef,
    agent: Arc<Agent>,
    channels: HashMap<ChannelKind, Arc<dyn Channel>>,
    metrics: Arc<crate::metrics::Metrics>,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let (scheduler, exec) = build(loaded, &store, agent, channels);
    let scheduler = scheduler.with_metrics(metrics.clone());
    let exec: Arc<dyn Execute> = Arc::new(exec.with_metrics(metrics));
    ethan_core::task::spawn(Arc::new(scheduler).run(exec, shutdown))
}

/// This process's run leases on a shared store (`store.lease_secs`); `None` for SQLite.
pub fn run_leases(loaded: &Loaded, store: &DaemonStoreRef) -> Option<Arc<lease::RunLeases>> {
    lease::RunLeases::for_store(
        store,
        &runner::process_identity(),
        loaded.config.store.lease_secs,
    )
}

/// The scheduler and the executor on the daemon's store, with run leases when it is shared
/// (`ethan run`, and `ethan jobs run`, which claims one run and executes it itself).
pub fn build(
    loaded: &Loaded,
    store: &DaemonStoreRef,
    agent: Arc<Agent>,
    channels: HashMap<ChannelKind, Arc<dyn Channel>>,
) -> (Scheduler, JobExecutor) {
    let leases = run_leases(loaded, store);
    let opts = SchedulerOptions::from_config(&loaded.config);
    let scheduler =
        Scheduler::new(store.shared(), Arc::new(SystemClock), opts).with_leases(leases.clone());
    let exec = JobExecutor::new(
        agent,
        channels,
        store.shared(),
        delivery::RetryPolicy::default(),
    )
    .with_leases(leases);
    (scheduler, exec)
}
