//! What the kernel exposes past the sandbox, closed for every command — approved ones of a root
//! daemon included — inside its own mount namespace (run by the sandbox helper after `/proc` is
//! mounted, before Landlock):
//! - **block devices and raw memory**: every block device under `/dev` and `/dev/mem`,
//!   `/dev/kmem`, `/dev/port` are covered (`/dev/null` on a `nodev` mount: `EACCES`), and every
//!   mount but `/dev` and `/dev/pts` is made `nodev`, so a device node found or made anywhere
//!   else opens nothing. A disk read raw would show the hidden config's bytes.
//! - **the kernel's settings and user-mode helpers**: `/proc/sys`, `/proc/sysrq-trigger` and
//!   `/sys` are read-only and `/proc/kcore` is covered. A `core_pattern`, `modprobe` or
//!   `uevent_helper` written there would run a program as root outside every namespace.
//!
//! Landlock adds the last piece: no command may create a device node ([`super::landlock`]).

use super::mounts::{hide_file, seal};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// `MOUNT_ATTR_NODEV` of `mount_setattr(2)`.
const MOUNT_ATTR_NODEV: u64 = 0x4;
/// `MOUNT_ATTR_RDONLY`.
const MOUNT_ATTR_RDONLY: u64 = 0x1;

/// `struct mount_attr` of `mount_setattr(2)` (Linux 5.12).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Set and clear mount attributes on the mount at `path` (and those below it, `recursive`).
fn set_attr(path: &Path, recursive: bool, set: u64, clear: u64) -> Result<(), String> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("{}: NUL in path", path.display()))?;
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { libc::AT_RECURSIVE } else { 0 };
    // SAFETY: a NUL-terminated path and a `struct mount_attr` alive for the call, with its size.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c.as_ptr(),
            flags as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if r != 0 {
        return Err(format!(
            "mount_setattr on {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Close the kernel's ways past the sandbox (see the module doc).
///
/// # Errors
/// A mount change that failed: the command must not run.
pub fn guard() -> Result<(), String> {
    let mount_points = mount_points()?;
    // Where /dev is no mount of its own, the root's mount holds it: leave that one alone.
    let dev_mounted = mount_points.iter().any(|m| m == Path::new("/dev"));
    for mount_point in mount_points {
        if mount_point.starts_with("/dev") || (!dev_mounted && mount_point == Path::new("/")) {
            continue;
        }
        match set_attr(&mount_point, false, MOUNT_ATTR_NODEV, 0) {
            Ok(()) => {}
            // Covered by a later mount, or gone.
            Err(_) if !mount_point.exists() => {}
            Err(e) => return Err(e),
        }
    }
    for path in ["/proc/sys", "/proc/sysrq-trigger"] {
        if Path::new(path).exists() {
            seal(Path::new(path))?;
        }
    }
    if Path::new("/proc/kcore").exists() {
        hide_file(Path::new("/proc/kcore"))?;
    }
    if Path::new("/sys/kernel").is_dir() {
        set_attr(Path::new("/sys"), true, MOUNT_ATTR_RDONLY, 0)?;
    }
    for device in raw_devices(Path::new("/dev")) {
        hide_file(&device)?;
    }
    Ok(())
}

/// The mount points of this mount namespace (`/proc/self/mountinfo`, field 5, octal escapes
/// decoded), in order.
fn mount_points() -> Result<Vec<PathBuf>, String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
    Ok(info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| PathBuf::from(std::ffi::OsString::from(unescape(p))))
        .collect())
}

/// `\040`-style escapes of mountinfo.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|d| (b'0'..=b'7').contains(d));
        if octal {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Block devices and the raw memory devices (`mem`, `kmem`, `port`: character 1:1, 1:2, 1:4)
/// under `dir`, symlinks not followed, `pts`, `shm` and `mqueue` skipped.
fn raw_devices(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(meta) = e.path().symlink_metadata() else {
                continue;
            };
            let ft = meta.file_type();
            if ft.is_dir() {
                let name = e.file_name();
                if !(d == dir && ["pts", "shm", "mqueue"].iter().any(|n| name == *n)) {
                    stack.push(e.path());
                }
            } else if ft.is_block_device()
                || (ft.is_char_device() && [(1, 1), (1, 2), (1, 4)].contains(&dev_numbers(&meta)))
            {
                out.push(e.path());
            }
        }
    }
    out
}

fn dev_numbers(meta: &std::fs::Metadata) -> (u32, u32) {
    let rdev = meta.rdev();
    (libc::major(rdev), libc::minor(rdev))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape("/mnt/a\\040b"), "/mnt/a b");
        assert_eq!(unescape("/x\\134y"), "/x\\y");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape("/end\\04"), "/end\\04");
    }
}
