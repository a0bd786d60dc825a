//! What tools may not read: the one list and the one resolver that the file and search tools,
//! the shell classifier and the kernel sandbox all use.
//!
//! A path is *protected* when
//! - it lies inside `$ETHAN_HOME` (config, database, spill, knowledge, logs, tokens) but outside
//!   the workspace, or is the config file itself wherever it lives;
//! - it is one of the well-known credential places of the user running the daemon
//!   ([`CREDENTIAL_PLACES`] under `$HOME`: `~/.ssh`, `~/.aws`, `~/.docker`, `~/.kube`,
//!   `~/.config/gcloud`, `~/.config/gh`, `~/.netrc`, `~/.git-credentials`, `~/.pgpass`, …);
//! - any of its components looks like a secret ([`secret_looking`]: `.ssh`, `.env*`, `*.pem`,
//!   `*.key`, `credentials*`, `id_rsa*`, …), wherever it is;
//! - it is a hard link to a protected file (same device and inode);
//! - it is a process's environment (`/proc/<pid>/environ`, [`process_environment`]): the
//!   daemon's holds its keys and tokens.
//!
//! Symlinks and `..` are resolved before the check ([`real_path`]), so a link in the workspace
//! cannot point a tool at a protected file. The kernel sandbox ([`super::landlock`]) hides the
//! first two kinds from shell commands ([`Protection::hidden_places`]); the pattern kinds are
//! enforced by the tools and the classifier.

use std::path::{Component, Path, PathBuf};

/// Credential places under the home directory of the user running the daemon, hidden from shell
/// commands by the kernel and refused by the file tools.
pub const CREDENTIAL_PLACES: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".docker",
    ".kube",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".netrc",
    "_netrc",
    ".git-credentials",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
];

/// Whether one path component (any case) looks like it holds a secret: the one list, kept in the
/// shell classifier, which judges words of commands by it.
pub use ethan_shell_classifier::secret_looking;

/// Why a path is protected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Protected {
    /// Inside `$ETHAN_HOME`, outside the workspace (or the config file).
    EthanHome,
    /// A credential place of the daemon's user (the place is given, e.g. `~/.aws`).
    Credentials(String),
    /// A component that looks like a secret (the component is given).
    SecretLooking(String),
    /// A hard link to a protected file (the protected file is given).
    HardLink(PathBuf),
    /// A file with other names (hard links) that could not all be looked for: the protected
    /// places hold more entries than are searched (the place not searched to its end is given).
    LinkUnchecked(PathBuf),
    /// A process's environment (`/proc/<pid>/environ`): the daemon's holds its keys and tokens.
    Environment,
}

impl Protected {
    /// A sentence for the model and the approval: which path, and why tools may not touch it.
    pub fn describe(&self, path: &Path) -> String {
        match self {
            Protected::EthanHome => format!(
                "{} is inside Ethan's own data directory (config, database, secrets); tools may not touch it",
                path.display()
            ),
            Protected::Credentials(place) => format!(
                "{} is a credential store ({place}); tools may not read or change it",
                path.display()
            ),
            Protected::SecretLooking(c) => format!(
                "{} looks like a secret ({c:?}); tools may not read or change secret files",
                path.display()
            ),
            Protected::HardLink(target) => format!(
                "{} is a hard link to the protected file {}; tools may not touch it",
                path.display(),
                target.display()
            ),
            Protected::LinkUnchecked(place) => format!(
                "{} has more than one name (a hard link), and {} holds too many files to make sure \
                 none of its other names is protected; tools may not touch it",
                path.display(),
                place.display()
            ),
            Protected::Environment => format!(
                "{} is a process's environment (the daemon's holds its keys and tokens); tools may not read it",
                path.display()
            ),
        }
    }
}

