//! Shells and interpreters: code given as a string (`bash -c`, `python -c`, `perl -e`, …), a
//! script or code read from standard input, `awk` programs that run commands, `sed` scripts
//! that execute, and `source`.

use super::super::{Ctx, Input, Stdin, Walker};
use crate::words::{basename, long_option_is, shorten, texts, Arg};
use crate::ShellClass;

pub(crate) const SHELLS: &[&str] = &[
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "mksh",
    "ash",
    "yash",
    "rbash",
    "fish",
    "tcsh",
    "csh",
    "pwsh",
    "powershell",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    Python,
    Perl,
    Ruby,
    Node,
    Deno,
    Php,
    Lua,
    R,
    Osa,
    Expect,
    Tcl,
}

pub(crate) fn interpreter_family(name: &str) -> Option<Family> {
    Some(match name {
        n if n.starts_with("python") || n.starts_with("pypy") => Family::Python,
        n if n == "perl" || n.starts_with("perl5") => Family::Perl,
        "ruby" | "jruby" | "truffleruby" => Family::Ruby,
        "node" | "nodejs" | "bun" | "ts-node" | "tsx" => Family::Node,
        "deno" => Family::Deno,
        n if n == "php"
            || (n.starts_with("php") && n[3..].chars().all(|c| c.is_ascii_digit() || c == '.')) =>
        {
            Family::Php
        }
        n if n == "lua" || n == "luajit" || n.starts_with("lua5") => Family::Lua,
        "Rscript" | "R" => Family::R,
        "osascript" => Family::Osa,
        "expect" => Family::Expect,
        "tclsh" | "wish" => Family::Tcl,
        _ => return None,
    })
}

/// Whether an option gives the interpreter code to run inline.
pub(crate) fn inline_code_flag(family: Family, t: &str) -> bool {
    if t.starts_with("--") {
        return match family {
            Family::Node => {
                t == "--eval"
                    || t.starts_with("--eval=")
                    || t == "--print"
                    || t.starts_with("--print=")
            }
            Family::R => t.starts_with("--expr"),
            _ => false,
        };
    }
    let cluster = &t[1..];
    match family {
        Family::Python => cluster.contains('c'),
        Family::Perl => cluster.contains(['e', 'E']),
        Family::Ruby => cluster.contains('e'),
        Family::Node => cluster.contains(['e', 'p']),
        Family::Deno => false,
        Family::Php => cluster.contains(['r', 'B', 'R', 'E']),
        Family::Lua | Family::R | Family::Osa => cluster.contains('e'),
        Family::Expect => cluster.contains('c'),
        Family::Tcl => false,
    }
}

/// Whether a sed script uses the `e` command or the `e` flag of `s`, which run shell commands.
pub(crate) fn sed_executes(script: &str) -> bool {
    for segment in script.split(['\n', ';']) {
        let mut rest = segment.trim_start();
        // Skip an address: line numbers, `$`, `/regex/`, ranges and `!`.
        loop {
            let before = rest.len();
            rest = rest.trim_start_matches(|c: char| {
                c.is_ascii_digit() || matches!(c, '$' | ',' | '~' | '!' | '+' | ' ')
            });
            if let Some(after) = rest.strip_prefix('/') {
                match find_unescaped(after, '/') {
                    Some(end) => rest = &after[end + 1..],
                    None => return true,
                }
            }
            if rest.len() == before {
                break;
            }
        }
        let rest = rest.trim_start_matches(['{', ' ']);
        if rest == "e" || rest.starts_with("e ") {
            return true;
        }
        if let Some(body) = rest.strip_prefix('s') {
            let mut chars = body.chars();
            let Some(delim) = chars.next() else {
                continue;
            };
            if delim.is_alphanumeric() || delim == '\\' {
                continue;
            }
            let after_delim = &body[delim.len_utf8()..];
            let Some(p1) = find_unescaped(after_delim, delim) else {
                continue;
            };
            let after_pattern = &after_delim[p1 + delim.len_utf8()..];
            let Some(p2) = find_unescaped(after_pattern, delim) else {
                continue;
            };
            let flags = &after_pattern[p2 + delim.len_utf8()..];
            let flags: String = flags
                .chars()
                .take_while(|c| !c.is_whitespace() && *c != '}')
                .collect();
            // `w file` ends the flags; anything before it counts.
            let flags = flags.split('w').next().unwrap_or("");
            if flags.contains('e') {
                return true;
            }
        }
    }
    false
}

