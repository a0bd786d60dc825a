//! Running the real `ethan` binary from integration tests.
//!
//! - [`TestHome`]: a temporary directory used as `ETHAN_HOME` (deleted on drop).
//! - [`Daemon`]: `ethan run` as a child process, its stdout and stderr appended to
//!   `<home>/daemon.log`; killed on drop (and, when the test is panicking, the log's tail is
//!   printed so the failure shows what the daemon did).
//! - [`run_cli`]: one bounded run of the binary (e.g. `ethan chat -m hi`), output captured.
//! - [`wait_until`] / [`wait_for_log`]: bounded polling.
//!
//! [`ChildLimits`] adds process settings to a child: a file-size limit (`RLIMIT_FSIZE`) and
//! another user id (tests running as root use it to make file permissions count).
//!
//! Children never see the test's own `ETHAN_*`, `OPENAI_*`, `TELEGRAM_*` or `LARK_*` variables;
//! pass what a test needs explicitly (`*_with_env`). `NO_PROXY` always covers loopback and
//! `NO_COLOR=1` is set.
//!
//! The blocking calls ([`Daemon::stop`], [`Daemon::wait_exit`], [`run_cli`]) are safe inside
//! `#[tokio::test(flavor = "multi_thread")]`: they use `block_in_place`, so the in-process fakes
//! the child talks to keep being served while the test waits.

#![allow(dead_code)]

use std::ffi::{OsStr, OsString};
use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Environment variable prefixes removed from every child.
pub const SCRUBBED_PREFIXES: [&str; 5] = ["ETHAN_", "OPENAI_", "ANTHROPIC_", "TELEGRAM_", "LARK_"];
/// `RUST_LOG` given to `ethan run`.
pub const DAEMON_RUST_LOG: &str = "ethan=debug,ethan_channels=debug";
/// Bound of [`run_cli`].
pub const CLI_TIMEOUT: Duration = Duration::from_secs(60);
/// How long [`Daemon::stop`] waits after SIGTERM before SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// Path of the `ethan` binary under test.
pub fn ethan_bin() -> &'static str {
    env!("CARGO_BIN_EXE_ethan")
}

// ----- TestHome ------------------------------------------------------------------------------

/// A temporary `ETHAN_HOME`, removed when dropped.
pub struct TestHome {
    dir: tempfile::TempDir,
    /// With `ETHAN_TEST_STORE=postgres`: this home's database (created on first use).
    pg_url: std::sync::OnceLock<String>,
}

/// Whether the suite runs on PostgreSQL (`ETHAN_TEST_STORE=postgres`): then every config a
/// test writes gets `store.url` of a database of its own on a throwaway cluster
/// (`ethan::store::pg::cluster`), unless the config sets `store:` itself.
pub fn suite_on_postgres() -> bool {
    std::env::var("ETHAN_TEST_STORE").is_ok_and(|v| v == "postgres")
}

/// A new, empty database on the throwaway cluster (started on first use); panics saying why
/// when PostgreSQL cannot be started (e.g. its binaries are not installed).
pub fn fresh_pg_database() -> String {
    std::thread::spawn(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for the database setup");
        rt.block_on(ethan::store::pg::cluster::fresh_database())
    })
    .join()
    .expect("the database setup thread")
    .unwrap_or_else(|e| panic!("cannot start the test PostgreSQL: {e}"))
}

/// `yaml` with `store.url` appended when `url` is given and `yaml` has no top-level `store:`.
pub fn with_store_url(yaml: &str, url: Option<&str>) -> String {
    // Not into a file whose top level is a list (a test of that very mistake).
    let top_level_list = yaml
        .lines()
        .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .is_some_and(|l| l.starts_with('-'));
    match url {
        Some(url) if !top_level_list && !yaml.lines().any(|l| l.starts_with("store:")) => {
            format!("{}\nstore:\n  url: \"{url}\"\n", yaml.trim_end())
        }
        _ => yaml.to_string(),
    }
}

