//! Scalars as people write them in YAML: an id may be a string or a bare number.

use serde::{Deserialize, Deserializer};

/// Accept a YAML string or number (ids such as Telegram user ids are often written unquoted).
pub(crate) fn string_or_number<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
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