pub(crate) fn find_unescaped(s: &str, delim: char) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == delim {
            return Some(i);
        }
    }
    None
}

pub(crate) fn is_stdin_path(t: &str) -> bool {
    matches!(t, "-" | "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0")
}

impl<'a> Walker<'a> {
    pub(crate) fn shell_command(&mut self, argv: &[Arg], input: &Input, ctx: Ctx, depth: usize) {
        let name = basename(&argv[0].text()).to_owned();
        let mut i = 1;
        let mut code_flag = false;
        let mut stdin_flag = false;
        while let Some(a) = argv.get(i) {
            if a.is_dynamic() {
                break;
            }
            let t = a.text();
            if t == "--" || t == "-" {
                i += 1;
                break;
            }
            if t.starts_with("--") {
                if matches!(t.as_str(), "--rcfile" | "--init-file") {
                    i += 2;
                } else {
                    if t == "--command" {
                        code_flag = true;
                    }
                    i += 1;
                }
                continue;
            }
            if (t.starts_with('-') || t.starts_with('+')) && t.len() > 1 {
                let flags = &t[1..];
                if t.starts_with('-')
                    && (flags.contains('c')
                        || (matches!(name.as_str(), "pwsh" | "powershell")
                            && flags.eq_ignore_ascii_case("command")))
                {
                    code_flag = true;
                }
                if flags.contains('s') {
                    stdin_flag = true;
                }
                let takes = flags.chars().filter(|c| matches!(c, 'o' | 'O')).count();
                i += 1 + takes;
                continue;
            }
            break;
        }
        if code_flag {
            match argv.get(i) {
                Some(code) => self.code_string(code, input.as_stdin(), depth),
                // `xargs sh -c`: the first input word becomes the code.
                None if ctx.args_from_input => self.note(
                    ShellClass::Always,
                    format!("runs its input as shell code ({name} -c)"),
                ),
                None => self.note(ShellClass::Ask, format!("runs {name}")),
            }
            return;
        }
        if ctx.args_from_input {
            self.note(
                ShellClass::Always,
                format!("runs its input as shell code ({name})"),
            );
            return;
        }
        if let (Some(script), false) = (argv.get(i), stdin_flag) {
            let t = script.text();
            if script.procsub {
                self.note(
                    ShellClass::Always,
                    format!("{name} runs code from a process substitution"),
                );
            } else if script.is_dynamic() {
                self.note(
                    ShellClass::Always,
                    format!("{name} runs a non-literal script"),
                );
            } else if is_stdin_path(&t) {
                self.shell_reads_stdin(&name, input, depth);
            } else {
                self.note(ShellClass::Ask, format!("runs a {name} script"));
            }
            return;
        }
        self.shell_reads_stdin(&name, input, depth);
    }

    pub(crate) fn shell_reads_stdin(&mut self, name: &str, input: &Input, depth: usize) {
        match input {
            Input::Piped => self.note(ShellClass::Always, format!("pipes into a shell ({name})")),
            Input::Text { text, is_static } => {
                self.note(ShellClass::Ask, format!("runs {name}"));
                if !is_static {
                    self.note(ShellClass::Always, "shell reads generated code");
                }
                self.walk_script(text, depth + 1, Stdin::Inherited);
            }
            Input::File(path) => {
                let t = path.text();
                if path.is_dynamic() || is_stdin_path(&t) {
                    self.note(
                        ShellClass::Always,
                        format!("{name} reads code from a non-literal source"),
                    );
                } else {
                    self.note(ShellClass::Ask, format!("runs a {name} script"));
                }
            }
            Input::Inherited => self.note(ShellClass::Ask, format!("starts {name}")),
        }
    }