/// The home directory of the user running the daemon (`$HOME`, else the password database).
pub fn user_home() -> Option<PathBuf> {
    if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        return Some(PathBuf::from(h));
    }
    // SAFETY: getpwuid returns a pointer into static storage or null; we copy the string out
    // before any other call could overwrite it.
    unsafe {
        let pw = libc::getpwuid(libc::getuid());
        if pw.is_null() || (*pw).pw_dir.is_null() {
            return None;
        }
        let dir = std::ffi::CStr::from_ptr((*pw).pw_dir);
        Some(PathBuf::from(
            std::ffi::OsStr::from_encoded_bytes_unchecked(dir.to_bytes()),
        ))
    }
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

/// [`real_path`] of `real_base.join(rel)`, where `real_base` is already a real path and `rel` is
/// relative with plain components only (a [`CREDENTIAL_PLACES`] entry): one `lstat` per
/// component walked instead of a `readlink` per component of the whole path per attempt. The
/// result is the same: a component that is a symlink hands the rest to [`real_path`]; the first
/// one missing (or not a directory) ends the walk, and the rest is appended as it is.
fn real_path_under(real_base: &Path, rel: &str) -> PathBuf {
    let mut out = real_base.to_path_buf();
    let mut parts = Path::new(rel).components();
    while let Some(c) = parts.next() {
        let Component::Normal(name) = c else {
            return real_path(&real_base.join(rel));
        };
        out.push(name);
        match std::fs::symlink_metadata(&out) {
            Ok(m) if m.file_type().is_symlink() => {
                // The link itself when it is the last component: `link/` would ask for a
                // folder, and a link to a file would be left unresolved.
                let rest = parts.as_path();
                if !rest.as_os_str().is_empty() {
                    out.push(rest);
                }
                return real_path(&out);
            }
            Ok(m) if m.is_dir() => {}
            _ => {
                let rest = parts.as_path();
                if !rest.as_os_str().is_empty() {
                    out.push(rest);
                }
                return out;
            }
        }
    }
    out
}

/// Most entries of the home directory read to find the credential places in one listing; a
/// larger home is walked place by place instead.
const HOME_LISTING_LIMIT: usize = 512;

/// Each of [`CREDENTIAL_PLACES`] under `home` (a real path), as [`real_path_under`] gives it,
/// from one listing of `home`: a place whose first component the listing does not hold is
/// missing, and only the places under a listed directory (`.config/gh`) or behind a link are
/// walked further. Falls back to [`real_path_under`] for each place when `home` cannot be
/// listed or holds more than [`HOME_LISTING_LIMIT`] entries.
fn credential_places_under(home: &Path) -> Vec<(PathBuf, &'static str)> {
    let Some(listed) = listed_firsts(home) else {
        return CREDENTIAL_PLACES
            .iter()
            .map(|p| (real_path_under(home, p), *p))
            .collect();
    };
    CREDENTIAL_PLACES
        .iter()
        .map(|rel| {
            let (first, rest) = rel.split_once('/').unwrap_or((rel, ""));
            let kind = listed.iter().find(|(n, _)| n == first).map(|(_, k)| k);
            let path = match kind {
                Some(k) if k.is_symlink() => real_path(&home.join(rel)),
                Some(k) if k.is_dir() && !rest.is_empty() => {
                    real_path_under(&home.join(first), rest)
                }
                _ => home.join(rel),
            };
            (path, *rel)
        })
        .collect()
}

/// The entries of `home` named as the first component of a credential place, with their types
/// (not following links); `None` when `home` cannot be listed to its end within
/// [`HOME_LISTING_LIMIT`] entries.
fn listed_firsts(home: &Path) -> Option<Vec<(String, std::fs::FileType)>> {
    let mut out = Vec::new();
    for (i, entry) in std::fs::read_dir(home).ok()?.enumerate() {
        if i >= HOME_LISTING_LIMIT {
            return None;
        }
        let entry = entry.ok()?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let wanted = CREDENTIAL_PLACES
            .iter()
            .any(|p| p.split('/').next() == Some(name));
        if wanted {
            out.push((name.to_string(), entry.file_type().ok()?));
        }
    }
    Some(out)
}

