//! File commands: `rm`, `mv`/`rename` of top-level directories, `chmod` modes, `chown`, `dd`,
//! the writers `tee`/`truncate`/`touch`, and `find` with the commands its `-exec`/`-ok` actions
//! run.

use super::super::{Ctx, Input, Walker};
use crate::paths::{dangerous_write_target, is_top_level_dir};
use crate::words::{long_option_is, short_cluster, shorten, texts, Arg};
use crate::ShellClass;

/// Splits the arguments of `mv` or `rename` into options and operands, the way getopt does:
/// `short_with_arg` lists short options that take a value (`-S .bak`, `-S.bak`), `long_with_arg`
/// long ones (`--suffix .bak`, `--suffix=.bak`, or a unique prefix like `--suf`); `--` ends the
/// options. Returns the operands and the options with their values.
pub(crate) fn operands<'x>(
    args: &'x [Arg],
    short_with_arg: &str,
    long_with_arg: &[&str],
) -> (Vec<&'x Arg>, Vec<(String, String)>) {
    let mut operands = Vec::new();
    let mut options = Vec::new();
    let mut i = 0;
    let mut options_done = false;
    while let Some(a) = args.get(i) {
        i += 1;
        let t = a.text();
        if options_done || !t.starts_with('-') || t == "-" {
            operands.push(a);
            continue;
        }
        if t == "--" {
            options_done = true;
            continue;
        }
        if let Some(long) = t.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value.to_owned())),
                None => (long, None),
            };
            let full = long_with_arg
                .iter()
                .find(|l| long_option_is(&format!("--{name}"), l));
            match (full, value) {
                (Some(full), Some(value)) => options.push(((*full).to_owned(), value)),
                (Some(full), None) => {
                    let value = args.get(i).map(Arg::text).unwrap_or_default();
                    i += 1;
                    options.push(((*full).to_owned(), value));
                }
                (None, _) => options.push((t.clone(), String::new())),
            }
            continue;
        }
        let cluster: Vec<char> = t.chars().skip(1).collect();
        for (k, c) in cluster.iter().enumerate() {
            if short_with_arg.contains(*c) {
                let attached: String = cluster[k + 1..].iter().collect();
                let value = if attached.is_empty() {
                    i += 1;
                    args.get(i - 1).map(Arg::text).unwrap_or_default()
                } else {
                    attached
                };
                options.push((format!("-{c}"), value));
                break;
            }
            options.push((format!("-{c}"), String::new()));
        }
    }
    (operands, options)
}

/// The files `mv` moves: with `-t DIR` every operand, otherwise every operand but the last.
pub(crate) fn mv_sources(args: &[Arg]) -> Vec<&Arg> {
    let (mut operands, options) = operands(args, "St", &["--suffix", "--target-directory"]);
    let target_given = options
        .iter()
        .any(|(o, _)| o == "-t" || o == "--target-directory");
    if !target_given {
        operands.pop();
    }
    operands
}

/// The files `rename` renames: util-linux `rename FROM TO FILE…` and Perl `rename EXPR FILE…`
/// both take the files after the first operand (all of them when `-e`/`-E` gives the
/// expression). Taking the second operand of the util-linux form as a file only errs towards
/// asking.
pub(crate) fn rename_sources(args: &[Arg]) -> Vec<&Arg> {
    let (operands, options) = operands(args, "eE", &[]);
    if options.iter().any(|(o, _)| o == "-e" || o == "-E") {
        operands
    } else {
        operands.into_iter().skip(1).collect()
    }
}

/// The starting points of `find` (`.` when none is given): the words after its leading options
/// (`-H`, `-L`, `-P`, `-D LIST`, `-O3`) up to the first expression word.
pub(crate) fn find_start_points(texts: &[String]) -> Vec<&str> {
    let mut i = 1;
    while let Some(t) = texts.get(i) {
        match t.as_str() {
            "-H" | "-L" | "-P" => i += 1,
            "-D" => i += 2,
            "--" => {
                i += 1;
                break;
            }
            t if t.starts_with("-O") => i += 1,
            _ => break,
        }
    }
    let starts: Vec<&str> = texts
        .iter()
        .skip(i)
        .take_while(|t| !t.starts_with('-') && !matches!(t.as_str(), "(" | "!" | ","))
        .map(String::as_str)
        .collect();
    if starts.is_empty() {
        vec!["."]
    } else {
        starts
    }
}