    pub(crate) fn interpreter_command(&mut self, argv: &[Arg], input: &Input, ctx: Ctx) {
        let name = basename(&argv[0].text()).to_owned();
        let Some(family) = interpreter_family(&name) else {
            return;
        };
        let texts = texts(argv);
        let mut script: Option<usize> = None;
        let mut i = 1;
        while let Some(t) = texts.get(i) {
            if argv[i].is_dynamic() {
                script = Some(i);
                break;
            }
            if t == "--" {
                if i + 1 < texts.len() {
                    script = Some(i + 1);
                }
                break;
            }
            if t == "-" {
                break;
            }
            if t.starts_with('-') {
                if inline_code_flag(family, t) {
                    self.note(
                        ShellClass::Always,
                        format!("interpreter with inline code ({name} {})", shorten(t)),
                    );
                    return;
                }
                if family == Family::Python && (t == "-m" || t.starts_with("-m")) {
                    self.note(ShellClass::Ask, format!("runs a {name} module"));
                    return;
                }
                i += 1;
                continue;
            }
            if family == Family::Deno && matches!(t.as_str(), "eval" | "repl") {
                self.note(
                    ShellClass::Always,
                    format!("interpreter with inline code ({name} {t})"),
                );
                return;
            }
            script = Some(i);
            break;
        }
        if ctx.args_from_input {
            self.note(
                ShellClass::Always,
                format!("runs its input as code ({name})"),
            );
            return;
        }
        if let Some(s) = script {
            let arg = &argv[s];
            if arg.procsub {
                self.note(
                    ShellClass::Always,
                    format!("{name} runs code from a process substitution"),
                );
            } else if arg.is_dynamic() {
                self.note(
                    ShellClass::Always,
                    format!("{name} runs a non-literal script"),
                );
            } else if is_stdin_path(&arg.text()) {
                self.interpreter_reads_stdin(&name, input);
            } else {
                self.note(ShellClass::Ask, format!("runs a {name} script"));
            }
            return;
        }
        self.interpreter_reads_stdin(&name, input);
    }

    pub(crate) fn interpreter_reads_stdin(&mut self, name: &str, input: &Input) {
        match input {
            Input::Piped => self.note(
                ShellClass::Always,
                format!("pipes into an interpreter ({name})"),
            ),
            Input::Text { .. } => self.note(
                ShellClass::Always,
                format!("interpreter with inline code ({name} here-document)"),
            ),
            Input::File(path) => {
                if path.is_dynamic() || is_stdin_path(&path.text()) {
                    self.note(
                        ShellClass::Always,
                        format!("{name} reads code from a non-literal source"),
                    );
                } else {
                    self.note(ShellClass::Ask, format!("runs a {name} script"));
                }
            }
            Input::Inherited => self.note(ShellClass::Ask, format!("starts {name}")),
        }
    }

    pub(crate) fn awk_command(&mut self, argv: &[Arg]) {
        let texts = texts(argv);
        let mut programs: Vec<&Arg> = Vec::new();
        let mut from_file = false;
        let mut i = 1;
        while let Some(t) = texts.get(i) {
            if t == "--" {
                i += 1;
                break;
            }
            if t == "-f" || long_option_is(t, "--file") {
                from_file = true;
                i += 2;
                continue;
            }
            if let Some((_, program)) = t
                .split_once('=')
                .filter(|(n, _)| long_option_is(n, "--source"))
            {
                let literal = !argv[i].is_dynamic();
                self.awk_program(program, literal);
                i += 1;
                continue;
            }
            if t == "-e" || (long_option_is(t, "--source") && !t.contains('=')) {
                programs.extend(argv.get(i + 1));
                i += 2;
                continue;
            }
            if matches!(
                t.as_str(),
                "-F" | "-v"
                    | "-i"
                    | "-l"
                    | "--include"
                    | "--load"
                    | "--assign"
                    | "--field-separator"
            ) {
                i += 2;
                continue;
            }
            if t.starts_with('-') && t.len() > 1 {
                if t.starts_with("-f") {
                    from_file = true;
                }
                i += 1;
                continue;
            }
            break;
        }
        if programs.is_empty() && !from_file {
            programs.extend(argv.get(i));
        }
        for p in programs {
            self.awk_program(&p.text(), !p.is_dynamic());
        }
        self.note(ShellClass::Ask, "runs awk");
    }