/// Whether `real` (a real path) is a process's environment: a file named `environ` in `/proc`
/// or on any other mount of the proc file system (one `statfs`, for that name only). The shell
/// classifier refuses the same (`/proc/*/environ`); a command cannot open the daemon's at all.
pub fn process_environment(real: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    if real.file_name().is_none_or(|n| n != "environ") {
        return false;
    }
    if real.starts_with("/proc") {
        return true;
    }
    let Ok(c) = std::ffi::CString::new(real.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a NUL-terminated path and a zeroed struct the call fills.
    let fs = unsafe {
        let mut fs: libc::statfs = std::mem::zeroed();
        if libc::statfs(c.as_ptr(), &mut fs) != 0 {
            return false;
        }
        fs
    };
    // `f_type` is signed with glibc and unsigned with musl; the magic number fits either.
    #[allow(clippy::unnecessary_cast)]
    let is_proc = fs.f_type as i64 == libc::PROC_SUPER_MAGIC as i64;
    is_proc
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

/// A place hidden from shell commands by the kernel: everything under `path` except the
/// `except` subtree (the workspace inside `$ETHAN_HOME`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HiddenPlace {
    pub path: PathBuf,
    pub except: Option<PathBuf>,
}

/// The protected places for one tool call: `$ETHAN_HOME` less the workspace, the config file,
/// and the credential places under the user's home. All paths are real (symlinks resolved), as
/// they were when it was made: it is made again for each step of a call, never kept longer.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Protection {
    pub ethan_home: Option<PathBuf>,
    pub workspace: PathBuf,
    pub user_home: Option<PathBuf>,
    pub extra: Vec<PathBuf>,
    /// The credential places under `user_home` ([`CREDENTIAL_PLACES`], real paths, each with
    /// its entry of the list), found once when this was made: a search checks every path it
    /// walks against them.
    credentials: Vec<(PathBuf, String)>,
}

impl Protection {
    /// For a call working in `workspace`, with `$ETHAN_HOME` = `ethan_home` (`None` in tests that
    /// do not care) and this process's home.
    pub fn new(ethan_home: Option<&Path>, workspace: &Path) -> Self {
        Self::with_homes(
            ethan_home.map(real_path),
            real_path(workspace),
            user_home().map(|h| real_path(&h)),
        )
    }

    /// From real paths already resolved; the credential places found under `user_home` now.
    fn with_homes(
        ethan_home: Option<PathBuf>,
        workspace: PathBuf,
        user_home: Option<PathBuf>,
    ) -> Self {
        let credentials = user_home
            .as_deref()
            .map(credential_places_under)
            .unwrap_or_default()
            .into_iter()
            .map(|(path, name)| (path, name.to_string()))
            .collect();
        Self {
            ethan_home,
            workspace,
            user_home,
            extra: Vec::new(),
            credentials,
        }
    }

    /// These places protected, and `also` (real paths: the config file, from
    /// [`super::settings::SandboxSettings::protected`]).
    pub fn and(mut self, also: &[PathBuf]) -> Self {
        self.extra.extend(also.iter().cloned());
        self
    }

    /// The credential places that apply (under the user's home), real paths.
    fn credential_places(&self) -> &[(PathBuf, String)] {
        &self.credentials
    }

    /// Whether `path` (absolute, not necessarily existing) is protected, and why. Symlinks are
    /// followed; a hard link to a protected file counts as that file.
    pub fn check(&self, path: &Path) -> Option<Protected> {
        let real = real_path(path);
        for candidate in [path, real.as_path()] {
            for c in candidate.components() {
                if let Component::Normal(name) = c {
                    let name = name.to_string_lossy();
                    if secret_looking(&name) {
                        return Some(Protected::SecretLooking(name.into_owned()));
                    }
                }
            }
        }
        if let Some(why) = self.place_of(&real) {
            return Some(why);
        }
        self.hard_link_target(&real)
    }