impl Default for TestHome {
    fn default() -> Self {
        Self::new()
    }
}

impl TestHome {
    /// Creates an empty temporary directory.
    pub fn new() -> TestHome {
        let dir = tempfile::Builder::new()
            .prefix("ethan-test-home-")
            .tempdir()
            .expect("TestHome: create temp dir");
        TestHome {
            dir,
            pg_url: std::sync::OnceLock::new(),
        }
    }

    /// This home's PostgreSQL database when the suite runs on PostgreSQL ([`suite_on_postgres`]).
    pub fn pg_url(&self) -> Option<String> {
        suite_on_postgres().then(|| self.pg_url.get_or_init(fresh_pg_database).clone())
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `<home>/config.yaml`.
    pub fn config_path(&self) -> PathBuf {
        self.path().join("config.yaml")
    }

    /// Writes `yaml` to `<home>/config.yaml` (replacing it).
    pub fn write_config(&self, yaml: &str) {
        let yaml = with_store_url(yaml, self.pg_url().as_deref());
        std::fs::write(self.config_path(), yaml).expect("TestHome: write config.yaml");
    }

    /// Writes `contents` to `<home>/<relative>` (creating parent directories); returns the path.
    pub fn write_file(&self, relative: &str, contents: &str) -> PathBuf {
        let p = self.path().join(relative);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("TestHome: create parent dirs");
        }
        std::fs::write(&p, contents).unwrap_or_else(|e| panic!("TestHome: write {p:?}: {e}"));
        p
    }

    /// `<home>/daemon.log`.
    pub fn log_path(&self) -> PathBuf {
        self.path().join("daemon.log")
    }

    /// The daemon log so far (empty if none).
    pub fn log(&self) -> String {
        read_lossy(&self.log_path())
    }

    /// Fails (showing the log) if the daemon logged a panic.
    pub fn assert_no_panic(&self) {
        let log = self.log();
        assert!(!log.contains("panicked"), "the daemon panicked:\n{log}");
    }
}

/// The daemon log of `home` (same as [`TestHome::log`]).
pub fn log(home: &TestHome) -> String {
    home.log()
}

fn read_lossy(p: &Path) -> String {
    std::fs::read(p)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

fn tail(s: &str, lines: usize) -> String {
    let all: Vec<&str> = s.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

// ----- environment ---------------------------------------------------------------------------

/// Whether a variable is kept away from children (see [`SCRUBBED_PREFIXES`]).
pub fn is_scrubbed(name: &OsStr) -> bool {
    let name = name.to_string_lossy();
    SCRUBBED_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The complete environment of a child: `parent` minus scrubbed variables and `RUST_LOG`, then
/// `ETHAN_HOME=<home>`, `RUST_LOG` (if given), `NO_COLOR=1`, loopback added to
/// `NO_PROXY`/`no_proxy`, then `extra` (which wins over everything).
pub fn child_env(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    home: &Path,
    rust_log: Option<&str>,
    extra: &[(&str, &str)],
) -> Vec<(OsString, OsString)> {
    fn set(env: &mut Vec<(OsString, OsString)>, key: &str, value: OsString) {
        env.retain(|(k, _)| k != key);
        env.push((key.into(), value));
    }
    let mut env: Vec<(OsString, OsString)> = parent
        .into_iter()
        .filter(|(k, _)| !is_scrubbed(k) && k != "RUST_LOG")
        .collect();
    set(&mut env, "ETHAN_HOME", home.as_os_str().to_owned());
    if let Some(l) = rust_log {
        set(&mut env, "RUST_LOG", l.into());
    }
    set(&mut env, "NO_COLOR", "1".into());
    // Daemons run side by side: the gateway takes a free port (logged) unless a test says otherwise.
    set(&mut env, "ETHAN__GATEWAY__LISTEN", "127.0.0.1:0".into());
    for key in ["NO_PROXY", "no_proxy"] {
        let old = env
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.to_string_lossy().into_owned())
            .unwrap_or_default();
        let value = if old.is_empty() {
            "127.0.0.1,localhost".to_string()
        } else {
            format!("{old},127.0.0.1,localhost")
        };
        set(&mut env, key, value.into());
    }
    for (k, v) in extra {
        set(&mut env, k, (*v).into());
    }
    env
}

fn command(
    program: &str,
    args: &[&str],
    home: &Path,
    rust_log: Option<&str>,
    extra: &[(&str, &str)],
) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args).current_dir(home).env_clear().envs(child_env(
        std::env::vars_os(),
        home,
        rust_log,
        extra,
    ));
    cmd
}

