//! `ethan run`: the daemon. Builds everything in one wiring step ([`wiring`]: store, channels,
//! services, consent, tools, agent, router), starts every configured channel and the scheduler
//! and the MCP servers ([`crate::mcp`], in the background), resumes events a crash left
//! unfinished, and runs until SIGINT/SIGTERM (then closes the MCP servers). Never reads stdin.

pub mod access;
pub mod commands;
pub mod exe_pages;
pub mod fence;
pub mod group_view;
pub mod open_store;
pub mod owner_hint;
pub mod replica;
pub mod router;
pub mod running;
pub mod stream;
pub mod tool_setup;
pub mod trim;
pub mod typing;
pub mod wiring;

use crate::config::Loaded;
use crate::store::DaemonStoreRef;
use anyhow::Context;
use std::sync::Arc;

/// Turns in flight across all sessions.
pub const MAX_CONCURRENT_TURNS: usize = 8;

/// Remove spill files, audit rows, replay keys, finished inbound events and `lark.seen:*` keys
/// past `retention.*` (at start, then daily).
pub async fn prune_retention(loaded: &Loaded, store: &DaemonStoreRef) {
    let r = &loaded.config.retention;
    let (dir, days) = (loaded.spill_dir(), r.spill_days);
    let files = ethan_core::task::spawn_blocking(move || crate::tools::spill::prune(&dir, days))
        .await
        .unwrap_or(0);
    match store.prune_audit(r.audit_days).await {
        Ok(rows) if rows + files > 0 => {
            tracing::info!("retention: removed {files} spill file(s) and {rows} audit row(s)")
        }
        Ok(_) => {}
        Err(e) => tracing::warn!("retention: {e}"),
    }
    match store.prune_inbound(r.inbound_days).await {
        Ok((events, seen)) if events + seen > 0 => tracing::info!(
            "retention: removed {events} inbound event(s) and {seen} lark.seen key(s)"
        ),
        Ok(_) => {}
        Err(e) => tracing::warn!("retention: {e}"),
    }
}

pub use crate::config::{lark_config, telegram_config};

/// `ethan run`: build everything ([`wiring::daemon`]), serve ([`wiring::serve`]) until
/// SIGINT/SIGTERM, then stop taking events in, give turns in flight [`SHUTDOWN_GRACE_SECS`],
/// and close the MCP servers and the store.
pub async fn run(loaded: Arc<Loaded>) -> anyhow::Result<()> {
    for n in &loaded.notices {
        tracing::warn!("{n}");
    }
    let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
    let daemon = wiring::daemon(loaded.clone(), &shutdown_rx).await?;
    let (tasks, gateway_addr) = wiring::serve(&daemon, &shutdown_rx).await?;
    running::record_start(&loaded.home, gateway_addr).await;
    tracing::info!("ethan is running (store {})", open_store::describe(&loaded));
    notify_systemd("READY=1");
    probe_after_start(&daemon);
    exe_pages::release_after_start();

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term.recv() => {},
    }
    notify_systemd("STOPPING=1");
    running::record_stop(&loaded.home).await;
    tracing::info!(
        "shutting down: no new events; waiting up to {SHUTDOWN_GRACE_SECS} s for turns in flight"
    );
    let _ = shutdown_tx.send(true);
    stop(daemon, tasks).await;
    Ok(())
}

/// Seconds after the daemon is ready that it probes the sandbox, unless a turn needed the
/// settings before: the probe (two process starts) does not compete with the channels' first
/// connections.
const PROBE_AFTER_READY_SECS: u64 = 1;

/// Probe the sandbox [`PROBE_AFTER_READY_SECS`] after the start.
fn probe_after_start(daemon: &wiring::Daemon) {
    let probe = daemon.sandbox.clone();
    ethan_core::task::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_secs(PROBE_AFTER_READY_SECS)).await;
        probe.settings().await;
    });
}

/// Wait for turns in flight (at most [`SHUTDOWN_GRACE_SECS`]) and the tasks, then close the
/// MCP servers, the store and the private temp folder.
async fn stop(daemon: wiring::Daemon, tasks: Vec<tokio::task::JoinHandle<()>>) {
    let router = &daemon.routing.router;
    let deadline =
        tokio::time::Instant::now() + std::time::Duration::from_secs(SHUTDOWN_GRACE_SECS);
    while router.turns_in_flight() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let left = router.turns_in_flight();
    if left > 0 {
        tracing::info!("{left} turn(s) still running; they will be answered after the restart");
    } else if let Some(r) = &daemon.replica {
        // Nothing runs here any more: the other replicas take these sessions at once.
        r.give_up_all().await;
    }
    for t in tasks {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(3), t).await;
    }
    daemon.mcp.shutdown().await;
    if let Err(e) = daemon.store.checkpoint().await {
        tracing::warn!("final database checkpoint failed: {e}");
    }
    if let Some(dir) = &daemon.sandbox.settings().await.private_tmp {
        crate::sandbox::remove_private_tmp(dir);
    }
}

/// Seconds `ethan run` waits for turns in flight on SIGTERM; unfinished ones are resumed at
/// the next start (their inbound events stay recorded as unfinished).
pub const SHUTDOWN_GRACE_SECS: u64 = 5;

/// `sd_notify(3)` for `Type=notify` units: a datagram to `$NOTIFY_SOCKET` (a path, or an
/// abstract name starting with `@`). Does nothing outside systemd.
fn notify_systemd(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let Ok(sock) = std::os::unix::net::UnixDatagram::unbound() else {
        return;
    };
    let path = path.to_string_lossy().into_owned();
    let sent = if let Some(name) = path.strip_prefix('@') {
        use std::os::linux::net::SocketAddrExt;
        std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
            .and_then(|addr| sock.send_to_addr(state.as_bytes(), &addr))
    } else {
        sock.send_to(state.as_bytes(), &path)
    };
    if let Err(e) = sent {
        tracing::debug!("sd_notify failed: {e}");
    }
}
