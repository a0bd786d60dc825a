//! What a tool call may reach on this machine.
//!
//! - [`protected`]: the one list of protected places and the one resolver (file and search
//!   tools, the shell classifier and the kernel sandbox agree on it);
//! - [`landlock`]: the kernel sandbox of shell commands (Landlock), which hides `$ETHAN_HOME`
//!   (less the workspace) and the user's credential places from every command;
//! - [`network`]: no network for commands that run without the owner's approval;
//! - [`seccomp`]: no unix sockets and no capabilities for those commands either;
//! - [`env`]: the cleared environment of shell commands;
//! - [`private_tmp`]: the daemon's own temp folder (mode 0700), the one place outside the
//!   workspace where `file_write` needs no consent, and the `TMPDIR` of shell commands.

pub mod env;
pub mod landlock;
pub mod network;
pub mod protected;
pub mod seccomp;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

static PRIVATE_TMP: OnceLock<Option<PathBuf>> = OnceLock::new();

/// The daemon's private temp folder, `<system temp>/ethan-<pid>-<random>` with mode 0700,
/// created on first use (`None` when it cannot be created; callers then fall back to asking).
pub fn private_tmp() -> Option<&'static Path> {
    PRIVATE_TMP
        .get_or_init(|| {
            use std::os::unix::fs::DirBuilderExt;
            let base = std::env::temp_dir();
            for _ in 0..8 {
                let name = format!(
                    "ethan-{}-{}",
                    std::process::id(),
                    &uuid::Uuid::new_v4().simple().to_string()[..8]
                );
                let dir = base.join(name);
                match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                    Ok(()) => return Some(protected::real_path(&dir)),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                    Err(e) => {
                        tracing::warn!(
                            "cannot create a private temp folder under {}: {e}",
                            base.display()
                        );
                        return None;
                    }
                }
            }
            None
        })
        .as_deref()
}

/// What `ethan doctor` says about the sandbox: `Ok(line)` when the kernel enforces it and a
/// real sandboxed read of `probe` (a protected file, e.g. the config) was refused; `Err(line)`
/// when there is no sandbox or the read got through.
pub fn self_check(protection: &protected::Protection, probe: &Path) -> Result<String, String> {
    let abi = match landlock::status() {
        landlock::Status::Available(v) => v,
        landlock::Status::Unavailable(why) => {
            return Err(format!(
                "{why}; without it no shell command counts as safe: every one asks the owner"
            ))
        }
    };
    let hidden = protection.hidden_places();
    let prepared = match landlock::prepare(protection, None) {
        Ok(Some(p)) => p,
        Ok(None) => return Err("Landlock could not be applied; every shell command asks".into()),
        Err(e) => return Err(format!("the ruleset could not be built: {e}")),
    };
    let places = hidden
        .iter()
        .map(|h| h.path.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    if !probe.exists() {
        return Ok(format!(
            "Landlock ABI {abi}: shell commands cannot reach {places} ({} rules)",
            prepared.rules
        ));
    }
    let rules = prepared.rules;
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg("exec cat -- \"$1\" >/dev/null")
        .arg("sh")
        .arg(probe)
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    // SAFETY: only async-signal-safe system calls run in the child (see `Prepared`).
    unsafe {
        use std::os::unix::process::CommandExt;
        let p = std::sync::Arc::new(prepared);
        cmd.pre_exec(move || p.restrict_current_process());
    }
    match cmd.output() {
        Ok(out) if !out.status.success() => Ok(format!(
            "Landlock ABI {abi}: shell commands cannot reach {places} ({rules} rules; checked: reading {} was refused)",
            probe.display()
        )),
        Ok(_) => Err(format!(
            "Landlock ABI {abi} is there, but a sandboxed command could read {}",
            probe.display()
        )),
        Err(e) => Err(format!("the sandbox check could not run /bin/sh: {e}")),
    }
}
