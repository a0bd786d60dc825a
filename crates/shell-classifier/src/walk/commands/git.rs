//! `git`: subcommands and options that run other code (aliases, `-c core.pager=…`, hooks,
//! `config` values) or destroy work (`reset --hard`, `clean -f`, `push --force`).

use super::super::Walker;
use crate::words::{long_option_is, short_cluster, shorten, texts, Arg};
use crate::ShellClass;

/// `git -c name=value` settings that make git run a program.
pub(crate) fn git_config_runs_code(config: &str) -> bool {
    let (key, value) = config.split_once('=').unwrap_or((config, ""));
    let key = key.to_lowercase();
    if key.starts_with("alias.") && value.trim_start().starts_with('!') {
        return true;
    }
    [
        "sshcommand",
        "pager",
        "editor",
        "fsmonitor",
        "hookspath",
        "askpass",
        "textconv",
        "external",
        "command",
        "program",
        "helper",
        "proxy",
        "uploadpack",
        "receivepack",
        "gpg",
        "clean",
        "smudge",
        "process",
    ]
    .iter()
    .any(|k| key.contains(k))
}

impl<'a> Walker<'a> {
    /// `git -c key=value` (or `--config-env`): a setting that runs a program is always-ask, one
    /// off the harmless list ([`crate::git_key_is_harmless`]) asks.
    fn git_setting(&mut self, key: &str, value: &str) {
        if git_config_runs_code(&format!("{key}={value}")) {
            self.note(
                ShellClass::Always,
                "git -c with a setting that runs a command",
            );
        } else if !crate::git_key_is_harmless(key) {
            self.note(
                ShellClass::Ask,
                format!(
                    "git -c {} (a setting that could run a program)",
                    shorten(key)
                ),
            );
        }
    }

    pub(crate) fn git_command(&mut self, argv: &[Arg]) {
        let texts = texts(argv);
        let Some(i) = self.git_options(argv, &texts) else {
            return;
        };
        let Some(sub) = texts.get(i) else {
            self.note(ShellClass::Ask, "runs git");
            return;
        };
        let rest = &texts[i + 1..];
        let rest_args = &argv[i + 1..];
        if rest_args.iter().any(Arg::is_dynamic)
            && matches!(
                sub.as_str(),
                "push" | "reset" | "clean" | "checkout" | "branch"
            )
        {
            self.note(
                ShellClass::Always,
                format!("git {sub} with a non-literal argument"),
            );
            return;
        }
        match sub.as_str() {
            "reset" => self.git_reset(rest),
            "clean" => self.git_clean(rest),
            "push" => self.git_push(rest),
            "status" | "log" | "diff" | "show" | "blame" | "shortlog" | "describe"
            | "rev-parse" | "ls-files" | "ls-tree" | "cat-file" | "rev-list" | "show-ref"
            | "merge-base" | "version" | "whatchanged" | "grep" => {
                self.git_read_only(sub, rest, argv)
            }
            "branch" => self.git_branch(rest, argv),
            "tag" | "remote" | "stash" => self.git_listing(sub, rest, argv),
            _ => self.note(ShellClass::Ask, format!("git {}", shorten(sub))),
        }
    }

    /// git's options before the subcommand (another repository, `-c` settings, the exec
    /// path): the index of the subcommand, or `None` when a non-literal argument decided.
    fn git_options(&mut self, argv: &[Arg], texts: &[String]) -> Option<usize> {
        let mut i = 1;
        while let Some(t) = texts.get(i) {
            if argv[i].is_dynamic() {
                self.note(ShellClass::Always, "git with a non-literal argument");
                return None;
            }
            match t.as_str() {
                // Another repository's config can run commands (core.fsmonitor, diff.external).
                "-C" | "--git-dir" | "--work-tree" => {
                    self.note(ShellClass::Ask, "git on another repository or work tree");
                    i += 2;
                }
                s if s.starts_with("--git-dir=") || s.starts_with("--work-tree=") => {
                    self.note(ShellClass::Ask, "git on another repository or work tree");
                    i += 1;
                }
                "--config-env" => {
                    // The value comes from a variable: judge the setting by its name.
                    if let Some(c) = texts.get(i + 1) {
                        self.git_setting(c.split_once('=').map_or(c.as_str(), |(k, _)| k), "");
                    }
                    i += 2;
                }
                "--namespace" | "--super-prefix" | "--exec-path" => i += 2,
                "-c" => {
                    if let Some(config) = texts.get(i + 1) {
                        let (key, value) = config.split_once('=').unwrap_or((config, ""));
                        self.git_setting(key, value);
                    }
                    i += 2;
                }
                s if s.starts_with("--exec-path=") => {
                    self.note(ShellClass::Always, "git with a changed exec path or config");
                    i += 1;
                }
                s if s.starts_with("--config-env=") => {
                    let name = &s["--config-env=".len()..];
                    self.git_setting(name.split_once('=').map_or(name, |(k, _)| k), "");
                    i += 1;
                }
                s if s.starts_with('-') => i += 1,
                _ => break,
            }
        }
        Some(i)
    }

