//! Wrappers: commands that run their arguments as a command (`sudo`, `su`, `env`, `nice`,
//! `timeout`, `time`, `xargs`, `parallel`, `watch`, `flock`, …). Their own options are read the
//! way their option parsers do ([`skip_options`], [`wrapper_options`]), and the command they run
//! is judged in turn.

use super::super::{Ctx, Input, Walker};
use super::interpreters::{interpreter_family, SHELLS};
use crate::paths::is_top_level_dir;
use crate::words::{basename, is_identifier, long_option_is, short_cluster, texts, Arg};
use crate::ShellClass;

/// How the options of a wrapper command are read.
pub(crate) struct OptionSpec {
    /// Short options that take a value, attached (`-n1`) or as the next word (`-n 1`).
    pub(crate) short_required: &'static str,
    /// Short options whose value is optional and can only be attached (`-i{}`, `-i`).
    pub(crate) short_optional: &'static str,
    /// Long options (without `--`) that take a value (`--jobs 4`, `--jobs=4`).
    pub(crate) long_required: &'static [&'static str],
    /// The other long options (no value, or an optional `=value`), to resolve abbreviations.
    pub(crate) long_other: &'static [&'static str],
    /// Whether a unique prefix of a long option is accepted (`getopt_long` does).
    pub(crate) abbreviations: bool,
}

pub(crate) const XARGS_OPTIONS: OptionSpec = OptionSpec {
    short_required: "adEILnPs",
    short_optional: "eil",
    long_required: &[
        "arg-file",
        "delimiter",
        "max-args",
        "max-chars",
        "max-procs",
        "process-slot-var",
    ],
    long_other: &[
        "null",
        "eof",
        "replace",
        "max-lines",
        "open-tty",
        "interactive",
        "no-run-if-empty",
        "verbose",
        "show-limits",
        "exit",
        "help",
        "version",
    ],
    abbreviations: true,
};

/// GNU parallel's options that take a value (Perl's Getopt::Long with bundling: `-j4`, `-j 4`,
/// `--jobs 4`, `--jobs=4`). Abbreviations are not followed: a prefix of an option missing here
/// could be taken for one that takes a value and hide the command.
pub(crate) const PARALLEL_OPTIONS: OptionSpec = OptionSpec {
    short_required: "aCdEIjJLnNPsSW",
    short_optional: "eil",
    long_required: &[
        "arg-file",
        "arg-file-sep",
        "argfilesep",
        "arg-sep",
        "argsep",
        "basefile",
        "bf",
        "basenamereplace",
        "bnr",
        "basenameextensionreplace",
        "bner",
        "block",
        "block-size",
        "blocksize",
        "block-timeout",
        "bt",
        "colsep",
        "col-sep",
        "compress-program",
        "decompress-program",
        "ctagstring",
        "ctag-string",
        "delay",
        "delimiter",
        "dirnamereplace",
        "dnr",
        "env",
        "extensionreplace",
        "er",
        "filter",
        "group-by",
        "halt",
        "halt-on-error",
        "header",
        "jobs",
        "joblog",
        "jl",
        "limit",
        "load",
        "match",
        "max-args",
        "max-chars",
        "max-procs",
        "max-replace-args",
        "memfree",
        "memsuspend",
        "minversion",
        "nice",
        "parens",
        "process-slot-var",
        "profile",
        "recend",
        "recstart",
        "res",
        "result",
        "results",
        "retries",
        "return",
        "rpl",
        "semaphorename",
        "id",
        "semaphoretimeout",
        "st",
        "seqreplace",
        "shard",
        "shell-completion",
        "slotreplace",
        "sql",
        "sqlandworker",
        "sqlmaster",
        "sqlworker",
        "ssh",
        "ssh-delay",
        "sshdelay",
        "sshlogin",
        "sshloginfile",
        "slf",
        "tagstring",
        "tag-string",
        "template",
        "tmpl",
        "tempdir",
        "tmpdir",
        "term-seq",
        "termseq",
        "timeout",
        "transferfile",
        "transfer-file",
        "tf",
        "trc",
        "trim",
        "wd",
        "workdir",
        "work-dir",
    ],
    long_other: &[],
    abbreviations: false,
};

