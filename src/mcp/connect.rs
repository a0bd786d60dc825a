//! Connecting to one MCP server: a child process over stdio or a streamable HTTP endpoint
//! (MCP spec 2025-06-18, "Transports"), then the `initialize` handshake ("Lifecycle").
//!
//! A child runs in the workspace with a cleared environment: the safe list of
//! [`crate::sandbox::env::PASSED`] (no variable whose name looks secret) plus the server's own
//! `env` ([`child_env`]), so a server cannot read the daemon's keys. It leads a process group
//! of its own, and the whole group is killed when the connection ends (`npx` starts the real
//! server as a grandchild). Where the kernel enforces Landlock, it runs in the sandbox of an
//! approved shell command ([`crate::sandbox::landlock`]): `$ETHAN_HOME` (less the workspace),
//! the config file and the user's credential places are unreadable to it and everything it
//! starts; the rest of the machine and the network are as the user's permissions allow (as for
//! shell commands, a folder that contains a hidden place, such as `$HOME` for `~/.ethan`, keeps
//! its existing entries but gets no new ones). Its stderr is logged at debug level, redacted.

use super::server::Handler;
use super::transport::McpTransport;
use crate::config::{McpServerConfig, Secret};
use crate::sandbox::protected::Protection;
use crate::tools::redact::Redactor;
use rmcp::service::{RoleClient, RunningService, ServiceExt};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A live connection.
pub type Running = RunningService<RoleClient, Handler>;

/// Why a server could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The configured command does not exist (logged once, see the manager).
    #[error("the command {0:?} was not found")]
    NotFound(String),
    #[error("{0}")]
    Failed(String),
}

/// The environment of a server's child: [`crate::sandbox::env::for_command`] (no `TMPDIR`)
/// with the server's `env` on top (a configured variable replaces a passed one).
pub fn child_env(server_env: &BTreeMap<String, Secret>) -> Vec<(OsString, OsString)> {
    let mut env = crate::sandbox::env::for_command(None);
    for (k, v) in server_env {
        env.retain(|(n, _)| n != k.as_str());
        env.push((k.into(), v.expose().into()));
    }
    env
}

/// Connect and initialise (within `cfg.timeout_secs`). For a child, also its process group
/// id, to kill the group when done. A server over HTTP is reached through a guard of `egress`.
#[allow(clippy::too_many_arguments)]
pub async fn connect(
    name: &str,
    cfg: &McpServerConfig,
    workspace: &Path,
    ethan_home: Option<&Path>,
    protected_also: &[std::path::PathBuf],
    handler: Handler,
    redactor: Arc<Redactor>,
    egress: &crate::egress::Egress,
) -> Result<(Running, Option<u32>), ConnectError> {
    let limit = Duration::from_secs(cfg.timeout_secs.max(1));
    if let Some(command) = &cfg.command {
        let cmd = child_command(name, command, cfg, workspace, ethan_home, protected_also)?;
        let (transport, pgid) = spawn_child(name, command, cmd, redactor)?;
        let running = handshake(
            tokio::time::timeout(limit, handler.serve(McpTransport::Child(transport))).await,
            limit,
        );
        if running.is_err() {
            kill_group(pgid);
        }
        return running.map(|r| (r, pgid));
    }
    let Some(url) = &cfg.url else {
        return Err(ConnectError::Failed(
            "neither command nor url is set".into(),
        ));
    };
    let transport = http_transport(url, cfg, limit, egress)?;
    handshake(
        tokio::time::timeout(limit, handler.serve(McpTransport::Http(transport))).await,
        limit,
    )
    .map(|r| (r, None))
}

/// The outcome of the `initialize` handshake, awaited for at most `limit`.
fn handshake(
    r: Result<Result<Running, rmcp::service::ClientInitializeError>, tokio::time::error::Elapsed>,
    limit: Duration,
) -> Result<Running, ConnectError> {
    match r {
        Ok(r) => r.map_err(|e| ConnectError::Failed(format!("the MCP handshake failed: {e}"))),
        Err(_) => Err(ConnectError::Failed(format!(
            "no answer to initialize within {} s",
            limit.as_secs()
        ))),
    }
}

/// The server's `command` as a child: in the workspace (made first), with [`child_env`], in
/// the Landlock sandbox where the kernel has it.
fn child_command(
    name: &str,
    command: &str,
    cfg: &McpServerConfig,
    workspace: &Path,
    ethan_home: Option<&Path>,
    protected_also: &[std::path::PathBuf],
) -> Result<tokio::process::Command, ConnectError> {
    // The shell tool makes the workspace the same way on first use.
    std::fs::create_dir_all(workspace).map_err(|e| {
        ConnectError::Failed(format!(
            "cannot create the workspace {}: {e}",
            workspace.display()
        ))
    })?;
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(&cfg.args)
        .env_clear()
        .envs(child_env(&cfg.env))
        .current_dir(workspace)
        .kill_on_drop(true);
    let protection = Protection::new(ethan_home, workspace).and(protected_also);
    match crate::sandbox::landlock::prepare(&protection, None) {
        Ok(Some(prepared)) => {
            let prepared = Arc::new(prepared);
            // SAFETY: only `landlock_restrict_self(2)` and `prctl(2)`, async-signal-safe
            // system calls, run between fork and exec; nothing is allocated.
            unsafe {
                cmd.pre_exec(move || prepared.restrict_current_process());
            }
        }
        Ok(None) => {
            tracing::debug!("mcp server {name}: no Landlock on this kernel; it runs unsandboxed")
        }
        Err(e) => {
            return Err(ConnectError::Failed(format!(
                "the sandbox could not be prepared: {e}"
            )))
        }
    }
    Ok(cmd)
}

