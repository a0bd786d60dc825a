//! Path resolution and protection for file and search tools.
//!
//! Relative paths resolve against `tools.workspace`; `~/` is the user's home. What is
//! protected is decided by [`ethan_sandbox::protected`], the one list the shell sandbox and
//! classifier use too: `$ETHAN_HOME` outside the workspace, the user's credential places,
//! secret-looking names, and hard links to any of them. Symlinks are followed before the
//! check, so a link in the workspace cannot point the tool at a protected file.

use crate::ToolError;
use crate::{ErrorKind, ToolContext};
use std::fs::File;
use std::path::{Path, PathBuf};

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

pub use ethan_sandbox::protected::{real_path, secret_looking, Protected, Protection};

/// The protected places for `ctx` ([`ethan_sandbox::protected`]), resolved now: built once per
/// step of a call (its plan, its run), never kept longer, so a place made into a link later is
/// seen by the next call.
pub fn protection_of(ctx: &ToolContext) -> Protection {
    Protection::new(ctx.ethan_home.as_deref(), &ctx.workspace).and(&ctx.services.sandbox.protected)
}

/// Whether `path` (already resolved) is protected for `ctx`.
pub fn protection(ctx: &ToolContext, path: &Path) -> Option<Protected> {
    protection_of(ctx).check(path)
}

/// Resolve and refuse protected paths: the one call file and search tools make. A protected path
/// passes only when the owner approved this call as an always-ask call (consent).
pub fn resolve_checked(ctx: &ToolContext, path: &str) -> Result<PathBuf, ToolError> {
    resolve_checked_by(ctx, &protection_of(ctx), path)
}

/// [`resolve_checked`] against `rules`, the call's protected places worked out once
/// ([`protection_of`]) by a tool that checks again what it opens or checks more than one path.
pub fn resolve_checked_by(
    ctx: &ToolContext,
    rules: &Protection,
    path: &str,
) -> Result<PathBuf, ToolError> {
    let p = resolve(ctx, path);
    match rules.check(&p) {
        None => Ok(p),
        Some(_)
            if ctx
                .approved_actions
                .iter()
                .any(|a| a == ethan_core::tool::PROTECTED_PATHS_APPROVED) =>
        {
            Ok(p)
        }
        Some(why) => Err(ToolError::new(ErrorKind::Denied, why.describe(&p))),
    }
}

/// Open `path` (checked by [`resolve_checked_by`] against `rules`) for reading, and check what
/// was opened: the descriptor's real path (`/proc/self/fd`) passes the same protection rule. A link swapped
/// between the check and the open (by a command running beside the tool) cannot hand the tool a
/// protected file: whatever the name led to is the file checked and the one read. Opened
/// without blocking (a FIFO does not hold the call) and without becoming a terminal.
pub fn open_checked(
    ctx: &ToolContext,
    rules: &Protection,
    path: &Path,
) -> std::io::Result<Result<File, ToolError>> {
    use std::os::unix::fs::MetadataExt;
    let (file, held) = open_held(path)?;
    if !held.is_file() && !held.is_dir() {
        // A device, FIFO or socket: no end (`/dev/zero`), or no answer.
        return Ok(Err(ToolError::new(
            ErrorKind::Validation,
            format!("{} is not a regular file", path.display()),
        )));
    }
    if approved(ctx) {
        return Ok(is_pinned(ctx, &held, path).map(|()| file));
    }
    let opened = opened_path(&file)?;
    // The name must still lead to the inode held (not renamed over, not deleted: " (deleted)"),
    // and that inode is what the hard-link search looks for, not whatever a name leads to now.
    let same =
        std::fs::metadata(&opened).is_ok_and(|m| (m.dev(), m.ino()) == (held.dev(), held.ino()));
    if !same {
        return Ok(Err(ToolError::new(
            ErrorKind::Denied,
            format!(
                "{} changed while it was opened; read it again",
                path.display()
            ),
        )));
    }
    Ok(
        match rules
            .check(&opened)
            .or_else(|| rules.hard_link_target_of(&held))
        {
            Some(why) => Err(ToolError::new(ErrorKind::Denied, why.describe(path))),
            None => Ok(file),
        },
    )
}

/// Open `path` for reading as the tools do — without blocking (a FIFO does not hold the call)
/// and without becoming a terminal — with what the descriptor holds (`fstat`).
pub fn open_held(path: &Path) -> std::io::Result<(File, std::fs::Metadata)> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let held = file.metadata()?;
    Ok((file, held))
}

