//! The mount half of the shell sandbox, run by the sandbox helper ([`super::helper`]) inside
//! the command's own mount namespace, before Landlock and seccomp:
//! - [`hide`]: an empty, read-only `tmpfs` over each hidden folder (`$ETHAN_HOME`, `~/.ssh`, …)
//!   and `/dev/null` on a `nodev` mount over each hidden file (`~/.netrc`, a config file kept
//!   outside `$ETHAN_HOME`: opening it fails with `EACCES`). The workspace, when it lies inside
//!   a hidden folder, is mounted back at its place. Nothing is granted around a hidden place,
//!   so the folders that contain one (`$HOME` when `$ETHAN_HOME` is `~/.ethan`) stay writable.
//! - [`fresh_proc`]: a `/proc` of the command's PID namespace (the daemon has no entry there).
//! - [`pin`], [`seal`], [`show_files`]: the primitives [`super::repos`] seals repositories with;
//! - [`private_shm`], [`private_pts`]: a `/dev/shm` and pseudo-terminals of the command's own,
//!   for a command that runs without approval.
//!
//! The command cannot undo these mounts: Landlock refuses mount changes to a restricted process
//! and the seccomp filter refuses every mount call.

use super::protected::Protection;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

fn c(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{}: NUL in path", path.display()))
}

