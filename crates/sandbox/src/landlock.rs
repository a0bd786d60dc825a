//! The kernel half of the shell sandbox: a Landlock ruleset (Linux ≥ 5.13, `landlock` crate)
//! that lets a shell command reach every file of the machine except the protected places
//! ([`super::protected::Protection::hidden_places`]), applied to the child between `fork` and
//! `exec`.
//!
//! Landlock only grants, so the ruleset is built as an allow-list around the hidden places: the
//! directories on the way down to a hidden place (`/`, `$HOME`, `$ETHAN_HOME`, …) may only be
//! listed, and every other entry beside them is granted whole — files, directories, devices.
//! What follows for a command:
//! - reading, writing, executing or linking anything inside a hidden place fails with `EACCES`
//!   whatever the spelling (`..`, globs, symlinks, `$HOME`, an interpreter), because the kernel
//!   checks the resolved file; a hard link cannot be made from a hidden file into the workspace
//!   (the `REFER` right is not granted there);
//! - the names inside the hidden places can still be listed (`ls ~/.ssh`), not read;
//! - new entries cannot be created directly in a listed-only directory (e.g. a new top-level
//!   file in `$HOME` when `$ETHAN_HOME` is `~/.ethan`); the workspace and everything else are
//!   writable as the user's permissions allow;
//! - a Landlock domain may not `ptrace` a process outside it, which also closes
//!   `/proc/<daemon pid>/environ`, `/mem` and `/fd/*` of the daemon — for a daemon running as
//!   an ordinary user. Root reads `/proc/<pid>/environ` past that check, so when the daemon runs
//!   as root the process directories of `/proc` are not granted at all (`ps` and
//!   `/proc/self/…` then fail inside commands; the rest of `/proc` works). On ABI 6 and later,
//!   signals to the daemon and abstract unix sockets outside the sandbox are refused too.
//!
//! The ruleset is built per command (the file system changes), in the parent; the child only
//! makes two async-signal-safe system calls (`prctl(PR_SET_NO_NEW_PRIVS)` and
//! `landlock_restrict_self`). `PR_SET_NO_NEW_PRIVS` means set-uid programs (`sudo`) do not gain
//! privileges inside the sandbox.

use super::protected::{HiddenPlace, Protection};
use landlock::{
    Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, ABI,
};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// The newest ABI whose rights are asked for; older kernels get what they support.
const TARGET_ABI: ABI = ABI::V6;

/// Most directory entries given a rule of their own for one command.
const MAX_RULES: usize = 20_000;

/// Whether this kernel enforces Landlock, and which ABI version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Enforced; the kernel's ABI version.
    Available(i64),
    /// Not enforced, and why (for `ethan doctor`).
    Unavailable(String),
}

impl Status {
    pub fn is_available(&self) -> bool {
        matches!(self, Status::Available(_))
    }
}

/// Ask the kernel (`landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`).
pub fn status() -> Status {
    // SAFETY: the documented version query; no pointer is dereferenced.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    };
    if v >= 1 {
        Status::Available(v)
    } else {
        let e = std::io::Error::last_os_error();
        let why = match e.raw_os_error() {
            Some(libc::ENOSYS) => "the kernel has no Landlock (built without it, or older than 5.13)".to_string(),
            Some(libc::EOPNOTSUPP) => {
                "Landlock is built into the kernel but not enabled at boot (add it to the lsm= boot parameter)".to_string()
            }
            _ => format!("Landlock is unavailable: {e}"),
        };
        Status::Unavailable(why)
    }
}

/// A ruleset ready to be applied in a child process.
#[derive(Debug)]
pub struct Prepared {
    fd: OwnedFd,
    /// How many rules it holds (for tests and logs).
    pub rules: usize,
}

