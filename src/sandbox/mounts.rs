//! The mount half of the shell sandbox, run by the sandbox helper ([`super::helper`]) inside
//! the command's own mount namespace, before Landlock and seccomp:
//! - [`hide`]: an empty, read-only `tmpfs` over each hidden folder (`$ETHAN_HOME`, `~/.ssh`, …)
//!   and `/dev/null` on a `nodev` mount over each hidden file (`~/.netrc`, a config file kept
//!   outside `$ETHAN_HOME`: opening it fails with `EACCES`). The workspace, when it lies inside
//!   a hidden folder, is mounted back at its place. Nothing is granted around a hidden place,
//!   so the folders that contain one (`$HOME` when `$ETHAN_HOME` is `~/.ethan`) stay writable.
//! - [`fresh_proc`]: a `/proc` of the command's PID namespace (the daemon has no entry there).
//! - [`seal_repositories`]: every `.git` found in the writable folders, mounted read-only for a
//!   command that runs without approval (hooks, config and info cannot be planted).
//!
//! The command cannot undo these mounts: Landlock refuses mount changes to a restricted process
//! and the seccomp filter refuses every mount call.

use super::protected::Protection;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Most directory entries looked at when searching for repositories.
pub const SEAL_SCAN_LIMIT: usize = 20_000;

fn c(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{}: NUL in path", path.display()))
}

fn mount(
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
fn read_only(target: &Path, extra: libc::c_ulong) -> Result<(), String> {
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
            mount(
                Some(Path::new("/dev/null")),
                &place.path,
                None,
                libc::MS_BIND,
                None,
            )?;
            read_only(&place.path, libc::MS_NODEV | libc::MS_NOEXEC)?;
        }
    }
    Ok(())
}

/// An empty read-only `tmpfs` over `dir`; `except` (inside it) mounted back at its place.
fn hide_folder(dir: &Path, except: Option<&Path>) -> Result<(), String> {
    // Keep a handle on what is to be put back before it is covered.
    let kept = except
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

/// Mount every `.git` (folder or `gitdir:` file) found under `roots` read-only, looking at most
/// [`SEAL_SCAN_LIMIT`] entries; returns how many were sealed. Symlinks are not followed.
pub fn seal_repositories(roots: &[std::path::PathBuf]) -> usize {
    let mut budget = SEAL_SCAN_LIMIT;
    let mut sealed = 0;
    let mut stack: Vec<std::path::PathBuf> = roots.to_vec();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if budget == 0 {
                return sealed;
            }
            budget -= 1;
            let Ok(ft) = entry.file_type() else { continue };
            let path = entry.path();
            if entry.file_name() == ".git" && (ft.is_dir() || ft.is_file()) {
                if mount(Some(&path), &path, None, libc::MS_BIND | libc::MS_REC, None)
                    .and_then(|_| read_only(&path, libc::MS_NODEV))
                    .is_ok()
                {
                    sealed += 1;
                }
            } else if ft.is_dir() {
                stack.push(path);
            }
        }
    }
    sealed
}
