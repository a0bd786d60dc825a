//! The sandbox helper: the daemon's own binary started again in a hidden mode
//! (`ethan __ethan-sandbox-helper MODE SPEC`), single-threaded, so it can set a sandbox up with
//! ordinary code instead of between `fork` and `exec` of a multi-threaded daemon.
//!
//! Mode `shell` runs one shell command ([`ShellSpec`]):
//! 1. it enters new namespaces: a PID namespace and a mount namespace always, a network
//!    namespace for a command that runs without approval, and a user namespace first when the
//!    daemon is not root (its uid and gid mapped to themselves, so files keep their owner);
//! 2. it forks: the child is PID 1 of the new PID namespace. When it ends — the command
//!    returned, or the helper was killed at a timeout or `/stop` (the child has
//!    `PR_SET_PDEATHSIG`) — the kernel kills every other process of the namespace: nothing the
//!    command started (`setsid`, double forks, `nohup`) outlives it;
//! 3. the child hides the protected places with mounts ([`super::mounts`]: an empty read-only
//!    file system over each hidden folder, an unopenable node over each hidden file, the
//!    workspace put back where it lay inside one), mounts a `/proc` of the new PID namespace,
//!    and for a command without approval makes every repository's `.git` in the workspace
//!    read-only;
//! 4. it restricts itself with Landlock ([`super::landlock`]; for an approved command whose
//!    places are hidden by mounts, the whole tree is granted: Landlock then only locks the mounts
//!    and refuses tracing and signalling outside), drops capabilities (without approval),
//!    installs the seccomp filter ([`super::seccomp`]) and executes `bash -c COMMAND`.
//!
//! Where the kernel gives no namespaces (no user namespaces for an unprivileged daemon), an
//! approved command still runs: the helper becomes a child subreaper, so whatever the command
//! leaves behind is reparented to it and killed when the command returns; Landlock then grants
//! around the hidden places (folders that contain one cannot get new entries). A command
//! without approval never runs there ([`super::network`] makes every command ask).
//!
//! Mode `parse` reads an untrusted file in a child with resource limits (the media module's
//! parser); mode `probe` reports which namespaces work ([`probe_here`]). The modes are
//! dispatched by the crate's top-level `helper` module.
//!
//! The specification comes on standard input (so no command can read it from the helper's
//! command line), which is then `/dev/null` for the command. The helper ends the command when
//! the daemon ends, however it ends (it watches the daemon through a pidfd; where the kernel has
//! none, it gets `PR_SET_PDEATHSIG`). In its namespaces the command gets a session of its own, so
//! it has no controlling terminal: `/dev/tty` is not the terminal `ethan chat` runs in.
//!
//! Setup errors are written to standard error as `ethan sandbox [TAG]: …` with exit code
//! [`SETUP_FAILED`], `TAG` being a random word of the specification: a command cannot make its
//! own output pass for a setup error. The command's own exit code and signal are passed
//! through.

use super::protected::Protection;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The first argument of the helper mode.
pub const HELPER_ARG: &str = "__ethan-sandbox-helper";

/// The exit code of a helper whose sandbox could not be set up (its message is on stderr,
/// prefixed [`SETUP_PREFIX`]).
pub const SETUP_FAILED: i32 = 125;
pub const SETUP_PREFIX: &str = "ethan sandbox";

/// Largest specification read from standard input.
const SPEC_LIMIT: u64 = 8 << 20;

/// One shell command for the helper.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShellSpec {
    /// `/bin/bash` (or `/bin/sh`).
    pub program: PathBuf,
    pub command: String,
    /// The places to hide; `None` when the owner approved this very command reading one.
    pub protection: Option<Protection>,
    /// Whether the command went through consent (the approved profile, the user's write
    /// access, the network).
    pub approved: bool,
    /// No network (a network namespace of its own).
    pub offline: bool,
    /// Folders a command without approval may write (the workspace, the private temp folder).
    pub writable: Vec<PathBuf>,
    /// The process that starts the helper: the helper ends the command when it ends.
    pub daemon_pid: u32,
    /// A random word that marks the helper's own setup errors ([`setup_error`]).
    pub tag: String,
}

impl ShellSpec {
    /// A new random [`ShellSpec::tag`].
    pub fn new_tag() -> String {
        uuid::Uuid::new_v4().simple().to_string()
    }
}

/// The helper's setup error in a finished command's exit code and standard error, if it is one
/// (the tag of `spec` proves it came from the helper, not from the command).
pub fn setup_error(spec: &ShellSpec, code: Option<i32>, stderr: &str) -> Option<String> {
    if code != Some(SETUP_FAILED) {
        return None;
    }
    stderr
        .strip_prefix(&format!("{SETUP_PREFIX} [{}]: ", spec.tag))
        .map(|why| why.trim().to_string())
}

