//! Secret redaction for audit entries and logs:
//! - any object key whose name contains `key`, `token`, `secret`, `password`, `credential` or
//!   `auth` (case-insensitive) has its value replaced, recursively through objects and lists;
//! - in strings, argv flags such as `--token=x`, `--api-key x`, `-p=x` for the same words, and
//!   `Bearer x` / `Basic x`, lose their value;
//! - the literal values of the secrets in the config are replaced wherever they appear;
//! - anything shaped like a well-known credential is replaced wherever it appears, whatever the
//!   key it sits under ([`redact_shapes`]): OpenAI (`sk-…`, `sk-proj-…`) and Anthropic
//!   (`sk-ant-…`) keys, GitHub tokens (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`),
//!   Slack tokens (`xoxa-`, `xoxb-`, `xoxp-`, `xoxr-`), AWS access key ids (`AKIA` + 16),
//!   Telegram bot tokens (`<bot id>:<35 characters>`), JWTs (`eyJ….eyJ….…`) and PEM private-key
//!   blocks (`-----BEGIN … PRIVATE KEY-----` to its `END` line, or to the end of the text when
//!   the block is cut off).
//!
//! The daemon's log goes through [`redact_shapes`] too (the daemon's `logging`).

use regex::Regex;
use serde_json::Value;
use std::borrow::Cow;
use std::sync::OnceLock;

pub const REDACTED: &str = "<redacted>";
const SENSITIVE: &[&str] = &[
    "key",
    "token",
    "secret",
    "password",
    "passwd",
    "credential",
    "auth",
];

fn sensitive_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    SENSITIVE.iter().any(|w| n.contains(w))
}

/// One alternation of every credential shape named in the module docs.
const SHAPES: &str = concat!(
    // PEM private-key blocks, whole, or to the end of a cut-off text.
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:(?s:.*?)-----END [A-Z0-9 ]*PRIVATE KEY-----|(?s:.*))",
    // OpenAI (sk-, sk-proj-) and Anthropic (sk-ant-) keys.
    r"|\bsk-[A-Za-z0-9_-]{20,}",
    // GitHub personal, OAuth, user-to-server, server-to-server and refresh tokens.
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}",
    // Slack tokens.
    r"|\bxox[abpr]-[A-Za-z0-9-]{10,}",
    // AWS access key ids.
    r"|\bAKIA[0-9A-Z]{16}\b",
    // Telegram bot tokens (also inside Bot API URLs: `/bot<token>/`).
    r"|[0-9]{6,}:[A-Za-z0-9_-]{30,}",
    // JWTs: base64url header and payload of JSON objects, then the signature (maybe empty).
    r"|\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*",
);

fn shapes() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(SHAPES).expect("the credential shapes are a valid regex"))
}

/// `text` with everything shaped like a credential (module docs) replaced by [`REDACTED`];
/// borrowed when nothing matched.
pub fn redact_shapes(text: &str) -> Cow<'_, str> {
    shapes().replace_all(text, REDACTED)
}

/// A redactor holding the literal secret values (longest first).
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    pub fn new(mut secrets: Vec<String>) -> Self {
        secrets.retain(|s| s.len() >= 4);
        ethan_core::sort::sort_by_key(&mut secrets, |s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Self { secrets }
    }

    /// A redacted copy of a JSON value.
    pub fn value(&self, v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| {
                        let v = if sensitive_name(k) && !v.is_null() {
                            Value::String(REDACTED.into())
                        } else {
                            self.value(v)
                        };
                        (k.clone(), v)
                    })
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(|x| self.value(x)).collect()),
            Value::String(s) => Value::String(self.text(s)),
            other => other.clone(),
        }
    }

    /// A redacted copy of free text (a command line, an error message).
    pub fn text(&self, s: &str) -> String {
        let mut out = redact_flags(s);
        if let Cow::Owned(clean) = redact_shapes(&out) {
            out = clean;
        }
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), REDACTED);
            }
        }
        out
    }

    /// `s` with only the configured secret values replaced (no shape or flag guessing): for a
    /// tool's output, whose text must otherwise reach the model as it is.
    pub fn known<'a>(&self, s: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(s);
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = Cow::Owned(out.replace(secret.as_str(), REDACTED));
            }
        }
        out
    }
}