/// Process settings for a child besides its environment (see [`Daemon::start_limited`],
/// [`run_cli_limited`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct ChildLimits {
    /// `RLIMIT_FSIZE` in bytes: no file the child writes may grow past it (a larger write fails
    /// with `EFBIG`, or kills the child with `SIGXFSZ` unless it ignores that signal). It also
    /// covers the log file the child's output goes to.
    pub file_size: Option<u64>,
    /// Run as this `(uid, gid)`, without supplementary groups. Needs the test to run as root.
    pub user: Option<(u32, u32)>,
}

impl ChildLimits {
    fn apply(self, cmd: &mut Command) {
        use std::os::unix::process::CommandExt;
        if let Some((uid, gid)) = self.user {
            cmd.uid(uid).gid(gid);
        }
        if let Some(bytes) = self.file_size {
            // SAFETY: only `setrlimit`, an async-signal-safe system call, runs between fork and
            // exec.
            unsafe {
                cmd.pre_exec(move || {
                    let lim = libc::rlimit {
                        rlim_cur: bytes as libc::rlim_t,
                        rlim_max: bytes as libc::rlim_t,
                    };
                    if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
    }
}

/// Runs `f`, letting the tokio multi-thread runtime (if we are on one) move its other tasks
/// off this thread meanwhile.
fn blocking<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

fn wait_timeout(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => return None,
            Err(e) => panic!("wait for child {}: {e}", child.id()),
        }
    }
}

// ----- Daemon --------------------------------------------------------------------------------

/// A running `ethan run`. Killed (SIGKILL) when dropped.
pub struct Daemon {
    child: Option<Child>,
    status: Option<ExitStatus>,
    log_path: PathBuf,
    pid: u32,
}

impl Daemon {
    /// Spawns `ethan run` with `ETHAN_HOME=<home>` and `RUST_LOG=ethan=debug,ethan_channels=debug`.
    pub fn start(home: &TestHome) -> Daemon {
        Self::start_with_env(home, &[])
    }

    /// Like [`Daemon::start`], with extra environment variables (e.g. secrets the config
    /// references).
    pub fn start_with_env(home: &TestHome, envs: &[(&str, &str)]) -> Daemon {
        Self::start_program(home, ethan_bin(), &["run"], envs)
    }

    /// Spawns any program the way [`Daemon::start`] spawns `ethan run` (same environment,
    /// log file, and lifecycle). Mostly for testing this module.
    pub fn start_program(
        home: &TestHome,
        program: &str,
        args: &[&str],
        envs: &[(&str, &str)],
    ) -> Daemon {
        Self::start_program_limited(home, program, args, envs, ChildLimits::default())
    }

    /// Like [`Daemon::start_with_env`], with [`ChildLimits`] applied to the process.
    pub fn start_limited(home: &TestHome, envs: &[(&str, &str)], limits: ChildLimits) -> Daemon {
        Self::start_program_limited(home, ethan_bin(), &["run"], envs, limits)
    }

    /// [`Daemon::start_program`] with [`ChildLimits`].
    pub fn start_program_limited(
        home: &TestHome,
        program: &str,
        args: &[&str],
        envs: &[(&str, &str)],
        limits: ChildLimits,
    ) -> Daemon {
        let log_path = home.log_path();
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .unwrap_or_else(|e| panic!("Daemon: open {log_path:?}: {e}"));
        let out = log.try_clone().expect("Daemon: clone log handle");
        let err = log.try_clone().expect("Daemon: clone log handle");
        let mut cmd = command(program, args, home.path(), Some(DAEMON_RUST_LOG), envs);
        limits.apply(&mut cmd);
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap_or_else(|e| panic!("Daemon: spawn {program} {args:?}: {e}"));
        let pid = child.id();
        let _ = writeln!(log, "[support] spawned {program} {args:?} as pid {pid}");
        Daemon {
            child: Some(child),
            status: None,
            log_path,
            pid,
        }
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The exit status, if the process has exited (non-blocking).
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(s)) = child.try_wait() {
                    self.status = Some(s);
                }
            }
        }
        self.status
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.try_status().is_none()
    }

    /// Waits up to `timeout` for the process to exit on its own; `None` if it is still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if let Some(s) = self.try_status() {
            return Some(s);
        }
        let child = self.child.as_mut()?;
        let status = blocking(|| wait_timeout(child, timeout));
        self.status = status;
        status
    }

    /// SIGKILL and wait (a crash, as far as the daemon is concerned). Idempotent.
    pub fn kill(&mut self) -> ExitStatus {
        if let Some(s) = self.try_status() {
            return s;
        }
        let child = self.child.as_mut().expect("Daemon: no child");
        let _ = child.kill();
        let status = child.wait().expect("Daemon: wait after SIGKILL");
        self.status = Some(status);
        status
    }

    /// SIGTERM (via `kill -TERM <pid>`), wait up to 10 s, then SIGKILL. Returns the exit status.
    pub fn stop(&mut self) -> ExitStatus {
        self.stop_within(STOP_GRACE)
    }

    /// Like [`Daemon::stop`] with a custom grace period.
    pub fn stop_within(&mut self, grace: Duration) -> ExitStatus {
        if let Some(s) = self.try_status() {
            return s;
        }
        let pid = self.pid.to_string();
        let _ = Command::new("kill")
            .args(["-TERM", &pid])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        match self.wait_exit(grace) {
            Some(s) => s,
            None => {
                self.append_log(&format!(
                    "[support] pid {pid} still running {grace:?} after SIGTERM; sending SIGKILL"
                ));
                self.kill()
            }
        }
    }

    /// Reads `<home>/daemon.log`.
    pub fn log(home: &TestHome) -> String {
        home.log()
    }

    /// Reads the log this daemon writes to.
    pub fn log_text(&self) -> String {
        read_lossy(&self.log_path)
    }

    fn append_log(&self, line: &str) {
        if let Ok(mut f) = OpenOptions::new().append(true).open(&self.log_path) {
            let _ = writeln!(f, "{line}");
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            if self.status.is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if std::thread::panicking() {
            eprintln!(
                "----- daemon.log ({}), last 200 lines -----\n{}\n----- end of daemon.log -----",
                self.log_path.display(),
                tail(&self.log_text(), 200)
            );
        }
    }
}