    fn awk_program(&mut self, text: &str, literal: bool) {
        if !literal {
            self.note(ShellClass::Always, "awk program is not literal");
        } else if text.contains("system") || text.contains('|') {
            self.note(ShellClass::Always, "awk program runs commands");
        } else if text.contains('>') || text.contains("ENVIRON") {
            self.note(
                ShellClass::Ask,
                "awk program may write files or read the environment",
            );
        }
    }

    /// Pagers and editors: their command options run commands (`less '+!sh'`, `vim -c '!sh'`,
    /// `vim --cmd`, `vim -S script`, `less --lesskey-file`), so those are always-ask.
    pub(crate) fn pager_or_editor_command(&mut self, name: &str, args: &[Arg]) {
        let editor = !matches!(name, "less" | "more" | "most");
        let runs = args.iter().any(|a| {
            let t = a.text();
            a.is_dynamic()
                || t.starts_with('+')
                || (editor
                    && (t == "-c"
                        || t == "-S"
                        || long_option_is(&t, "--cmd")
                        || t.starts_with("-c")
                        || t.starts_with("-S")))
                || (!editor
                    && (long_option_is(&t, "--lesskey-file")
                        || long_option_is(&t, "--lesskey-src")
                        || (t.starts_with('-') && !t.starts_with("--") && t.contains('k'))))
        });
        if runs {
            self.note(ShellClass::Always, format!("{name} option runs commands"));
        } else {
            self.note(ShellClass::Ask, format!("runs {name}"));
        }
    }

    pub(crate) fn sed_command(&mut self, argv: &[Arg]) {
        let texts = texts(argv);
        let mut scripts: Vec<(String, bool)> = Vec::new();
        let mut has_script_option = false;
        let mut first_operand: Option<(String, bool)> = None;
        let mut i = 1;
        while let Some(t) = texts.get(i) {
            if t == "-e" || (long_option_is(t, "--expression") && !t.contains('=')) {
                has_script_option = true;
                if let Some(a) = argv.get(i + 1) {
                    scripts.push((a.text(), a.is_dynamic()));
                }
                i += 2;
                continue;
            }
            if let Some(s) = t
                .split_once('=')
                .filter(|(n, _)| long_option_is(n, "--expression"))
                .map(|(_, v)| v)
            {
                has_script_option = true;
                scripts.push((s.to_owned(), argv[i].is_dynamic()));
            } else if t == "-f" || long_option_is(t, "--file") {
                has_script_option = true;
                i += 2;
                continue;
            } else if (!t.starts_with('-') || argv[i].is_dynamic()) && first_operand.is_none() {
                first_operand = Some((t.clone(), argv[i].is_dynamic()));
            }
            i += 1;
        }
        if !has_script_option {
            scripts.extend(first_operand);
        }
        if scripts.iter().any(|(_, dynamic)| *dynamic) {
            self.note(ShellClass::Always, "sed script is not literal");
        }
        if scripts.iter().any(|(s, _)| sed_executes(s)) {
            self.note(ShellClass::Always, "sed script runs commands");
        }
        self.note(ShellClass::Ask, "runs sed");
    }

    pub(crate) fn source_command(&mut self, args: &[Arg]) {
        let Some(first) = args.first() else {
            self.note(ShellClass::Ask, "source without a file");
            return;
        };
        let t = first.text();
        if first.procsub {
            self.note(ShellClass::Always, "sources a process substitution");
        } else if first.is_dynamic() {
            self.note(ShellClass::Always, "sources a non-literal path");
        } else if is_stdin_path(&t)
            || t.starts_with("/dev/fd/")
            || (t.starts_with("/proc/") && t.contains("/fd/"))
        {
            self.note(ShellClass::Always, "sources standard input");
        } else {
            self.note(ShellClass::Ask, format!("sources {}", shorten(&t)));
        }
    }
}
