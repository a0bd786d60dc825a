//! What `ethan doctor` says about the shell sandbox: Landlock and its ABI, the system-call
//! filter, the namespaces commands get here (and what this kernel lacks), and a real sandboxed
//! read of a protected file through the helper.

use super::helper::{self, Namespaces, ShellSpec};
use super::protected::Protection;
use std::path::Path;

/// One line: `Ok` when that part holds, `Err` when it is missing or weaker (a warning).
pub type Line = Result<String, String>;

/// The sandbox lines for `ethan doctor`. `probe` is a protected file (the config) that a
/// sandboxed command must fail to read.
pub fn report(protection: &Protection, probe: &Path) -> Vec<Line> {
    let mut out = vec![landlock_line(protection)];
    out.push(if super::seccomp::FILTER_AVAILABLE {
        Ok(super::seccomp::describe())
    } else {
        Err(super::seccomp::describe())
    });
    let ns = helper::namespaces();
    out.push(namespaces_line(&ns));
    out.push(match super::network::available() {
        Ok(()) => Ok(
            "commands that run without approval get no network (a network namespace of their own)"
                .into(),
        ),
        Err(why) => Err(format!(
            "{why}; commands cannot be cut off from the network, so every command asks"
        )),
    });
    if probe.exists() && super::landlock::status().is_available() {
        out.push(read_check(protection, probe));
    }
    out
}

fn landlock_line(protection: &Protection) -> Line {
    match super::landlock::status() {
        super::landlock::Status::Available(abi) => {
            let places = protection
                .hidden_places()
                .iter()
                .map(|h| h.path.display().to_string())
                .collect::<Vec<_>>()
                .join(", ");
            Ok(format!(
                "Landlock ABI {abi}: shell commands cannot reach {places}"
            ))
        }
        super::landlock::Status::Unavailable(why) => Err(format!(
            "{why}; without it no shell command counts as safe: every one asks the owner"
        )),
    }
}

/// Which namespaces commands get, and what that means.
pub fn namespaces_line(ns: &Namespaces) -> Line {
    let mut used = Vec::new();
    if ns.user {
        used.push("user");
    }
    for (on, name) in [(ns.pid, "PID"), (ns.mount, "mount"), (ns.net, "network")] {
        if on {
            used.push(name);
        }
    }
    if ns.mounts_hide() {
        Ok(format!(
            "namespaces for each command: {} — every process a command starts ends with it; \
             the protected places are hidden by mounts (approved commands can write anywhere \
             else the user can); repositories in the workspace are read-only to commands run \
             without approval and show them no setting that runs a program; block devices and \
             the kernel's settings are out of every command's reach",
            used.join(", ")
        ))
    } else {
        Err(format!(
            "missing on this kernel: {}; approved commands run without a PID namespace (what \
             they leave behind is killed by the helper as a subreaper) and the folders that \
             contain a protected place are read-only to them",
            ns.missing.as_deref().unwrap_or("namespaces for commands")
        ))
    }
}

/// A real unapproved command, through the helper, trying to read `probe`.
fn read_check(protection: &Protection, probe: &Path) -> Line {
    let spec = ShellSpec {
        program: "/bin/sh".into(),
        // cat must work at all (a readable file first) for its failure on the probe to count.
        command: format!(
            "cat /bin/sh >/dev/null || exit 3; exec cat -- '{}' >/dev/null",
            probe.display().to_string().replace('\'', "'\\''")
        ),
        protection: Some(protection.clone()),
        approved: false,
        offline: true,
        writable: vec![protection.workspace.clone()],
        daemon_pid: std::process::id(),
        tag: ShellSpec::new_tag(),
    };
    let out = helper::program().and_then(|p| {
        let json = helper::spec_bytes(&spec)?;
        let mut child = std::process::Command::new(p)
            .arg(helper::HELPER_ARG)
            .arg("shell")
            .current_dir("/")
            .env_clear()
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()?;
        if let Some(mut stdin) = child.stdin.take() {
            use std::io::Write;
            stdin.write_all(&json)?;
        }
        child.wait_with_output()
    });
    let setup = |o: &std::process::Output| {
        helper::setup_error(&spec, o.status.code(), &String::from_utf8_lossy(&o.stderr))
    };
    match out {
        Ok(o) if setup(&o).is_some() => Err(format!(
            "the sandbox could not be set up: {}",
            setup(&o).unwrap_or_default()
        )),
        Ok(o) if o.status.code() == Some(1) => Ok(format!(
            "checked: a sandboxed command could not read {}",
            probe.display()
        )),
        Ok(o) if o.status.success() => Err(format!(
            "a sandboxed command could read {}",
            probe.display()
        )),
        Ok(o) => Err(format!(
            "the sandboxed read of {} could not be tried ({}): {}",
            probe.display(),
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!("the sandbox helper could not run: {e}")),
    }
}