/// Reads a wrapper's options the way getopt does, up to the first word that is not an option
/// (a non-literal word counts as the command) or just after `--`. Returns the index of the
/// command and the options with their values; long options come back by their full name when
/// an abbreviation resolves to one.
pub(crate) fn wrapper_options(
    argv: &[Arg],
    start: usize,
    spec: &OptionSpec,
) -> (usize, Vec<(String, Option<String>)>) {
    let mut options = Vec::new();
    let mut i = start;
    while let Some(a) = argv.get(i) {
        if a.is_dynamic() {
            break;
        }
        let t = a.text();
        if t == "--" {
            i += 1;
            break;
        }
        if !t.starts_with('-') || t == "-" {
            break;
        }
        i += 1;
        if let Some(long) = t.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value.to_owned())),
                None => (long, None),
            };
            let full = resolve_long_option(name, spec);
            let value = match value {
                None if spec.long_required.contains(&full) => {
                    i += 1;
                    argv.get(i - 1).map(Arg::text)
                }
                value => value,
            };
            options.push((format!("--{full}"), value));
            continue;
        }
        let cluster: Vec<char> = t.chars().skip(1).collect();
        for (k, c) in cluster.iter().enumerate() {
            let attached: String = cluster[k + 1..].iter().collect();
            if spec.short_required.contains(*c) {
                let value = if attached.is_empty() {
                    i += 1;
                    argv.get(i - 1).map(Arg::text)
                } else {
                    Some(attached)
                };
                options.push((format!("-{c}"), value));
                break;
            }
            if spec.short_optional.contains(*c) {
                options.push((format!("-{c}"), Some(attached).filter(|v| !v.is_empty())));
                break;
            }
            options.push((format!("-{c}"), None));
        }
    }
    (i, options)
}

/// The full name of a long option given as `name` (exact, or a unique prefix when the spec
/// allows abbreviations); `name` itself when it names none.
pub(crate) fn resolve_long_option<'n>(name: &'n str, spec: &OptionSpec) -> &'n str {
    let all = || spec.long_required.iter().chain(spec.long_other);
    if !spec.abbreviations || name.is_empty() || all().any(|o| *o == name) {
        return name;
    }
    let mut candidates = all().filter(|o| o.starts_with(name));
    match (candidates.next(), candidates.next()) {
        (Some(only), None) => only,
        _ => name,
    }
}

/// Whether a word of a `parallel` command has a replacement string (`{}`, `{.}`, `{1}`, `{= … =}`,
/// or the one given with `-I`).
pub(crate) fn has_replacement(word: &str, custom: Option<&str>) -> bool {
    if custom.is_some_and(|r| !r.is_empty() && word.contains(r)) {
        return true;
    }
    word.find('{')
        .is_some_and(|open| word[open..].contains('}'))
}

/// Wrappers that run the command after their own options, as `(name, short options that take a
/// value, long options that take the next word, operands before the command)`: `timeout
/// DURATION COMMAND` and `chrt PRIORITY COMMAND` have one.
const OPTION_WRAPPERS: &[(&str, &str, &[&str], usize)] = &[
    (
        "sudo",
        "ugCDhprtTU",
        &[
            "--user",
            "--group",
            "--close-from",
            "--chdir",
            "--host",
            "--prompt",
            "--role",
            "--type",
            "--command-timeout",
            "--other-user",
        ],
        0,
    ),
    ("doas", "uC", &[], 0),
    ("pkexec", "", &["--user"], 0),
    ("command", "", &[], 0),
    ("exec", "a", &[], 0),
    ("nice", "n", &["--adjustment"], 0),
    ("nohup", "", &[], 0),
    ("timeout", "sk", &["--signal", "--kill-after"], 1),
    ("stdbuf", "ioe", &["--input", "--output", "--error"], 0),
    ("time", "fo", &["--format", "--output"], 0),
    ("ionice", "cn", &["--class", "--classdata"], 0),
    (
        "chrt",
        "TPD",
        &["--sched-runtime", "--sched-period", "--sched-deadline"],
        1,
    ),
    ("setsid", "", &[], 0),
    ("unbuffer", "", &[], 0),
];

/// Skips options before a wrapped command. `short_with_arg` lists short options that take a
/// value (`-n 5` or `-n5`); `long_with_arg` lists long options that take the next argument
/// (`--signal KILL`; `--signal=KILL` needs no listing). Returns the index of the command.
pub(crate) fn skip_options(
    argv: &[Arg],
    start: usize,
    short_with_arg: &str,
    long_with_arg: &[&str],
) -> usize {
    let mut i = start;
    while let Some(a) = argv.get(i) {
        if a.is_dynamic() {
            return i;
        }
        let t = a.text();
        if t == "--" {
            return i + 1;
        }
        if !t.starts_with('-') || t == "-" {
            return i;
        }
        if t.starts_with("--") {
            i += if !t.contains('=') && long_with_arg.iter().any(|l| long_option_is(&t, l)) {
                2
            } else {
                1
            };
            continue;
        }
        let cluster: Vec<char> = t.chars().skip(1).collect();
        let mut consumed = 1;
        for (k, c) in cluster.iter().enumerate() {
            if short_with_arg.contains(*c) {
                if k + 1 == cluster.len() {
                    consumed = 2;
                }
                break;
            }
        }
        i += consumed;
    }
    i
}