/// Read the specification from standard input, then put `/dev/null` there for the command.
pub fn read_spec() -> Result<ShellSpec, String> {
    use std::io::Read;
    let mut json = Vec::new();
    std::io::stdin()
        .lock()
        .take(SPEC_LIMIT)
        .read_to_end(&mut json)
        .map_err(|e| format!("reading the specification: {e}"))?;
    let spec: ShellSpec =
        serde_json::from_slice(&json).map_err(|e| format!("bad specification: {e}"))?;
    let null = std::fs::File::open("/dev/null").map_err(|e| format!("/dev/null: {e}"))?;
    use std::os::fd::AsRawFd;
    // SAFETY: duplicating a descriptor we own onto standard input.
    if unsafe { libc::dup2(null.as_raw_fd(), 0) } != 0 {
        return Err(format!("stdin: {}", std::io::Error::last_os_error()));
    }
    Ok(spec)
}

/// The program to start for the helper: this very executable.
pub fn program() -> std::io::Result<PathBuf> {
    std::env::current_exe()
}

/// Print a setup error the way the daemon recognises it (`tag`: the specification's, once it
/// is read); returns [`SETUP_FAILED`].
pub fn setup_failed(tag: Option<&str>, msg: &str) -> i32 {
    match tag {
        Some(tag) => eprintln!("{SETUP_PREFIX} [{tag}]: {msg}"),
        None => eprintln!("{SETUP_PREFIX}: {msg}"),
    }
    SETUP_FAILED
}

/// A note for the command's standard error (a folder made read-only, and why).
fn note(msg: &str) {
    eprintln!("{SETUP_PREFIX} (note): {msg}");
}

/// Which namespaces commands get on this machine.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Namespaces {
    /// A user namespace was needed (the daemon is not root) and could be made.
    pub user: bool,
    pub pid: bool,
    pub mount: bool,
    pub net: bool,
    /// A fresh `/proc` could be mounted for the PID namespace.
    pub proc: bool,
    /// Why something is missing (the first error).
    pub missing: Option<String>,
}

impl Namespaces {
    /// Whether hidden places are hidden by mounts (else Landlock grants around them).
    pub fn mounts_hide(&self) -> bool {
        self.pid && self.mount && self.proc
    }
}

/// Enter the namespaces; `Err` says which call failed.
fn unshare(net: bool) -> Result<bool, String> {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let mut flags = libc::CLONE_NEWPID | libc::CLONE_NEWNS;
    if net {
        flags |= libc::CLONE_NEWNET;
    }
    if !root {
        flags |= libc::CLONE_NEWUSER;
    }
    // SAFETY: geteuid/getegid and unshare take and return integers.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(format!(
            "unshare (PID, mount{}{} namespaces): {}",
            if net { ", network" } else { "" },
            if root { "" } else { ", user" },
            std::io::Error::last_os_error()
        ));
    }
    if !root {
        // Map our own ids to themselves: files keep their owner, nothing else is reachable.
        let write = |f: &str, s: String| std::fs::write(f, s).map_err(|e| format!("{f}: {e}"));
        write("/proc/self/setgroups", "deny".into())?;
        write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))?;
        write("/proc/self/gid_map", format!("{gid} {gid} 1\n"))?;
    }
    Ok(!root)
}

/// Run in the helper: which namespaces a command gets here.
pub fn probe_here() -> Namespaces {
    let mut ns = Namespaces::default();
    match unshare(true) {
        Ok(user) => {
            ns.user = user;
            ns.pid = true;
            ns.mount = true;
            ns.net = true;
        }
        Err(e) => {
            ns.missing = Some(e);
            return ns;
        }
    }
    // SAFETY: the helper is single-threaded.
    match unsafe { libc::fork() } {
        0 => {
            let ok = super::mounts::private_root().and_then(|_| super::mounts::fresh_proc());
            // SAFETY: plain exit of the forked child.
            unsafe { libc::_exit(if ok.is_ok() { 0 } else { 1 }) }
        }
        -1 => ns.missing = Some(format!("fork: {}", std::io::Error::last_os_error())),
        pid => {
            ns.proc = wait_for(pid) == Exit::Code(0);
            if !ns.proc {
                ns.missing = Some("a /proc of the new PID namespace cannot be mounted".into());
            }
        }
    }
    ns
}