    /// The protected place `real` (a real path) lies in, by location only: no name patterns,
    /// no hard links.
    pub fn place_of(&self, real: &Path) -> Option<Protected> {
        if let Some(home) = &self.ethan_home {
            // Everything in $ETHAN_HOME is the daemon's, but a workspace strictly inside it. A
            // workspace that is $ETHAN_HOME itself opens nothing of it.
            let in_workspace = &self.workspace != home
                && self.workspace.starts_with(home)
                && real.starts_with(&self.workspace);
            if real.starts_with(home) && !in_workspace {
                return Some(Protected::EthanHome);
            }
        }
        if self.extra.iter().any(|e| real == e) {
            return Some(Protected::EthanHome);
        }
        if process_environment(real) {
            return Some(Protected::Environment);
        }
        for (place, name) in self.credential_places() {
            if real.starts_with(place) && !self.workspace.starts_with(place) {
                return Some(Protected::Credentials(format!("~/{name}")));
            }
        }
        None
    }

    /// When `real` is a regular file with more than one link: [`Protected::HardLink`] to the
    /// protected file it is linked to (same device and inode), if any; [`Protected::LinkUnchecked`]
    /// when the search gave up before it looked everywhere (it fails closed). The small places
    /// (credential places, the config file) are searched before `$ETHAN_HOME`. Costs one `stat`
    /// for any other path.
    pub fn hard_link_target(&self, real: &Path) -> Option<Protected> {
        self.hard_link_within(real, HARD_LINK_SCAN_LIMIT)
    }

    /// [`Protection::hard_link_target`] of the file `meta` describes (an open file's `fstat`:
    /// the inode a descriptor holds, whatever its name now leads to).
    pub fn hard_link_target_of(&self, meta: &std::fs::Metadata) -> Option<Protected> {
        self.hard_link_of(meta, HARD_LINK_SCAN_LIMIT)
    }

    /// [`Protection::hard_link_target`], looking at most `budget` entries.
    fn hard_link_within(&self, real: &Path, budget: usize) -> Option<Protected> {
        self.hard_link_of(&std::fs::metadata(real).ok()?, budget)
    }

    /// [`Protection::hard_link_target_of`], looking at most `budget` entries.
    fn hard_link_of(&self, meta: &std::fs::Metadata, mut budget: usize) -> Option<Protected> {
        use std::os::unix::fs::MetadataExt;
        if !meta.is_file() || meta.nlink() < 2 {
            return None;
        }
        let want = (meta.dev(), meta.ino());
        let mut places = self.hidden_places();
        ethan_core::sort::sort_by_key(&mut places, |p| self.ethan_home.as_ref() == Some(&p.path));
        for place in places {
            match find_file(&place, &mut budget, |m| (m.dev(), m.ino()) == want) {
                Scan::Found(found) => return Some(Protected::HardLink(found)),
                Scan::Unfinished => return Some(Protected::LinkUnchecked(place.path)),
                Scan::Clear => {}
            }
        }
        None
    }

    /// The places the kernel sandbox hides from shell commands: `$ETHAN_HOME` (less the
    /// workspace when it lies inside), the config file, and the credential places that exist.
    pub fn hidden_places(&self) -> Vec<HiddenPlace> {
        let mut out = Vec::new();
        if let Some(home) = &self.ethan_home {
            if home.exists() {
                // Hidden whole, by default: the daemon keeps more there than any list would name
                // (its config, database, history, skills, browser profile, …). Only a workspace
                // strictly inside it is put back.
                let except = (&self.workspace != home && self.workspace.starts_with(home))
                    .then(|| self.workspace.clone());
                out.push(HiddenPlace {
                    path: home.clone(),
                    except,
                });
            }
        }
        for e in &self.extra {
            let covered = out.iter().any(|h| {
                e.starts_with(&h.path) && !h.except.as_ref().is_some_and(|x| e.starts_with(x))
            });
            if e.exists() && !covered {
                out.push(HiddenPlace {
                    path: e.clone(),
                    except: None,
                });
            }
        }
        for (place, _) in self.credential_places() {
            if place.exists() && !self.workspace.starts_with(place) {
                out.push(HiddenPlace {
                    path: place.clone(),
                    except: None,
                });
            }
        }
        out
    }
}

