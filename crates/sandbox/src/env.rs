//! The environment a shell command gets: the daemon's own variables are cleared and only a
//! short list of harmless ones is passed on, so `env`, `printenv`, `echo $OPENAI_API_KEY` or
//! `/proc/self/environ` show no secret. A variable whose name contains `KEY`, `TOKEN`,
//! `SECRET`, `PASSWORD`, `PASSWD`, `CREDENTIAL` or `AUTH` is never passed, even if listed.

use std::ffi::OsString;
use std::path::Path;

/// Variables passed on to shell commands (when set in the daemon's environment).
pub const PASSED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "LC_NUMERIC",
    "LC_TIME",
    "LC_COLLATE",
    "LC_MONETARY",
    "TZ",
    "TERM",
];

/// Whether a variable name suggests a secret value (any case).
pub fn secret_name(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    [
        "KEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "AUTH",
    ]
    .iter()
    .any(|w| n.contains(w))
}

/// The environment for a shell command: [`PASSED`] from the daemon's environment (a default
/// `PATH` when it has none), and `TMPDIR` set to `tmpdir` (the daemon's private temp folder).
pub fn for_command(tmpdir: Option<&Path>) -> Vec<(OsString, OsString)> {
    let mut out: Vec<(OsString, OsString)> = PASSED
        .iter()
        .filter(|n| !secret_name(n))
        .filter_map(|n| std::env::var_os(n).map(|v| (OsString::from(n), v)))
        .collect();
    if !out.iter().any(|(k, _)| k == "PATH") {
        out.push((
            "PATH".into(),
            "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin".into(),
        ));
    }
    if let Some(t) = tmpdir {
        out.push(("TMPDIR".into(), t.as_os_str().to_owned()));
    }
    out
}

/// Variables that keep git from running programs named in a repository's configuration: no
/// `core.fsmonitor` (git status would run it), no pager, and — unless `hooks` —
/// `core.hooksPath` pointing at an empty place, so an approved `git commit` runs no hook that
/// was planted in `.git/hooks`. Given as `GIT_CONFIG_COUNT`/`KEY_n`/`VALUE_n`, which win over
/// every configuration file.
pub fn git_guard(hooks: bool) -> Vec<(OsString, OsString)> {
    let mut settings = vec![("core.fsmonitor", "false"), ("core.pager", "cat")];
    if !hooks {
        settings.push(("core.hooksPath", "/dev/null"));
    }
    let mut out: Vec<(OsString, OsString)> = vec![
        ("GIT_CONFIG_COUNT".into(), settings.len().to_string().into()),
        ("GIT_PAGER".into(), "cat".into()),
    ];
    for (i, (k, v)) in settings.iter().enumerate() {
        out.push((format!("GIT_CONFIG_KEY_{i}").into(), (*k).into()));
        out.push((format!("GIT_CONFIG_VALUE_{i}").into(), (*v).into()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_are_never_passed() {
        for n in [
            "OPENAI_API_KEY",
            "TELEGRAM_BOT_TOKEN",
            "lark_app_secret",
            "PGPASSWORD",
            "GH_AUTH",
        ] {
            assert!(secret_name(n), "{n}");
        }
        let env = for_command(Some(Path::new("/tmp/x")));
        assert!(env.iter().all(|(k, _)| !secret_name(&k.to_string_lossy())));
        assert!(env.iter().any(|(k, v)| k == "TMPDIR" && v == "/tmp/x"));
        assert!(env.iter().any(|(k, _)| k == "PATH"));
    }
}
