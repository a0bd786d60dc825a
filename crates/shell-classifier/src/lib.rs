//! Shell command classifier for the consent rules of Ethan's `shell` tool: one call,
//! [`classify`], says whether a command line is safe, asks once or always asks, and why.
//!
//! # Model
//!
//! Every command the agent wants to run gets one of three classes, ordered by severity:
//!
//! - [`ShellClass::Safe`]: a short read-only list (`ls`, `pwd`, `cat`, `head`, `grep`, `git status`,
//!   …) used on paths that are not secret-looking and without writing to files; runs without
//!   consent.
//! - [`ShellClass::Ask`] ("ask once"): everything else; needs consent once per scope. The owner
//!   may answer "approve for this session", and later calls of the same scope then run without
//!   asking again.
//! - [`ShellClass::Always`] ("always ask"): dangerous commands (`rm -rf`, `dd of=`, `sudo`,
//!   `… | sh`, `eval`, environment dumps, secret reads, fork bombs, moving or renaming `/`, `~` or
//!   a top-level directory, …) and anything that cannot be analysed; asks every time, an approval
//!   is never remembered, and an unattended run (a scheduled job) never runs it.
//!
//! The classes are ordered `Safe < Ask < Always`. This crate only classifies: what a class means
//! for a call is decided by the consent gate of the daemon, which may make a class stricter (for
//! example, the `shell` tool turns `Safe` into `Ask` where the kernel offers no sandbox) but never
//! looser.
//!
//! The command is parsed with a real bash parser, the [`brush_parser`] crate (the parser of the
//! brush shell), never with regular expressions over the whole string. The classifier then walks
//! *every* simple command in the tree: pipelines, `&&`/`||`/`;` lists, subshells, brace groups,
//! `if`/`while`/`until`/`for`/`case` bodies, function bodies, coprocesses, `$(…)` and backtick
//! substitutions found inside words, assignments, redirection targets, here-documents and
//! parameter-expansion operands, and process substitutions. Code given as a string to another
//! shell (`bash -c '…'`, `sh -c`, `zsh -c`, `dash -c`, `su -c`, `flock -c`, `watch '…'`,
//! `env -S`, `trap '…'`, `alias x='…'`, `ssh host '…'`) is re-parsed and walked the same way, and so
//! is a here-document or here-string fed to a shell.
//!
//! Prefixes and wrappers that run their arguments as a command are stripped and the wrapped
//! command is classified in turn: `sudo`/`doas`/`pkexec` (which are themselves always-ask),
//! `env X=1 …` (and its options), `command`, `builtin`, `exec`, `nice`, `nohup`, `timeout`,
//! `stdbuf`, `time`, `xargs`, `parallel`, `find -exec/-execdir/-ok/-okdir … ;` (every one of
//! them), `watch`, `flock`, `ionice`, `chrt`, `setsid`, `unbuffer` and `busybox`. Their own
//! options are read the way their option parsers do (`xargs -I {} -n 1 -P4 -0n 1`, GNU
//! abbreviations like `--max-p 4`, `--eof` whose value can only be attached; `parallel -j 4 -S
//! host --colsep ,`), so the wrapped command is the one that actually runs. `parallel` joins its
//! command words and runs them with a shell, so they are walked as shell code (`parallel 'rm -rf
//! {}' ::: x`) unless `-q` is given; a `parallel` with no command runs its input as commands, and
//! a `{= … =}` replacement string is Perl code (both always-ask). Under `xargs` and `parallel` a
//! shell or interpreter whose code or script would come from the input (`xargs sh -c`,
//! `parallel 'bash -c {}'`) is always-ask. Any other command whose arguments contain the name of
//! a dangerous command (`ssh host rm -rf /`, `strace rm -rf /`) is also checked, as if it were a
//! wrapper, and only an always-ask result is taken from that guess.
//!
//! `/`, the home directory (`~`, `$HOME`, with or without a trailing `/` or `/.`) and any
//! directory right under `/` (`/usr`, `/etc/`) form one list of top-level directories: a
//! recursive `chmod` of one, and moving or renaming one (`mv /usr /x`, `mv -t /tmp /bin`, the
//! files of `rename`), are always-ask. The sources of `mv` are its operands except the last, or
//! all of them with `-t DIR`; copying (`cp`, `ln`) is not treated so. A `find -exec` command
//! whose `{}` stands for a starting point on that list (`find / -maxdepth 0 -exec mv {} /x \;`)
//! is also judged with `{}` replaced by it, for that rule only, and so is a `parallel` command
//! given such a directory after `:::` (`parallel mv {} /x ::: /usr`).
//!
//! Words are interpreted the way bash would before deciding: quotes and escapes are removed
//! (`r''m`, `"rm"`, `\rm`, `$'\x72m'` are all `rm`), brace expansions are expanded
//! (`rm -{r,f}`), and anything dynamic is kept as dynamic: a command name that is not a literal
//! word (`$X`, `${X}`, `$(…)`, backticks, a glob) is always-ask.
//!
//! The class of the whole command is the worst class of any part ("worst wins"); the reasons
//! given are those of the parts that reached that class.
//!
//! Where brush-parser is known to read a command differently from bash, the classifier either
//! takes both readings or gives up with "cannot parse" (always-ask): `( ( cmd ) )` and
//! `((cmd) )` are subshells, and `((…))` is also walked as commands because dash runs it that way;
//! words must match their source text (the tokenizer mangles substitutions on the line of a
//! pending here-document); a here-document body must start on a later line; `$(` left as literal
//! text, or closed inside a comment, is not trusted; backquoted code gets bash's unescaping; and
//! single quotes are not treated as quoting inside arithmetic or inside `"${x:-'…'}"`. The test
//! corpus checks the classification against bash itself on generated commands.
//!
//! [`classify`] never panics on any input (a panic inside the parser, which happens on some
//! malformed input, is caught and counts as always-ask). Parsing runs on a dedicated thread with
//! a large stack, behind a length cap, a cap on the number of nesting constructs (the parser is
//! recursive), a nesting depth cap for the walk, a work budget and a time limit; whatever goes
//! past a cap, fails to parse, or is empty is always-ask.
//!
//! # Layout
//!
//! - this file: the public API ([`classify`], [`Classification`], [`ShellClass`]);
//! - `parse`: the caps, the checks made before brush-parser sees a text, and the guarded
//!   analysis thread (stack, panics, time limit);
//! - `words`: words as bash reads them (quote removal, ANSI-C quotes, brace expansion, globs);
//! - `secrets`: what looks secret ([`secret_looking`], the one list of secret-looking file
//!   names, also used by the daemon's file tools and sandbox), the daemon's own markers;
//! - `paths`: secret paths in words, dangerous write targets, top-level directories;
//! - `gitconfig`: the git settings that never run a program ([`git_setting_is_harmless`], also
//!   used by the daemon's sandbox for the repositories a command without approval reads);
//! - `walk`: the walk over the syntax tree and, in its `commands` submodule, the per-command
//!   rules by family (wrappers, interpreters, files, git, network, system). Rules and walk
//!   recurse into each other (`bash -c '…'` walks a script; a script's commands are judged by
//!   the rules), so they form one module.

