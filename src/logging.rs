//! Logging with `tracing`, to stderr (or, for an interactive `ethan chat`, and for `ethan chat
//! -m` without `-v` or `--log-level`, to daily files `$ETHAN_HOME/logs/ethan-YYYY-MM-DD.log`, so
//! log lines never land in the conversation or before its one sentence), with
//! every configured secret value, and everything shaped
//! like a credential ([`crate::tools::redact::redact_shapes`]: API keys, tokens, JWTs, private
//! keys), replaced by `<redacted>` before a line is written (HTTP libraries put request URLs,
//! which for the Bot API contain the token, into their error texts; tool arguments and errors
//! may carry whatever a user pasted).
//!
//! The filter: `--log-level`, else `-v` (debug), else `RUST_LOG`, else the command's default
//! (`ethan=info,ethan_channels=info,warn` for `run`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

/// The secret values to hide; filled in once the config is loaded. Also where lines go.
#[derive(Clone, Default)]
pub struct Redactor(Arc<RwLock<Vec<String>>>, Option<Arc<PathBuf>>);

/// Where log lines go.
#[derive(Debug, Clone)]
pub enum LogTo {
    Stderr,
    /// Daily files in this folder (`ethan-YYYY-MM-DD.log`, local date).
    Files(PathBuf),
}

/// The daily file of `dir` for today.
pub fn log_file(dir: &Path) -> PathBuf {
    dir.join(format!(
        "ethan-{}.log",
        chrono::Local::now().format("%Y-%m-%d")
    ))
}

/// Remove the daily files of `dir` older than `days` days (by the date in their name); how many.
pub fn prune(dir: &Path, days: u32) -> usize {
    let cutoff = chrono::Local::now().date_naive() - chrono::Days::new(u64::from(days));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut n = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let date = name
            .strip_prefix("ethan-")
            .and_then(|r| r.strip_suffix(".log"))
            .and_then(|d| chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").ok());
        if date.is_some_and(|d| d < cutoff) && std::fs::remove_file(e.path()).is_ok() {
            n += 1;
        }
    }
    n
}

impl Redactor {
    pub fn set(&self, mut secrets: Vec<String>) {
        // Longest first, so a secret containing another is replaced whole.
        secrets.retain(|s| s.len() >= 4);
        ethan_core::sort::sort_by_key(&mut secrets, |s| std::cmp::Reverse(s.len()));
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = secrets;
    }

    /// `text` with the configured secrets and every credential-shaped string replaced.
    pub fn redact(&self, text: &str) -> String {
        let secrets = self.0.read().unwrap_or_else(|p| p.into_inner());
        let mut out = text.to_string();
        for s in secrets.iter() {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), "<redacted>");
            }
        }
        match crate::tools::redact::redact_shapes(&out) {
            std::borrow::Cow::Owned(clean) => clean,
            std::borrow::Cow::Borrowed(_) => out,
        }
    }
}

pub struct RedactingWriter {
    redactor: Redactor,
    buf: Vec<u8>,
}

impl Write for RedactingWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let text = String::from_utf8_lossy(&self.buf);
        let clean = self.redactor.redact(&text);
        self.buf.clear();
        match &self.redactor.1 {
            None => std::io::stderr().write_all(clean.as_bytes()),
            Some(dir) => {
                use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
                let _ = std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir.as_path());
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .mode(0o600)
                    .open(log_file(dir))?
                    .write_all(clean.as_bytes())
            }
        }
    }
}

impl Drop for RedactingWriter {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

impl<'a> MakeWriter<'a> for Redactor {
    type Writer = RedactingWriter;
    fn make_writer(&'a self) -> Self::Writer {
        RedactingWriter {
            redactor: self.clone(),
            buf: Vec::new(),
        }
    }
}

/// Install the global subscriber. `level` (from `--log-level` or `-v`) wins over `RUST_LOG`,
/// which wins over `default`. An invalid `level` is an error.
pub fn init(default: &str, level: Option<&str>, to: LogTo) -> Result<Redactor, String> {
    let dir = match to {
        LogTo::Stderr => None,
        LogTo::Files(d) => Some(Arc::new(d)),
    };
    let redactor = Redactor(Arc::default(), dir.clone());
    let filter = match level {
        Some(l) => EnvFilter::try_new(l).map_err(|e| format!("--log-level {l:?}: {e}"))?,
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default)),
    };
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(dir.is_none() && std::io::stderr().is_terminal())
        .with_writer(redactor.clone())
        .with_target(false)
        .try_init();
    Ok(redactor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_daily_files_are_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let today = log_file(dir.path());
        for name in ["ethan-2000-01-01.log", "notes.txt"] {
            std::fs::write(dir.path().join(name), "x").unwrap();
        }
        std::fs::write(&today, "x").unwrap();
        assert_eq!(prune(dir.path(), 7), 1);
        assert!(today.exists());
        assert!(dir.path().join("notes.txt").exists());
        assert!(!dir.path().join("ethan-2000-01-01.log").exists());
    }

    #[test]
    fn replaces_every_secret() {
        let r = Redactor::default();
        r.set(vec!["123456:ABCDEF".into(), "sk-abc".into(), "x".into()]);
        assert_eq!(
            r.redact("GET /bot123456:ABCDEF/getMe with sk-abc and x"),
            "GET /bot<redacted>/getMe with <redacted> and x"
        );
    }

    #[test]
    fn replaces_credential_shapes_nobody_configured() {
        let r = Redactor::default();
        r.set(vec!["configured-secret".into()]);
        let line = "WARN tool shell failed: args {\"env\":{\"x\":\"ghp_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb3d\"}} \
                    via https://api.telegram.org/bot987654321:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/send \
                    key AKIAIOSFODNN7EXAMPLE and configured-secret";
        let out = r.redact(line);
        for secret in [
            "ghp_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb3d",
            "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
            "AKIAIOSFODNN7EXAMPLE",
            "configured-secret",
        ] {
            assert!(!out.contains(secret), "{secret} in {out}");
        }
        assert!(
            out.starts_with("WARN tool shell failed: args {\"env\":{\"x\":\"<redacted>\"}}"),
            "{out}"
        );
        assert!(out.contains("/bot<redacted>/send"), "{out}");
    }
}