/// Which namespaces commands get on this machine (asked by starting the helper;
/// [`super::settings::probe`] asks once, at start).
pub fn namespaces() -> Namespaces {
    let out = program().and_then(|p| {
        std::process::Command::new(p)
            .arg(HELPER_ARG)
            .arg("probe")
            .env_clear()
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
    });
    match out {
        Ok(o) => serde_json::from_slice(o.stdout.trim_ascii()).unwrap_or_else(|e| Namespaces {
            missing: Some(format!("the sandbox helper answered nothing usable: {e}")),
            ..Namespaces::default()
        }),
        Err(e) => Namespaces {
            missing: Some(format!("the sandbox helper could not start: {e}")),
            ..Namespaces::default()
        },
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Exit {
    Code(i32),
    Signal(i32),
}

fn wait_for(pid: libc::pid_t) -> Exit {
    let mut status = 0;
    loop {
        // SAFETY: waitpid writes the status into our local.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        if r == -1 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Exit::Code(SETUP_FAILED);
        }
    }
    if libc::WIFSIGNALED(status) {
        Exit::Signal(libc::WTERMSIG(status))
    } else {
        Exit::Code(libc::WEXITSTATUS(status))
    }
}

/// A pidfd of the daemon (the helper's parent), when this kernel has pidfds; `Err` when the
/// daemon is gone already.
fn watch_daemon(daemon_pid: u32) -> Result<Option<std::os::fd::OwnedFd>, String> {
    use std::os::fd::FromRawFd;
    // SAFETY: integer arguments only.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, daemon_pid as libc::pid_t, 0u32) };
    let fd = (fd >= 0).then(|| {
        // SAFETY: a descriptor the kernel just gave us.
        unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) }
    });
    if fd.is_none() {
        // No pidfds (Linux before 5.3): the kernel kills the helper when its parent goes.
        // SAFETY: integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    }
    // Checked after the pidfd is open: it refers to our parent, not a reused pid.
    // SAFETY: getppid cannot fail.
    if unsafe { libc::getppid() } as u32 != daemon_pid {
        return Err("the daemon is gone".into());
    }
    Ok(fd)
}

/// Wait for `child`; if the daemon (`daemon`, a pidfd) ends first, kill `child` (PID 1 of the
/// command's namespace: the kernel then kills the rest) and wait for it.
fn wait_watching(child: libc::pid_t, daemon: Option<&std::os::fd::OwnedFd>) -> Exit {
    use std::os::fd::AsRawFd;
    let Some(daemon) = daemon else {
        return wait_for(child);
    };
    // SAFETY: integer arguments only.
    let child_fd = unsafe { libc::syscall(libc::SYS_pidfd_open, child, 0u32) } as i32;
    if child_fd < 0 {
        return wait_for(child);
    }
    loop {
        let mut fds = [
            libc::pollfd {
                fd: daemon.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: child_fd,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two pollfds on our stack.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        if r > 0 && fds[0].revents != 0 && fds[1].revents == 0 {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(child, libc::SIGKILL) };
        }
        // SAFETY: closing the pidfd we opened.
        unsafe { libc::close(child_fd) };
        return wait_for(child);
    }
}

/// The helper's `shell` mode; returns the exit code (or ends by the command's signal).
pub fn shell_main(spec: &ShellSpec) -> i32 {
    let daemon = match watch_daemon(spec.daemon_pid) {
        Ok(d) => d,
        Err(e) => return setup_failed(Some(&spec.tag), &e),
    };
    let namespaces = match unshare(spec.offline) {
        Ok(_) => true,
        Err(e) if spec.offline => {
            return setup_failed(
                Some(&spec.tag),
                &format!("{e}; a command without approval needs it"),
            )
        }
        Err(e) => {
            // Degraded: no namespaces. The helper adopts what the command leaves behind.
            tracing::debug!("no namespaces for an approved command: {e}");
            // SAFETY: integer arguments only.
            unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
            false
        }
    };
    // The child learns of the helper's death by this pipe closing, besides PR_SET_PDEATHSIG
    // (which could come too late if the helper died before the child set it).
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return setup_failed(
            Some(&spec.tag),
            &format!("pipe: {}", std::io::Error::last_os_error()),
        );
    }
    // SAFETY: the helper is single-threaded; the child only runs our own code, then execs.
    match unsafe { libc::fork() } {
        -1 => setup_failed(
            Some(&spec.tag),
            &format!("fork: {}", std::io::Error::last_os_error()),
        ),
        0 => {
            // SAFETY: closing our copy of the write end.
            unsafe { libc::close(fds[1]) };
            let e = child(spec, namespaces, fds[0]);
            setup_failed(Some(&spec.tag), &e)
        }
        pid => {
            // SAFETY: the helper keeps the write end and gives up its standard streams, so the
            // daemon sees the end of output when the command's processes are gone.
            unsafe {
                libc::close(fds[0]);
                libc::close(0);
                libc::close(1);
                libc::close(2);
            }
            let exit = wait_watching(pid, daemon.as_ref());
            if !namespaces {
                kill_descendants();
            }
            match exit {
                Exit::Code(c) => c,
                Exit::Signal(s) => {
                    // SAFETY: restore the default action and die by the same signal.
                    unsafe {
                        libc::signal(s, libc::SIG_DFL);
                        libc::kill(libc::getpid(), s);
                    }
                    128 + s
                }
            }
        }
    }
}

