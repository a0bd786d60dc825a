//! The daemon under test: `ethan run` as a child process with its own `$ETHAN_HOME`, and what
//! `/proc` says about it (RSS in KiB, CPU time in clock ticks).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Daemon {
    child: Child,
    /// When `spawn` was called (just before fork + exec).
    pub started: Instant,
}

impl Daemon {
    /// Start `bin run` with `home` as `$ETHAN_HOME`; its output is appended to `log`.
    pub fn spawn(bin: &Path, home: &Path, log: &Path) -> Daemon {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("daemon log");
        let err = out.try_clone().expect("daemon log");
        let mut cmd = Command::new(bin);
        cmd.arg("run")
            .env("ETHAN_HOME", home)
            .env(
                "RUST_LOG",
                std::env::var("BENCH_RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .env("NO_COLOR", "1")
            .env("NO_PROXY", "*")
            .env_remove("OPENAI_API_KEY")
            .env_remove("TELEGRAM_BOT_TOKEN")
            .env_remove("LARK_APP_ID")
            .env_remove("LARK_APP_SECRET")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let started = Instant::now();
        let child = cmd.spawn().expect("spawn ethan run");
        Daemon { child, started }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `VmRSS`, `RssAnon` and `RssFile` in KiB.
    pub fn rss_kib(&self) -> (u64, u64, u64) {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        (field("VmRSS:"), field("RssAnon:"), field("RssFile:"))
    }

    /// User + system CPU time used so far.
    pub fn cpu(&self) -> Duration {
        cpu_of(&format!("/proc/{}/stat", self.pid()))
    }

    /// Whether the process has exited (with its status).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGTERM, then SIGKILL after 10 s.
    pub fn stop(mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.pid() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// CPU time of this process (the fakes).
pub fn own_cpu() -> Duration {
    cpu_of("/proc/self/stat")
}

fn cpu_of(stat_path: &str) -> Duration {
    let stat = std::fs::read_to_string(stat_path).unwrap_or_default();
    // Fields after the `(comm)`: state is field 3; utime and stime are fields 14 and 15.
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|v| v.parse::<u64>().ok()))
        .sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_micros(ticks * 1_000_000 / hz)
}

/// The release binary: `$BENCH_BIN`, else `target/release/ethan` of this checkout.
pub fn binary() -> PathBuf {
    std::env::var_os("BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
            target.join("release").join("ethan")
        })
}
