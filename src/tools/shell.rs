//! `shell{command, timeout?}`: runs `bash -c <command>` (or `sh -c` where bash is missing) in the
//! workspace, in its own process group; on timeout the whole group is killed. Returns the exit
//! code, stdout and stderr.

use super::args::{opt_u64, req_str};
use super::{ErrorKind, Risk, Tool, ToolContext, ToolResult};
use crate::consent::shell::{classify, Classification, ShellClass};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Default and largest timeout of one command, in seconds.
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;
pub const MAX_TIMEOUT_SECS: u64 = 600;
/// Bytes kept of each stream.
const STREAM_CAP: usize = 1024 * 1024;

pub struct Shell {
    default_timeout: u64,
    /// The config's secret values: a command that mentions one always asks.
    secrets: Vec<String>,
}

impl Shell {
    /// `default_timeout`: seconds, from `tools.shell.timeout_secs` (default 30).
    pub fn new(default_timeout: u64) -> Self {
        Self {
            default_timeout,
            secrets: Vec::new(),
        }
    }

    /// With the config's secret values, for the classifier.
    pub fn with_secrets(mut self, secrets: Vec<String>) -> Self {
        self.secrets = secrets;
        self
    }

    fn classify(&self, args: &Value) -> Option<(String, Classification)> {
        let command = args.get("command").and_then(Value::as_str)?;
        Some((command.to_string(), classify(command, &self.secrets)))
    }

    fn effective_timeout(&self, args: &Value) -> u64 {
        args.get("timeout")
            .and_then(Value::as_u64)
            .unwrap_or(self.default_timeout)
            .clamp(1, MAX_TIMEOUT_SECS)
    }
}

fn shell_program() -> &'static str {
    if std::path::Path::new("/bin/bash").exists() {
        "/bin/bash"
    } else {
        "/bin/sh"
    }
}

async fn read_capped<R: tokio::io::AsyncRead + Unpin>(mut r: R) -> (Vec<u8>, usize) {
    let mut kept = Vec::new();
    let mut total = 0usize;
    let mut buf = [0u8; 8192];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                total += n;
                let room = STREAM_CAP.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    (kept, total)
}

fn kill_group(pid: u32) {
    // SAFETY: kill(2) with a negative pid signals the process group we created; no memory is
    // touched.
    unsafe {
        libc::kill(-(pid as i32), libc::SIGKILL);
    }
}

