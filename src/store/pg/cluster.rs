//! A throwaway PostgreSQL server for tests and benchmarks: one per process, started on first
//! use, gone with the process.
//!
//! [`cluster`] finds `initdb` and `postgres` (on `PATH`, else the newest
//! `/usr/lib/postgresql/*/bin`), runs `initdb` in a fresh directory under the system temp dir
//! (`ethan-pg-<pid>`) and starts `postgres` on 127.0.0.1 and a free port, its socket in the same
//! directory, with durability off (`fsync`, `synchronous_commit`, `full_page_writes`) for speed.
//! PostgreSQL refuses to run as root: under euid 0 both run as `nobody`, which owns the
//! directory. `pg_stat_statements` is loaded when the server has it (for the figures of
//! BENCHMARKS.md; a database sees it after `CREATE EXTENSION`). The server is spawned from a
//! thread that lives as long as the process, with `PR_SET_PDEATHSIG` = `SIGQUIT` (an immediate shutdown) set in the child, so it dies with the
//! test process however that ends; directories of earlier processes that are gone are removed
//! at the next start.
//!
//! [`fresh_database`] creates a new database on it and returns its URL. Authentication is
//! `trust` for every user but [`PASSWORD_USER`], who must give a password (SCRAM) — for tests
//! of refused credentials. Without the server binaries every call fails, saying to install the
//! Debian package `postgresql`: a test that needs the server fails, it never passes silently.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};

/// The cluster's superuser (no password).
pub const SUPERUSER: &str = "postgres";

/// A role that must authenticate with a password (`scram-sha-256`) over TCP; it does not exist
/// until a test creates it (`CREATE ROLE ethan_pw LOGIN PASSWORD '…'`).
pub const PASSWORD_USER: &str = "ethan_pw";

/// How long the server may take to accept connections after it was started.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Why the throwaway server is not available.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("test PostgreSQL cluster: {0}")]
pub struct ClusterError(pub String);

/// A running throwaway server.
#[derive(Debug)]
pub struct Cluster {
    port: u16,
    dir: PathBuf,
}

impl Cluster {
    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory holding the data directory (`data/`), the socket and `postgres.log`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The URL of database `db` as the superuser.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://{SUPERUSER}@127.0.0.1:{}/{db}", self.port)
    }

    /// Create database `name` (a plain identifier); returns its URL.
    pub async fn create_database(&self, name: &str) -> Result<String, ClusterError> {
        let (client, connection) =
            tokio_postgres::connect(&self.url("postgres"), tokio_postgres::NoTls)
                .await
                .map_err(|e| {
                    ClusterError(format!("cannot connect: {}", super::errors::describe(&e)))
                })?;
        let conn = tokio::spawn(connection);
        let made = client
            .batch_execute(&format!("CREATE DATABASE \"{name}\""))
            .await
            .map_err(|e| {
                ClusterError(format!(
                    "cannot create database {name}: {}",
                    super::errors::describe(&e)
                ))
            });
        drop(client);
        let _ = conn.await;
        made.map(|()| self.url(name))
    }
}

static CLUSTER: OnceLock<Result<Cluster, ClusterError>> = OnceLock::new();

/// The process's cluster, started on the first call (blocking, a few seconds).
pub fn cluster() -> Result<&'static Cluster, ClusterError> {
    CLUSTER.get_or_init(start).as_ref().map_err(Clone::clone)
}

/// A new, empty database on the process's cluster; its URL
/// (`postgres://postgres@127.0.0.1:<port>/t<pid>_<n>`).
pub async fn fresh_database() -> Result<String, ClusterError> {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let cluster = tokio::task::spawn_blocking(cluster)
        .await
        .map_err(|e| ClusterError(format!("starting the cluster panicked: {e}")))??;
    let name = format!(
        "t{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    cluster.create_database(&name).await
}

/// `initdb` and `postgres` from one directory: `PATH` first, then the newest
/// `/usr/lib/postgresql/<version>/bin`.
fn find_binaries() -> Result<(PathBuf, PathBuf), ClusterError> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            Some((v, e.path().join("bin")))
        })
        .collect();
    versions.sort();
    dirs.extend(versions.into_iter().rev().map(|(_, p)| p));
    find_binaries_in(dirs)
}

/// The first of `dirs` with both `initdb` and `postgres`.
fn find_binaries_in(dirs: Vec<PathBuf>) -> Result<(PathBuf, PathBuf), ClusterError> {
    dirs.into_iter()
        .map(|d| (d.join("initdb"), d.join("postgres")))
        .find(|(i, p)| i.is_file() && p.is_file())
        .ok_or_else(|| {
            ClusterError(
                "no PostgreSQL server binaries (initdb and postgres) on PATH or in \
                 /usr/lib/postgresql/*/bin: install the Debian package postgresql"
                    .into(),
            )
        })
}

