//! Logging with `tracing`, to stderr, with every configured secret value, and everything shaped
//! like a credential ([`crate::tools::redact::redact_shapes`]: API keys, tokens, JWTs, private
//! keys), replaced by `<redacted>` before a line is written (HTTP libraries put request URLs,
//! which for the Bot API contain the token, into their error texts; tool arguments and errors
//! may carry whatever a user pasted).
//!
//! The filter comes from `RUST_LOG` (default `ethan=info,ethan_channels=info,warn`).

use std::io::Write;
use std::sync::{Arc, RwLock};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

/// The secret values to hide; filled in once the config is loaded.
#[derive(Clone, Default)]
pub struct Redactor(Arc<RwLock<Vec<String>>>);

impl Redactor {
    pub fn set(&self, mut secrets: Vec<String>) {
        // Longest first, so a secret containing another is replaced whole.
        secrets.retain(|s| s.len() >= 4);
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
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
        std::io::stderr().write_all(clean.as_bytes())
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

/// Install the global subscriber; `default` is the filter used when `RUST_LOG` is unset.
pub fn init(default: &str) -> Redactor {
    let redactor = Redactor::default();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(redactor.clone())
        .with_target(false)
        .try_init();
    redactor
}

#[cfg(test)]
mod tests {
    use super::*;

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