#[async_trait]
impl Tool for Shell {
    fn name(&self) -> &str {
        "shell"
    }
    fn description(&self) -> &str {
        "Run a shell command (bash -c) in the workspace directory. Returns the exit code, stdout and stderr. \
         `timeout` is in seconds (default 30, at most 600); the whole process group is killed when it expires."
    }
    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command line, run with bash -c"},
                "timeout": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_SECS, "description": "Seconds before the command is killed"}
            },
            "required": ["command"],
            "additionalProperties": false
        })
    }
    fn risk(&self) -> Risk {
        Risk::Exec
    }
    /// The shell classifier decides: safe commands run without asking; others ask once per
    /// session (scope `shell`); dangerous ones ask every time.
    fn consent_check(&self, args: &Value, _ctx: &ToolContext) -> Option<String> {
        let (command, c) = self.classify(args)?;
        match c.class {
            ShellClass::Safe => None,
            ShellClass::Ask => Some(command),
            ShellClass::Always => Some(format!("(dangerous: {})\n{command}", c.reasons.join("; "))),
        }
    }
    fn consent_always(&self, args: &Value, _ctx: &ToolContext) -> bool {
        self.classify(args)
            .is_none_or(|(_, c)| c.class == ShellClass::Always)
    }
    fn fast_path(&self) -> bool {
        true
    }
    fn timeout(&self) -> Duration {
        Duration::from_secs(self.default_timeout + 5)
    }
    fn timeout_for(&self, args: &Value) -> Duration {
        // The command's own limit, plus time to kill it and collect its output.
        Duration::from_secs(self.effective_timeout(args) + 5)
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolResult {
        let command = match req_str(&args, "command") {
            Ok(c) => c,
            Err(e) => return e,
        };
        if let Err(e) = opt_u64(&args, "timeout") {
            return e;
        }
        let secs = self.effective_timeout(&args);
        if let Err(e) = std::fs::create_dir_all(&ctx.workspace) {
            return ToolResult::err(
                ErrorKind::Dependency,
                format!(
                    "cannot create the workspace {}: {e}",
                    ctx.workspace.display()
                ),
            );
        }
        let mut cmd = tokio::process::Command::new(shell_program());
        cmd.arg("-c")
            .arg(command)
            .current_dir(&ctx.workspace)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        // The daemon ignores SIGXFSZ (so a file-size limit fails its writes instead of killing
        // it) and ignored signals survive exec: commands get the default back, as in a shell.
        // SAFETY: only `signal(2)`, which is async-signal-safe, runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGXFSZ, libc::SIG_DFL);
                Ok(())
            });
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                return ToolResult::err(
                    ErrorKind::Dependency,
                    format!("cannot start {}: {e}", shell_program()),
                )
            }
        };
        let pid = child.id().unwrap_or(0);
        let out = tokio::spawn(read_capped(child.stdout.take().expect("piped stdout")));
        let err = tokio::spawn(read_capped(child.stderr.take().expect("piped stderr")));
        let status = tokio::time::timeout(Duration::from_secs(secs), child.wait()).await;
        let timed_out = status.is_err();
        if timed_out && pid != 0 {
            kill_group(pid);
        }
        let status = match status {
            Ok(s) => s.ok(),
            Err(_) => child.wait().await.ok(),
        };
        // Children that escaped the group could keep the pipes open; do not wait forever.
        let collect = |h: tokio::task::JoinHandle<(Vec<u8>, usize)>| async move {
            tokio::time::timeout(Duration::from_secs(2), h)
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default()
        };
        let (stdout, stdout_total) = collect(out).await;
        let (stderr, stderr_total) = collect(err).await;
        let code = status.and_then(|s| s.code());
        let mut text = String::new();
        text.push_str(&format!(
            "exit code: {}\n",
            code.map(|c| c.to_string())
                .unwrap_or_else(|| "none (killed by a signal)".into())
        ));
        text.push_str("--- stdout ---\n");
        text.push_str(&String::from_utf8_lossy(&stdout));
        if stdout_total > stdout.len() {
            text.push_str(&format!(
                "\n[stdout cut at {} of {stdout_total} bytes]",
                stdout.len()
            ));
        }
        text.push_str("\n--- stderr ---\n");
        text.push_str(&String::from_utf8_lossy(&stderr));
        if stderr_total > stderr.len() {
            text.push_str(&format!(
                "\n[stderr cut at {} of {stderr_total} bytes]",
                stderr.len()
            ));
        }
        let meta = json!({"exit_code": code, "timed_out": timed_out});
        if timed_out {
            let mut r = ToolResult::err(
                ErrorKind::Timeout,
                format!("the command did not finish within {secs} s and was killed (with its process group); output so far follows"),
            );
            r.output = text;
            return r.with_metadata(meta);
        }
        ToolResult::ok(text).with_metadata(meta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::executor::tests::ctx_in;

    #[tokio::test]
    async fn runs_and_reports_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx_in(dir.path());
        let r = Shell::new(30)
            .run(json!({"command": "echo hi; echo oops >&2; exit 3"}), &ctx)
            .await;
        assert!(r.ok);
        assert!(r.output.contains("exit code: 3"), "{}", r.output);
        assert!(r.output.contains("hi"));
        assert!(r.output.contains("oops"));
    }

    #[tokio::test]
    async fn timeout_kills_the_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx_in(dir.path());
        let marker = dir.path().join("survived");
        let cmd = format!("(sleep 3; touch {}) & sleep 30", marker.display());
        let started = std::time::Instant::now();
        let r = Shell::new(30)
            .run(json!({"command": cmd, "timeout": 1}), &ctx)
            .await;
        assert!(!r.ok);
        assert_eq!(r.error_kind, Some(ErrorKind::Timeout));
        assert!(started.elapsed() < Duration::from_secs(10));
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert!(!marker.exists(), "a background child outlived the timeout");
    }

    #[tokio::test]
    async fn commands_get_the_default_sigxfsz_back() {
        // As in the daemon (src/main.rs): this process ignores SIGXFSZ.
        // SAFETY: installs no handler code.
        unsafe {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        }
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx_in(dir.path());
        let r = Shell::new(30)
            .run(
                json!({"command": "ulimit -f 1; head -c 100000 /dev/zero > big; echo status $?"}),
                &ctx,
            )
            .await;
        // Killed by SIGXFSZ (128 + 25) as in a login shell, not "File too large" (status 1).
        assert!(r.output.contains("status 153"), "{}", r.output);
    }
}