/// chmod modes that open files to everyone or set privilege bits.
pub(crate) fn dangerous_mode(t: &str) -> Option<String> {
    if t.chars().all(|c| c.is_digit(8)) && (3..=4).contains(&t.len()) {
        let digits: Vec<u32> = t.chars().filter_map(|c| c.to_digit(8)).collect();
        let other = *digits.last()?;
        if other & 2 != 0 {
            return Some(format!("chmod {t} makes files world-writable"));
        }
        if digits.len() == 4 && digits[0] & 6 != 0 {
            return Some(format!("chmod {t} sets setuid/setgid"));
        }
        return None;
    }
    if t.starts_with('-')
        && !t.contains(['+', '='])
        && !t.chars().skip(1).all(|c| "rwxXst".contains(c))
    {
        return None;
    }
    for clause in t.split(',') {
        let who: String = clause.chars().take_while(|c| "ugoa".contains(*c)).collect();
        let rest = &clause[who.len()..];
        let mut chars = rest.chars();
        let op = chars.next();
        let perms: String = chars.collect();
        if !matches!(op, Some('+' | '=')) {
            continue;
        }
        if (who.contains('a') || who.contains('o')) && perms.contains('w') {
            return Some(format!("chmod {t} makes files world-writable"));
        }
        if perms.contains('s') {
            return Some(format!("chmod {t} sets setuid/setgid"));
        }
    }
    None
}

impl<'a> Walker<'a> {
    /// `dd`: writing with `of=` (or a non-literal argument that may be one) always asks.
    pub(crate) fn dd_command(&mut self, args: &[Arg]) {
        if args
            .iter()
            .any(|a| a.text().starts_with("of=") || a.is_dynamic())
        {
            self.note(ShellClass::Always, "dd with of=");
        } else {
            self.note(ShellClass::Ask, "runs dd");
        }
    }

    /// `chown`/`chgrp`: recursively always asks.
    pub(crate) fn chown_command(&mut self, name: &str, args: &[Arg]) {
        if args.iter().any(|a| {
            let t = a.text();
            long_option_is(&t, "--recursive") || short_cluster(&t).is_some_and(|c| c.contains('R'))
        }) {
            self.note(ShellClass::Always, format!("{name} -R"));
        } else {
            self.note(ShellClass::Ask, format!("runs {name}"));
        }
    }

    /// `tee`, `truncate`, `touch`: each operand is a file written.
    pub(crate) fn touch_command(&mut self, name: &str, args: &[Arg]) {
        for a in args {
            let t = a.text();
            if !t.starts_with('-') || a.is_dynamic() {
                self.write_target(a);
            }
        }
        self.note(ShellClass::Ask, format!("runs {name}"));
    }

    pub(crate) fn rm_command(&mut self, args: &[Arg]) {
        let mut dangerous = false;
        for a in args {
            let t = a.text();
            if a.is_dynamic() {
                self.note(ShellClass::Always, "rm with a non-literal argument");
                return;
            }
            if let Some(cluster) = short_cluster(&t) {
                if cluster.contains(['r', 'R', 'f']) {
                    dangerous = true;
                }
            } else if long_option_is(&t, "--recursive")
                || long_option_is(&t, "--force")
                || long_option_is(&t, "--no-preserve-root")
            {
                dangerous = true;
            }
        }
        if dangerous {
            self.note(ShellClass::Always, "rm with -r/-f");
        } else {
            self.note(ShellClass::Ask, "runs rm");
        }
    }

    /// Moving or renaming `/`, the home directory or a top-level directory is as bad as
    /// deleting it.
    pub(crate) fn moved_sources(&mut self, sources: &[&Arg]) {
        for source in sources {
            let t = source.text();
            if is_top_level_dir(&t) {
                self.note(
                    ShellClass::Always,
                    format!("moves or renames a top-level directory ({})", shorten(&t)),
                );
            }
        }
    }

    pub(crate) fn chmod_command(&mut self, args: &[Arg]) {
        let texts = texts(args);
        let recursive = texts.iter().any(|t| {
            long_option_is(t, "--recursive") || short_cluster(t).is_some_and(|c| c.contains('R'))
        });
        let mode = args
            .iter()
            .zip(&texts)
            .find(|(a, t)| a.is_dynamic() || !t.starts_with('-') || dangerous_mode(t).is_some());
        if mode.is_some_and(|(a, _)| a.is_dynamic()) {
            self.note(ShellClass::Always, "chmod with a non-literal mode");
            return;
        }
        for (a, t) in args.iter().zip(&texts) {
            if a.is_dynamic() {
                continue;
            }
            if let Some(reason) = dangerous_mode(t) {
                self.note(ShellClass::Always, reason);
                return;
            }
        }
        if recursive {
            let top_level = texts
                .iter()
                .filter(|t| !t.starts_with('-'))
                .any(|t| is_top_level_dir(t));
            if top_level {
                self.note(
                    ShellClass::Always,
                    "recursive chmod of a top-level directory",
                );
                return;
            }
        }
        self.note(ShellClass::Ask, "runs chmod");
    }

