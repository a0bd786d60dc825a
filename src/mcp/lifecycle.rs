//! The rules of one server's life the manager ([`super::manager`]) follows, each small enough to
//! test alone:
//! - [`Backoff`]: the wait before a restart — 1, 2, 4 … seconds, at most
//!   [`MAX_RESTART_DELAY`]; back to 1 s only after a connection that stayed up for
//!   [`STABLE_AFTER`], so a server that crashes right after listing its tools is restarted ever
//!   more slowly instead of every second;
//! - [`list_tools`]: `tools/list` page by page (MCP spec 2025-06-18, "Tools › Listing Tools",
//!   `cursor` / `nextCursor`), at most [`MAX_PAGES`] pages and [`MAX_TOOLS`] tools, so a server
//!   cannot keep the daemon listing or fill its memory;
//! - [`ping`]: `ping` ("Utilities › Ping") within the server's timeout; a server that does not
//!   answer is restarted ([`ping_every`] says how often it is asked).

use rmcp::model::{ClientRequest, PaginatedRequestParams, PingRequest};
use rmcp::service::{Peer, RoleClient};
use serde_json::Value;
use std::time::{Duration, Instant};

/// The longest wait between two restarts.
pub const MAX_RESTART_DELAY: Duration = Duration::from_secs(30);
/// How long a connection must last for the next restart to wait 1 s again.
pub const STABLE_AFTER: Duration = Duration::from_secs(30);
/// The most `tools/list` pages read from one server.
pub const MAX_PAGES: usize = 16;
/// The most tools taken from one server.
pub const MAX_TOOLS: usize = 512;

/// The wait before the next restart.
#[derive(Debug)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            next: Duration::from_secs(1),
        }
    }
}

impl Backoff {
    /// A connection that was up since `since` ended (or a start failed: `None`): the wait
    /// before the next start; each one doubles, up to [`MAX_RESTART_DELAY`], unless the
    /// connection lasted [`STABLE_AFTER`].
    pub fn after(&mut self, since: Option<Instant>) -> Duration {
        if since.is_some_and(|t| t.elapsed() >= STABLE_AFTER) {
            self.next = Duration::from_secs(1);
        }
        let wait = self.next;
        self.next = (self.next * 2).min(MAX_RESTART_DELAY);
        wait
    }
}

/// The tools of `tools/list`, as JSON (`name`, `description`, `inputSchema`, `annotations`),
/// read page by page within the caps; the second value says what was left out, if anything.
pub async fn list_tools(peer: &Peer<RoleClient>) -> Result<(Vec<Value>, Option<String>), String> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for page in 0..MAX_PAGES {
        let params =
            (page > 0).then(|| PaginatedRequestParams::default().with_cursor(cursor.clone()));
        let r = peer.list_tools(params).await.map_err(|e| e.to_string())?;
        for t in &r.tools {
            if tools.len() >= MAX_TOOLS {
                return Ok((
                    tools,
                    Some(format!("only its first {MAX_TOOLS} tools are used")),
                ));
            }
            if let Ok(v) = serde_json::to_value(t) {
                tools.push(v);
            }
        }
        cursor = r.next_cursor.map(|c| c.to_string());
        if cursor.is_none() {
            return Ok((tools, None));
        }
    }
    Ok((
        tools,
        Some(format!(
            "only its first {MAX_PAGES} pages of tools are used"
        )),
    ))
}

/// How often a server is pinged: its timeout, at most every 30 s.
pub fn ping_every(timeout: Duration) -> Duration {
    timeout.clamp(Duration::from_secs(1), Duration::from_secs(30))
}

/// `ping`, answered within `limit`.
pub async fn ping(peer: &Peer<RoleClient>, limit: Duration) -> Result<(), String> {
    let request = ClientRequest::PingRequest(PingRequest {
        method: Default::default(),
        extensions: Default::default(),
    });
    match tokio::time::timeout(limit, peer.send_request(request)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("ping failed: {e}")),
        Err(_) => Err(format!("no answer to ping within {} s", limit.as_secs())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_after_early_crashes_back_off_to_30_s_and_a_stable_run_resets() {
        let mut b = Backoff::default();
        let crashed = Some(Instant::now());
        let waits: Vec<u64> = (0..8).map(|_| b.after(crashed).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30, 30]);
        let long_ago = Instant::now().checked_sub(STABLE_AFTER + Duration::from_secs(1));
        if long_ago.is_some() {
            assert_eq!(b.after(long_ago), Duration::from_secs(1));
            assert_eq!(b.after(None), Duration::from_secs(2));
        }
    }

    #[test]
    fn pings_follow_the_timeout_within_bounds() {
        assert_eq!(ping_every(Duration::from_secs(2)), Duration::from_secs(2));
        assert_eq!(ping_every(Duration::from_secs(60)), Duration::from_secs(30));
        assert_eq!(ping_every(Duration::ZERO), Duration::from_secs(1));
    }
}
