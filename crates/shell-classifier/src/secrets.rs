//! What looks secret: [`secret_looking`], the one list of secret-looking file names (the
//! daemon's file tools and sandbox use it too), sample names to test globs against, the markers
//! of the daemon's own files and settings, and secret-looking variable names.

/// Whether one path component (any case) looks like it holds a secret.
pub fn secret_looking(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    const EXACT: &[&str] = &[
        ".ssh",
        ".gnupg",
        ".aws",
        ".azure",
        ".netrc",
        "_netrc",
        ".git-credentials",
        ".pgpass",
        ".npmrc",
        ".pypirc",
        ".docker",
        ".kube",
        ".envrc",
        "secrets",
    ];
    EXACT.contains(&n.as_str())
        || n == ".env"
        || n.starts_with(".env.")
        || n.ends_with(".env")
        || n.contains(".env.")
        || n.contains("credentials")
        || ["id_rsa", "id_ed25519", "id_ecdsa", "id_dsa"]
            .iter()
            .any(|p| n.starts_with(p))
        || [".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".ppk"]
            .iter()
            .any(|ext| n.ends_with(ext))
}

/// Representative names that secret-looking path components match; used to test globs.
pub(crate) const SECRET_SAMPLES: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".docker",
    ".kube",
    ".netrc",
    ".git-credentials",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    ".envrc",
    ".env",
    ".env.local",
    "prod.env",
    "server.pem",
    "server.key",
    "cert.p12",
    "cert.pfx",
    "store.jks",
    "key.ppk",
    "credentials",
    "credentials.json",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    ".ethan",
];

pub(crate) const DAEMON_MARKERS: &[&str] = &[
    "ethan_home",
    "openai_api_key",
    "telegram_bot_token",
    "lark_app_secret",
    "ethan__",
    "ethan.db",
];

/// An environment variable (upper case by convention) whose name suggests a secret value.
pub(crate) fn secret_variable(name: &str) -> bool {
    name.chars()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && [
            "KEY",
            "TOKEN",
            "SECRET",
            "PASSWORD",
            "PASSWD",
            "CREDENTIAL",
            "PRIVATE",
        ]
        .iter()
        .any(|w| name.contains(w))
}

pub(crate) fn mentions_ethan_dir(lower: &str) -> bool {
    let bytes = lower.as_bytes();
    let mut from = 0;
    while let Some(pos) = lower[from..].find(".ethan") {
        let start = from + pos;
        let end = start + ".ethan".len();
        let before_ok = start == 0 || !bytes[start - 1].is_ascii_alphanumeric();
        let after_ok = end >= bytes.len()
            || !(bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_' || bytes[end] == b'-');
        if before_ok && after_ok {
            return true;
        }
        from = end;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::secret_looking;

    #[test]
    fn secret_names() {
        for s in [
            ".ssh",
            ".env",
            ".env.local",
            "prod.env",
            "server.pem",
            "tls.key",
            "credentials.json",
            ".netrc",
            "id_rsa.pub",
            ".envrc",
        ] {
            assert!(secret_looking(s), "{s}");
        }
        for s in ["src", "env.rs", "keyboard.txt", "notes.md", "monkey"] {
            assert!(!secret_looking(s), "{s}");
        }
    }
}