impl<'a> Walker<'a> {
    pub(crate) fn env_command(&mut self, argv: &[Arg], input: &Input, ctx: Ctx, depth: usize) {
        let mut i = 1;
        while let Some(a) = argv.get(i) {
            if a.is_dynamic() {
                break;
            }
            let t = a.text();
            if t == "--" {
                i += 1;
                break;
            }
            if matches!(t.as_str(), "-u" | "-C" | "-P")
                || ((long_option_is(&t, "--unset") || long_option_is(&t, "--chdir"))
                    && !t.contains('='))
            {
                i += 2;
                continue;
            }
            if t == "-S"
                || long_option_is(&t, "--split-string")
                || (t.starts_with("-S") && t.len() > 2)
            {
                // `env -S 'cmd args'` splits a string into a command line.
                let mut code =
                    if let Some((_, code)) = t.split_once('=').filter(|_| t.starts_with("--")) {
                        code.to_owned()
                    } else if let Some(code) = t.strip_prefix("-S").filter(|c| !c.is_empty()) {
                        code.to_owned()
                    } else {
                        i += 1;
                        argv.get(i).map(Arg::text).unwrap_or_default()
                    };
                for rest in argv.get(i + 1..).unwrap_or(&[]) {
                    code.push(' ');
                    code.push_str(&rest.text());
                }
                self.walk_script(&code, depth + 1, input.as_stdin());
                return;
            }
            if t.starts_with('-') && t != "-" {
                i += 1;
                continue;
            }
            if t == "-" {
                i += 1;
                continue;
            }
            if let Some((name, _)) = t.split_once('=') {
                if is_identifier(name) {
                    self.exported_name(name);
                    i += 1;
                    continue;
                }
            }
            break;
        }
        if i >= argv.len() {
            self.note(ShellClass::Always, "environment dump (env)");
            return;
        }
        self.wrapped(argv, i, input, ctx, depth);
    }

    pub(crate) fn xargs_command(&mut self, argv: &[Arg], input: &Input, ctx: Ctx, depth: usize) {
        self.note(ShellClass::Ask, "xargs runs a command on its input");
        let (i, options) = wrapper_options(argv, 1, &XARGS_OPTIONS);
        let mut replace: Option<String> = None;
        for (option, value) in options {
            match option.as_str() {
                "-I" => replace = value,
                "-i" | "--replace" => replace = Some(value.unwrap_or_else(|| "{}".to_owned())),
                _ => {}
            }
        }
        let rest = argv.get(i..).unwrap_or(&[]);
        if let (Some(r), Some(first)) = (&replace, rest.first()) {
            if !r.is_empty() && first.text().contains(r.as_str()) {
                self.note(ShellClass::Always, "xargs runs its input as commands");
            }
            let inner = basename(&first.text()).to_owned();
            let runs_code = SHELLS.contains(&inner.as_str())
                || interpreter_family(&inner).is_some()
                || inner == "eval";
            if runs_code
                && !r.is_empty()
                && rest.iter().skip(1).any(|a| a.text().contains(r.as_str()))
            {
                self.note(ShellClass::Always, "xargs substitutes its input into code");
            }
        }
        let inner_ctx = Ctx {
            args_from_input: true,
            ..ctx
        };
        if rest.is_empty() {
            return;
        }
        self.command(rest, input, inner_ctx, depth + 1);
    }

