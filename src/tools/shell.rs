//! `shell{command, timeout?}`: runs `bash -c <command>` (or `sh -c` where bash is missing) in the
//! workspace, in its own process group; on timeout the whole group is killed. Returns the exit
//! code, stdout and stderr.
//!
//! Every command runs in the sandbox ([`crate::sandbox`]): the kernel (Landlock) hides
//! `$ETHAN_HOME` outside the workspace and the user's credential places, and the environment is
//! cleared to a short harmless list. Consent follows the classifier, with two rules on top:
//! - a command that names a protected path (`cat ../config.yaml`, `head ~/.aws/credentials`) is
//!   an always-ask call; once the owner approved it, it runs outside the sandbox, as shown;
//! - where the kernel offers no sandbox, no command is "safe": every one asks.

use super::args::{opt_u64, req_str};
use super::paths;
use super::{ErrorKind, Risk, Tool, ToolContext, ToolResult};
use async_trait::async_trait;
use ethan_shell_classifier::{classify, Classification, ShellClass};
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
    /// Whether the kernel sandbox is enforced on this machine (probed once).
    sandboxed: bool,
}

impl Shell {
    /// `default_timeout`: seconds, from `tools.shell.timeout_secs` (default 30).
    pub fn new(default_timeout: u64) -> Self {
        Self {
            default_timeout,
            secrets: Vec::new(),
            sandboxed: crate::sandbox::landlock::status().is_available(),
        }
    }

    /// As if the kernel had (or had not) a sandbox: for tests of the fallback.
    pub fn with_sandbox(mut self, available: bool) -> Self {
        self.sandboxed = available;
        self
    }

    /// With the config's secret values, for the classifier.
    pub fn with_secrets(mut self, secrets: Vec<String>) -> Self {
        self.secrets = secrets;
        self
    }

