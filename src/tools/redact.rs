//! Secret redaction for audit entries and logs:
//! - any object key whose name contains `key`, `token`, `secret`, `password`, `credential` or
//!   `auth` (case-insensitive) has its value replaced, recursively through objects and lists;
//! - in strings, argv flags such as `--token=x`, `--api-key x`, `-p=x` for the same words, and
//!   `Bearer x` / `Basic x`, lose their value;
//! - the literal values of the secrets in the config are replaced wherever they appear.

use serde_json::Value;

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

/// A redactor holding the literal secret values (longest first).
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    pub fn new(mut secrets: Vec<String>) -> Self {
        secrets.retain(|s| s.len() >= 4);
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
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
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), REDACTED);
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
