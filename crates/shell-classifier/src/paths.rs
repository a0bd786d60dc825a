//! Paths in words: the secret-looking part of a word (a literal component, a glob that could
//! match one, a system file that holds secrets), dangerous write targets (devices, system
//! directories, shell startup files, git hooks) and the top-level directories that a move or a
//! recursive change must never touch without asking every time.

use crate::secrets::{secret_looking, SECRET_SAMPLES};
use crate::words::{compile_glob, glob_match, shorten, Arg, Kind};

pub(crate) fn is_component_separator(c: char) -> bool {
    matches!(c, '/' | '=' | ':' | '@' | ',' | ';') || c.is_whitespace()
}

/// The secret-looking part of a word, if any: a literal component, a glob that could match one,
/// or a system file that holds secrets.
pub(crate) fn secret_path(arg: &Arg) -> Option<String> {
    let text = arg.text();
    let lower = text.to_lowercase();
    for component in lower.split(is_component_separator) {
        if secret_looking(component) {
            return Some(component.to_owned());
        }
    }
    if lower.contains("/proc/") && lower.split(is_component_separator).any(|c| c == "environ") {
        return Some("/proc/*/environ".to_owned());
    }
    for sys in [
        "/etc/shadow",
        "/etc/gshadow",
        "/etc/sudoers",
        "/etc/ssh/ssh_host_",
    ] {
        if lower.contains(sys) {
            return Some(sys.to_owned());
        }
    }
    if arg.has_glob() {
        for component in arg.chars.split(|(c, _)| is_component_separator(*c)) {
            if !component
                .iter()
                .any(|&(c, k)| k == Kind::Unquoted && matches!(c, '*' | '?' | '['))
            {
                continue;
            }
            let literal = component
                .iter()
                .filter(|&&(c, k)| !(k == Kind::Unquoted && matches!(c, '*' | '?' | '[' | ']')))
                .count();
            let dot_first = matches!(component.first(), Some(('.', _)));
            if literal < 2 && !dot_first {
                continue;
            }
            let pattern = compile_glob(component);
            for sample in SECRET_SAMPLES {
                let sample: Vec<char> = sample.chars().collect();
                if glob_match(&pattern, &sample) {
                    let shown: String = component.iter().map(|(c, _)| *c).collect();
                    return Some(shown);
                }
            }
        }
    }
    None
}

/// Lexically normalises an absolute path (`//`, `.`, `..`); other paths are returned as given.
pub(crate) fn normalize_path(path: &str) -> String {
    if !path.starts_with('/') {
        return path.to_owned();
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Whether a word names `/`, the home directory (`~`, `$HOME`) or a directory right under `/`
/// (`/usr`, `/etc/`, `/var/.`, `/opt/../lib`): the folders that a recursive change, a move or a
/// rename must never touch without asking every time. A word may have a glob (`/*`).
pub(crate) fn is_top_level_dir(text: &str) -> bool {
    if let Some(rest) = text
        .strip_prefix("$HOME")
        .or_else(|| text.strip_prefix('~'))
    {
        return rest.is_empty() || (rest.starts_with('/') && normalize_path(rest) == "/");
    }
    let path = normalize_path(text);
    path.starts_with('/') && path.matches('/').count() == 1
}

pub(crate) fn under(path: &str, dir: &str) -> bool {
    path == dir
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

pub(crate) const HARMLESS_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/tty",
    "/dev/fd/1",
    "/dev/fd/2",
];

/// Whether writing to this path is dangerous, and why.
pub(crate) fn dangerous_write_target(text: &str) -> Option<String> {
    let path = normalize_path(text);
    if under(&path, "/dev") {
        if HARMLESS_DEVICES.contains(&path.as_str()) {
            return None;
        }
        return Some(format!("writes to a device ({})", shorten(&path)));
    }
    for dir in ["/etc", "/sys", "/boot", "/proc"] {
        if under(&path, dir) {
            return Some(format!("writes to a system path ({})", shorten(&path)));
        }
    }
    // A relative path that climbs out could land anywhere, including the directories above.
    if !path.starts_with('/') && !path.starts_with('~') && path.contains("..") {
        for dir in ["etc", "sys", "boot", "proc", "dev"] {
            if path.split('/').any(|c| c == dir) {
                return Some(format!("may write to a system path ({})", shorten(&path)));
            }
        }
    }
    let last = path.rsplit('/').next().unwrap_or("");
    if matches!(
        last,
        ".bashrc"
            | ".bash_profile"
            | ".bash_login"
            | ".bash_logout"
            | ".profile"
            | ".zshrc"
            | ".zshenv"
            | ".zprofile"
            | ".zlogin"
            | "authorized_keys"
    ) {
        return Some(format!("writes a login or shell startup file ({last})"));
    }
    if path.contains(".git/hooks") {
        return Some("writes a git hook".to_owned());
    }
    None
}