/// The uid and gid of `nobody`, to run the server as when this process is root.
fn nobody() -> Result<(u32, u32), ClusterError> {
    // SAFETY: getpwnam returns a pointer into static storage or null; read at once.
    let pw = unsafe { libc::getpwnam(c"nobody".as_ptr()) };
    if pw.is_null() {
        return Err(ClusterError(
            "running as root, and there is no user `nobody` to run PostgreSQL as (it refuses \
             to run as root)"
                .into(),
        ));
    }
    // SAFETY: pw is not null and points to a passwd record.
    Ok(unsafe { ((*pw).pw_uid, (*pw).pw_gid) })
}

/// Remove `ethan-pg-<pid>` (and `ethan-pg-<pid>-<name>`) directories of processes that no
/// longer run.
fn remove_stale(temp: &Path) {
    let Ok(entries) = std::fs::read_dir(temp) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("ethan-pg-"))
            .and_then(|p| p.split('-').next()?.parse::<i32>().ok())
        else {
            continue;
        };
        // SAFETY: kill with signal 0 only checks whether the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if !alive {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

fn io_err(what: &str, e: std::io::Error) -> ClusterError {
    ClusterError(format!("{what}: {e}"))
}

/// A command that runs as `owner` (when set) in `dir`, with the C locale.
fn command(bin: &Path, dir: &Path, owner: Option<(u32, u32)>) -> Command {
    let mut cmd = Command::new(bin);
    cmd.current_dir(dir).env("LC_ALL", "C").stdin(Stdio::null());
    if let Some((uid, gid)) = owner {
        cmd.uid(uid).gid(gid);
    }
    cmd
}

fn start() -> Result<Cluster, ClusterError> {
    start_in(&format!("ethan-pg-{}", std::process::id()), None)
}

/// Another throwaway server (in `ethan-pg-<pid>-<name>`, gone with the process like the
/// process's cluster), serving TLS with the PEM files `cert` (the server's certificate, with
/// any intermediates) and `key` (its private key), copied into its directory. Plain-text
/// connections are accepted too: the client decides.
pub fn start_tls(name: &str, cert: &Path, key: &Path) -> Result<Cluster, ClusterError> {
    start_in(
        &format!("ethan-pg-{}-{name}", std::process::id()),
        Some((cert, key)),
    )
}

/// The server's TLS files copied into `dir` (owned by `owner`, the key mode 0600 as
/// PostgreSQL demands); the settings that use them.
fn tls_files(
    dir: &Path,
    cert: &Path,
    key: &Path,
    owner: Option<(u32, u32)>,
) -> Result<Vec<String>, ClusterError> {
    use std::os::unix::fs::PermissionsExt;
    let mut settings = vec!["ssl=on".to_string()];
    for (from, name, setting) in [
        (cert, "server.crt", "ssl_cert_file"),
        (key, "server.key", "ssl_key_file"),
    ] {
        let to = dir.join(name);
        std::fs::copy(from, &to).map_err(|e| io_err(&format!("copy {}", from.display()), e))?;
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| io_err(&format!("chmod {}", to.display()), e))?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(&to, Some(uid), Some(gid))
                .map_err(|e| io_err(&format!("chown {}", to.display()), e))?;
        }
        settings.push(format!("{setting}={}", to.display()));
    }
    Ok(settings)
}

