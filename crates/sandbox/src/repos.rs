//! The repositories in the folders a command without approval may write (the workspace and the
//! private temp folder), as the sandbox helper shows them to such a command, inside its own mount
//! namespace:
//! - **found whatever the folder holds**: every folder is searched, breadth-first, the
//!   workspace first, for `.git` folders and files, bare repositories (a folder with `HEAD`),
//!   the common folders their `commondir` names and the targets of `gitdir:` files, and the
//!   repositories nested in them (`modules/`, `worktrees/`). A folder that cannot be searched
//!   through within [`SCAN_LIMIT`] entries, or that holds more than [`REPO_LIMIT`] repositories,
//!   is made read-only whole for the command instead (failing closed);
//! - **sealed**: each is mounted read-only, a `.git` file too, and a `.git` symlink makes its
//!   folder read-only; every folder between the writable root and a sealed place is mounted
//!   onto itself, so it cannot be renamed or removed (`EBUSY`) and a writable copy cannot be put
//!   in its place;
//! - **unplantable by what it reads**: every `config` and `config.worktree` of them is shown
//!   with only the settings that never run a program ([`super::gitconfig`]), so a repository
//!   written without approval (a file in the private temp folder needs none) cannot make a
//!   read-only `git diff` or `git log` run `diff.external`, a driver's `textconv` or a filter.
//!
//! Commands the owner approved see the repositories as they are (and write them).

use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

/// Most directory entries looked at in one writable folder.
pub const SCAN_LIMIT: usize = 250_000;

/// Most repositories sealed in one writable folder.
pub const REPO_LIMIT: usize = 2_000;

/// Largest config file shown (a larger one is shown empty).
const CONFIG_LIMIT: u64 = 1 << 20;

/// What a search of one writable folder found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Found {
    /// Places mounted read-only whole: git directories, `.git` files, folders with a `.git`
    /// symlink.
    pub sealed: BTreeSet<PathBuf>,
    /// Config files shown sanitised (inside the sealed places, or a `commondir` target).
    pub configs: BTreeSet<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// An ordinary folder.
    Plain,
    /// A git directory: sealed when `top`, else inside one that is (its configs only).
    GitDir { top: bool },
    /// Inside a git directory (`modules/`, `worktrees/`): git directories found are not sealed
    /// again.
    Inside,
}

/// Search `root` (one of `roots`, the writable folders).
///
/// # Errors
/// More than [`SCAN_LIMIT`] entries or [`REPO_LIMIT`] repositories, or a folder that cannot be
/// read for another reason than vanishing or not being ours to read.
pub fn scan(root: &Path, roots: &[PathBuf]) -> Result<Found, String> {
    scan_within(root, roots, SCAN_LIMIT)
}