pub(super) fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> Result<(), String> {
    let source = source.map(c).transpose()?;
    let target_c = c(target)?;
    let fstype = fstype.map(|f| CString::new(f).unwrap_or_default());
    let data = data.map(|d| CString::new(d).unwrap_or_default());
    let ptr = |o: &Option<CString>| o.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
    // SAFETY: every pointer is a NUL-terminated string alive for the call, or null.
    let r = unsafe {
        libc::mount(
            ptr(&source),
            target_c.as_ptr(),
            ptr(&fstype),
            flags,
            ptr(&data).cast(),
        )
    };
    if r != 0 {
        return Err(format!(
            "mount on {}: {}",
            target.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Make every mount private to this namespace (nothing mounted here shows outside).
pub fn private_root() -> Result<(), String> {
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )
}

/// Mount a `/proc` of the current PID namespace over `/proc`.
pub fn fresh_proc() -> Result<(), String> {
    mount(
        Some(Path::new("proc")),
        Path::new("/proc"),
        Some("proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    )
}

/// Remount the bind mount at `target` read-only (plus `extra` flags).
pub(super) fn read_only(target: &Path, extra: libc::c_ulong) -> Result<(), String> {
    mount(
        None,
        target,
        None,
        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | libc::MS_NOSUID | extra,
        None,
    )
}

/// Hide `protection`'s places (see the module doc).
pub fn hide(protection: &Protection) -> Result<(), String> {
    for place in protection.hidden_places() {
        let Ok(meta) = std::fs::symlink_metadata(&place.path) else {
            continue;
        };
        if meta.is_dir() {
            hide_folder(&place.path, place.except.as_deref())?;
        } else {
            hide_file(&place.path)?;
        }
    }
    Ok(())
}

/// `/dev/null` on a `nodev` mount over the file `path`: opening it fails with `EACCES`.
pub fn hide_file(path: &Path) -> Result<(), String> {
    mount(
        Some(Path::new("/dev/null")),
        path,
        None,
        libc::MS_BIND,
        None,
    )?;
    read_only(path, libc::MS_NODEV | libc::MS_NOEXEC)
}

/// An empty read-only `tmpfs` over `dir`; `except` (inside it) mounted back at its place.
fn hide_folder(dir: &Path, except: Option<&Path>) -> Result<(), String> {
    // Keep a handle on what is to be put back before it is covered (a workspace not made yet
    // has nothing to put back).
    let kept = except
        .filter(|e| e.exists())
        .map(|e| {
            std::fs::File::open(e)
                .map(|f| (e.to_path_buf(), f))
                .map_err(|err| format!("{}: {err}", e.display()))
        })
        .transpose()?;
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    mount(
        Some(Path::new("tmpfs")),
        dir,
        Some("tmpfs"),
        flags,
        Some("size=64k,mode=755"),
    )?;
    if let Some((path, file)) = kept {
        use std::os::fd::AsRawFd;
        std::fs::create_dir_all(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let source = format!("/proc/self/fd/{}", file.as_raw_fd());
        mount(
            Some(Path::new(&source)),
            &path,
            None,
            libc::MS_BIND | libc::MS_REC,
            None,
        )?;
    }
    mount(
        None,
        dir,
        None,
        libc::MS_REMOUNT | libc::MS_RDONLY | flags,
        None,
    )
}

/// Enter the working directory again by its path, so it lies in the new mounts: a directory
/// entered before them (the helper's, inherited) still points into the tree underneath, where
/// a sealed `.git` is not sealed.
pub fn reenter_working_directory() -> Result<(), String> {
    let cwd = std::env::current_dir().map_err(|e| format!("the working directory: {e}"))?;
    std::env::set_current_dir(&cwd).map_err(|e| format!("{}: {e}", cwd.display()))
}

/// Mount `dir` onto itself: a mount point cannot be renamed or removed (`EBUSY`), so what lies
/// under it stays where it is.
pub fn pin(dir: &Path) -> Result<(), String> {
    mount(Some(dir), dir, None, libc::MS_BIND, None)
}

/// Mount `place` (a folder with whatever is mounted inside it, or a file) read-only onto itself.
pub fn seal(place: &Path) -> Result<(), String> {
    mount(Some(place), place, None, libc::MS_BIND | libc::MS_REC, None)?;
    read_only(place, libc::MS_NODEV)
}

/// Show each file of `files` with the given text instead of its own, read-only: the texts are
/// written to a scratch `tmpfs` mounted over `/proc` for the moment, each is mounted over its
/// file, and the scratch is detached (the mounted files live on; nothing else reaches them).
pub fn show_files(files: &[(PathBuf, String)]) -> Result<(), String> {
    if files.is_empty() {
        return Ok(());
    }
    let scratch = Path::new("/proc");
    mount(
        Some(Path::new("tmpfs")),
        scratch,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        Some("size=64m,mode=700"),
    )?;
    let shown = files
        .iter()
        .enumerate()
        .try_for_each(|(i, (target, text))| {
            let source = scratch.join(format!("f{i}"));
            std::fs::write(&source, text).map_err(|e| format!("{}: {e}", source.display()))?;
            mount(Some(&source), target, None, libc::MS_BIND, None)?;
            read_only(target, libc::MS_NODEV | libc::MS_NOEXEC)
        });
    let detached = unmount_detached(scratch);
    shown.and(detached)
}

fn unmount_detached(target: &Path) -> Result<(), String> {
    let c = c(target)?;
    // SAFETY: a NUL-terminated path alive for the call.
    if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
        return Err(format!(
            "unmounting {}: {}",
            target.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// A `/dev/shm` of the command's own (a small `tmpfs` that goes with its mount namespace), for a
/// command that runs without approval: nothing it writes there outlives it or fills the
/// machine's memory.
pub fn private_shm() -> Result<(), String> {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        return Ok(());
    }
    mount(
        Some(Path::new("tmpfs")),
        shm,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        Some(&format!("size={PRIVATE_SHM_BYTES},mode=1777")),
    )
}

/// Size of a command's own `/dev/shm`.
pub const PRIVATE_SHM_BYTES: u64 = 64 << 20;

/// Pseudo-terminals of the command's own (a new `devpts` instance, `/dev/ptmx` opening it), for
/// a command that runs without approval: the terminals of the machine (the one `ethan chat`
/// runs in) are not there to read from or type into.
pub fn private_pts() -> Result<(), String> {
    let pts = Path::new("/dev/pts");
    if !pts.is_dir() {
        return Ok(());
    }
    mount(
        Some(Path::new("devpts")),
        pts,
        Some("devpts"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    )?;
    mount(
        Some(Path::new("/dev/pts/ptmx")),
        Path::new("/dev/ptmx"),
        None,
        libc::MS_BIND,
        None,
    )
}
