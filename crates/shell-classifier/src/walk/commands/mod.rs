//! The per-command rules: the dispatch on a command's name (its basename, after the checks every
//! command gets), the read-only list and its exceptions, `eval`, declaration builtins and shell
//! state, and the guess at dangerous commands hidden in the arguments of unknown ones. Families
//! live in submodules: `wrappers` (commands that run other commands), `interpreters` (shells,
//! script languages, `awk`, `sed`, `source`), `files` (`rm`, `cp`/`mv`, `chmod`, `find`), `git`,
//! `network` (`ssh`) and `system` (processes, services, firewall, accounts).

pub(crate) mod files;
mod git;
pub(crate) mod interpreters;
mod network;
mod system;
mod wrappers;

use super::{Ctx, Input, Stdin, Walker, BENIGN_VARIABLES};
use crate::parse::MAX_DEPTH;
use crate::words::{basename, getopt_operands, option_is, short_cluster, shorten, texts, Arg};
use crate::ShellClass;
use files::rename_sources;
use interpreters::{interpreter_family, SHELLS};

pub(crate) const SAFE_COMMANDS: &[&str] = &[
    "ls", "pwd", "echo", "printf", "cat", "head", "tail", "wc", "stat", "file", "du", "df", "date",
    "whoami", "id", "uname", "hostname", "uptime", "which", "type", "grep", "egrep", "fgrep", "rg",
    "sort", "uniq", "cut", "tr", "diff", "tree", "cd", "true", "false", ":", "test", "[",
    "basename", "dirname", "realpath", "readlink", "nl", "seq", "sleep", "cmp", "read", "unset",
    "shift", "wait", "exit", "return", "break", "continue", "let", "pushd", "popd", "dirs",
];

/// Safe commands that may take dynamic arguments: they neither read files nor run anything.
pub(crate) const DYNAMIC_ARGS_OK: &[&str] = &[
    "echo", "printf", "true", "false", ":", "test", "[", "sleep", "read", "unset", "shift", "wait",
    "exit", "return", "break", "continue", "let", "seq",
];

/// Names that, found among the arguments of an unknown command, suggest it runs them.
pub(crate) const EMBEDDED_TRIGGERS: &[&str] = &[
    "rm",
    "dd",
    "shred",
    "wipefs",
    "fdisk",
    "sfdisk",
    "parted",
    "mkfs",
    "sudo",
    "doas",
    "su",
    "pkexec",
    "eval",
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "python",
    "python3",
    "perl",
    "ruby",
    "node",
    "php",
    "chmod",
    "chown",
    "git",
    "find",
    "xargs",
    "parallel",
    "env",
    "kill",
    "shutdown",
    "reboot",
    "halt",
    "poweroff",
    "crontab",
    "systemctl",
    "iptables",
    "userdel",
    "passwd",
    "source",
    "awk",
    "printenv",
    "tee",
    "nohup",
    "timeout",
    "nice",
    "exec",
    "command",
    "setsid",
];

impl<'a> Walker<'a> {
    /// Classifies one command given as its words after expansion.
    pub(crate) fn command(&mut self, argv: &[Arg], input: &Input, ctx: Ctx, depth: usize) {
        if self.deep(depth) || !self.tick() {
            return;
        }
        let Some(first) = argv.first() else {
            return;
        };
        for arg in argv {
            self.check_text(&arg.text());
        }
        if first.is_dynamic() {
            self.note(ShellClass::Always, "command name is not a literal word");
            return;
        }
        if first.has_glob() {
            self.note(ShellClass::Always, "command name is a glob pattern");
            return;
        }
        let full = first.text();
        if full.is_empty() {
            self.note(ShellClass::Ask, "empty command name");
            return;
        }
        let name = basename(&full).to_owned();
        if name.is_empty() {
            self.note(ShellClass::Ask, format!("runs {}", shorten(&full)));
            return;
        }
        if self.functions.iter().any(|f| *f == full || *f == name) {
            if ctx.pipeline || ctx.background {
                self.note(
                    ShellClass::Always,
                    "fork bomb (a function calls itself in a pipeline or background)",
                );
            } else {
                self.note(ShellClass::Ask, "recursive function");
            }
            return;
        }
        if !matches!(name.as_str(), "echo" | "printf") {
            for arg in &argv[1..] {
                self.check_secret_path(arg);
            }
        }
        self.dispatch(&name, argv, input, ctx, depth);
    }