fn scan_within(root: &Path, roots: &[PathBuf], limit: usize) -> Result<Found, String> {
    let mut found = Found::default();
    let mut seen_gitdirs = BTreeSet::new();
    let mut queue = VecDeque::from([(root.to_path_buf(), Kind::Plain)]);
    let mut budget = limit;
    while let Some((dir, kind)) = queue.pop_front() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            // Gone meanwhile, or not ours (another user's folder we cannot list, which the
            // command cannot write either).
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
                ) =>
            {
                continue
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => continue,
            Err(e) => return Err(format!("{}: {e}", dir.display())),
        };
        let mut children = Vec::new();
        for entry in entries.flatten() {
            if budget == 0 {
                return Err(format!(
                    "more than {limit} entries to search for repositories"
                ));
            }
            budget -= 1;
            let Ok(ft) = entry.file_type() else { continue };
            children.push((entry.file_name(), ft));
        }
        let has_head = children.iter().any(|(n, ft)| n == "HEAD" && !ft.is_dir());
        let kind = match kind {
            Kind::Plain if has_head => Kind::GitDir { top: true },
            Kind::Inside if has_head => Kind::GitDir { top: false },
            k => k,
        };
        if let Kind::GitDir { top } = kind {
            if !seen_gitdirs.insert(dir.clone()) {
                continue;
            }
            if seen_gitdirs.len() > REPO_LIMIT {
                return Err(format!("more than {REPO_LIMIT} repositories"));
            }
            if top {
                found.sealed.insert(dir.clone());
            }
            for name in ["config", "config.worktree"] {
                found.configs.insert(dir.join(name));
            }
            if let Some(common) = pointer(&dir.join("commondir"), "", &dir) {
                if within(&common, roots) {
                    queue.push_back((common, Kind::GitDir { top: true }));
                }
            }
        }
        for (name, ft) in children {
            let path = dir.join(&name);
            match kind {
                Kind::GitDir { .. } => {
                    if ft.is_dir() && (name == "modules" || name == "worktrees") {
                        queue.push_back((path, Kind::Inside));
                    }
                }
                Kind::Inside => {
                    if ft.is_dir() {
                        queue.push_back((path, Kind::Inside));
                    }
                }
                Kind::Plain if name == ".git" => {
                    if ft.is_dir() {
                        queue.push_back((path, Kind::GitDir { top: true }));
                    } else if ft.is_symlink() {
                        // A symlink cannot be pinned: its folder is sealed whole.
                        found.sealed.insert(dir.clone());
                    } else {
                        found.sealed.insert(path.clone());
                        if let Some(target) = pointer(&path, "gitdir:", &dir) {
                            if within(&target, roots) {
                                queue.push_back((target, Kind::GitDir { top: true }));
                            }
                        }
                    }
                }
                Kind::Plain => {
                    if ft.is_dir() {
                        queue.push_back((path, Kind::Plain));
                    }
                }
            }
        }
    }
    // A sealed place inside another sealed one needs no mount of its own.
    let outer: Vec<PathBuf> = found.sealed.iter().cloned().collect();
    found
        .sealed
        .retain(|p| !outer.iter().any(|o| o != p && p.starts_with(o)));
    found.configs.retain(|c| c.is_file());
    Ok(found)
}

/// The folder a `commondir` or `.git` file names (`prefix` before the path), relative to
/// `base`, with symlinks resolved.
fn pointer(file: &Path, prefix: &str, base: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(file)
        .ok()?
        .take(4096)
        .read_to_string(&mut text)
        .ok()?;
    let target = text.trim().strip_prefix(prefix)?.trim();
    if target.is_empty() {
        return None;
    }
    let path = base.join(target);
    let real = super::protected::real_path(&path);
    real.is_dir().then_some(real)
}

fn within(path: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|r| path.starts_with(r))
}

/// Seal the repositories of `roots` (see the module doc); returns notes for the command's
/// standard error (a folder made read-only whole, and why).
///
/// # Errors
/// A mount that failed: the command must not run.
pub fn protect(roots: &[PathBuf]) -> Result<Vec<String>, String> {
    let roots: Vec<PathBuf> = roots
        .iter()
        .filter(|r| r.is_dir())
        .map(|r| super::protected::real_path(r))
        .collect();
    let mut notes = Vec::new();
    let mut plans = Vec::new();
    for root in &roots {
        match scan(root, &roots) {
            Ok(found) => plans.push((root, found)),
            Err(why) => {
                super::mounts::seal(root)?;
                notes.push(format!(
                    "{} is read-only for this command: {why}",
                    root.display()
                ));
            }
        }
    }
    // Read before anything is mounted over them.
    let configs: Vec<(PathBuf, String)> = plans
        .iter()
        .flat_map(|(_, f)| f.configs.iter())
        .map(|c| (c.clone(), sanitised_config(c)))
        .collect();
    for (_, found) in &plans {
        for dir in pins(&roots, found) {
            super::mounts::pin(&dir)?;
        }
    }
    let mut sealed: Vec<&PathBuf> = plans.iter().flat_map(|(_, f)| &f.sealed).collect();
    ethan_core::sort::sort_by_key(&mut sealed, |p| p.components().count());
    for place in sealed {
        super::mounts::seal(place)?;
    }
    super::mounts::show_files(&configs)?;
    Ok(notes)
}

/// The folders strictly between the writable folder (of `roots`) a sealed place lies in and the
/// place, shallowest first: mounted onto themselves so they cannot be renamed or removed.
pub fn pins(roots: &[PathBuf], found: &Found) -> Vec<PathBuf> {
    let mut out = BTreeSet::new();
    for sealed in &found.sealed {
        let Some(root) = roots.iter().find(|r| sealed.starts_with(r)) else {
            continue;
        };
        let mut p = sealed.parent();
        while let Some(dir) = p {
            if dir == root || !dir.starts_with(root) {
                break;
            }
            out.insert(dir.to_path_buf());
            p = dir.parent();
        }
    }
    let mut out: Vec<PathBuf> = out.into_iter().collect();
    ethan_core::sort::sort_by_key(&mut out, |p| p.components().count());
    out
}

