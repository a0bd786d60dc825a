//! What a tool call may reach on this machine.
//!
//! - [`protected`]: the one list of protected places and the one resolver (file and search
//!   tools, the shell classifier and the kernel sandbox agree on it);
//! - [`landlock`]: the kernel sandbox of shell commands (Landlock), which hides `$ETHAN_HOME`
//!   (less the workspace) and the user's credential places from every command;
//! - [`network`]: no network for commands that run without the owner's approval;
//! - [`seccomp`]: the system-call allow-lists of commands with and without approval;
//! - [`mounts`]: the protected places hidden by mounts, a command's own `/dev/shm` and
//!   pseudo-terminals;
//! - [`repos`]: every repository of the writable folders sealed, its config shown with only
//!   the settings that run no program ([`gitconfig`]), for a command without approval;
//! - [`devices`]: block devices, raw memory and the kernel's settings out of every command's
//!   reach;
//! - [`helper`]: the daemon's binary in its helper mode, which puts each command in its own
//!   namespaces (nothing it starts outlives it), applies the layers above and runs it; it also
//!   parses untrusted files under resource limits;
//! - [`env`]: the cleared environment of shell commands;
//! - [`doctor`]: what `ethan doctor` says about all this;
//! - [`make_private_tmp`]: the daemon's own temp folder (mode 0700), the one place outside the
//!   workspace where `file_write` needs no consent, and the `TMPDIR` of shell commands; removed
//!   when the daemon stops ([`remove_private_tmp`]), and those of daemons that are gone at the
//!   next start ([`sweep_private_tmps`]).
//! - [`settings`]: what the sandbox found at start (the private temp folder, the probes of the
//!   kernel, the places protected besides Ethan's home), a value the wiring step gives the agent,
//!   whose tools see it in their context.

pub mod devices;
pub mod doctor;
pub mod env;
pub mod gitconfig;
pub mod helper;
pub mod landlock;
pub mod mounts;
pub mod network;
pub mod protected;
pub mod repos;
pub mod seccomp;
pub mod settings;

use std::path::{Path, PathBuf};

/// The name of a private temp folder starts with this, then `<pid>-<8 hex digits>`.
const PRIVATE_TMP_PREFIX: &str = "ethan-";

/// Make the daemon's private temp folder, `<system temp>/ethan-<pid>-<random>` with mode 0700
/// (`None` when it cannot be made; callers then fall back to asking). [`settings::probe`]
/// makes it once, at start.
pub fn make_private_tmp() -> Option<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let base = std::env::temp_dir();
    for _ in 0..8 {
        let name = format!(
            "{PRIVATE_TMP_PREFIX}{}-{}",
            std::process::id(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let dir = base.join(name);
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Some(protected::real_path(&dir)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                tracing::warn!(
                    "cannot create a private temp folder under {}: {e}",
                    base.display()
                );
                return None;
            }
        }
    }
    None
}

/// Remove the private temp folder `dir` (the daemon calls this when it stops).
pub fn remove_private_tmp(dir: &Path) {
    if let Err(e) = remove_tree(dir) {
        tracing::debug!("could not remove {}: {e}", dir.display());
    }
}

/// Remove `dir` and everything in it, also what a command left unreadable or unwritable to its
/// owner (`chmod 000` on a subfolder): on a first failure every folder is made `rwx` for the
/// owner (symlinks not followed) and the removal tried again.
fn remove_tree(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if std::fs::remove_dir_all(dir).is_ok() {
        return Ok(());
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700));
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
    }
    std::fs::remove_dir_all(dir)
}