    pub(crate) fn find_command(&mut self, argv: &[Arg], input: &Input, ctx: Ctx, depth: usize) {
        let texts = texts(argv);
        let mut i = 1;
        let mut special = false;
        while i < texts.len() {
            let t = texts[i].as_str();
            match t {
                "-delete" => {
                    self.note(ShellClass::Always, "find -delete");
                    special = true;
                }
                "-exec" | "-execdir" | "-ok" | "-okdir" => {
                    special = true;
                    self.note(ShellClass::Ask, format!("find {t} runs a command"));
                    let start = i + 1;
                    let mut end = start;
                    while end < texts.len() && texts[end] != ";" && texts[end] != "+" {
                        end += 1;
                    }
                    let inner = argv.get(start..end).unwrap_or(&[]);
                    if inner.first().is_some_and(|a| a.text().contains("{}")) {
                        self.note(ShellClass::Always, "find runs the files it finds");
                    }
                    let inner_ctx = Ctx {
                        args_from_input: false,
                        ..ctx
                    };
                    self.command(inner, input, inner_ctx, depth + 1);
                    self.found_top_level_moves(&texts, inner, input, inner_ctx, depth);
                    i = end;
                }
                "-fprint" | "-fprint0" | "-fprintf" | "-fls" => {
                    special = true;
                    if let Some(target) = argv.get(i + 1) {
                        self.write_target(target);
                    }
                }
                _ => {}
            }
            i += 1;
        }
        if !special {
            self.safe_command("find", argv, depth);
        }
    }

    /// `{}` in a `find -exec` command stands for each file found, starting with the starting
    /// points themselves (and, under `/`, the top-level directories). For a starting point that
    /// is a top-level directory, the command is judged again with `{}` replaced by it, and only
    /// a move or rename of a top-level directory is kept from that reading.
    pub(crate) fn found_top_level_moves(
        &mut self,
        find_argv: &[String],
        inner: &[Arg],
        input: &Input,
        ctx: Ctx,
        depth: usize,
    ) {
        if !inner.iter().any(|a| a.text().contains("{}")) {
            return;
        }
        for start in find_start_points(find_argv) {
            if !is_top_level_dir(start) {
                continue;
            }
            let replaced: Vec<Arg> = inner
                .iter()
                .map(|a| {
                    let t = a.text();
                    if t.contains("{}") {
                        Arg::literal(&t.replace("{}", start))
                    } else {
                        a.clone()
                    }
                })
                .collect();
            let mut sub = self.sub_walker();
            sub.command(&replaced, input, ctx, depth + 1);
            self.absorb(sub, |r| {
                r.starts_with("moves or renames a top-level directory")
            });
        }
    }
}

impl Walker<'_> {
    /// `cp`, `mv`, `install` and `ln`: a dangerous target always asks, and so does moving a
    /// top-level directory.
    pub(crate) fn copy_command(&mut self, name: &str, args: &[Arg]) {
        let texts = texts(args);
        let mut targets: Vec<&Arg> = Vec::new();
        for (i, t) in texts.iter().enumerate() {
            if t == "-t" || t == "--target-directory" {
                targets.extend(args.get(i + 1));
            } else if t.starts_with("--target-directory=")
                || (t.starts_with("-t") && t.len() > 2 && !t.starts_with("--"))
            {
                targets.push(&args[i]);
            }
        }
        if let Some(last) = args.iter().rev().find(|a| !a.text().starts_with('-')) {
            targets.push(last);
        }
        for t in targets {
            let text = t.text();
            let text = text
                .strip_prefix("--target-directory=")
                .or_else(|| text.strip_prefix("-t"))
                .unwrap_or(&text);
            if let Some(reason) = dangerous_write_target(text) {
                self.note(ShellClass::Always, reason);
            }
        }
        if name == "mv" {
            self.moved_sources(&mv_sources(args));
        }
        self.note(ShellClass::Ask, format!("runs {name}"));
    }
}