/// The sanitised text of the config file `path` (empty when it cannot be read as a regular
/// file of at most [`CONFIG_LIMIT`] bytes).
pub fn sanitised_config(path: &Path) -> String {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    // Non-blocking: a FIFO put in its place must not hang the helper.
    let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
    else {
        return String::new();
    };
    match f.metadata() {
        Ok(m) if m.is_file() && m.len() <= CONFIG_LIMIT => {}
        _ => return String::new(),
    }
    let mut bytes = Vec::new();
    if f.take(CONFIG_LIMIT).read_to_end(&mut bytes).is_err() {
        return String::new();
    }
    super::gitconfig::sanitise(&String::from_utf8_lossy(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git_init(dir: &Path, bare: bool) {
        std::fs::create_dir_all(dir).unwrap();
        let mut cmd = std::process::Command::new("git");
        cmd.arg("init").arg("-q");
        if bare {
            cmd.arg("--bare");
        }
        assert!(cmd.current_dir(dir).status().unwrap().success());
    }

    #[test]
    fn every_kind_of_repository_is_found_at_any_depth() {
        let t = tempfile::tempdir().unwrap();
        let ws = super::super::protected::real_path(t.path());
        git_init(&ws, false);
        git_init(&ws.join("a/b/c/inner"), false);
        git_init(&ws.join("mirror.git"), true);
        // Many plain files first, in a folder searched before the deep repository.
        std::fs::create_dir_all(ws.join("a/many")).unwrap();
        for i in 0..300 {
            std::fs::write(ws.join(format!("a/many/f{i}")), "").unwrap();
        }
        // A `.git` file pointing at a git directory elsewhere in the folder, and one with
        // `commondir` into a folder without HEAD.
        std::fs::create_dir_all(ws.join("wt")).unwrap();
        std::fs::create_dir_all(ws.join("elsewhere/objects")).unwrap();
        std::fs::create_dir_all(ws.join("elsewhere/refs")).unwrap();
        std::fs::write(ws.join("elsewhere/config"), "[diff]\n\texternal = sh\n").unwrap();
        std::fs::create_dir_all(ws.join("gd")).unwrap();
        std::fs::write(ws.join("gd/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(ws.join("gd/commondir"), "../elsewhere\n").unwrap();
        std::fs::write(ws.join("wt/.git"), "gitdir: ../gd\n").unwrap();
        std::os::unix::fs::symlink(ws.join(".git"), ws.join("a/b/.git")).unwrap();
        let found = scan(&ws, std::slice::from_ref(&ws)).unwrap();
        let sealed: Vec<_> = found.sealed.iter().cloned().collect();
        for want in [
            ws.join(".git"),
            ws.join("a/b"),
            ws.join("mirror.git"),
            ws.join("wt/.git"),
            ws.join("gd"),
            ws.join("elsewhere"),
        ] {
            assert!(sealed.contains(&want), "{want:?} not in {sealed:?}");
        }
        // a/b/c/inner/.git lies inside the sealed a/b.
        assert!(!sealed.contains(&ws.join("a/b/c/inner/.git")), "{sealed:?}");
        assert!(found.configs.contains(&ws.join("elsewhere/config")));
        assert!(found.configs.contains(&ws.join("a/b/c/inner/.git/config")));
        assert_eq!(
            pins(std::slice::from_ref(&ws), &found),
            vec![ws.join("a"), ws.join("wt")]
        );
        assert!(!sanitised_config(&ws.join("elsewhere/config")).contains("external"));
    }

    #[test]
    fn a_folder_too_large_to_search_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().to_path_buf();
        for i in 0..50 {
            std::fs::File::create(ws.join(format!("f{i}"))).unwrap();
        }
        let err = scan_within(&ws, std::slice::from_ref(&ws), 40).unwrap_err();
        assert!(err.contains("more than 40 entries"), "{err}");
        assert!(scan_within(&ws, std::slice::from_ref(&ws), 60).is_ok());
    }
}