fn start_in(name: &str, tls: Option<(&Path, &Path)>) -> Result<Cluster, ClusterError> {
    let (initdb, postgres) = find_binaries()?;
    let temp = std::env::temp_dir();
    remove_stale(&temp);
    let dir = temp.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| io_err(&format!("create {}", dir.display()), e))?;
    // SAFETY: geteuid has no preconditions.
    let owner = if unsafe { libc::geteuid() } == 0 {
        let (uid, gid) = nobody()?;
        std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
            .map_err(|e| io_err(&format!("chown {}", dir.display()), e))?;
        Some((uid, gid))
    } else {
        None
    };
    let data = dir.join("data");
    let out = command(&initdb, &dir, owner)
        .arg("-D")
        .arg(&data)
        .args([
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--no-sync",
            "--encoding=UTF8",
            "--locale=C",
        ])
        .output()
        .map_err(|e| io_err(&format!("run {}", initdb.display()), e))?;
    if !out.status.success() {
        return Err(ClusterError(format!(
            "{} failed ({}): {}",
            initdb.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    // Written over initdb's file, which keeps its owner.
    std::fs::write(
        data.join("pg_hba.conf"),
        format!(
            "local all all trust\n\
             host all {PASSWORD_USER} 127.0.0.1/32 scram-sha-256\n\
             host all all 127.0.0.1/32 trust\n"
        ),
    )
    .map_err(|e| io_err("write pg_hba.conf", e))?;
    let mut settings = match tls {
        Some((cert, key)) => tls_files(&dir, cert, key, owner)?,
        None => Vec::new(),
    };
    // Statement counts for the figures of BENCHMARKS.md, where the server has the module.
    let real = std::fs::canonicalize(&postgres).unwrap_or_else(|_| postgres.clone());
    let lib = real.parent().and_then(Path::parent).map(|d| d.join("lib"));
    if lib.is_some_and(|l| l.join("pg_stat_statements.so").is_file()) {
        settings.push("shared_preload_libraries=pg_stat_statements".into());
    }
    let mut last = String::new();
    for _ in 0..3 {
        let port = free_port()?;
        match run_server(&postgres, &dir, &data, port, owner, &settings) {
            Ok(()) => return Ok(Cluster { port, dir }),
            Err(e) => last = e.0,
        }
    }
    Err(ClusterError(last))
}

/// A port nothing listens on right now.
fn free_port() -> Result<u16, ClusterError> {
    let l =
        std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| io_err("find a free port", e))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| io_err("find a free port", e))
}

/// What the server's thread reports.
enum Event {
    Spawned(Result<u32, String>),
    Exited(String),
}

/// Start the server on `port` from a thread that stays for the process, and wait until it
/// accepts connections.
fn run_server(
    postgres: &Path,
    dir: &Path,
    data: &Path,
    port: u16,
    owner: Option<(u32, u32)>,
    settings: &[String],
) -> Result<(), ClusterError> {
    let log_path = dir.join("postgres.log");
    let log = std::fs::File::create(&log_path).map_err(|e| io_err("create postgres.log", e))?;
    let log2 = log
        .try_clone()
        .map_err(|e| io_err("open postgres.log", e))?;
    let mut cmd = command(postgres, dir, owner);
    cmd.arg("-D")
        .arg(data)
        .arg("-p")
        .arg(port.to_string())
        .arg("-k")
        .arg(dir)
        .args([
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
            "-c",
            "max_connections=300",
        ])
        .args(settings.iter().flat_map(|s| ["-c", s.as_str()]))
        .stdout(log)
        .stderr(log2);
    let parent = std::process::id();
    // SAFETY: the closure only makes async-signal-safe calls (prctl, getppid). std sets the
    // uid and gid before it runs, so the death signal survives the change of user.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGQUIT) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() as u32 != parent {
                return Err(std::io::Error::other("the test process is gone"));
            }
            Ok(())
        });
    }
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name(format!("ethan-pg-{port}"))
        .spawn(move || match cmd.spawn() {
            Err(e) => {
                let _ = tx.send(Event::Spawned(Err(e.to_string())));
            }
            Ok(mut child) => {
                let _ = tx.send(Event::Spawned(Ok(child.id())));
                let status = child
                    .wait()
                    .map(|s| s.to_string())
                    .unwrap_or_else(|e| e.to_string());
                let _ = tx.send(Event::Exited(status));
                // The thread ends only after the server did: PR_SET_PDEATHSIG fires when the
                // thread that spawned the child exits.
            }
        })
        .map_err(|e| io_err("start the server's thread", e))?;
    let log_tail = || {
        std::fs::read_to_string(&log_path)
            .map(|l| l.lines().rev().take(5).collect::<Vec<_>>().join(" | "))
            .unwrap_or_default()
    };
    match rx.recv() {
        Ok(Event::Spawned(Ok(_))) => {}
        Ok(Event::Spawned(Err(e))) => {
            return Err(ClusterError(format!(
                "cannot run {}: {e}",
                postgres.display()
            )))
        }
        _ => return Err(ClusterError("the server's thread died".into())),
    }
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Ok(Event::Exited(status)) = rx.try_recv() {
            return Err(ClusterError(format!(
                "postgres on port {port} exited ({status}): {}",
                log_tail()
            )));
        }
        // Line 8 of postmaster.pid is the server's status: `ready` once it accepts connections.
        let ready = std::fs::read_to_string(data.join("postmaster.pid"))
            .ok()
            .is_some_and(|s| s.lines().nth(7).is_some_and(|l| l.trim() == "ready"));
        if ready {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(ClusterError(format!(
                "postgres on port {port} was not ready within {}s: {}",
                START_TIMEOUT.as_secs(),
                log_tail()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_server_binaries_the_error_says_what_to_install() {
        let empty = tempfile::tempdir().unwrap();
        let e = find_binaries_in(vec![empty.path().to_path_buf()]).unwrap_err();
        assert!(
            e.to_string()
                .contains("install the Debian package postgresql"),
            "{e}"
        );
        std::fs::write(empty.path().join("initdb"), "").unwrap();
        std::fs::write(empty.path().join("postgres"), "").unwrap();
        assert_eq!(
            find_binaries_in(vec![empty.path().to_path_buf()])
                .unwrap()
                .0,
            empty.path().join("initdb")
        );
    }

    #[test]
    fn directories_of_dead_processes_are_removed_and_live_ones_kept() {
        let temp = tempfile::tempdir().unwrap();
        // A child that has exited and been waited for: its pid is not running.
        let mut child = Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let (stale, live, other) = (
            temp.path().join(format!("ethan-pg-{dead}")),
            temp.path().join(format!("ethan-pg-{}", std::process::id())),
            temp.path().join("ethan-pg-notapid"),
        );
        for d in [&stale, &live, &other] {
            std::fs::create_dir(d).unwrap();
        }
        remove_stale(temp.path());
        assert!(!stale.exists());
        assert!(live.exists() && other.exists());
    }
}
