//! `file_write{path, content, append?}`: writes (or appends) text, creating parent directories.
//! Its approval shows the text and what happens to the file ([`super::write_preview`]).

use super::write_preview::{self, Before};
use crate::args::{opt_bool, req_str};
use crate::{paths, ErrorKind, Tool, ToolContext};
use crate::{CallPlan, ToolDecl, ToolError, ToolOutput};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::sync::LazyLock;
use tokio::io::AsyncWriteExt;

pub struct FileWrite;

#[async_trait]
impl Tool for FileWrite {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "file_write",
                "Write text to a file (relative paths are in the workspace), creating parent directories. \
                 `append: true` adds to the end instead of replacing.",
                json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "content": {"type": "string"},
                        "append": {"type": "boolean", "default": false}
                    },
                    "required": ["path", "content"],
                    "additionalProperties": false
                }),
            )
            // Its output says what was written where.
            .not_private()
        });
        &DECL
    }
    fn describe(&self, args: &Value, ctx: &ToolContext) -> CallPlan {
        CallPlan {
            consent: self.consent_check(args, ctx),
            scope: self.consent_scope(args, ctx),
            always: self.consent_always(args, ctx),
            // A protected file: the one judged (its inode), which `run` opens or nothing.
            identity: self
                .consent_always(args, ctx)
                .then(|| judged(ctx).map(|j| j.2.clone()))
                .flatten(),
            ..CallPlan::of(self.decl(), args)
        }
    }
    /// Where the file really is, judged once before consent (`run` writes only there), and
    /// what is there now (for the approval).
    async fn assess(&self, args: &Value, ctx: &ToolContext) -> Option<crate::Assessment> {
        let raw = args.get("path").and_then(Value::as_str)?;
        let path = paths::resolve(ctx, raw);
        let judged = ethan_core::task::spawn_blocking(move || {
            let real = paths::real_path(&path);
            let before = Before::of(&real);
            let file = paths::identity_of(std::fs::metadata(&real).ok().as_ref());
            JudgedPath(real, before, file)
        })
        .await
        .ok()?;
        Some(crate::Assessment::new(judged))
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let (path, content) = match (req_str(&args, "path"), req_str(&args, "content")) {
            (Ok(p), Ok(c)) => match paths::resolve_checked(ctx, p) {
                Ok(p) => (p, c),
                Err(e) => return Err(e),
            },
            (Err(e), _) | (_, Err(e)) => return Err(e),
        };
        let append = match opt_bool(&args, "append") {
            Ok(a) => a.unwrap_or(false),
            Err(e) => return Err(e),
        };
        let judged = judged_path(args["path"].as_str().unwrap_or_default(), ctx);
        let res = async {
            // The folders are made where the path was judged to lead and the file is opened in
            // the last one, held open (never a name through a link: `O_NOFOLLOW` at each step),
            // and created only when nothing is there (`O_EXCL`); then the name must still lead
            // to it and what was opened must be it: a link swapped in or re-pointed meanwhile
            // cannot redirect the write, nor make it create or remove a file anywhere else.
            // Truncated only after the checks.
            let opening = judged.clone();
            let (f, folder, created) =
                ethan_core::task::spawn_blocking(move || open_judged(&opening, append))
                    .await
                    .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())))?;
            let mut f = tokio::fs::File::from_std(f);
            let held = f.metadata().await?;
            if !held.is_file() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!(
                        "{} is not a regular file; nothing was written",
                        judged.display()
                    ),
                ));
            }
            let opened = if created {
                paths::identity_of(None)
            } else {
                paths::identity_of(Some(&held))
            };
            let replaced = self::judged(ctx).is_some_and(|j| j.2 != opened);
            let checked = if replaced || paths::real_path(&path) != judged {
                Err(format!(
                    "{} changed after it was checked (it now leads to {}); nothing was written",
                    path.display(),
                    paths::real_path(&path).display()
                ))
            } else {
                opened_where_judged(&f, &judged, ctx)
            };
            if let Err(why) = checked {
                if created {
                    folder.remove_created();
                }
                return Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    why,
                ));
            }
            if !append {
                f.set_len(0).await?;
            }
            f.write_all(content.as_bytes()).await?;
            f.flush().await
        }
        .await;
        match res {
            Ok(()) => Ok(ToolOutput::new(format!(
                "{} {} bytes to {}",
                if append { "appended" } else { "wrote" },
                content.len(),
                path.display()
            ))
            .with_metadata(json!({"path": path.display().to_string(), "bytes": content.len()}))),
            Err(e) => Err(ToolError::new(
                ErrorKind::Dependency,
                format!("{}: {e}", path.display()),
            )),
        }
    }
}