mod gitconfig;
mod parse;
mod paths;
mod secrets;
mod walk;
mod words;

#[cfg(test)]
mod tests;

pub use gitconfig::{git_key_is_harmless, git_setting_is_harmless};
pub use secrets::secret_looking;

/// The consent class of a shell command. Ordered: the worst sub-command wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ShellClass {
    /// Read-only; runs without consent.
    Safe,
    /// Needs consent once per scope.
    Ask,
    /// Needs consent every time; never remembered.
    Always,
}

/// The result of [`classify`].
#[derive(Debug, Clone, PartialEq)]
pub struct Classification {
    /// The worst class found in the command.
    pub class: ShellClass,
    /// Short human phrases explaining the class (empty for [`ShellClass::Safe`]).
    pub reasons: Vec<String>,
}

/// Classifies a shell command line.
///
/// `secrets` are the literal secret values from the daemon's configuration; a command containing
/// any of them (when at least 4 characters long) is [`ShellClass::Always`].
pub fn classify(command: &str, secrets: &[String]) -> Classification {
    if command.len() > parse::MAX_INPUT_BYTES {
        return always("too long to analyse");
    }
    let command = command.to_owned();
    let secrets: Vec<String> = secrets
        .iter()
        .filter(|s| s.chars().count() >= 4)
        .cloned()
        .collect();
    parse::guarded(move || walk::classify_here(&command, &secrets))
}

/// An always-ask result with one reason.
fn always(reason: &str) -> Classification {
    Classification {
        class: ShellClass::Always,
        reasons: vec![reason.to_owned()],
    }
}
