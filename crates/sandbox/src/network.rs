//! The network half of the shell sandbox: a command that runs without the owner's approval (a
//! "safe" command, e.g. `ls`, `cat`, `git status`) gets a network namespace of its own, with no
//! interface but a loopback that is down. It cannot open a TCP or UDP connection, resolve a name
//! (so no data leaves through DNS either) or reach the gateway on 127.0.0.1, whatever it runs
//! inside — `/dev/tcp` redirections, a git hook, an interpreter. A command the owner approved
//! runs with the machine's network.
//!
//! Root gets the namespace with `unshare(CLONE_NEWNET)`; another user with
//! `unshare(CLONE_NEWUSER | CLONE_NEWNET)` (an unprivileged user namespace; file access keeps the
//! user's own ids). Where the kernel allows neither, [`available`] says so and no command counts
//! as safe.

/// Enter a new network namespace. Call only between `fork` and `exec`: one async-signal-safe
/// system call, nothing allocated.
///
/// # Errors
/// The OS error of `unshare` (`EPERM` where user namespaces are off, `EINVAL` without
/// `CONFIG_NET_NS`).
pub fn isolate_current_process() -> std::io::Result<()> {
    // SAFETY: geteuid and unshare take and return integers only.
    unsafe {
        let flags = if libc::geteuid() == 0 {
            libc::CLONE_NEWNET
        } else {
            libc::CLONE_NEWUSER | libc::CLONE_NEWNET
        };
        if libc::unshare(flags) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Whether commands can be cut off from the network here (probed by starting `/bin/sh` in a
/// new namespace; [`super::settings::probe`] asks once, at start); `Err` says why not.
pub fn available() -> Result<(), String> {
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg("exit 0")
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: only `unshare(2)` runs in the child (see `isolate_current_process`).
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(isolate_current_process);
    }
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!(
            "a command in a new network namespace exited with {s}"
        )),
        Err(e) => Err(format!("no network namespace for commands: {e}")),
    }
}