impl FileWrite {
    /// No consent inside the daemon's private temp folder ([`ethan_sandbox::make_private_tmp`]) only,
    /// never the system temp directory as a whole; a protected path is an always-ask call.
    fn consent_check(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
        let raw = args.get("path").and_then(Value::as_str)?;
        let protected = paths::protected_description(ctx, raw, "write");
        let path = judged_path(raw, ctx);
        let tmp = ctx.services.sandbox.private_tmp.as_deref();
        if protected.is_none() && tmp.is_some_and(|tmp| path.starts_with(tmp)) {
            return None;
        }
        let content = args
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let append = args.get("append").and_then(Value::as_bool) == Some(true);
        let before = judged(ctx).map_or_else(|| Before::of(&path), |j| j.1);
        let previews = ctx.ethan_home.as_ref().map(|h| h.join("previews"));
        let preview = write_preview::describe(&path, content, append, before, previews.as_deref());
        // A protected file: why first, then the same preview as any other write (the text, and
        // whether it is appended).
        Some(match protected {
            Some(why) => format!("{why}\n{preview}"),
            None => preview,
        })
    }
    /// The parent directory: approving it for the session covers its subtree.
    fn consent_scope(&self, args: &Value, ctx: &ToolContext) -> String {
        let raw = args.get("path").and_then(Value::as_str).unwrap_or("");
        let path = judged_path(raw, ctx);
        path.parent().unwrap_or(&path).display().to_string()
    }
    fn consent_always(&self, args: &Value, ctx: &ToolContext) -> bool {
        args.get("path")
            .and_then(Value::as_str)
            .is_some_and(|p| paths::protection(ctx, &paths::resolve(ctx, p)).is_some())
    }
}

/// The real path of the file, as judged before consent ([`Tool::assess`]), what was there, and
/// which file that was ([`paths::identity_of`]): `run` writes that file or nothing.
#[derive(Debug, Clone, PartialEq)]
struct JudgedPath(std::path::PathBuf, Before, String);

fn judged(ctx: &ToolContext) -> Option<&JudgedPath> {
    ctx.assessment.as_ref().and_then(|a| a.get::<JudgedPath>())
}

/// The real path of `raw` as judged before consent, or worked out now for a call that was not
/// assessed (callers outside the executor).
fn judged_path(raw: &str, ctx: &ToolContext) -> std::path::PathBuf {
    judged(ctx)
        .map(|j| j.0.clone())
        .unwrap_or_else(|| paths::real_path(&paths::resolve(ctx, raw)))
}

/// The folder a write's file is in, held open from [`open_judged`], and the file's name in it.
struct Folder {
    fd: std::os::fd::OwnedFd,
    name: std::ffi::CString,
}

impl Folder {
    /// Remove the file this write created (by its name in the folder held, wherever a name
    /// leads now).
    fn remove_created(&self) {
        use std::os::fd::AsRawFd;
        // SAFETY: a descriptor this struct owns and a NUL-terminated name.
        unsafe { libc::unlinkat(self.fd.as_raw_fd(), self.name.as_ptr(), 0) };
    }
}

/// `openat` relative to `at`, never following a link at `name`.
fn open_at(
    at: libc::c_int,
    name: &std::ffi::CStr,
    flags: libc::c_int,
) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: a NUL-terminated name; `at` is held open by the caller.
    let fd = unsafe { libc::openat(at, name.as_ptr(), flags, 0o666 as libc::c_uint) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Make the folder `dir` (a real path: no link in it when the call was judged) and the ones
/// above it that are missing, one at a time from `/`, each reached without following a link
/// (`openat` with `O_NOFOLLOW`, `mkdirat` in the folder held open); the last one held open. A
/// folder swapped for a link after the check stops it, and nothing is made where it leads.
fn make_folders(dir: &std::path::Path) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::ffi::CString;
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let folder = libc::O_PATH | libc::O_DIRECTORY;
    let mut held = open_at(libc::AT_FDCWD, &CString::new("/")?, folder)?;
    for part in dir.components() {
        let std::path::Component::Normal(name) = part else {
            continue;
        };
        let name = CString::new(name.as_bytes())?;
        let next = match open_at(held.as_raw_fd(), &name, folder) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // SAFETY: as above; 0o777 less the umask, as `create_dir` does.
                if unsafe { libc::mkdirat(held.as_raw_fd(), name.as_ptr(), 0o777) } != 0 {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::AlreadyExists {
                        return Err(e);
                    }
                }
                open_at(held.as_raw_fd(), &name, folder)
            }
            other => other,
        };
        held = next.map_err(|e| {
            changed_since_check(
                e,
                &[libc::ELOOP, libc::ENOTDIR],
                dir,
                "a folder in it is now a link or a file",
            )
        })?;
    }
    Ok(held)
}