/// Without a PID namespace: kill and reap every process reparented to this subreaper until
/// none is left.
fn kill_descendants() {
    for _ in 0..1000 {
        let children = children_of_self();
        if children.is_empty() {
            // Reap whatever died meanwhile; stop when there is no child at all.
            // SAFETY: waitpid with WNOHANG and no status.
            let r = unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) };
            if r <= 0 {
                return;
            }
            continue;
        }
        for c in children {
            // SAFETY: signalling a child of ours.
            unsafe { libc::kill(c, libc::SIGKILL) };
        }
        // SAFETY: reaping any child.
        while unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

fn children_of_self() -> Vec<libc::pid_t> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The child: PID 1 of the new namespace. Returns only on a setup error.
fn child(spec: &ShellSpec, namespaces: bool, parent_alive: i32) -> String {
    // SAFETY: integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    if namespaces {
        // A session of its own: no controlling terminal. (Without namespaces the command stays
        // in the helper's process group, which the daemon kills at a timeout.)
        // SAFETY: no arguments.
        unsafe { libc::setsid() };
    }
    let mut poll = libc::pollfd {
        fd: parent_alive,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd on our stack, no waiting.
    if unsafe { libc::poll(&mut poll, 1, 0) } > 0 {
        // The write end closed: the helper is gone already.
        // SAFETY: plain exit.
        unsafe { libc::_exit(SETUP_FAILED) };
    }
    let mut hidden_by_mounts = false;
    if namespaces {
        if let Err(e) = super::mounts::private_root() {
            return e;
        }
        let proc = super::mounts::fresh_proc().is_ok();
        if let Some(p) = &spec.protection {
            match super::mounts::hide(p) {
                Ok(()) => hidden_by_mounts = proc,
                Err(e) => return format!("hiding the protected places: {e}"),
            }
        }
        if !spec.approved {
            match super::repos::protect(&spec.writable) {
                Ok(notes) => notes.iter().for_each(|n| note(n)),
                Err(e) => return format!("sealing the repositories: {e}"),
            }
        }
        if let Err(e) = super::devices::guard() {
            return format!("closing the kernel's interfaces: {e}");
        }
        if !spec.approved {
            if let Err(e) = super::mounts::private_pts().and_then(|_| super::mounts::private_shm())
            {
                return e;
            }
        }
        if let Err(e) = super::mounts::reenter_working_directory() {
            return e;
        }
    }
    if let Some(p) = &spec.protection {
        let prepared = if spec.approved && hidden_by_mounts {
            super::landlock::prepare_whole_tree()
        } else {
            super::landlock::prepare(p, (!spec.approved).then_some(spec.writable.as_slice()))
        };
        match prepared {
            Ok(Some(r)) => {
                if let Err(e) = r.restrict_current_process() {
                    return format!("Landlock: {e}");
                }
            }
            Ok(None) => {}
            Err(e) => return format!("the Landlock ruleset: {e}"),
        }
    }
    if !spec.approved {
        super::seccomp::drop_capabilities_in_current_process();
    }
    // SAFETY: restoring the default SIGXFSZ action the daemon ignores (ignored signals survive
    // exec), and marking inherited descriptors close-on-exec.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_DFL);
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
    }
    let profile = if spec.approved {
        super::seccomp::Profile::Approved
    } else {
        super::seccomp::Profile::Unapproved
    };
    if let Err(e) = super::seccomp::install(profile) {
        return e;
    }
    use std::os::unix::process::CommandExt;
    let e = std::process::Command::new(&spec.program)
        .arg("-c")
        .arg(&spec.command)
        .exec();
    format!("cannot start {}: {e}", spec.program.display())
}

/// The command line that starts the helper in its `shell` mode (the caller sets the environment,
/// working directory and output streams, and writes [`spec_bytes`] to its standard input).
pub fn shell_command() -> std::io::Result<tokio::process::Command> {
    let mut cmd = tokio::process::Command::new(program()?);
    cmd.arg(HELPER_ARG)
        .arg("shell")
        .stdin(std::process::Stdio::piped());
    Ok(cmd)
}

/// What to write to the helper's standard input for `spec`.
pub fn spec_bytes(spec: &ShellSpec) -> std::io::Result<Vec<u8>> {
    serde_json::to_vec(spec).map_err(std::io::Error::other)
}
