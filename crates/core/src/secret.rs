//! [`Secret`]: a string that never appears in `Debug` output or logs; and how a YAML scalar
//! written as a number is read as a string ([`string_or_number`]), which a secret may be.

use serde::{Deserialize, Deserializer};
use std::fmt;

/// A credential from the config (API key, bot token, app secret). `Debug` and `Display` print
/// `<redacted>` (or `<empty>`); call [`Secret::expose`] only where the value is sent to its
/// service.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
    pub fn is_empty(&self) -> bool {
        self.0.trim().is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() {
            "<empty>"
        } else {
            "<redacted>"
        })
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        string_or_number(d).map(Secret)
    }
}

/// Accept a YAML string or number (ids such as Telegram user ids, and sometimes secrets, are
/// written unquoted).
pub fn string_or_number<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum S {
        Str(String),
        I(i64),
        U(u64),
        F(f64),
        B(bool),
    }
    Ok(match S::deserialize(d)? {
        S::Str(s) => s,
        S::I(i) => i.to_string(),
        S::U(u) => u.to_string(),
        S::F(f) => f.to_string(),
        S::B(b) => b.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_reads_numbers_and_never_shows_itself() {
        let s: Secret = serde_json::from_str("12345").unwrap();
        assert_eq!(s.expose(), "12345");
        assert_eq!(format!("{s:?} {s}"), "<redacted> <redacted>");
        assert_eq!(format!("{:?}", Secret::default()), "<empty>");
        assert!(Secret::new("  ").is_empty());
    }
}