// ----- one-shot CLI runs ---------------------------------------------------------------------

/// Runs `ethan <args>` once with `ETHAN_HOME=<home>` (scrubbed environment, no `RUST_LOG`),
/// feeding `stdin` if given (otherwise stdin is null). Killed after 60 s; then the status is the
/// kill signal and stderr ends with a `[support] killed` note.
pub fn run_cli(home: &TestHome, args: &[&str], stdin: Option<&str>) -> Output {
    run_cli_with_env(home, args, stdin, &[])
}

/// [`run_cli`] with extra environment variables.
pub fn run_cli_with_env(
    home: &TestHome,
    args: &[&str],
    stdin: Option<&str>,
    envs: &[(&str, &str)],
) -> Output {
    run_program(home, ethan_bin(), args, stdin, envs, CLI_TIMEOUT)
}

/// [`run_cli_with_env`] with [`ChildLimits`] applied to the process.
pub fn run_cli_limited(
    home: &TestHome,
    args: &[&str],
    stdin: Option<&str>,
    envs: &[(&str, &str)],
    limits: ChildLimits,
) -> Output {
    run_program_limited(home, ethan_bin(), args, stdin, envs, CLI_TIMEOUT, limits)
}

/// Runs any program like [`run_cli`] runs `ethan`, with a custom bound.
pub fn run_program(
    home: &TestHome,
    program: &str,
    args: &[&str],
    stdin: Option<&str>,
    envs: &[(&str, &str)],
    timeout: Duration,
) -> Output {
    run_program_limited(
        home,
        program,
        args,
        stdin,
        envs,
        timeout,
        ChildLimits::default(),
    )
}

