//! `ethan jobs list|remove|run`: scheduled jobs from the command line.
//!
//! `run <id>` executes the job now, in this process: it claims a slot like the scheduler does
//! (the job's due slot if it has one, else the current second), so a running daemon does not run
//! the same slot too; runs the agent unattended; and posts the digest through the configured
//! channel adapters it builds itself — whether or not the daemon is running. Exit 0 when the run
//! succeeded and its digest was delivered (or there was nothing to post).

use crate::config::Loaded;
use crate::jobs::job;
use crate::scheduler::delivery;
use crate::scheduler::runner::Execute;
use crate::store::jobs::{Delivery, JobState, RunStatus};
use crate::store::{DaemonStoreRef, OpenStore};
use crate::tools::schedule_list::run_summary;
use std::process::ExitCode;
use std::sync::Arc;

/// The subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum JobsCommand {
    /// List the jobs: id, schedule, time zone, next run, last status, target
    List,
    /// Remove a job and its run history
    Remove { id: String },
    /// Run a job now and post its digest (works without the daemon)
    Run { id: String },
}

pub async fn run(loaded: Arc<Loaded>, cmd: JobsCommand) -> anyhow::Result<ExitCode> {
    let stores = crate::daemon::open_store::open(&loaded).await?;
    let store = stores.main.clone();
    match cmd {
        JobsCommand::List => list(&store, &loaded).await?,
        JobsCommand::Remove { id } => {
            let j = job::remove(&*store, &id).await?;
            println!("removed job {} ({:?})", j.id, j.title);
        }
        JobsCommand::Run { id } => return run_now(&loaded, &stores, &id).await,
    }
    Ok(ExitCode::SUCCESS)
}

/// `jobs list`: a table of the jobs, one a line.
async fn list(store: &DaemonStoreRef, loaded: &Loaded) -> anyhow::Result<()> {
    let config_tz = loaded
        .config
        .timezone
        .clone()
        .filter(|t| !t.trim().is_empty());
    let jobs = store.list_jobs().await?;
    if jobs.is_empty() {
        println!("No scheduled jobs.");
        return Ok(());
    }
    let mut rows = vec![[
        "ID".to_string(),
        "SCHEDULE".into(),
        "TIMEZONE".into(),
        "NEXT RUN".into(),
        "LAST".into(),
        "TARGET".into(),
    ]];
    for j in &jobs {
        let zone = job::zone_of(j, config_tz.as_deref());
        let next = match (j.state, j.paused, j.next_run) {
            (JobState::Done, _, _) => "done".to_string(),
            (_, true, _) => "paused".to_string(),
            (_, _, Some(t)) => chrono::DateTime::from_timestamp(t, 0)
                .map(|t| crate::tz::display(&zone, t))
                .unwrap_or_default(),
            _ => "-".to_string(),
        };
        let last = store
            .job_runs(&j.id, 1)
            .await?
            .first()
            .map(|r| run_summary(r, &zone))
            .unwrap_or_else(|| "never ran".into());
        rows.push([
            j.id.clone(),
            job::describe_schedule(j, config_tz.as_deref()).replace('`', ""),
            zone.name().to_string(),
            next,
            last,
            job::target_label(j),
        ]);
    }
    let widths: Vec<usize> = (0..6)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        println!("{}", line.join("  ").trim_end());
    }
    Ok(())
}

/// `jobs run <id>`: claim a slot, run the job unattended, post its digest and say how it went.
async fn run_now(loaded: &Arc<Loaded>, stores: &OpenStore, id: &str) -> anyhow::Result<ExitCode> {
    let store = &stores.main;
    if store.get_job(id).await?.is_none() {
        anyhow::bail!("there is no job {id:?} (`ethan jobs list` shows the ids)");
    }
    // Everything that can fail to build is built before the slot is claimed.
    use crate::daemon::wiring;
    let channels = delivery::send_channels(loaded)?;
    let sandbox = wiring::services(loaded, stores, false);
    let private_tmp = sandbox.private_tmp.clone();
    let consent = wiring::consent(loaded, store, channels.clone(), None, None);
    let agent = wiring::agent(
        loaded.clone(),
        stores,
        Some(consent.clone()),
        sandbox.into(),
    )?;
    let (scheduler, exec) = crate::scheduler::build(loaded, store, agent, channels);
    let claim = scheduler.claim_now(id).await?;
    eprintln!(
        "running job {} (run {}, slot {})…",
        claim.job.id, claim.run_id, claim.scheduled_for
    );
    let report = exec.execute(claim).await;
    private_tmp
        .iter()
        .for_each(|d| crate::sandbox::remove_private_tmp(d));
    if let Some(d) = &report.digest {
        println!("{d}");
    }
    let target = store
        .get_job(id)
        .await?
        .map(|j| job::target_label(&j))
        .unwrap_or_default();
    match report.delivery {
        Delivery::Delivered => eprintln!(
            "run {}: {}; delivered to {target}{}",
            report.run_id,
            report.status.as_str(),
            report
                .message_id
                .as_deref()
                .map(|m| format!(" (message {m})"))
                .unwrap_or_default()
        ),
        Delivery::Skipped => eprintln!(
            "run {}: {}; nothing to post",
            report.run_id,
            report.status.as_str()
        ),
        Delivery::Failed | Delivery::Pending => eprintln!(
            "run {}: {}; NOT delivered to {target}: {}",
            report.run_id,
            report.status.as_str(),
            report.error.as_deref().unwrap_or("unknown error")
        ),
    }
    if let (RunStatus::Failed, Some(e)) = (report.status, &report.error) {
        eprintln!("ethan: the run failed: {e}");
    }
    let ok = report.status == RunStatus::Ok
        && matches!(report.delivery, Delivery::Delivered | Delivery::Skipped);
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
