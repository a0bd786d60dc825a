//! `ethan status`: whether a daemon runs for this `$ETHAN_HOME` (pid, uptime, version), and,
//! from its `/healthz`, its channels, the turns in flight and the approvals waiting; the next
//! scheduled runs from the store. Exit 0 when a daemon runs and is healthy, else 1.

use crate::daemon::running::{self, DaemonRecord};
use std::process::ExitCode;

/// `3h 05m`, `4m 10s`.
fn uptime(secs: i64) -> String {
    let s = secs.max(0);
    match (s / 86_400, (s % 86_400) / 3600, (s % 3600) / 60, s % 60) {
        (d, h, _, _) if d > 0 => format!("{d}d {h}h"),
        (_, h, m, _) if h > 0 => format!("{h}h {m:02}m"),
        (_, _, m, sec) => format!("{m}m {sec:02}s"),
    }
}

async fn healthz(addr: std::net::SocketAddr) -> Result<serde_json::Value, String> {
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(3))
        .no_proxy()
        .build()
        .map_err(|e| e.to_string())?;
    let url = format!("http://{addr}/healthz");
    let resp = client
        .get(&url)
        .send()
        .await
        .map_err(|e| ethan_channels::net::describe(&e))?;
    resp.json().await.map_err(|e| e.to_string())
}

pub async fn run(loaded: &crate::config::Loaded) -> anyhow::Result<ExitCode> {
    let store = crate::daemon::open_store::open(loaded).await?.main;
    let mut healthy = false;
    match running::read(&loaded.home).await {
        None => println!(
            "daemon     not running (no `ethan run` is up for {})",
            loaded.home.display()
        ),
        Some(r) if !running::is_alive(r.pid) => println!(
            "daemon     not running (pid {} recorded at its start is gone: it stopped without \
             cleaning up; see its log)",
            r.pid
        ),
        Some(r) => healthy = daemon_lines(&r).await,
    }
    jobs_line(loaded, &store).await?;
    Ok(if healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The daemon's lines; whether it is healthy.
async fn daemon_lines(r: &DaemonRecord) -> bool {
    let up = chrono::Utc::now().timestamp() - r.started_at;
    println!(
        "daemon     running: pid {}, up {}, version {}",
        r.pid,
        uptime(up),
        r.version
    );
    let Some(addr) = r.gateway else {
        println!("channels   unknown (gateway.enabled is false, so there is no /healthz to ask)");
        return true;
    };
    match healthz(addr).await {
        Err(e) => {
            println!("channels   unknown: http://{addr}/healthz does not answer: {e}");
            false
        }
        Ok(h) => {
            let channels = h["channels"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k} {}", v.as_str().unwrap_or("?")))
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "none (only the HTTP gateway)".into());
            println!(
                "channels   {channels}; store {}",
                h["store"].as_str().unwrap_or("?")
            );
            println!(
                "turns      {} in flight",
                h["turns_in_flight"].as_u64().unwrap_or(0)
            );
            println!(
                "approvals  {} waiting for an answer",
                h["pending_approvals"].as_u64().unwrap_or(0)
            );
            h["status"] == "ok"
        }
    }
}

/// The next three scheduled runs.
async fn jobs_line(
    loaded: &crate::config::Loaded,
    store: &crate::store::DaemonStoreRef,
) -> anyhow::Result<()> {
    let tz = loaded
        .config
        .timezone
        .clone()
        .filter(|t| !t.trim().is_empty());
    let mut next: Vec<_> = store
        .list_jobs()
        .await?
        .into_iter()
        .filter(|j| !j.paused && !matches!(j.state, crate::store::jobs::JobState::Done))
        .filter_map(|j| j.next_run.map(|t| (t, j)))
        .collect();
    ethan_core::sort::sort_by_key(&mut next, |(t, _)| *t);
    if next.is_empty() {
        println!("jobs       no run scheduled");
        return Ok(());
    }
    let shown: Vec<String> = next
        .iter()
        .take(3)
        .map(|(t, j)| {
            let zone = crate::jobs::job::zone_of(j, tz.as_deref());
            let at = chrono::DateTime::from_timestamp(*t, 0)
                .map(|t| crate::tz::display(&zone, t))
                .unwrap_or_default();
            format!("{} ({:?}) at {at}", j.id, j.title)
        })
        .collect();
    println!(
        "jobs       {} scheduled; next: {}",
        next.len(),
        shown.join("; ")
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uptimes_read_naturally() {
        assert_eq!(uptime(70), "1m 10s");
        assert_eq!(uptime(3 * 3600 + 5 * 60), "3h 05m");
        assert_eq!(uptime(2 * 86_400 + 3600), "2d 1h");
    }

    #[test]
    fn this_process_is_alive_and_a_free_pid_is_not() {
        assert!(running::is_alive(std::process::id()));
        assert!(!running::is_alive(u32::MAX));
    }
}