    /// Classifies a command by its name (`name`, the basename of `argv[0]`), family by family.
    fn dispatch(&mut self, name: &str, argv: &[Arg], input: &Input, ctx: Ctx, depth: usize) {
        let args = &argv[1..];
        match name {
            // Wrappers that run their arguments as a command.
            "sudo" | "doas" | "pkexec" | "su" | "runuser" | "env" | "command" | "builtin"
            | "busybox" | "exec" | "nice" | "nohup" | "timeout" | "stdbuf" | "time" | "xargs"
            | "parallel" | "watch" | "flock" | "ionice" | "chrt" | "setsid" | "unbuffer" => {
                self.wrapper_command(name, argv, input, ctx, depth)
            }

            // Shells and interpreters.
            n if SHELLS.contains(&n) => self.shell_command(argv, input, ctx, depth),
            n if interpreter_family(n).is_some() => self.interpreter_command(argv, input, ctx),
            "awk" | "gawk" | "mawk" | "nawk" | "busybox-awk" => self.awk_command(argv),
            "sed" | "gsed" => self.sed_command(argv),
            "eval" => self.eval_command(args, input, depth),
            "source" | "." => self.source_command(args),

            // Destructive commands.
            "rm" => self.rm_command(args),
            "dd" => self.dd_command(args),
            n if n.starts_with("mkfs")
                || matches!(
                    n,
                    "mke2fs"
                        | "mkswap"
                        | "fdisk"
                        | "sfdisk"
                        | "cfdisk"
                        | "gdisk"
                        | "sgdisk"
                        | "parted"
                        | "wipefs"
                        | "shred"
                        | "blkdiscard"
                ) =>
            {
                self.note(
                    ShellClass::Always,
                    format!("formats, partitions or wipes storage ({n})"),
                );
            }
            "chmod" => self.chmod_command(args),
            "chown" | "chgrp" => self.chown_command(name, args),
            "find" => self.find_command(argv, input, ctx, depth),
            "git" => self.git_command(argv),
            "tee" | "truncate" | "touch" => self.touch_command(name, args),
            "cp" | "mv" | "install" | "ln" => self.copy_command(name, args),
            "rename" => {
                self.moved_sources(&rename_sources(args));
                self.note(ShellClass::Ask, "runs rename");
                self.embedded_commands(name, argv, ctx, depth);
            }

            // Environment dumps and shell state.
            "printenv" => self.note(
                ShellClass::Always,
                "prints environment variables (printenv)",
            ),
            "export" | "declare" | "typeset" | "local" | "readonly" => {
                self.declaration_command(name, args, depth)
            }
            "set" => self.set_command(args),
            "alias" => self.alias_command(args, depth),
            "trap" => self.trap_command(args, depth),

            // System administration.
            "crontab" | "kill" | "shutdown" | "reboot" | "halt" | "poweroff" | "init"
            | "telinit" | "systemctl" | "iptables" | "ip6tables" | "iptables-legacy"
            | "iptables-nft" | "nft" | "userdel" | "deluser" | "passwd" | "chpasswd"
            | "usermod" | "groupdel" | "delgroup" | "ps" | "tar" | "bsdtar" | "gtar" => {
                self.system_command(name, args)
            }
            "ssh" => self.ssh_command(argv, depth),
            "rsync" => self.rsync_command(args),
            "less" | "more" | "most" | "vi" | "vim" | "nvim" | "view" | "ex" | "vimdiff" => {
                self.pager_or_editor_command(name, args)
            }
            n if SAFE_COMMANDS.contains(&n) => self.safe_command(n, argv, depth),
            _ => {
                self.note(ShellClass::Ask, format!("runs {}", shorten(name)));
                self.embedded_commands(name, argv, ctx, depth);
            }
        }
    }

    /// `eval`: always asks; the code it runs is walked too, for the reasons.
    fn eval_command(&mut self, args: &[Arg], input: &Input, depth: usize) {
        self.note(ShellClass::Always, "eval");
        let code: Vec<String> = args.iter().map(Arg::text).collect();
        let mut inner = self.sub_walker();
        inner.walk_script(&code.join(" "), depth + 1, input.as_stdin());
        self.absorb(inner, |r| !r.starts_with("cannot parse"));
    }

    /// `set`: with no arguments an environment dump; `set -a` exports what follows.
    fn set_command(&mut self, args: &[Arg]) {
        let texts = texts(args);
        if texts.is_empty() {
            self.note(ShellClass::Always, "environment dump (set)");
        }
        // `set -a` exports every variable assigned after it.
        let allexport = texts.iter().any(|t| {
            short_cluster(t).is_some_and(|c| c.contains('a'))
                || t == "allexport"
                || t.starts_with("-o") && t.contains("allexport")
        });
        if allexport {
            self.note(
                ShellClass::Ask,
                "set -a passes every variable to the programs it runs",
            );
        }
    }