/// The real path of what `file` holds (`/proc/self/fd`): the name it was reached by, links and
/// `..` resolved at the open, whatever the name leads to now.
pub fn opened_path(file: &File) -> std::io::Result<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

/// For an approved call ([`approved`]): `Ok` when `held` (what was opened) is the file the
/// approval was checked against right before the run ([`Pinned`], its inode), else refused: a
/// link re-pointed after that check leads to something else.
pub fn is_pinned(
    ctx: &ToolContext,
    held: &std::fs::Metadata,
    path: &Path,
) -> Result<(), ToolError> {
    use std::os::unix::fs::MetadataExt;
    match ctx.assessment.as_ref().and_then(|a| a.get::<Pinned>()) {
        Some(pin) if (held.dev(), held.ino()) == (pin.meta.dev(), pin.meta.ino()) => Ok(()),
        _ => Err(ToolError::new(
            ErrorKind::Denied,
            format!(
                "{} no longer leads to what the owner approved; nothing was read. Call it again \
                 to ask the owner about what it leads to now.",
                path.display()
            ),
        )),
    }
}

/// Whether the owner approved this call's protected paths (an always-ask call said yes to).
pub fn approved(ctx: &ToolContext) -> bool {
    ctx.approved_actions
        .iter()
        .any(|a| a == ethan_core::tool::PROTECTED_PATHS_APPROVED)
}

/// The file an approved protected path led to when the executor checked the approval again,
/// right before the run (a tool's assessment of the call, made again then): an approved call
/// opens this inode or nothing.
pub struct Pinned {
    /// Where the path led (links and `..` resolved): what the description shows.
    pub real: PathBuf,
    /// What that file was then (`stat`): its device and inode, which an approved call opens or
    /// nothing, and what the description says of its other names.
    pub meta: std::fs::Metadata,
}

/// [`Pinned`] for the path argument `raw` of an approved call; `None` before any approval
/// (nothing to pin: the ordinary checks apply) or when nothing is there.
pub fn pin_approved(ctx: &ToolContext, raw: &str) -> Option<Pinned> {
    if !approved(ctx) {
        return None;
    }
    let real = real_path(&resolve(ctx, raw));
    let m = std::fs::metadata(&real).ok()?;
    Some(Pinned { real, meta: m })
}

/// Consent hooks shared by file tools: a protected path is an always-ask call (owner only). The
/// description names where the path really leads (links and `..` resolved) when that differs
/// from the path as written — what the owner approves, and what the executor checks again
/// right before the call runs.
pub fn protected_description(ctx: &ToolContext, path: &str, verb: &str) -> Option<String> {
    let p = resolve(ctx, path);
    let rules = protection_of(ctx);
    let why = rules.check(&p)?;
    // Described again after the yes, the call shows the file it is pinned to (one resolution
    // for what is compared with the approval and what may be opened).
    let pin = ctx.assessment.as_ref().and_then(|a| a.get::<Pinned>());
    let (real, meta) = match pin {
        Some(pin) => (pin.real.clone(), Some(pin.meta.clone())),
        None => (real_path(&p), std::fs::metadata(&p).ok()),
    };
    Some(format!(
        "{verb} {} — {}{}",
        shown_with(&p, &real),
        why.describe(&p),
        same_file_as(&rules, &why, &real, meta.as_ref())
    ))
}

/// The file `meta` describes, by device and inode, for [`CallPlan::identity`]: `-` when nothing
/// is there.
///
/// [`CallPlan::identity`]: ethan_core::tool::CallPlan::identity
pub fn identity_of(meta: Option<&std::fs::Metadata>) -> String {
    use std::os::unix::fs::MetadataExt;
    match meta {
        Some(m) => format!("{}:{}", m.dev(), m.ino()),
        None => "-".to_string(),
    }
}

/// For a call on the protected path argument `raw`: the file it leads to, by device and inode
/// (the one pinned for an approved call, else what is there now); `None` for a path that is
/// not protected (nothing to compare after a yes). The executor refuses an approved call
/// whose file changed while the owner decided, even when the question reads the same.
pub fn protected_identity(ctx: &ToolContext, raw: &str) -> Option<String> {
    let p = resolve(ctx, raw);
    protection(ctx, &p)?;
    Some(
        match ctx.assessment.as_ref().and_then(|a| a.get::<Pinned>()) {
            Some(pin) => identity_of(Some(&pin.meta)),
            None => identity_of(std::fs::metadata(&p).ok().as_ref()),
        },
    )
}