impl Protection {
    /// A protected file with more than one name (a hard link made outside the sandbox), if any:
    /// the kernel hides a path, not a file, so its other name would be readable. Looks at most
    /// [`HARD_LINK_SCAN_LIMIT`] entries, and fails closed: when the places hold more, the place
    /// it could not search to its end.
    pub fn linked_file(&self) -> Option<PathBuf> {
        use std::os::unix::fs::MetadataExt;
        let mut budget = HARD_LINK_SCAN_LIMIT;
        self.hidden_places().iter().find_map(|place| {
            match find_file(place, &mut budget, |m| m.nlink() > 1) {
                Scan::Found(f) => Some(f),
                Scan::Unfinished => Some(place.path.clone()),
                Scan::Clear => None,
            }
        })
    }
}

/// Most directory entries looked at when searching for the other name of a hard link.
const HARD_LINK_SCAN_LIMIT: usize = 20_000;

/// What a search of one place found.
enum Scan {
    Found(PathBuf),
    /// Searched to its end: nothing.
    Clear,
    /// The budget ran out first.
    Unfinished,
}

/// The first regular file under `place` (outside its exception) that `matches`, looking at
/// most `budget` entries in all.
fn find_file(
    place: &HiddenPlace,
    budget: &mut usize,
    matches: impl Fn(&std::fs::Metadata) -> bool,
) -> Scan {
    let mut stack = vec![place.path.clone()];
    while let Some(p) = stack.pop() {
        if *budget == 0 {
            return Scan::Unfinished;
        }
        *budget -= 1;
        if place.except.as_deref() == Some(p.as_path()) {
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if meta.is_dir() {
            if let Ok(rd) = std::fs::read_dir(&p) {
                stack.extend(rd.flatten().map(|e| e.path()));
            }
        } else if meta.is_file() && matches(&meta) {
            return Scan::Found(p);
        }
    }
    Scan::Clear
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cheap walk gives what [`real_path`] gives: a place missing, present, under a missing
    /// or a file parent, and behind a symlink.
    #[test]
    fn a_credential_place_resolves_as_real_path_does() {
        let home = tempfile::tempdir().unwrap();
        let base = real_path(home.path());
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(base.join(".config/gh")).unwrap();
        std::fs::write(base.join(".netrc"), "x").unwrap();
        std::fs::write(base.join(".cargo"), "a file").unwrap();
        std::fs::create_dir_all(elsewhere.path().join("ssh")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path().join("ssh"), base.join(".ssh")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), base.join(".kube")).unwrap();
        for rel in CREDENTIAL_PLACES.iter().chain(&[".kube/x/y", ".netrc/z"]) {
            assert_eq!(
                real_path_under(&base, rel),
                real_path(&base.join(rel)),
                "{rel}"
            );
        }
        assert_eq!(
            real_path_under(&base, ".ssh"),
            real_path(&elsewhere.path().join("ssh"))
        );
        // One listing of the home gives the same places, in the list's order.
        let expected: Vec<_> = CREDENTIAL_PLACES
            .iter()
            .map(|rel| (real_path(&base.join(rel)), *rel))
            .collect();
        assert_eq!(credential_places_under(&base), expected);
        // A home too large to list, or one that cannot be listed, is walked place by place.
        for i in 0..HOME_LISTING_LIMIT {
            std::fs::write(base.join(format!("f{i}")), "").unwrap();
        }
        assert!(listed_firsts(&base).is_none());
        assert_eq!(credential_places_under(&base), expected);
        assert!(listed_firsts(&base.join("missing")).is_none());
    }

    /// A credential file that is a link to a file kept elsewhere (a dotfile manager's
    /// `~/.cargo/credentials.toml -> ~/dotfiles/cargo-token`, or `~/.netrc` in a home too large
    /// to list) protects the file it leads to: a tool given that file's own path is refused.
    /// The walk asked for the link's target as a folder (`link/`), failed, and kept the link's
    /// own path, so the token was readable by its real name.
    #[test]
    fn a_credential_link_to_a_file_protects_the_file() {
        let home = tempfile::tempdir().unwrap();
        let base = real_path(home.path());
        let kept = tempfile::tempdir().unwrap();
        let kept = real_path(kept.path());
        std::fs::create_dir(base.join(".cargo")).unwrap();
        for (link, file) in [
            (".cargo/credentials.toml", "cargo-token"),
            (".netrc", "machines"),
        ] {
            std::fs::write(kept.join(file), "token = \"cio-secret\"").unwrap();
            std::os::unix::fs::symlink(kept.join(file), base.join(link)).unwrap();
        }
        let at = || Protection::with_homes(None, base.join("ws"), Some(base.clone()));
        let check = |p: &Protection| {
            for (file, place) in [
                ("cargo-token", "~/.cargo/credentials.toml"),
                ("machines", "~/.netrc"),
            ] {
                assert_eq!(
                    p.check(&kept.join(file)),
                    Some(Protected::Credentials(place.into())),
                    "{file}"
                );
            }
        };
        check(&at());
        for i in 0..=HOME_LISTING_LIMIT {
            std::fs::write(base.join(format!("f{i}")), "").unwrap();
        }
        check(&at());
        assert_eq!(
            real_path_under(&base, ".netrc"),
            real_path(&base.join(".netrc"))
        );
    }

    /// The places from one listing equal [`real_path`] of each place (the per-place walk)
    /// in odd homes: `.config` a file, a link to a file, to the home itself or to a folder;
    /// `.cargo` a link to a folder holding `credentials` (a file and a link); dangling, looping,
    /// relative and chained links; a FIFO; names that differ by case or a trailing byte, and
    /// names that are not UTF-8; a home of exactly [`HOME_LISTING_LIMIT`] entries (listed) and
    /// one more (walked); a home that is a file.
    #[test]
    fn odd_homes_give_the_places_real_path_gives() {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::fs::symlink;
        let expected = |base: &Path| -> Vec<(PathBuf, &'static str)> {
            CREDENTIAL_PLACES
                .iter()
                .map(|rel| (real_path(&base.join(rel)), *rel))
                .collect()
        };
        let elsewhere = tempfile::tempdir().unwrap();
        let out = real_path(elsewhere.path());
        std::fs::create_dir_all(out.join("cfg/gh")).unwrap();
        std::fs::create_dir_all(out.join("cargo")).unwrap();
        std::fs::write(out.join("cargo/credentials"), "t").unwrap();
        std::fs::write(out.join("cred.toml"), "t").unwrap();
        symlink(out.join("cred.toml"), out.join("cargo/credentials.toml")).unwrap();
        std::fs::write(out.join("plain"), "x").unwrap();
        symlink(out.join("cfg"), out.join("hop")).unwrap();
        type MakeHome<'a> = Box<dyn Fn(&Path) + 'a>;
        let homes: Vec<MakeHome> = vec![
            Box::new(|h| std::fs::write(h.join(".config"), "a file").unwrap()),
            Box::new(|h| symlink(out.join("plain"), h.join(".config")).unwrap()),
            Box::new(|h| symlink(".", h.join(".config")).unwrap()),
            Box::new(|h| symlink(out.join("cfg"), h.join(".config")).unwrap()),
            Box::new(|h| symlink(out.join("hop"), h.join(".config")).unwrap()),
            Box::new(|h| {
                std::fs::create_dir(h.join(".config")).unwrap();
                symlink(out.join("cfg/gh"), h.join(".config/gh")).unwrap();
                symlink(out.join("gone"), h.join(".config/gcloud")).unwrap();
                symlink("hub", h.join(".config/hub")).unwrap();
            }),
            Box::new(|h| symlink(out.join("cargo"), h.join(".cargo")).unwrap()),
            Box::new(|h| {
                std::fs::create_dir(h.join(".cargo")).unwrap();
                symlink(out.join("cred.toml"), h.join(".cargo/credentials")).unwrap();
            }),
            Box::new(|h| {
                symlink(out.join("gone"), h.join(".ssh")).unwrap();
                symlink(".aws", h.join(".aws")).unwrap();
                symlink("../x", h.join(".kube")).unwrap();
                symlink(".kube", h.join(".docker")).unwrap();
                symlink("/dev/null", h.join(".netrc")).unwrap();
                std::fs::create_dir(h.join("_netrc")).unwrap();
                let fifo = std::ffi::CString::new(h.join(".gnupg").as_os_str().as_bytes());
                // SAFETY: a NUL-terminated path and a mode.
                assert_eq!(unsafe { libc::mkfifo(fifo.unwrap().as_ptr(), 0o600) }, 0);
            }),
            Box::new(|h| {
                for name in [
                    &b".SSH"[..],
                    b".ssh ",
                    b".ssh\n",
                    b".\xffssh",
                    b".config\xff",
                ] {
                    let p = h.join(std::ffi::OsStr::from_bytes(name));
                    symlink(out.join("cfg"), p).unwrap();
                }
            }),
            Box::new(|h| {
                symlink(out.join("cfg"), h.join(".azure")).unwrap();
                for i in 0..HOME_LISTING_LIMIT - 1 {
                    std::fs::write(h.join(format!("f{i}")), "").unwrap();
                }
                assert!(listed_firsts(h).is_some(), "exactly the limit is listed");
                assert_eq!(
                    credential_places_under(h)[3],
                    (real_path(&out.join("cfg")), ".azure")
                );
                std::fs::write(h.join("one-more"), "").unwrap();
                assert!(listed_firsts(h).is_none(), "one more is walked");
            }),
        ];
        for (i, make) in homes.iter().enumerate() {
            let home = tempfile::tempdir().unwrap();
            let base = real_path(home.path());
            make(&base);
            assert_eq!(credential_places_under(&base), expected(&base), "home {i}");
        }
        let file = out.join("plain");
        assert_eq!(credential_places_under(&file), expected(&file));
    }

    /// A process's environment is protected however it is reached; the other files of a
    /// process folder, and a file named `environ` elsewhere, are not.
    #[test]
    fn a_process_environment_is_protected() {
        let ws = tempfile::tempdir().unwrap();
        let p = Protection::new(None, ws.path());
        let pid = std::process::id();
        std::os::unix::fs::symlink("/proc/self", ws.path().join("me")).unwrap();
        for path in [
            "/proc/self/environ".to_string(),
            "/proc/thread-self/environ".to_string(),
            format!("/proc/{pid}/task/{pid}/environ"),
            format!("{}/me/environ", ws.path().display()),
            "/proc/self/root/proc/1/environ".to_string(),
        ] {
            assert_eq!(
                p.check(Path::new(&path)),
                Some(Protected::Environment),
                "{path}"
            );
        }
        assert!(process_environment(Path::new("/proc/1/environ")));
        assert!(p.check(Path::new("/proc/self/status")).is_none());
        std::fs::write(ws.path().join("environ"), "x").unwrap();
        assert!(p.check(&ws.path().join("environ")).is_none());
    }

    #[test]
    fn hidden_places_carve_out_the_workspace() {
        let home = tempfile::tempdir().unwrap();
        let ws = home.path().join("workspace");
        std::fs::create_dir_all(&ws).unwrap();
        let p = Protection::new(Some(home.path()), &ws);
        let hidden = p.hidden_places();
        let ethan = hidden
            .iter()
            .find(|h| h.path == real_path(home.path()))
            .expect("ETHAN_HOME is hidden");
        assert_eq!(ethan.except.as_deref(), Some(real_path(&ws).as_path()));
        assert!(p.check(&ws.join("a.txt")).is_none());
        assert_eq!(
            p.check(&home.path().join("config.yaml")),
            Some(Protected::EthanHome)
        );
        assert_eq!(p.check(&ws.join("../ethan.db")), Some(Protected::EthanHome));
    }

    #[test]
    fn a_hard_link_in_the_workspace_is_the_protected_file() {
        let home = tempfile::tempdir().unwrap();
        let ws = home.path().join("workspace");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(home.path().join("config.yaml"), "token: x").unwrap();
        std::fs::hard_link(home.path().join("config.yaml"), ws.join("notes.txt")).unwrap();
        std::fs::write(ws.join("plain.txt"), "x").unwrap();
        let p = Protection::new(Some(home.path()), &ws);
        match p.check(&ws.join("notes.txt")) {
            Some(Protected::HardLink(t)) => {
                assert_eq!(t, real_path(&home.path().join("config.yaml")))
            }
            other => panic!("not refused as a hard link: {other:?}"),
        }
        assert!(p.check(&ws.join("plain.txt")).is_none());
    }

    #[test]
    fn a_workspace_that_is_ethan_home_opens_nothing_of_it() {
        let home = tempfile::tempdir().unwrap();
        for f in ["config.yaml", "ethan.db", "history", "notes.txt"] {
            std::fs::write(home.path().join(f), "x").unwrap();
        }
        std::fs::create_dir_all(home.path().join("skills/mine")).unwrap();
        let p = Protection::new(Some(home.path()), home.path());
        // Whatever the daemon keeps there, listed or not.
        for f in [
            "config.yaml",
            "ethan.db",
            "history",
            "notes.txt",
            "skills/mine/SKILL.md",
        ] {
            assert_eq!(
                p.check(&home.path().join(f)),
                Some(Protected::EthanHome),
                "{f}"
            );
        }
        let hidden = p.hidden_places();
        assert_eq!(
            hidden.first(),
            Some(&HiddenPlace {
                path: real_path(home.path()),
                except: None
            }),
            "{hidden:?}"
        );
    }

    /// A search that gives up refuses: a hard link whose other name was not found within the
    /// budget is protected, and the small places are searched first.
    #[test]
    fn a_hard_link_search_that_gives_up_refuses() {
        let home = tempfile::tempdir().unwrap();
        let ws = home.path().join("workspace");
        std::fs::create_dir_all(home.path().join("spill")).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        for i in 0..20 {
            std::fs::write(home.path().join(format!("spill/{i}")), "").unwrap();
        }
        std::fs::write(home.path().join("config.yaml"), "token: x").unwrap();
        std::fs::hard_link(home.path().join("config.yaml"), ws.join("a.txt")).unwrap();
        // A hard link of two ordinary files of the workspace: not protected when searched to
        // the end, refused when the search gives up.
        std::fs::write(ws.join("b.txt"), "b").unwrap();
        std::fs::hard_link(ws.join("b.txt"), ws.join("c.txt")).unwrap();
        let p = Protection::new(Some(home.path()), &ws);
        assert_eq!(
            p.hard_link_within(&real_path(&ws.join("b.txt")), 1000),
            None
        );
        assert!(matches!(
            p.hard_link_within(&real_path(&ws.join("b.txt")), 5),
            Some(Protected::LinkUnchecked(_))
        ));
        assert!(matches!(
            p.hard_link_within(&real_path(&ws.join("a.txt")), 1000),
            Some(Protected::HardLink(_))
        ));
        // A protected file the search cannot reach within its budget, whatever order the
        // directories list their entries in (five folders deep): refused all the same.
        let deep = home.path().join("deep/1/2/3/4");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("kept.db"), "kept").unwrap();
        std::fs::hard_link(deep.join("kept.db"), ws.join("d.txt")).unwrap();
        assert!(matches!(
            p.hard_link_within(&real_path(&ws.join("d.txt")), 1000),
            Some(Protected::HardLink(_))
        ));
        assert!(matches!(
            p.hard_link_within(&real_path(&ws.join("d.txt")), 3),
            Some(Protected::LinkUnchecked(_))
        ));
        let why = Protected::LinkUnchecked(home.path().to_path_buf()).describe(&ws.join("b.txt"));
        assert!(why.contains("hard link"), "{why}");
    }
}