    /// `alias name=value`: the value is code, walked as such.
    fn alias_command(&mut self, args: &[Arg], depth: usize) {
        for a in args {
            let t = a.text();
            if let Some((_, value)) = t.split_once('=') {
                if a.is_static() {
                    self.walk_script(value, depth + 1, Stdin::Inherited);
                } else {
                    self.note(ShellClass::Always, "alias with a non-literal value");
                }
            }
        }
    }

    /// `trap CODE SIGNAL…`: the code is walked (not when listing or resetting).
    fn trap_command(&mut self, args: &[Arg], depth: usize) {
        let texts = texts(args);
        if let Some(first) = args.first() {
            let t = &texts[0];
            if !matches!(t.as_str(), "-l" | "-p" | "--" | "-")
                && !t.chars().all(|c| c.is_ascii_digit())
            {
                self.code_string(first, Stdin::Inherited, depth);
            }
        }
    }

    /// Classifies `argv[i..]` as the command a wrapper runs.
    pub(crate) fn wrapped(
        &mut self,
        argv: &[Arg],
        i: usize,
        input: &Input,
        ctx: Ctx,
        depth: usize,
    ) {
        let rest = argv.get(i..).unwrap_or(&[]);
        self.command(rest, input, ctx, depth + 1);
    }

    /// Code given to a shell as a string.
    pub(crate) fn code_string(&mut self, code: &Arg, stdin: Stdin, depth: usize) {
        if code.is_static() {
            self.walk_script(&code.text(), depth + 1, stdin);
        } else {
            self.note(ShellClass::Always, "shell code is not a literal string");
            // Still walk what is known, for the reasons; the parse may fail on placeholders.
            let mut inner = self.sub_walker();
            inner.walk_script(&code.text(), depth + 1, stdin);
            self.absorb(inner, |r| !r.starts_with("cannot parse"));
        }
    }

    pub(crate) fn declaration_command(&mut self, name: &str, args: &[Arg], depth: usize) {
        let texts = texts(args);
        let options: Vec<&String> = texts
            .iter()
            .filter(|t| t.starts_with('-') || t.starts_with('+'))
            .collect();
        let operands: Vec<(&Arg, &String)> = args
            .iter()
            .zip(&texts)
            .filter(|(_, t)| !(t.starts_with('-') || t.starts_with('+')))
            .collect();
        let prints = options
            .iter()
            .any(|o| o.starts_with('-') && o.contains('p'));
        if prints || operands.is_empty() {
            let only_functions = !options.is_empty()
                && options
                    .iter()
                    .all(|o| o.chars().skip(1).all(|c| c == 'f' || c == 'F'));
            if !only_functions || prints {
                self.note(ShellClass::Always, format!("prints variables ({name})"));
                return;
            }
        }
        let exports = name == "export"
            || options
                .iter()
                .any(|o| o.starts_with('-') && o.contains('x'));
        for (a, t) in operands {
            let var = t.split_once('=').map_or(t.as_str(), |(n, _)| n);
            let var = var.split('[').next().unwrap_or(var);
            let var = var.trim_end_matches('+');
            if a.is_dynamic() && !t.contains('=') {
                self.note(ShellClass::Ask, format!("{name} of a non-literal name"));
            }
            if exports {
                self.exported_name(var);
            } else {
                self.assigned_name(var);
            }
            self.check_arith_injection(a, depth);
        }
    }