/// Remove the private temp folders in `base` of daemons that are gone: named
/// `ethan-<pid>-<8 hex digits>`, owned by this user, and `<pid>` is no running process (or
/// this one's from before a restart under the same pid, which cannot be told apart and is kept).
/// Returns how many were removed.
pub fn sweep_private_tmps(base: &Path) -> usize {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(base) else {
        return 0;
    };
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = private_tmp_pid(&name.to_string_lossy()) else {
            continue;
        };
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        if !meta.is_dir() || meta.uid() != me || process_alive(pid) {
            continue;
        }
        if remove_tree(&entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// The pid in a private temp folder's name (`ethan-<pid>-<8 hex digits>`).
fn private_tmp_pid(name: &str) -> Option<i32> {
    let rest = name.strip_prefix(PRIVATE_TMP_PREFIX)?;
    let (pid, random) = rest.split_once('-')?;
    let hex = random.len() == 8 && random.bytes().all(|b| b.is_ascii_hexdigit());
    (hex && !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
        .then(|| pid.parse().ok())
        .flatten()
}

fn process_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_temp_folders_of_daemons_that_are_gone_are_swept() {
        let base = tempfile::tempdir().unwrap();
        let mine = base
            .path()
            .join(format!("ethan-{}-0123abcd", std::process::id()));
        // Pid 2^22+ is above the kernel's largest pid: no such process.
        let gone = base.path().join("ethan-4194999-89abcdef");
        let other = base.path().join("ethan-turn-abc");
        for d in [&mine, &gone, &other] {
            std::fs::create_dir(d).unwrap();
        }
        std::fs::write(gone.join("left.txt"), "x").unwrap();
        // A subfolder a command left without any permission.
        std::fs::create_dir_all(gone.join("locked/inner")).unwrap();
        std::fs::write(gone.join("locked/inner/f"), "x").unwrap();
        use std::os::unix::fs::PermissionsExt;
        for d in ["locked/inner", "locked"] {
            std::fs::set_permissions(gone.join(d), std::fs::Permissions::from_mode(0o000)).unwrap();
        }
        assert_eq!(sweep_private_tmps(base.path()), 1);
        assert!(mine.exists() && other.exists() && !gone.exists());
        assert_eq!(private_tmp_pid("ethan-12-0123abcd"), Some(12));
        assert_eq!(private_tmp_pid("ethan-12-0123abc"), None);
        assert_eq!(private_tmp_pid("ethan-turn-0123abcd"), None);
    }

    /// Root ignores permissions, so as root the removal of a folder left `chmod 000` is tried
    /// as an ordinary user (`nobody`), in a child process.
    #[test]
    fn a_folder_left_without_permissions_is_removed_by_an_ordinary_user() {
        use std::os::unix::fs::PermissionsExt;
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return only_the_temp_folders_of_daemons_that_are_gone_are_swept();
        }
        let base = tempfile::tempdir().unwrap();
        let gone = base.path().join("ethan-4194997-0badbeef");
        std::fs::create_dir_all(gone.join("locked/inner")).unwrap();
        std::fs::write(gone.join("locked/inner/f"), "x").unwrap();
        let nobody = 65534;
        for p in [
            base.path(),
            &gone,
            &gone.join("locked"),
            &gone.join("locked/inner"),
        ] {
            std::os::unix::fs::chown(p, Some(nobody), Some(nobody)).unwrap();
        }
        for d in ["locked/inner", "locked"] {
            std::fs::set_permissions(gone.join(d), std::fs::Permissions::from_mode(0o000)).unwrap();
        }
        let path = base.path().to_path_buf();
        // SAFETY: the child drops to nobody, sweeps and exits; it takes no lock another thread
        // could hold (the file system calls allocate only through the C library's fork-safe
        // allocator).
        let status = match unsafe { libc::fork() } {
            0 => {
                let ok = unsafe { libc::setgid(nobody) == 0 && libc::setuid(nobody) == 0 };
                let removed = if ok { sweep_private_tmps(&path) } else { 99 };
                unsafe { libc::_exit(removed as i32) }
            }
            pid => {
                let mut status = 0;
                unsafe { libc::waitpid(pid, &mut status, 0) };
                libc::WEXITSTATUS(status)
            }
        };
        assert_eq!(status, 1);
        assert!(!gone.exists());
    }
}