/// A name protected for its own sake (it looks like a secret, it is in a credential place) can
/// be another name of a protected file: ` (the same file as …)` naming it, for the question, so
/// that a name re-linked to another file while the owner decides changes the question and the
/// call is refused. Empty otherwise. `meta` is the file's `stat` (`None`: nothing there).
pub fn same_file_as(
    rules: &Protection,
    why: &Protected,
    real: &Path,
    meta: Option<&std::fs::Metadata>,
) -> String {
    if matches!(why, Protected::HardLink(_)) {
        return String::new();
    }
    match meta.and_then(|m| rules.hard_link_target_of(m)) {
        Some(Protected::HardLink(same)) if same != real => {
            format!(" (the same file as {})", same.display())
        }
        _ => String::new(),
    }
}

/// `path` as an approval shows it: followed by where it really leads (links and `..`
/// resolved, [`real_path`]) when that differs.
pub fn with_target(path: &Path) -> String {
    shown_with(path, &real_path(path))
}

/// `path` shown with `real`, where it leads, when that differs.
fn shown_with(path: &Path, real: &Path) -> String {
    if real == path {
        path.display().to_string()
    } else {
        format!("{} (→ {})", path.display(), real.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::tests::ctx_in;

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
        assert_eq!(err.kind, ErrorKind::Denied);
        // A hard link in the workspace to the config is the config.
        std::fs::hard_link(home.path().join("config.yaml"), ws.join("hard.txt")).unwrap();
        let err = resolve_checked(&ctx, "hard.txt").unwrap_err();
        assert!(err.message.contains("hard link"), "{err:?}");
        assert!(resolve_checked(&ctx, "/home/someone/.ssh/id_ed25519").is_err());
        assert!(resolve_checked(&ctx, "project/.env").is_err());
    }

    /// The approval of a protected path names where a link really leads (what the call would
    /// read), and says nothing more when the path is no link.
    #[test]
    fn a_protected_description_names_the_real_target_of_a_link() {
        let home = tempfile::tempdir().unwrap();
        let ws = home.path().join("workspace");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(home.path().join("config.yaml"), "x").unwrap();
        let mut ctx = ctx_in(&ws);
        ctx.ethan_home = Some(home.path().to_path_buf());
        let real = home.path().join("config.yaml").canonicalize().unwrap();
        std::os::unix::fs::symlink(&real, ws.join("link")).unwrap();
        let d = protected_description(&ctx, "link", "read").unwrap();
        let shown = format!(
            "read {} (→ {}) — ",
            ws.join("link").display(),
            real.display()
        );
        assert!(d.starts_with(&shown), "{d}");
        let direct = real.display().to_string();
        let d = protected_description(&ctx, &direct, "read").unwrap();
        assert!(d.starts_with(&format!("read {direct} — ")), "{d}");
        assert!(!d.contains('→'), "{d}");
        assert_eq!(protected_description(&ctx, "notes.txt", "read"), None);
    }

    /// A name protected for its own sake that is also another name of a protected file: the
    /// description says which file, so re-linking the name to another file changes it.
    #[test]
    fn a_protected_description_names_the_protected_file_a_hard_link_shares() {
        let home = tempfile::tempdir().unwrap();
        let ws = home.path().join("workspace");
        std::fs::create_dir_all(&ws).unwrap();
        for f in ["config.yaml", "ethan.db"] {
            std::fs::write(home.path().join(f), "x").unwrap();
        }
        let mut ctx = ctx_in(&ws);
        ctx.ethan_home = Some(home.path().to_path_buf());
        let real = |f: &str| home.path().join(f).canonicalize().unwrap();
        std::fs::hard_link(real("config.yaml"), ws.join(".env")).unwrap();
        let d = protected_description(&ctx, ".env", "read").unwrap();
        assert!(d.contains("looks like a secret"), "{d}");
        let same = format!("(the same file as {})", real("config.yaml").display());
        assert!(d.ends_with(&same), "{d}");
        // Re-linked to another protected file: another description.
        std::fs::remove_file(ws.join(".env")).unwrap();
        std::fs::hard_link(real("ethan.db"), ws.join(".env")).unwrap();
        let again = protected_description(&ctx, ".env", "read").unwrap();
        assert_ne!(d, again);
        assert!(again.contains("ethan.db"), "{again}");
        // A plain secret-looking file names no other file.
        std::fs::remove_file(ws.join(".env")).unwrap();
        std::fs::write(ws.join(".env"), "x").unwrap();
        let plain = protected_description(&ctx, ".env", "read").unwrap();
        assert!(!plain.contains("the same file as"), "{plain}");
    }
}