    /// The classifier's verdict, with this tool's rules on top (protected paths, no sandbox).
    fn classify(&self, args: &Value, ctx: &ToolContext) -> Option<(String, Classification)> {
        let command = args.get("command").and_then(Value::as_str)?;
        let mut c = classify(command, &self.secrets);
        if let Some(why) = names_protected(command, ctx) {
            c.class = ShellClass::Always;
            c.reasons.insert(0, why);
        } else if c.class == ShellClass::Safe && !self.sandboxed {
            c.class = ShellClass::Ask;
            c.reasons
                .push("no kernel sandbox on this machine, so every command asks".into());
        }
        Some((command.to_string(), c))
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

/// The first word of `command` that names a protected path ([`crate::sandbox::protected`]),
/// resolved against the workspace, as a reason for the approval. Words are split at blanks,
/// shell operators and `=`; quotes are dropped; `~` and `$HOME` are expanded; a glob is judged
/// by the folder before its first wildcard. The kernel sandbox is the real barrier: this only
/// makes a deliberate read visible and askable.
fn names_protected(command: &str, ctx: &ToolContext) -> Option<String> {
    let protection = paths::protection_of(ctx);
    let home = crate::sandbox::protected::user_home();
    let words = command
        .split(|c: char| {
            c.is_whitespace() || matches!(c, ';' | '|' | '&' | '(' | ')' | '<' | '>' | '=' | '`')
        })
        .map(|w| w.replace(['\'', '"', '\\'], ""))
        .filter(|w| !w.is_empty());
    for word in words {
        let mut w = word.clone();
        if let Some(h) = &home {
            let h = h.display().to_string();
            for var in ["${HOME}", "$HOME"] {
                if let Some(rest) = w.strip_prefix(var) {
                    w = format!("{h}{rest}");
                }
            }
            if w == "~" || w.starts_with("~/") {
                w = format!("{h}{}", &w[1..]);
            }
        }
        let w = match w.find(['*', '?', '[']) {
            Some(i) => match w[..i].rfind('/') {
                Some(j) => w[..j.max(1)].to_string(),
                None => ".".to_string(),
            },
            None => w,
        };
        let p = std::path::PathBuf::from(&w);
        let p = if p.is_absolute() {
            p
        } else {
            ctx.workspace.join(p)
        };
        if let Some(why) = protection.check(&p) {
            return Some(format!("names a protected path: {}", why.describe(&p)));
        }
    }
    None
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
    fn reads_private(&self) -> bool {
        true
    }
    /// The shell classifier decides: safe commands run without asking; others ask once per
    /// session (scope `shell`); dangerous ones ask every time.
    fn consent_check(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
        let (command, c) = self.classify(args, ctx)?;
        match c.class {
            ShellClass::Safe => None,
            ShellClass::Ask => Some(command),
            ShellClass::Always => Some(format!("(dangerous: {})\n{command}", c.reasons.join("; "))),
        }
    }
    fn consent_always(&self, args: &Value, ctx: &ToolContext) -> bool {
        self.classify(args, ctx)
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
        // The sandbox, unless the owner approved this very command reading a protected path.
        let approved_protected = names_protected(command, ctx).is_some()
            && ctx
                .approved_actions
                .iter()
                .any(|a| a == crate::consent::PROTECTED_PATHS_APPROVED);
        let sandbox = if approved_protected {
            None
        } else {
            match crate::sandbox::landlock::prepare(&paths::protection_of(ctx)) {
                Ok(Some(p)) => Some(p),
                Ok(None) if !self.sandboxed => None,
                Ok(None) => {
                    return ToolResult::err(
                        ErrorKind::Dependency,
                        "the kernel sandbox could not be set up for this command; it did not run",
                    )
                }
                Err(e) => {
                    return ToolResult::err(
                        ErrorKind::Dependency,
                        format!("the sandbox could not be set up ({e}); the command did not run"),
                    )
                }
            }
        };
        let mut cmd = tokio::process::Command::new(shell_program());
        cmd.arg("-c")
            .arg(command)
            .current_dir(&ctx.workspace)
            .env_clear()
            .envs(crate::sandbox::env::for_command(
                crate::sandbox::private_tmp(),
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        // The daemon ignores SIGXFSZ (so a file-size limit fails its writes instead of killing
        // it) and ignored signals survive exec: commands get the default back, as in a shell.
        // SAFETY: only `signal(2)`, `prctl(2)` and `landlock_restrict_self(2)`, which are
        // async-signal-safe system calls, run between fork and exec; nothing is allocated.
        let sandbox = std::sync::Arc::new(sandbox);
        let in_child = sandbox.clone();
        unsafe {
            cmd.pre_exec(move || {
                libc::signal(libc::SIGXFSZ, libc::SIG_DFL);
                if let Some(p) = in_child.as_ref() {
                    p.restrict_current_process()?;
                }
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
        drop(sandbox);
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

    /// `$ETHAN_HOME` with a config holding a secret, and a workspace inside it.
    fn daemon_home() -> (tempfile::TempDir, ToolContext) {
        let home = tempfile::tempdir().unwrap();
        let ws = home.path().join("workspace");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::write(
            home.path().join("config.yaml"),
            "api_key: sk-SANDBOXED-SECRET\n",
        )
        .unwrap();
        std::fs::create_dir_all(home.path().join("spill")).unwrap();
        std::fs::write(home.path().join("spill/x.txt"), "sk-SANDBOXED-SECRET").unwrap();
        std::fs::write(ws.join("notes.txt"), "visible notes").unwrap();
        let mut ctx = ctx_in(&ws);
        ctx.ethan_home = Some(home.path().to_path_buf());
        (home, ctx)
    }

    #[tokio::test]
    async fn the_kernel_hides_ethan_home_from_commands() {
        if !crate::sandbox::landlock::status().is_available() {
            panic!("this test needs Landlock (Linux 5.13+ with landlock in the lsm= list)");
        }
        let (_home, ctx) = daemon_home();
        let shell = Shell::new(30);
        for command in [
            "cat ../config.yaml",
            "cat ../*.yaml",
            "cd .. && cat config.yaml",
            "tail ../spill/*",
            "grep -r SANDBOXED ..",
            "cd sub && cat ../../config.yaml",
            "python3 -c \"import os; print(open(os.path.dirname(os.getcwd()) + '/config.yaml').read())\"",
            "ln ../config.yaml hard && cat hard",
            "ln -s .. up && cat up/config.yaml",
        ] {
            let r = shell.run(json!({ "command": command }), &ctx).await;
            assert!(
                !r.output.contains("sk-SANDBOXED-SECRET"),
                "{command} read the secret:\n{}",
                r.output
            );
            // EACCES, or EXDEV where Landlock refuses to link a hidden file elsewhere.
            assert!(
                ["Permission denied", "PermissionError", "Invalid cross-device link"]
                    .iter()
                    .any(|e| r.output.contains(e)),
                "{command} was not refused by the kernel:\n{}",
                r.output
            );
        }
        // The workspace itself is as usual: readable and writable.
        let r = shell
            .run(
                json!({"command": "cat notes.txt && echo new > new.txt && cat new.txt"}),
                &ctx,
            )
            .await;
        assert!(
            r.output.contains("visible notes") && r.output.contains("new"),
            "{}",
            r.output
        );
    }

    #[tokio::test]
    async fn commands_get_no_secret_variables() {
        let (_home, ctx) = daemon_home();
        let r = Shell::new(30).run(json!({"command": "env"}), &ctx).await;
        let names: Vec<&str> = r
            .output
            .lines()
            .filter_map(|l| l.split_once('=').map(|(k, _)| k))
            .collect();
        assert!(names.contains(&"PATH"), "{}", r.output);
        for n in names {
            assert!(!crate::sandbox::env::secret_name(n), "{n} was passed on");
        }
        let tmp = crate::sandbox::private_tmp().unwrap().display().to_string();
        assert!(r.output.contains(&format!("TMPDIR={tmp}")), "{}", r.output);
    }

    #[test]
    fn naming_a_protected_path_asks_every_time_and_no_sandbox_means_no_safe_class() {
        let (home, ctx) = daemon_home();
        let shell = Shell::new(30).with_sandbox(true);
        let args = json!({"command": "cat ../config.yaml"});
        let d = shell.consent_check(&args, &ctx).expect("asks");
        assert!(d.contains("protected path"), "{d}");
        assert!(shell.consent_always(&args, &ctx));
        let glob = json!({"command": format!("head {}/*.yaml", home.path().display())});
        assert!(shell.consent_always(&glob, &ctx));
        // A safe command in the workspace runs without a question where the kernel sandboxes it…
        let ls = json!({"command": "ls -la"});
        assert_eq!(shell.consent_check(&ls, &ctx), None);
        // …and asks where it cannot.
        let bare = Shell::new(30).with_sandbox(false);
        assert!(bare.consent_check(&ls, &ctx).is_some());
        assert!(!bare.consent_always(&ls, &ctx));
    }
}