/// Replace the values of sensitive argv flags and of `Bearer`/`Basic` credentials.
fn redact_flags(s: &str) -> String {
    // Tokens with their byte spans, split on whitespace.
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut start = None;
    for (i, c) in s.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(st)) => {
                spans.push((st, i));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(st) = start {
        spans.push((st, s.len()));
    }
    let mut replace: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < spans.len() {
        let (a, b) = spans[i];
        let tok = s[a..b].trim_matches(|c| c == '"' || c == '\'');
        let lower = tok.to_ascii_lowercase();
        if let Some(flag) = tok.strip_prefix('-') {
            let flag = flag.trim_start_matches('-');
            match flag.split_once('=') {
                Some((name, value)) if sensitive_name(name) && !value.is_empty() => {
                    let off = s[a..b].find('=').map(|p| a + p + 1).unwrap_or(b);
                    replace.push((off, b));
                }
                None if sensitive_name(flag) && flag.len() > 1 => {
                    if let Some(&(na, nb)) = spans.get(i + 1) {
                        if !s[na..nb].starts_with('-') {
                            replace.push((na, nb));
                            i += 1;
                        }
                    }
                }
                _ => {}
            }
        } else if lower == "bearer" || lower == "basic" || lower.ends_with(":bearer") {
            if let Some(&(na, nb)) = spans.get(i + 1) {
                replace.push((na, nb));
                i += 1;
            }
        } else if let Some((name, value)) = tok.split_once('=') {
            // Environment-style assignments: API_KEY=abc, GITHUB_TOKEN=abc
            if sensitive_name(name) && !value.is_empty() && !name.is_empty() && !name.contains('/')
            {
                let off = s[a..b].find('=').map(|p| a + p + 1).unwrap_or(b);
                replace.push((off, b));
            }
        }
        i += 1;
    }
    if replace.is_empty() {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut pos = 0;
    for (a, b) in replace {
        out.push_str(&s[pos..a]);
        // Keep a closing quote that belonged to the token.
        let quoted = s[a..b].ends_with('"') || s[a..b].ends_with('\'');
        out.push_str(REDACTED);
        if quoted {
            out.push_str(&s[b - 1..b]);
        }
        pos = b;
    }
    out.push_str(&s[pos..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_redacted_recursively() {
        let r = Redactor::default();
        let v = r.value(&json!({"api_key": "sk-1", "nested": [{"Authorization": "x", "ok": "y"}], "password": 5}));
        assert_eq!(
            v,
            json!({"api_key": REDACTED, "nested": [{"Authorization": REDACTED, "ok": "y"}], "password": REDACTED})
        );
    }

    #[test]
    fn known_replaces_only_configured_values() {
        let r = Redactor::new(vec!["env-value-1234".into()]);
        let out = "A=env-value-1234 --token=abc Bearer xyz sk-looks-like-a-key";
        assert_eq!(
            r.known(out),
            "A=<redacted> --token=abc Bearer xyz sk-looks-like-a-key"
        );
        assert!(matches!(r.known("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn flags_and_bearer_are_redacted() {
        let r = Redactor::default();
        assert_eq!(
            r.text("tool --token=abc --verbose"),
            "tool --token=<redacted> --verbose"
        );
        assert_eq!(
            r.text("tool --api-key abc next"),
            "tool --api-key <redacted> next"
        );
        assert_eq!(
            r.text("curl -H \"Authorization: Bearer abc123\" https://x"),
            "curl -H \"Authorization: Bearer <redacted>\" https://x"
        );
        assert_eq!(
            r.text("GITHUB_TOKEN=ghp_x make"),
            "GITHUB_TOKEN=<redacted> make"
        );
        assert_eq!(r.text("ls -la /tmp"), "ls -la /tmp");
        assert_eq!(
            r.text("echo 日本 --secret=秘密"),
            "echo 日本 --secret=<redacted>"
        );
    }

    /// One pasted credential of each shape, placed deep inside an argument value.
    fn pasted() -> Vec<&'static str> {
        vec![
            "sk-abcdefghijklmnopqrstuvwxyz0123456789ABCD",
            "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z_-Ab3dEf6h",
            "sk-ant-api03-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z-AAAA",
            "ghp_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb3d",
            "gho_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb3d",
            "ghu_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb3d",
            "ghs_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb3d",
            "ghr_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb3d",
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
            "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
            "xoxp-123456789012-123456789012-123456789012-abcdef0123456789",
            "xoxa-2-123456789012-abcdefabcdef",
            "xoxr-123456789012-abcdefabcdef",
            "AKIAIOSFODNN7EXAMPLE",
            "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq9\nxyzzy+/=\n-----END RSA PRIVATE KEY-----",
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
        ]
    }

    #[test]
    fn credential_shapes_are_redacted_anywhere_in_a_value() {
        let r = Redactor::default();
        for secret in pasted() {
            // Under harmless keys, inside a list, inside a sentence.
            let args = json!({
                "command": "deploy",
                "options": {"env": [1, {"note": format!("use {secret} for this")}]},
            });
            let out = r.value(&args).to_string();
            assert!(!out.contains(secret), "{secret} survived: {out}");
            assert!(
                out.contains(&format!("use {REDACTED} for this")),
                "{secret}: {out}"
            );
            assert!(out.contains("deploy"), "{out}");
            let line = format!("error: bad input {secret}, try again");
            assert_eq!(
                r.text(&line),
                format!("error: bad input {REDACTED}, try again"),
                "{secret}"
            );
        }
        // A private key cut off before its END line is redacted to the end of the text.
        let cut =
            json!({"a": [{"b": "key: -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B"}]});
        assert_eq!(
            r.value(&cut),
            json!({"a": [{"b": format!("key: {REDACTED}")}]})
        );
        // Ordinary text keeps its look.
        for plain in [
            "ls -la /tmp",
            "sk-short",
            "task-1234567890abcdefghijklmnopqrstuvwxyz",
            "ghp_short",
            "the meeting is at 10:30",
            "AKIA lower",
            "eyJhbGciOiJIUzI1NiJ9 alone",
            "-----BEGIN PUBLIC KEY-----\nMIIBIjAN\n-----END PUBLIC KEY-----",
        ] {
            assert_eq!(r.text(plain), plain);
        }
        // A Bot API URL keeps everything but the token.
        assert_eq!(
            redact_shapes("GET https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/getMe"),
            "GET https://api.telegram.org/bot<redacted>/getMe"
        );
    }

    #[test]
    fn literal_secrets_are_replaced() {
        let r = Redactor::new(vec!["sk-live-123456".into()]);
        assert_eq!(r.text("echo sk-live-123456"), format!("echo {REDACTED}"));
        assert_eq!(
            r.value(&json!({"cmd": "x sk-live-123456"})),
            json!({"cmd": format!("x {REDACTED}")})
        );
    }
}