    /// `git reset`: `--hard`, `--merge` and `--keep` throw work away.
    fn git_reset(&mut self, rest: &[String]) {
        if rest.iter().any(|t| {
            ["--hard", "--merge", "--keep"]
                .iter()
                .any(|o| long_option_is(t, o))
        }) {
            self.note(ShellClass::Always, "git reset --hard");
        } else {
            self.note(ShellClass::Ask, "git reset");
        }
    }

    /// `git clean`: `-f` deletes untracked files.
    fn git_clean(&mut self, rest: &[String]) {
        if has_short(rest, 'f') || rest.iter().any(|t| long_option_is(t, "--force")) {
            self.note(ShellClass::Always, "git clean -f");
        } else {
            self.note(ShellClass::Ask, "git clean");
        }
    }

    /// `git push`: forced, mirroring, deleting or pruning pushes rewrite the remote.
    fn git_push(&mut self, rest: &[String]) {
        let forced = has_short(rest, 'f')
            || has_short(rest, 'd')
            || rest.iter().any(|t| {
                t.starts_with("--force")
                    || ["--mirror", "--delete", "--prune"]
                        .iter()
                        .any(|o| long_option_is(t, o))
                    || (!t.starts_with('-')
                        && (t.starts_with('+') || t.starts_with(':') || t.contains(":+")))
                    || t.contains(" +")
            });
        if forced {
            self.note(ShellClass::Always, "git push --force or a destructive push");
        } else {
            self.note(ShellClass::Ask, "git push");
        }
    }

    /// The reading subcommands: safe unless they run an external program (diff drivers,
    /// text conversion, a pager of files) or write a file (`--output`).
    fn git_read_only(&mut self, sub: &str, rest: &[String], argv: &[Arg]) {
        let writes = rest.iter().any(|t| long_option_is(t, "--output"));
        // git accepts any unambiguous prefix of a long option (`--ope` is
        // `--open-files-in-pager`).
        let runs = rest.iter().any(|t| {
            long_option_is(t, "--ext-diff")
                || long_option_is(t, "--textconv")
                || (t.len() >= 4
                    && "--open-files-in-pager".starts_with(t.split('=').next().unwrap_or(t)))
                || t.starts_with("--open-files-in-pager")
                || t == "-O"
                || t.starts_with("-O")
        });
        if runs {
            self.note(
                ShellClass::Always,
                format!("git {sub} runs an external program"),
            );
        } else if writes {
            self.note(ShellClass::Ask, format!("git {sub} --output writes a file"));
        } else {
            self.safe_command("git", argv, 0);
        }
    }

    /// `git branch`: listing is safe, anything else asks.
    fn git_branch(&mut self, rest: &[String], argv: &[Arg]) {
        let listing = rest.iter().all(|t| {
            matches!(
                t.as_str(),
                "-a" | "-r"
                    | "-v"
                    | "-vv"
                    | "-l"
                    | "--list"
                    | "--all"
                    | "--remotes"
                    | "--show-current"
                    | "--verbose"
                    | "--no-color"
            ) || t.starts_with("--color")
                || t.starts_with("--sort=")
                || t.starts_with("--format=")
        });
        if listing {
            self.safe_command("git", argv, 0);
        } else {
            self.note(ShellClass::Ask, "git branch");
        }
    }

    /// `git tag`, `git remote`, `git stash`: listing is safe, anything else asks.
    fn git_listing(&mut self, sub: &str, rest: &[String], argv: &[Arg]) {
        let listing = match sub {
            "tag" => rest.is_empty() || rest.iter().all(|t| t == "-l" || t == "--list"),
            "remote" => rest.is_empty() || rest == ["-v"] || rest == ["--verbose"],
            _ => rest == ["list"],
        };
        if listing {
            self.safe_command("git", argv, 0);
        } else {
            self.note(ShellClass::Ask, format!("git {sub}"));
        }
    }
}

/// Whether a short-option cluster among `rest` has `c` (`-fd` has `f` and `d`).
fn has_short(rest: &[String], c: char) -> bool {
    rest.iter()
        .any(|t| short_cluster(t).is_some_and(|s| s.contains(c)))
}