    /// A command on the read-only list: safe unless something about its arguments is not.
    pub(crate) fn safe_command(&mut self, name: &str, argv: &[Arg], depth: usize) {
        let texts = texts(argv);
        let args = &texts[1.min(texts.len())..];
        // Long options by any unique prefix, as getopt_long reads them.
        let has = |opts: &[&str]| args.iter().any(|t| opts.iter().any(|o| option_is(t, o)));
        // A short option letter anywhere in a cluster (`-ao`, `-zC`, `-Ffile`): getopt reads
        // `-ao` as `-a -o`, and a letter inside an attached value only errs towards asking.
        let short = |letters: &str| {
            args.iter()
                .take_while(|t| t.as_str() != "--")
                .any(|t| short_cluster(t).is_some_and(|c| c.chars().any(|l| letters.contains(l))))
        };
        match name {
            "printf" if args.first().is_some_and(|t| t.starts_with("-v")) => {
                if let Some(var) = args.get(1) {
                    self.assigned_name(var.split('[').next().unwrap_or(var));
                }
                for a in &argv[1..] {
                    self.check_arith_injection(a, depth);
                }
                self.note(ShellClass::Ask, "printf -v sets a variable");
            }
            "sort" => {
                if has(&["--output"]) || short("o") {
                    self.note(ShellClass::Ask, "sort -o writes a file");
                }
                if has(&["--compress-program"]) {
                    self.note(ShellClass::Always, "sort runs a compression program");
                }
                if has(&["--files0-from"]) {
                    self.note(ShellClass::Ask, "sort reads the files named in a file");
                }
            }
            "tree" if short("oR") => self.note(ShellClass::Ask, "tree -o/-R writes files"),
            "date" if has(&["--set"]) || short("s") => {
                self.note(ShellClass::Ask, "date -s sets the clock");
            }
            "hostname"
                if args.iter().any(|t| !t.starts_with('-'))
                    || has(&["--file", "--boot"])
                    || short("Fb") =>
            {
                self.note(ShellClass::Ask, "hostname sets the host name");
            }
            "uniq"
                if getopt_operands(
                    args,
                    "fsw",
                    &["--skip-fields", "--skip-chars", "--check-chars"],
                )
                .len()
                    > 1 =>
            {
                self.note(ShellClass::Ask, "uniq writes an output file");
            }
            "file" if has(&["--compile"]) || short("C") => {
                self.note(ShellClass::Ask, "file -C writes a file");
            }
            "rg" if has(&["--pre"]) => self.note(ShellClass::Always, "rg --pre runs a command"),
            "read" | "unset" => {
                for t in args.iter().filter(|t| !t.starts_with('-')) {
                    self.assigned_name(t.split('[').next().unwrap_or(t));
                }
                for a in &argv[1..] {
                    self.check_arith_injection(a, depth);
                }
            }
            "let" | "test" | "[" => {
                for a in &argv[1..] {
                    self.check_arith_injection(a, depth);
                }
            }
            _ => {}
        }
        if DYNAMIC_ARGS_OK.contains(&name) {
            return;
        }
        for a in &argv[1..] {
            if a.procsub {
                continue;
            }
            if a.cmdsub {
                self.note(
                    ShellClass::Ask,
                    format!("{name} argument comes from a command substitution"),
                );
            }
            if a.opaque {
                self.note(
                    ShellClass::Ask,
                    format!("{name} argument uses an expansion"),
                );
            }
            for v in &a.vars {
                if BENIGN_VARIABLES.contains(&v.as_str()) {
                    self.deferred.push((
                        v.clone(),
                        ShellClass::Ask,
                        format!("{name} argument uses a reassigned ${v}"),
                    ));
                } else {
                    self.note(ShellClass::Ask, format!("{name} argument uses ${v}"));
                }
            }
        }
    }

    /// For commands we know nothing about: if an argument names a dangerous command, classify
    /// the rest of the line as that command and keep only an always-ask result.
    pub(crate) fn embedded_commands(&mut self, outer: &str, argv: &[Arg], ctx: Ctx, depth: usize) {
        if self.guessing || depth + 1 > MAX_DEPTH {
            return;
        }
        let mut guesses = 0;
        for (i, a) in argv.iter().enumerate().skip(1).take(256) {
            if a.is_dynamic() {
                continue;
            }
            let t = a.text();
            let first_word = t.split_whitespace().next().unwrap_or("");
            let base = basename(first_word);
            let triggered = EMBEDDED_TRIGGERS.contains(&base)
                || base.starts_with("mkfs")
                || base.starts_with("python");
            if !triggered {
                continue;
            }
            guesses += 1;
            if guesses > 8 {
                return;
            }
            let mut inner = self.sub_walker();
            inner.guessing = true;
            if t.contains(char::is_whitespace) {
                inner.walk_script(&t, depth + 1, Stdin::Inherited);
            } else {
                inner.command(
                    &argv[i..],
                    &Input::Inherited,
                    Ctx::nested(ctx.stdin),
                    depth + 1,
                );
            }
            self.steps = inner.steps;
            let mut found = false;
            for (c, r) in inner.notes {
                if c == ShellClass::Always && !r.starts_with("cannot parse") {
                    self.note(c, format!("{r} (in the arguments of {})", shorten(outer)));
                    found = true;
                }
            }
            if found {
                return;
            }
        }
    }
}