/// [`run_program`] with [`ChildLimits`].
pub fn run_program_limited(
    home: &TestHome,
    program: &str,
    args: &[&str],
    stdin: Option<&str>,
    envs: &[(&str, &str)],
    timeout: Duration,
    limits: ChildLimits,
) -> Output {
    let mut cmd = command(program, args, home.path(), None, envs);
    limits.apply(&mut cmd);
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("run_program: spawn {program} {args:?}: {e}"));

    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("stdin pipe");
        let input = input.to_string();
        // Writing from a thread: a child that does not read stdin must not block us.
        std::thread::spawn(move || {
            let _ = pipe.write_all(input.as_bytes());
        });
    }
    let (tx, rx) = mpsc::channel::<(u8, Vec<u8>)>();
    spawn_reader(child.stdout.take().expect("stdout pipe"), 1, tx.clone());
    spawn_reader(child.stderr.take().expect("stderr pipe"), 2, tx);

    let (status, timed_out) = blocking(|| match wait_timeout(&mut child, timeout) {
        Some(s) => (s, false),
        None => {
            let _ = child.kill();
            (child.wait().expect("run_program: wait after kill"), true)
        }
    });

    // Grandchildren may hold the pipes open; do not wait for them forever.
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let deadline = Instant::now() + Duration::from_secs(5);
    for _ in 0..2 {
        let left = deadline.saturating_duration_since(Instant::now());
        match blocking(|| rx.recv_timeout(left)) {
            Ok((1, data)) => stdout = data,
            Ok((_, data)) => stderr = data,
            Err(_) => break,
        }
    }
    if timed_out {
        stderr.extend_from_slice(
            format!("\n[support] killed {program} {args:?} after {timeout:?}\n").as_bytes(),
        );
    }
    Output {
        status,
        stdout,
        stderr,
    }
}

fn spawn_reader(mut r: impl Read + Send + 'static, which: u8, tx: mpsc::Sender<(u8, Vec<u8>)>) {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        let _ = tx.send((which, buf));
    });
}

// ----- waiting -------------------------------------------------------------------------------

/// Polls `f` every 50 ms until it returns `true`; panics with `what` after `timeout`.
pub async fn wait_until<F: FnMut() -> bool>(what: &str, timeout: Duration, mut f: F) {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if f() {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting until {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until `<home>/daemon.log` contains `needle`; panics with the log's tail after
/// `timeout`.
/// The gateway address a daemon logged (`gateway listening on http://ADDR`), waiting for it.
pub async fn gateway_addr(home: &TestHome, timeout: Duration) -> String {
    const NEEDLE: &str = "gateway listening on http://";
    wait_for_log(home, NEEDLE, timeout).await;
    let log = home.log();
    let at = log.find(NEEDLE).map(|i| i + NEEDLE.len()).unwrap_or(0);
    log[at..]
        .split(|c: char| c.is_whitespace())
        .next()
        .unwrap_or_default()
        .to_string()
}

pub async fn wait_for_log(home: &TestHome, needle: &str, timeout: Duration) {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let log = home.log();
        if log.contains(needle) {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!(
                "timed out after {timeout:?} waiting for {needle:?} in daemon.log; last lines:\n{}",
                tail(&log, 60)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