    /// GNU parallel: `parallel [options] [command [args]] [::: args | :::: files]…`. Without
    /// `-q` the command words are joined with spaces and run by a shell, so they are walked as
    /// shell code; with no command, the input lines themselves are the commands.
    pub(crate) fn parallel_command(&mut self, argv: &[Arg], input: &Input, ctx: Ctx, depth: usize) {
        self.note(ShellClass::Ask, "parallel runs a command on its input");
        let (i, options) = wrapper_options(argv, 1, &PARALLEL_OPTIONS);
        let mut quote = false;
        let mut replace: Option<String> = None;
        let mut separators = vec![":::".to_owned(), "::::".to_owned()];
        let mut literal_separators = vec![":::".to_owned()];
        let mut informational = false;
        for (option, value) in options {
            match option.as_str() {
                "-h"
                | "--help"
                | "-V"
                | "--version"
                | "--citation"
                | "--bibtex"
                | "--number-of-cpus"
                | "--number-of-cores"
                | "--number-of-sockets"
                | "--number-of-threads"
                | "--max-line-length-allowed"
                | "--minversion" => informational = true,
                "-q" | "--quote" => quote = true,
                "-I" | "-i" | "--replace" => replace = value.or(replace),
                "--arg-sep" | "--argsep" => {
                    literal_separators.extend(value.clone());
                    separators.extend(value)
                }
                "--arg-file-sep" | "--argfilesep" => separators.extend(value),
                _ => {}
            }
        }
        let rest = argv.get(i..).unwrap_or(&[]);
        let end = rest
            .iter()
            .position(|a| {
                let t = a.text();
                let t = t.strip_suffix('+').unwrap_or(&t);
                separators.iter().any(|s| s == t)
            })
            .unwrap_or(rest.len());
        let words = &rest[..end];
        if words.is_empty() {
            if !informational {
                self.note(ShellClass::Always, "parallel runs its input as commands");
            }
            return;
        }
        let line = texts(words).join(" ");
        if line.contains("{=") {
            self.note(
                ShellClass::Always,
                "parallel runs Perl code from a replacement string ({= … =})",
            );
        }
        let mut line_words = line.split_whitespace();
        if let Some(first) = line_words.next() {
            let inner = basename(first);
            let runs_code =
                SHELLS.contains(&inner) || interpreter_family(inner).is_some() || inner == "eval";
            if runs_code && line_words.any(|w| has_replacement(w, replace.as_deref())) {
                self.note(
                    ShellClass::Always,
                    "parallel substitutes its input into code",
                );
            }
        }
        let inner_ctx = Ctx {
            args_from_input: true,
            ..ctx
        };
        if quote {
            self.command(words, input, inner_ctx, depth + 1);
        } else {
            self.walk_script_ctx(&line, depth + 1, inner_ctx);
        }
        // Arguments given after `:::` are known: a top-level directory among them is put into
        // the command (for `{}`, or appended) to judge a move or rename of it.
        let mut literal = false;
        let mut values = Vec::new();
        for a in &rest[end..] {
            let t = a.text();
            let bare = t.strip_suffix('+').unwrap_or(&t);
            if separators.iter().any(|s| s == bare) {
                literal = literal_separators.iter().any(|s| s == bare);
            } else if literal && a.is_static() && is_top_level_dir(&t) {
                values.push(t);
            }
        }
        for value in values {
            let mut with_value = line.replace("{}", &value);
            if let Some(r) = replace.as_deref().filter(|r| !r.is_empty()) {
                with_value = with_value.replace(r, &value);
            }
            if with_value == line {
                with_value = format!("{line} {value}");
            }
            let mut sub = self.sub_walker();
            sub.walk_script_ctx(&with_value, depth + 1, inner_ctx);
            self.absorb(sub, |r| {
                r.starts_with("moves or renames a top-level directory")
            });
        }
    }

    pub(crate) fn watch_command(&mut self, argv: &[Arg], input: &Input, ctx: Ctx, depth: usize) {
        self.note(ShellClass::Ask, "watch runs a command repeatedly");
        let texts = texts(argv);
        let exec = texts
            .iter()
            .skip(1)
            .take_while(|t| t.starts_with('-'))
            .any(|t| {
                t == "-x" || t == "--exec" || short_cluster(t).is_some_and(|c| c.contains('x'))
            });
        let i = skip_options(argv, 1, "nq", &["--interval", "--equexit"]);
        let rest = argv.get(i..).unwrap_or(&[]);
        if exec {
            self.command(rest, input, ctx, depth + 1);
            return;
        }
        // watch joins its arguments and runs them with `sh -c`.
        if rest.iter().any(Arg::is_dynamic) {
            self.note(ShellClass::Always, "shell code is not a literal string");
        }
        let code: Vec<String> = rest.iter().map(Arg::text).collect();
        if !code.is_empty() {
            self.walk_script(&code.join(" "), depth + 1, input.as_stdin());
        }
    }

    pub(crate) fn flock_command(&mut self, argv: &[Arg], input: &Input, ctx: Ctx, depth: usize) {
        self.note(ShellClass::Ask, "flock takes a lock file");
        let mut i = 1;
        let mut lockfile_seen = false;
        while let Some(a) = argv.get(i) {
            let t = a.text();
            if t == "-c" || t == "--command" {
                if let Some(code) = argv.get(i + 1) {
                    self.code_string(code, input.as_stdin(), depth);
                }
                return;
            }
            if let Some(code) = t.strip_prefix("--command=") {
                self.walk_script(code, depth + 1, input.as_stdin());
                return;
            }
            if a.is_static() && t.starts_with('-') && t != "-" {
                if matches!(
                    t.as_str(),
                    "-w" | "-E" | "--timeout" | "--wait" | "--conflict-exit-code"
                ) {
                    i += 2;
                } else {
                    i += 1;
                }
                continue;
            }
            if !lockfile_seen {
                lockfile_seen = true;
                i += 1;
                continue;
            }
            break;
        }
        if i < argv.len() {
            self.wrapped(argv, i, input, ctx, depth);
        }
    }
}