/// `e` as "`path` changed after it was checked (`what`); nothing was written" when its error
/// code is one of `codes` (what opening without following a link meets where a link, a file or
/// a FIFO was put after the check), else `e` as it is.
fn changed_since_check(
    e: std::io::Error,
    codes: &[libc::c_int],
    path: &std::path::Path,
    what: &str,
) -> std::io::Error {
    match e.raw_os_error() {
        Some(code) if codes.contains(&code) => std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{} changed after it was checked ({what}); nothing was written",
                path.display()
            ),
        ),
        _ => e,
    }
}

/// Open the file at `judged` (a real path) for writing, in its folder made and held by
/// [`make_folders`], without following a link there and without blocking (a FIFO put there
/// opens at once or fails instead of waiting): the file already there, else a new one
/// (`O_EXCL`: only if nothing appeared meanwhile); with the folder held and whether the file
/// was created.
fn open_judged(
    judged: &std::path::Path,
    append: bool,
) -> std::io::Result<(std::fs::File, Folder, bool)> {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let parent = judged.parent().unwrap_or(std::path::Path::new("/"));
    let fd = make_folders(parent)?;
    let name = judged.file_name().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} names no file", judged.display()),
        )
    })?;
    let folder = Folder {
        fd,
        name: std::ffi::CString::new(name.as_bytes())?,
    };
    let made_link = |e| {
        let codes = [libc::ELOOP, libc::EEXIST, libc::ENXIO];
        changed_since_check(e, &codes, judged, "something else is there now")
    };
    let flags = libc::O_WRONLY | libc::O_NONBLOCK | if append { libc::O_APPEND } else { 0 };
    let at = folder.fd.as_raw_fd();
    let (fd, created) = match open_at(at, &folder.name, flags) {
        Ok(fd) => (fd, false),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let fd = open_at(at, &folder.name, flags | libc::O_CREAT | libc::O_EXCL);
            (fd.map_err(made_link)?, true)
        }
        Err(e) => return Err(made_link(e)),
    };
    Ok((std::fs::File::from(fd), folder, created))
}

