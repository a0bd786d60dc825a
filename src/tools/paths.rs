//! Path resolution and protection for file and search tools.
//!
//! Relative paths resolve against `tools.workspace`; `~/` is the user's home. A path is
//! *protected* when it lies inside `$ETHAN_HOME` (config, database, secrets) but outside the
//! workspace, or when any of its components looks like a secret (`.ssh`, `.gnupg`, `.aws`,
//! `.env*`, `*.pem`, `*.key`, `credentials*`, `.netrc`, `.git-credentials`, `.pgpass`,
//! `id_rsa*`/`id_ed25519*`, …). Symlinks are followed before the check, so a link in the
//! workspace cannot point the tool at a protected file.

use super::{ErrorKind, ToolContext, ToolResult};
use std::path::{Component, Path, PathBuf};

/// Resolve a path argument for `ctx` (no protection check).
pub fn resolve(ctx: &ToolContext, path: &str) -> PathBuf {
    let p = path.trim();
    if p == "~" {
        if let Some(home) = std::env::var_os("HOME") {
            return PathBuf::from(home);
        }
    }
    if let Some(rest) = p.strip_prefix("~/") {
        if let Some(home) = std::env::var_os("HOME") {
            return PathBuf::from(home).join(rest);
        }
    }
    let pb = PathBuf::from(p);
    if pb.is_absolute() {
        pb
    } else {
        ctx.workspace.join(pb)
    }
}

/// Why a path is protected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Protected {
    /// Inside `$ETHAN_HOME`, outside the workspace.
    EthanHome,
    /// A component that looks like a secret (the component is given).
    SecretLooking(String),
}

impl Protected {
    pub fn describe(&self, path: &Path) -> String {
        match self {
            Protected::EthanHome => format!(
                "{} is inside Ethan's own data directory (config, database, secrets); tools may not touch it",
                path.display()
            ),
            Protected::SecretLooking(c) => format!(
                "{} looks like a secret ({c:?}); tools may not read or change secret files",
                path.display()
            ),
        }
    }
}

/// Whether a file name looks like it holds a secret.
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
        "secrets",
    ];
    EXACT.contains(&n.as_str())
        || n == ".env"
        || n.starts_with(".env.")
        || n.starts_with("credentials")
        || n.starts_with("id_rsa")
        || n.starts_with("id_ed25519")
        || n.starts_with("id_ecdsa")
        || n.starts_with("id_dsa")
        || n.ends_with(".pem")
        || n.ends_with(".key")
        || n.ends_with(".p12")
        || n.ends_with(".pfx")
        || n.ends_with(".keystore")
}

/// The real location of `path`: symlinks resolved for the part that exists, the rest appended,
/// `..` folded.
pub fn real_path(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        if let Ok(c) = existing.canonicalize() {
            let mut out = c;
            for r in rest.iter().rev() {
                if r == ".." {
                    out.pop();
                } else if r != "." {
                    out.push(r);
                }
            }
            return out;
        }
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => return lexical_normalize(path),
        }
    }
}

fn lexical_normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Whether `path` (already resolved) is protected for `ctx`.
pub fn protection(ctx: &ToolContext, path: &Path) -> Option<Protected> {
    let real = real_path(path);
    for candidate in [path, real.as_path()] {
        for c in candidate.components() {
            if let Component::Normal(name) = c {
                if secret_looking(&name.to_string_lossy()) {
                    return Some(Protected::SecretLooking(
                        name.to_string_lossy().into_owned(),
                    ));
                }
            }
        }
    }
    if let Some(home) = &ctx.ethan_home {
        let home = real_path(home);
        let workspace = real_path(&ctx.workspace);
        if real.starts_with(&home) && !real.starts_with(&workspace) {
            return Some(Protected::EthanHome);
        }
    }
    None
}

/// Resolve and refuse protected paths: the one call file and search tools make. A protected path
/// passes only when the owner approved this call as an always-ask call (consent).
pub fn resolve_checked(ctx: &ToolContext, path: &str) -> Result<PathBuf, ToolResult> {
    let p = resolve(ctx, path);
    match protection(ctx, &p) {
        None => Ok(p),
        Some(_)
            if ctx
                .approved_actions
                .iter()
                .any(|a| a == crate::consent::PROTECTED_PATHS_APPROVED) =>
        {
            Ok(p)
        }
        Some(why) => Err(ToolResult::err(ErrorKind::Denied, why.describe(&p))),
    }
}

/// Consent hooks shared by file tools: a protected path is an always-ask call (owner only).
pub fn protected_description(ctx: &ToolContext, path: &str, verb: &str) -> Option<String> {
    let p = resolve(ctx, path);
    protection(ctx, &p).map(|why| format!("{verb} {} — {}", p.display(), why.describe(&p)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::executor::tests::ctx_in;

    #[test]
    fn secret_names() {
        for s in [
            ".ssh",
            ".env",
            ".env.local",
            "server.pem",
            "tls.key",
            "credentials.json",
            ".netrc",
            "id_rsa.pub",
        ] {
            assert!(secret_looking(s), "{s}");
        }
        for s in ["src", "env.rs", "keyboard.txt", "notes.md", "monkey"] {
            assert!(!secret_looking(s), "{s}");
        }
    }

    #[test]
    fn ethan_home_is_protected_but_the_workspace_is_not() {
        let home = tempfile::tempdir().unwrap();
        let ws = home.path().join("workspace");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(home.path().join("config.yaml"), "x").unwrap();
        let mut ctx = ctx_in(&ws);
        ctx.ethan_home = Some(home.path().to_path_buf());
        assert!(resolve_checked(&ctx, "notes.txt").is_ok());
        assert!(resolve_checked(&ctx, "../config.yaml").is_err());
        assert!(
            resolve_checked(&ctx, &home.path().join("ethan.db").display().to_string()).is_err()
        );
        // A symlink in the workspace pointing at the config is refused too.
        std::os::unix::fs::symlink(home.path().join("config.yaml"), ws.join("link")).unwrap();
        let err = resolve_checked(&ctx, "link").unwrap_err();
        assert_eq!(err.error_kind, Some(ErrorKind::Denied));
        assert!(resolve_checked(&ctx, "/home/someone/.ssh/id_ed25519").is_err());
        assert!(resolve_checked(&ctx, "project/.env").is_err());
    }
}
