//! How the `shell` tool runs one command once its sandbox is decided: the sandbox helper started
//! in the workspace with the command's [`ShellSpec`] on its input, waited for under the time
//! limit, its process group killed at the limit and again when it ends (nothing it left in the
//! background outlives it), each output stream kept up to [`STREAM_CAP`] bytes; then the text
//! the model reads.

use crate::{ErrorKind, ToolContext, ToolError, ToolOutput};
use ethan_sandbox::helper::ShellSpec;
use serde_json::json;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Bytes kept of each stream.
const STREAM_CAP: usize = 1024 * 1024;

/// What a command left when it ended or was killed.
pub(super) struct Finished {
    /// Its exit code (`None`: killed by a signal).
    code: Option<i32>,
    timed_out: bool,
    /// Each stream's kept bytes and its whole length.
    stdout: (Vec<u8>, usize),
    stderr: (Vec<u8>, usize),
}

pub(super) fn shell_program() -> &'static str {
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

/// The helper started on `spec` in the workspace, its environment cleared to the command's,
/// in a process group of its own, the specification written to its input.
async fn start(
    spec: &ShellSpec,
    ctx: &ToolContext,
    git_hooks: bool,
) -> Result<tokio::process::Child, ToolError> {
    let prepared = ethan_sandbox::helper::shell_command()
        .and_then(|c| ethan_sandbox::helper::spec_bytes(spec).map(|json| (c, json)));
    let (mut cmd, json) = match prepared {
        Ok(c) => c,
        Err(e) => {
            return Err(ToolError::new(
                ErrorKind::Dependency,
                format!("the sandbox helper could not be prepared ({e}); the command did not run"),
            ))
        }
    };
    cmd.current_dir(&ctx.workspace)
        .env_clear()
        .envs(ethan_sandbox::env::for_command(
            ctx.services.sandbox.private_tmp.as_deref(),
        ))
        .envs(ethan_sandbox::env::git_guard(git_hooks))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return Err(ToolError::new(
                ErrorKind::Dependency,
                format!("cannot start the sandbox helper: {e}"),
            ))
        }
    };
    // The specification, then end of input (the helper reads it before anything else).
    if let Some(mut stdin) = child.stdin.take() {
        use tokio::io::AsyncWriteExt;
        let _ = stdin.write_all(&json).await;
    }
    Ok(child)
}

/// Run `spec` for at most `secs` seconds: what it left.
pub(super) async fn run(
    spec: &ShellSpec,
    ctx: &ToolContext,
    git_hooks: bool,
    secs: u64,
) -> Result<Finished, ToolError> {
    let mut child = start(spec, ctx, git_hooks).await?;
    let pid = child.id().unwrap_or(0);
    let out = ethan_core::task::spawn(read_capped(child.stdout.take().expect("piped stdout")));
    let err = ethan_core::task::spawn(read_capped(child.stderr.take().expect("piped stderr")));
    let status = tokio::time::timeout(Duration::from_secs(secs), child.wait()).await;
    let timed_out = status.is_err();
    if timed_out && pid != 0 {
        kill_group(pid);
    }
    let status = match status {
        Ok(s) => s.ok(),
        Err(_) => child.wait().await.ok(),
    };
    // Nothing the command started outlives it: what it left in the background goes too.
    if pid != 0 {
        kill_group(pid);
    }
    // Children that escaped the group could keep the pipes open; do not wait forever.
    let collect = |h: tokio::task::JoinHandle<(Vec<u8>, usize)>| async move {
        tokio::time::timeout(Duration::from_secs(2), h)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default()
    };
    Ok(Finished {
        code: status.and_then(|s| s.code()),
        timed_out,
        stdout: collect(out).await,
        stderr: collect(err).await,
    })
}

/// What the model reads of a finished command: its exit code and both streams (saying where
/// they were cut); a `timeout` error with the output so far when it was killed at the limit,
/// a `dependency` error when the sandbox could not be set up.
pub(super) fn report(spec: &ShellSpec, done: Finished, secs: u64) -> Result<ToolOutput, ToolError> {
    let Finished {
        code,
        timed_out,
        stdout: (stdout, stdout_total),
        stderr: (stderr, stderr_total),
    } = done;
    let stderr_text = String::from_utf8_lossy(&stderr);
    if let Some(why) = ethan_sandbox::helper::setup_error(spec, code, &stderr_text) {
        return Err(ToolError::new(
            ErrorKind::Dependency,
            format!("the sandbox could not be set up ({why}); the command did not run"),
        ));
    }
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
        return Err(ToolError::new(
            ErrorKind::Timeout,
            format!("the command did not finish within {secs} s and was killed (with its process group); output so far follows"),
        )
        .with_output(text)
        .with_metadata(meta));
    }
    Ok(ToolOutput::new(text).with_metadata(meta))
}