/// Whether the file `f` refers to is the one consent judged ([`judged_path`]), and not
/// protected unless the owner approved that.
fn opened_where_judged(
    f: &tokio::fs::File,
    judged: &std::path::Path,
    ctx: &ToolContext,
) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    let actual = std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd()))
        .map_err(|e| format!("cannot tell which file was opened: {e}"))?;
    if actual != judged || (paths::protection(ctx, &actual).is_some() && !paths::approved(ctx)) {
        return Err(format!(
            "{} changed after it was checked (it now leads to {}); nothing was written",
            judged.display(),
            actual.display()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::tests::ctx_in;

    #[tokio::test]
    async fn writes_appends_and_creates_parents() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx_in(dir.path());
        let r: crate::ToolResult = FileWrite
            .run(json!({"path": "a/b/c.txt", "content": "x"}), &ctx)
            .await
            .into();
        assert!(r.ok, "{r:?}");
        let _ = FileWrite
            .run(
                json!({"path": "a/b/c.txt", "content": "y", "append": true}),
                &ctx,
            )
            .await;
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a/b/c.txt")).unwrap(),
            "xy"
        );
        let r: crate::ToolResult = FileWrite
            .run(json!({"path": "a/b/c.txt"}), &ctx)
            .await
            .into();
        assert_eq!(r.error_kind, Some(ErrorKind::Validation));
    }

    #[test]
    fn no_consent_only_inside_the_private_temp_folder() {
        // ETHAN_HOME and the workspace under the system temp directory, as in a test setup.
        let home = tempfile::tempdir().unwrap();
        let ws = home.path().join("workspace");
        std::fs::create_dir_all(&ws).unwrap();
        let mut ctx = ctx_in(&ws);
        ctx.ethan_home = Some(home.path().to_path_buf());
        let sandbox = ethan_sandbox::settings::testing::probed();
        let private = sandbox
            .private_tmp
            .as_deref()
            .expect("a private temp folder");
        let inside = private.join("draft.txt").display().to_string();
        assert_eq!(
            FileWrite.consent_check(&json!({"path": inside, "content": "x"}), &ctx),
            None
        );
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(private).unwrap().permissions().mode() & 0o777,
            0o700
        );
        // Elsewhere in the system temp directory: asks.
        let elsewhere = std::env::temp_dir().join("ethan-not-private.txt");
        let asked = FileWrite.consent_check(
            &json!({"path": elsewhere.display().to_string(), "content": "x"}),
            &ctx,
        );
        assert!(asked.is_some(), "writing to the shared temp dir must ask");
        // The workspace (itself under the temp dir) asks too.
        assert!(FileWrite
            .consent_check(&json!({"path": "a.txt", "content": "x"}), &ctx)
            .is_some());
    }

    #[tokio::test]
    async fn a_symlink_swapped_in_after_the_check_is_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx_in(dir.path());
        let victim = dir.path().join("victim.txt");
        std::fs::write(&victim, "keep").unwrap();
        let target = dir.path().join("draft.txt");
        let args = json!({"path": target.display().to_string(), "content": "evil"});
        let mut judged = ctx.clone();
        judged.assessment = FileWrite.assess(&args, &ctx).await;
        // Between the check and the write, the name becomes a link to another file.
        std::os::unix::fs::symlink(&victim, &target).unwrap();
        let r: crate::ToolResult = FileWrite.run(args.clone(), &judged).await.into();
        assert!(!r.ok, "{r:?}");
        assert!(r.error.unwrap().contains("changed after it was checked"));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        // Judged as it is now, the same write goes through the link as before.
        let mut now = ctx.clone();
        now.assessment = FileWrite.assess(&args, &ctx).await;
        assert!(FileWrite.run(args, &now).await.is_ok());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "evil");
    }

    /// An approved write of a protected path through a link, re-pointed after the executor's
    /// check at another protected file: the write is refused and the other file keeps its
    /// content (the path judged before consent is the one written).
    #[tokio::test]
    async fn an_approved_protected_write_re_pointed_after_the_check_is_refused() {
        let home = tempfile::tempdir().unwrap();
        let ws = home.path().join("workspace");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(home.path().join("config.yaml"), "approved").unwrap();
        std::fs::write(home.path().join("other.yaml"), "keep").unwrap();
        let mut ctx = ctx_in(&ws);
        ctx.ethan_home = Some(home.path().to_path_buf());
        std::os::unix::fs::symlink(home.path().join("config.yaml"), ws.join("link")).unwrap();
        let args = json!({"path": "link", "content": "evil"});
        ctx.assessment = FileWrite.assess(&args, &ctx).await;
        assert!(FileWrite.describe(&args, &ctx).always);
        ctx.approved_actions
            .push(ethan_core::tool::PROTECTED_PATHS_APPROVED.to_string());
        let repoint = |to: &std::path::Path| {
            let tmp = ws.join("link.new");
            std::os::unix::fs::symlink(to, &tmp).unwrap();
            std::fs::rename(&tmp, ws.join("link")).unwrap();
        };
        repoint(&home.path().join("other.yaml"));
        let r: crate::ToolResult = FileWrite.run(args.clone(), &ctx).await.into();
        assert!(r.error.unwrap().contains("changed after it was checked"));
        assert_eq!(
            std::fs::read_to_string(home.path().join("other.yaml")).unwrap(),
            "keep"
        );
    }

    /// The same, re-pointed at a protected file that does not exist yet: nothing is created
    /// there either (the file judged is opened, and created only where it was judged to be;
    /// before, the open created the new target before the check refused the write).
    #[tokio::test]
    async fn an_approved_protected_write_re_pointed_creates_nothing_elsewhere() {
        let home = tempfile::tempdir().unwrap();
        let ws = home.path().join("workspace");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(home.path().join("config.yaml"), "approved").unwrap();
        let mut ctx = ctx_in(&ws);
        ctx.ethan_home = Some(home.path().to_path_buf());
        std::os::unix::fs::symlink(home.path().join("config.yaml"), ws.join("link")).unwrap();
        let args = json!({"path": "link", "content": "evil"});
        ctx.assessment = FileWrite.assess(&args, &ctx).await;
        ctx.approved_actions
            .push(ethan_core::tool::PROTECTED_PATHS_APPROVED.to_string());
        let created = home.path().join("planted.yaml");
        let tmp = ws.join("link.new");
        std::os::unix::fs::symlink(&created, &tmp).unwrap();
        std::fs::rename(&tmp, ws.join("link")).unwrap();
        let r: crate::ToolResult = FileWrite.run(args, &ctx).await.into();
        assert!(!r.ok, "{r:?}");
        assert!(!created.exists(), "the write created {}", created.display());
    }

    /// Attack (review): an approved write of a secret-looking name in the workspace (`.env`, a
    /// plain file), replaced after the executor's check by a hard link to a protected file
    /// (`$ETHAN_HOME/config.yaml`), renamed over it: no symlink is there for `O_NOFOLLOW` and
    /// the name still leads to the path judged, but the inode opened is not the one judged, so
    /// the write is refused (before, nothing compared them and the write replaced the config).
    #[tokio::test]
    async fn an_approved_protected_write_re_linked_after_the_check_writes_nothing_else() {
        let home = tempfile::tempdir().unwrap();
        let ws = home.path().join("workspace");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(home.path().join("config.yaml"), "keep").unwrap();
        std::fs::write(ws.join(".env"), "TOKEN=old").unwrap();
        let mut ctx = ctx_in(&ws);
        ctx.ethan_home = Some(home.path().to_path_buf());
        let args = json!({"path": ".env", "content": "evil"});
        ctx.assessment = FileWrite.assess(&args, &ctx).await;
        assert!(FileWrite.describe(&args, &ctx).always);
        ctx.approved_actions
            .push(ethan_core::tool::PROTECTED_PATHS_APPROVED.to_string());
        // After the check: the name becomes another name of the config (one rename).
        std::fs::hard_link(home.path().join("config.yaml"), ws.join(".env.new")).unwrap();
        std::fs::rename(ws.join(".env.new"), ws.join(".env")).unwrap();
        let r: crate::ToolResult = FileWrite.run(args, &ctx).await.into();
        assert_eq!(
            std::fs::read_to_string(home.path().join("config.yaml")).unwrap(),
            "keep",
            "the approved write of .env went into the config: {r:?}"
        );
        assert!(!r.ok, "{r:?}");
    }

    /// Attack (review): an approved protected write (`notes/sub/.env`) whose parent folder
    /// (`notes`) is swapped after the executor's check for a link to another folder (here
    /// `$ETHAN_HOME`): the folders are made without following a link, so the write is refused
    /// and nothing is made where the link leads (before, `create_dir_all` followed it and left
    /// `sub` there).
    #[tokio::test]
    async fn a_parent_folder_swapped_after_the_check_leaves_no_folders_elsewhere() {
        let home = tempfile::tempdir().unwrap();
        let ws = home.path().join("workspace");
        std::fs::create_dir_all(ws.join("notes")).unwrap();
        let mut ctx = ctx_in(&ws);
        ctx.ethan_home = Some(home.path().to_path_buf());
        let args = json!({"path": "notes/sub/.env", "content": "x"});
        ctx.assessment = FileWrite.assess(&args, &ctx).await;
        assert!(FileWrite.describe(&args, &ctx).always);
        ctx.approved_actions
            .push(ethan_core::tool::PROTECTED_PATHS_APPROVED.to_string());
        // After the check: `notes` becomes a link to $ETHAN_HOME.
        std::fs::rename(ws.join("notes"), ws.join("notes.old")).unwrap();
        std::os::unix::fs::symlink(home.path(), ws.join("notes")).unwrap();
        let r: crate::ToolResult = FileWrite.run(args, &ctx).await.into();
        assert!(!r.ok, "{r:?}");
        assert!(!home.path().join("sub/.env").exists());
        assert!(
            !home.path().join("sub").exists(),
            "the refused write made {}",
            home.path().join("sub").display()
        );
    }

    /// Control (review): an unprotected write whose name is replaced after the check by a hard
    /// link to a protected file is refused (the name's hard-link check at the run), and the
    /// protected file keeps its content.
    #[tokio::test]
    async fn an_unprotected_write_re_linked_to_a_protected_file_after_the_check_is_refused() {
        let home = tempfile::tempdir().unwrap();
        let ws = home.path().join("workspace");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(home.path().join("config.yaml"), "keep").unwrap();
        std::fs::write(ws.join("notes.txt"), "old").unwrap();
        let mut ctx = ctx_in(&ws);
        ctx.ethan_home = Some(home.path().to_path_buf());
        let args = json!({"path": "notes.txt", "content": "evil"});
        ctx.assessment = FileWrite.assess(&args, &ctx).await;
        std::fs::hard_link(home.path().join("config.yaml"), ws.join("notes.new")).unwrap();
        std::fs::rename(ws.join("notes.new"), ws.join("notes.txt")).unwrap();
        let r: crate::ToolResult = FileWrite.run(args, &ctx).await.into();
        assert!(!r.ok, "{r:?}");
        assert_eq!(
            std::fs::read_to_string(home.path().join("config.yaml")).unwrap(),
            "keep"
        );
    }
    /// Attack (review): the question of a protected write shows the text written and whether
    /// it appends, as `write_preview` does for any other write, after why the file is
    /// protected (before: the reason alone, and the owner approved `write ~/.ssh/…` whatever
    /// the call would append).
    #[test]
    fn a_protected_write_question_shows_the_text_and_whether_it_appends() {
        let home = tempfile::tempdir().unwrap();
        let ws = home.path().join("workspace");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join(".env"), "TOKEN=old\n").unwrap();
        let mut ctx = ctx_in(&ws);
        ctx.ethan_home = Some(home.path().to_path_buf());
        let args = json!({"path": ".env", "content": "EVIL=LINE-7c3e", "append": true});
        let plan = FileWrite.describe(&args, &ctx);
        assert!(plan.always);
        let asked = plan.consent.unwrap();
        assert!(asked.contains("EVIL=LINE-7c3e"), "the question: {asked}");
        assert!(asked.contains("append"), "the question: {asked}");
    }

    /// Control (review): an approved protected write whose name is a dangling link (to a file
    /// that does not exist yet) is judged as the link itself and refused at the open
    /// (`O_NOFOLLOW`); nothing is created where the link leads.
    #[tokio::test]
    async fn an_approved_write_of_a_dangling_link_creates_nothing_where_it_leads() {
        let home = tempfile::tempdir().unwrap();
        let ws = home.path().join("workspace");
        std::fs::create_dir_all(&ws).unwrap();
        let mut ctx = ctx_in(&ws);
        ctx.ethan_home = Some(home.path().to_path_buf());
        let planted = home.path().join("planted.yaml");
        std::os::unix::fs::symlink(&planted, ws.join(".env")).unwrap();
        let args = json!({"path": ".env", "content": "evil"});
        ctx.assessment = FileWrite.assess(&args, &ctx).await;
        ctx.approved_actions
            .push(ethan_core::tool::PROTECTED_PATHS_APPROVED.to_string());
        let r: crate::ToolResult = FileWrite.run(args, &ctx).await.into();
        assert!(!r.ok, "{r:?}");
        assert!(!planted.exists(), "the write created {}", planted.display());
    }
    /// Attack (review): the file judged replaced after the check by a FIFO (renamed over it):
    /// the open does not block (`O_NONBLOCK`), so the call is refused at once (before, the open
    /// waited for a reader until the tool's time limit and left its thread stuck in `open`).
    #[tokio::test(flavor = "multi_thread")]
    async fn a_fifo_swapped_in_after_the_check_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx_in(dir.path());
        let target = dir.path().join("notes.txt");
        std::fs::write(&target, "old").unwrap();
        let args = json!({"path": "notes.txt", "content": "x"});
        let mut judged = ctx.clone();
        judged.assessment = FileWrite.assess(&args, &ctx).await;
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.display().to_string()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        std::fs::rename(&fifo, &target).unwrap();
        let run = FileWrite.run(args, &judged);
        let r = tokio::time::timeout(std::time::Duration::from_secs(3), run).await;
        if r.is_err() {
            // Let the blocked open go (a reader appears), so the test can end.
            use std::os::unix::fs::OpenOptionsExt;
            let _reader = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&target)
                .unwrap();
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        let r: crate::ToolResult = r.expect("the write blocked on the FIFO").into();
        assert!(!r.ok, "{r:?}");
    }
}