impl Walker<'_> {
    /// The wrappers that run their arguments as a command (the dispatch sends exactly these
    /// names here): the wrapped command is judged in turn, after their own options.
    pub(crate) fn wrapper_command(
        &mut self,
        name: &str,
        argv: &[Arg],
        input: &Input,
        ctx: Ctx,
        depth: usize,
    ) {
        let args = &argv[1..];
        // Those that read their arguments their own way.
        match name {
            "su" | "runuser" => return self.su_command(name, argv, input, ctx, depth),
            "env" => return self.env_command(argv, input, ctx, depth),
            "xargs" => return self.xargs_command(argv, input, ctx, depth),
            "parallel" => return self.parallel_command(argv, input, ctx, depth),
            "watch" => return self.watch_command(argv, input, ctx, depth),
            "flock" => return self.flock_command(argv, input, ctx, depth),
            _ => {}
        }
        // The others run what follows their options ([`OPTION_WRAPPERS`]), after what they do
        // themselves is judged.
        match name {
            "sudo" | "doas" | "pkexec" => self.note(
                ShellClass::Always,
                format!("runs with elevated privileges ({name})"),
            ),
            "nohup" => self.note(ShellClass::Ask, "nohup writes nohup.out"),
            // `command -v NAME` only says what NAME is.
            "command"
                if texts(args)
                    .iter()
                    .take_while(|t| t.starts_with('-'))
                    .any(|t| t.contains('v') || t.contains('V')) =>
            {
                return
            }
            "time" => self.time_output(argv),
            "ionice"
                if texts(args).iter().any(|t| {
                    matches!(
                        t.as_str(),
                        "-p" | "-P" | "-u" | "--pid" | "--pgid" | "--uid"
                    )
                }) =>
            {
                return self.note(ShellClass::Ask, "ionice changes other processes");
            }
            "chrt"
                if texts(args)
                    .iter()
                    .take_while(|t| t.starts_with('-'))
                    .any(|t| t == "-p" || t == "--pid" || t == "-m" || t == "--max") =>
            {
                return self.note(ShellClass::Ask, "chrt changes scheduling");
            }
            _ => {}
        }
        match OPTION_WRAPPERS.iter().find(|(n, ..)| *n == name) {
            Some((_, short, long, operands)) => {
                let i = skip_options(argv, 1, short, long);
                self.wrapped(argv, i + operands, input, ctx, depth);
            }
            // `builtin` and `busybox` (and, not reached, a name the dispatch does not send):
            // what follows is the command.
            None => self.wrapped(argv, 1, input, ctx, depth),
        }
    }

    /// `su` and `runuser`: the code of `-c`/`--command` is walked, and `runuser -- COMMAND`
    /// judged.
    fn su_command(&mut self, name: &str, argv: &[Arg], input: &Input, ctx: Ctx, depth: usize) {
        self.note(
            ShellClass::Always,
            format!("runs with elevated privileges ({name})"),
        );
        let mut i = 1;
        while let Some(a) = argv.get(i) {
            let t = a.text();
            if t == "-c" || t == "--command" {
                if let Some(code) = argv.get(i + 1) {
                    self.code_string(code, input.as_stdin(), depth);
                }
                i += 2;
            } else if let Some(code) = t.strip_prefix("--command=") {
                self.walk_script(code, depth + 1, input.as_stdin());
                i += 1;
            } else if t == "--" && name == "runuser" {
                self.command(argv.get(i + 1..).unwrap_or(&[]), input, ctx, depth + 1);
                break;
            } else {
                i += 1;
            }
        }
    }

    /// `time -o FILE`: the file its report is written to.
    fn time_output(&mut self, argv: &[Arg]) {
        let texts = texts(argv);
        for (k, t) in texts.iter().enumerate().skip(1) {
            if !t.starts_with('-') || t == "--" {
                break;
            }
            if t == "-o" || t == "--output" {
                if let Some(target) = argv.get(k + 1) {
                    self.write_target(target);
                }
            } else if let Some(target) = t.strip_prefix("--output=") {
                self.write_target(&Arg::literal(target));
            }
        }
    }
}