impl Prepared {
    /// Apply to the calling process. Call only between `fork` and `exec`: it makes two
    /// async-signal-safe system calls and allocates nothing.
    ///
    /// # Errors
    /// The OS error of `prctl` or `landlock_restrict_self`.
    pub fn restrict_current_process(&self) -> std::io::Result<()> {
        let fd = self.fd.as_raw_fd();
        // SAFETY: plain system calls with integer arguments.
        unsafe {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

/// A ruleset that grants the whole tree but making device nodes: for an approved command whose
/// hidden places are hidden by mounts ([`super::mounts`]). Landlock then holds what it holds for
/// every restricted process: no mount changes (the hiding cannot be undone), no tracing of a
/// process outside the command, and on ABI 6 and later no signals or abstract unix sockets
/// outside it.
///
/// # Errors
/// A ruleset the kernel refused.
pub fn prepare_whole_tree() -> Result<Option<Prepared>, String> {
    let all = AccessFs::from_all(TARGET_ABI);
    // Every right but making device nodes: a node made anywhere would reach a disk or memory
    // past what `super::devices` hides.
    let granted = all & !(AccessFs::MakeBlock | AccessFs::MakeChar);
    let root = PathFd::new("/").map_err(|e| format!("/: {e}"))?;
    let ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(|e| e.to_string())?
        .scope(Scope::from_all(TARGET_ABI))
        .map_err(|e| e.to_string())?
        .create()
        .map_err(|e| e.to_string())?
        .add_rule(PathBeneath::new(root, granted))
        .map_err(|e| e.to_string())?;
    let fd: Option<OwnedFd> = ruleset.into();
    Ok(fd.map(|fd| Prepared { fd, rules: 1 }))
}

/// A ruleset that grants nothing: no file can be opened, listed or written (for the file
/// parser, which gets its input on a pipe).
///
/// # Errors
/// A ruleset the kernel refused.
pub fn prepare_nothing() -> Result<Option<Prepared>, String> {
    let ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(TARGET_ABI))
        .map_err(|e| e.to_string())?
        .scope(Scope::from_all(TARGET_ABI))
        .map_err(|e| e.to_string())?
        .create()
        .map_err(|e| e.to_string())?;
    let fd: Option<OwnedFd> = ruleset.into();
    Ok(fd.map(|fd| Prepared { fd, rules: 0 }))
}

/// Device files a command that runs without approval may open (read and write); every other
/// entry of `/dev` (disks, memory, ports) is left out for such a command.
const HARMLESS_DEVICES: &[&str] = &[
    "null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts", "shm",
];

/// Build the ruleset hiding `protection`'s places. `Ok(None)` when the kernel does not enforce
/// Landlock.
///
/// `writable`: `None` for a command the owner approved (everything beside the hidden places, as
/// the user's permissions allow); `Some(folders)` for a command that runs without approval: the
/// rest of the machine is then read-only, only these folders (the workspace, the private temp
/// folder) and the harmless devices ([`HARMLESS_DEVICES`]) can be written, and no other device
/// nor, for root, `/proc/kcore` can be opened.
///
/// # Errors
/// A ruleset the kernel refused, or more than [`MAX_RULES`] entries to grant.
pub fn prepare(
    protection: &Protection,
    writable: Option<&[PathBuf]>,
) -> Result<Option<Prepared>, String> {
    let mut hidden = protection.hidden_places();
    // SAFETY: geteuid cannot fail and touches no memory.
    let root = unsafe { libc::geteuid() } == 0;
    let read_only = writable.is_some();
    if read_only {
        if let Ok(rd) = std::fs::read_dir("/dev") {
            hidden.extend(
                rd.flatten()
                    .filter(|e| {
                        !HARMLESS_DEVICES.contains(&e.file_name().to_string_lossy().as_ref())
                    })
                    .map(|e| HiddenPlace {
                        path: e.path(),
                        except: None,
                    }),
            );
        }
        if root {
            hidden.push(HiddenPlace {
                path: PathBuf::from("/proc/kcore"),
                except: None,
            });
        }
    }
    let grants = plan(&hidden, root)?;
    let all = AccessFs::from_all(TARGET_ABI);
    let file = AccessFs::from_file(TARGET_ABI);
    let read = AccessFs::from_read(TARGET_ABI);
    let read_file = read & file;
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(|e| e.to_string())?
        .scope(Scope::from_all(TARGET_ABI))
        .map_err(|e| e.to_string())?
        .create()
        .map_err(|e| e.to_string())?;
    let mut rules = 0;
    // A writable folder gets a rule of its own only when no hidden place lies inside it (a rule
    // covers its whole subtree); otherwise the entries planned inside it are made writable.
    let writable = writable.unwrap_or_default();
    let (clear, mixed): (Vec<&PathBuf>, Vec<&PathBuf>) = writable
        .iter()
        .filter(|w| w.is_dir())
        .partition(|w| !hidden.iter().any(|h| h.path.starts_with(w)));
    let extra: Vec<Planned> = clear
        .into_iter()
        .map(|w| Planned {
            path: w.clone(),
            kind: Grant::Whole,
            is_dir: true,
        })
        .collect();
    for (g, forced_write) in grants
        .iter()
        .map(|g| {
            let inside_writable = mixed.iter().any(|w| g.path.starts_with(w));
            (g, g.path.starts_with("/dev") || inside_writable)
        })
        .chain(extra.iter().map(|g| (g, true)))
    {
        let writes = !read_only || forced_write;
        let access = match g.kind {
            Grant::ListOnly => AccessFs::ReadDir.into(),
            Grant::Whole if g.is_dir && writes => all & !(AccessFs::MakeBlock | AccessFs::MakeChar),
            Grant::Whole if g.is_dir => read,
            Grant::Whole if writes => file,
            Grant::Whole => read_file,
        };
        // An entry that vanished since it was listed needs no rule.
        let Ok(fd) = PathFd::new(&g.path) else {
            continue;
        };
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| format!("{}: {e}", g.path.display()))?;
        rules += 1;
    }
    let fd: Option<OwnedFd> = ruleset.into();
    Ok(fd.map(|fd| Prepared { fd, rules }))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Grant {
    /// Only `READ_DIR` (a directory on the way down to a hidden place).
    ListOnly,
    /// Every right (the whole subtree).
    Whole,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Planned {
    path: PathBuf,
    kind: Grant,
    is_dir: bool,
}

/// The grants that cover everything but `hidden`: walk down from `/` through the directories
/// that contain (or, inside a hidden place, lead to an exception of) a hidden place. With
/// `hide_processes`, the numbered process directories of `/proc` are left out as well.
fn plan(hidden: &[HiddenPlace], hide_processes: bool) -> Result<Vec<Planned>, String> {
    let mut hidden = hidden.to_vec();
    if hide_processes {
        if let Ok(rd) = std::fs::read_dir("/proc") {
            hidden.extend(
                rd.flatten()
                    .filter(|e| {
                        e.file_name()
                            .to_string_lossy()
                            .bytes()
                            .all(|b| b.is_ascii_digit())
                    })
                    .map(|e| HiddenPlace {
                        path: e.path(),
                        except: None,
                    }),
            );
        }
    }
    let mut out = Vec::new();
    walk(Path::new("/"), &hidden, &mut out)?;
    Ok(out)
}

/// What `path` is for the walk.
enum Role {
    /// Hidden: no grant.
    Hidden,
    /// On the way to a hidden place or to an exception inside one: list it, then look inside.
    Mixed,
    /// Grant it whole.
    Open,
}

fn role(path: &Path, hidden: &[HiddenPlace]) -> Role {
    let mut mixed = false;
    let mut inside = false;
    for h in hidden {
        if path.starts_with(&h.path) {
            match &h.except {
                Some(e) if path.starts_with(e) => {}
                Some(e) if e.starts_with(path) => mixed = true,
                _ => inside = true,
            }
        } else if h.path.starts_with(path) {
            mixed = true;
        }
    }
    if inside {
        Role::Hidden
    } else if mixed {
        Role::Mixed
    } else {
        Role::Open
    }
}

fn walk(dir: &Path, hidden: &[HiddenPlace], out: &mut Vec<Planned>) -> Result<(), String> {
    out.push(Planned {
        path: dir.to_path_buf(),
        kind: Grant::ListOnly,
        is_dir: true,
    });
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(ft) = entry.file_type() else { continue };
        // A symlink needs no rule: the kernel checks the file it resolves to.
        if ft.is_symlink() {
            continue;
        }
        match role(&path, hidden) {
            Role::Hidden => {}
            Role::Mixed if ft.is_dir() => walk(&path, hidden, out)?,
            Role::Mixed => {}
            Role::Open => out.push(Planned {
                path,
                kind: Grant::Whole,
                is_dir: ft.is_dir(),
            }),
        }
        if out.len() > MAX_RULES {
            return Err(format!(
                "more than {MAX_RULES} entries beside the protected places (under {})",
                dir.display()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_lists_the_way_down_and_grants_the_rest() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        let ws = home.join("workspace");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(home.join("spill")).unwrap();
        std::fs::write(home.join("config.yaml"), "x").unwrap();
        std::fs::create_dir_all(root.path().join("other")).unwrap();
        let hidden = vec![HiddenPlace {
            path: home.clone(),
            except: Some(ws.clone()),
        }];
        let planned = plan(&hidden, true).unwrap();
        let kind_of = |p: &Path| planned.iter().find(|g| g.path == p).map(|g| g.kind);
        assert_eq!(kind_of(Path::new("/")), Some(Grant::ListOnly));
        assert_eq!(kind_of(root.path()), Some(Grant::ListOnly));
        assert_eq!(kind_of(&home), Some(Grant::ListOnly));
        assert_eq!(kind_of(&ws), Some(Grant::Whole));
        assert_eq!(kind_of(&root.path().join("other")), Some(Grant::Whole));
        assert_eq!(kind_of(&home.join("config.yaml")), None);
        assert_eq!(kind_of(&home.join("spill")), None);
        // Process directories are left out; the rest of /proc is granted.
        assert_eq!(kind_of(Path::new("/proc")), Some(Grant::ListOnly));
        assert_eq!(kind_of(Path::new("/proc/1")), None);
        assert_eq!(kind_of(Path::new("/proc/meminfo")), Some(Grant::Whole));
    }
}