/// Start `cmd` as the leader of a process group of its own, its stderr logged: the stdio
/// transport and the group's id.
fn spawn_child(
    name: &str,
    command: &str,
    cmd: tokio::process::Command,
    redactor: Arc<Redactor>,
) -> Result<(rmcp::transport::TokioChildProcess, Option<u32>), ConnectError> {
    let mut wrap = process_wrap::tokio::CommandWrap::from(cmd);
    wrap.wrap(process_wrap::tokio::ProcessGroup::leader());
    let (transport, stderr) = rmcp::transport::TokioChildProcess::builder(wrap)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => ConnectError::NotFound(command.to_string()),
            _ => ConnectError::Failed(format!("cannot start {command:?}: {e}")),
        })?;
    let pgid = transport.id();
    if let Some(stderr) = stderr {
        ethan_core::task::spawn(log_stderr(name.to_string(), stderr, redactor));
    }
    Ok((transport, pgid))
}

/// A server's stderr, drained to the end (a server blocked on a full pipe would hang), lines
/// logged lossily and at most 4 KiB each, so neither bad UTF-8 nor an endless line stops the
/// reader or grows the daemon's memory.
async fn log_stderr(
    name: String,
    mut stderr: impl tokio::io::AsyncRead + Unpin,
    redactor: Arc<Redactor>,
) {
    use tokio::io::AsyncReadExt;
    const MAX_LINE: usize = 4096;
    let mut buf = [0u8; 8192];
    let mut line: Vec<u8> = Vec::new();
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            if b == b'\n' {
                let text = String::from_utf8_lossy(&line);
                tracing::debug!("mcp server {name} stderr: {}", redactor.text(&text));
                line.clear();
            } else if line.len() < MAX_LINE {
                line.push(b);
            }
        }
    }
}

/// The streamable HTTP transport to `url`, with the configured headers, through a guard of
/// `egress`.
fn http_transport(
    url: &str,
    cfg: &McpServerConfig,
    limit: Duration,
    egress: &crate::egress::Egress,
) -> Result<rmcp::transport::StreamableHttpClientTransport<super::http::HttpClient>, ConnectError> {
    let mut headers = std::collections::HashMap::new();
    for (k, v) in &cfg.headers {
        let name = http::HeaderName::from_bytes(k.as_bytes())
            .map_err(|e| ConnectError::Failed(format!("header {k:?}: {e}")))?;
        let value = http::HeaderValue::from_str(v.expose())
            .map_err(|_| ConnectError::Failed(format!("header {k:?} has an invalid value")))?;
        headers.insert(name, value);
    }
    // Through the egress guard, which reaches the configured `url` (even on loopback: the
    // owner wrote it) and follows no redirects, so a header secret (an API key header, not only
    // Authorization) is never carried to another host.
    let guard = egress.guard(&[], Arc::new(crate::egress::SystemLookup));
    let client = crate::egress::EgressClient::new(
        &guard,
        crate::egress::Route::Mcp,
        crate::egress::Endpoint::all_of([url]),
        |b| b.connect_timeout(limit),
    )
    .map_err(|e| ConnectError::Failed(format!("HTTP client: {e}")))?;
    let config =
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url)
            .custom_headers(headers);
    Ok(rmcp::transport::StreamableHttpClientTransport::with_client(
        super::http::HttpClient(client),
        config,
    ))
}

/// Kill the process group led by `pgid` (the server and whatever it started).
pub fn kill_group(pgid: Option<u32>) {
    if let Some(p) = pgid.and_then(|p| i32::try_from(p).ok()).filter(|p| *p > 1) {
        // SAFETY: killpg has no memory effects; a group that is gone gives ESRCH, ignored.
        unsafe {
            libc::killpg(p, libc::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_sees_only_the_safe_list_and_its_own_env() {
        let mut own = BTreeMap::new();
        own.insert("GREETING".to_string(), Secret::new("hello"));
        own.insert("LANG".to_string(), Secret::new("C.UTF-8"));
        let env = child_env(&own);
        let names: Vec<String> = env
            .iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        for n in &names {
            assert!(
                crate::sandbox::env::PASSED.contains(&n.as_str()) || n == "GREETING",
                "{n} passed"
            );
        }
        assert!(env.iter().any(|(k, v)| k == "GREETING" && v == "hello"));
        assert_eq!(names.iter().filter(|n| *n == "LANG").count(), 1);
        assert!(env.iter().any(|(k, v)| k == "LANG" && v == "C.UTF-8"));
        assert!(names.iter().any(|n| n == "PATH"));
    }

    /// A real child run with the environment built here sees none of the daemon's variables.
    #[test]
    fn a_real_child_does_not_see_the_daemons_secrets() {
        // A variable of this test process stands for the daemon's keys.
        std::env::set_var("ETHAN_MCP_TEST_LEAK", "leaked-value");
        let mut own = BTreeMap::new();
        own.insert("MINE".to_string(), Secret::new("mine"));
        let out = std::process::Command::new("env")
            .env_clear()
            .envs(child_env(&own))
            .output()
            .expect("env runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!text.contains("leaked-value"), "{text}");
        assert!(text.contains("MINE=mine"), "{text}");
        for line in text.lines() {
            let name = line.split('=').next().unwrap_or("");
            assert!(
                crate::sandbox::env::PASSED.contains(&name) || name == "MINE",
                "{line}"
            );
        }
    }
}
