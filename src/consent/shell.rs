//! Shell command classifier for the consent rules of the `shell` tool.
//!
//! # Model
//!
//! Every command the agent wants to run gets one of three classes, ordered by severity:
//!
//! - [`ShellClass::Safe`]: a short read-only list (`ls`, `pwd`, `cat`, `head`, `grep`, `git status`,
//!   …) used on paths that are not secret-looking and without writing to files; runs without
//!   consent.
//! - [`ShellClass::Ask`]: everything else; needs consent once per scope.
//! - [`ShellClass::Always`]: dangerous commands (`rm -rf`, `dd of=`, `sudo`, `… | sh`, `eval`,
//!   environment dumps, secret reads, fork bombs, moving or renaming `/`, `~` or a top-level
//!   directory, …) and anything that cannot be analysed; asks every time and is never remembered.
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

use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::time::Duration;

use brush_parser::ast;
use brush_parser::word::{
    self, Parameter, ParameterExpr, TildeExpr, WordPiece, WordPieceWithSource,
};
use brush_parser::{Parser, ParserOptions};

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
    if command.len() > MAX_INPUT_BYTES {
        return always("too long to analyse");
    }
    let command = command.to_owned();
    let secrets: Vec<String> = secrets
        .iter()
        .filter(|s| s.chars().count() >= 4)
        .cloned()
        .collect();
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("shell-classify".to_owned())
        .stack_size(PARSE_STACK_BYTES)
        .spawn(move || {
            let result = catch_unwind(AssertUnwindSafe(|| classify_here(&command, &secrets)))
                .unwrap_or_else(|_| always("classifier error"));
            // The receiver may have given up waiting; nothing to do then.
            let _ = tx.send(result);
        });
    let handle = match spawned {
        Ok(handle) => handle,
        Err(_) => return always("cannot analyse (no thread)"),
    };
    match rx.recv_timeout(ANALYSIS_TIMEOUT) {
        Ok(result) => {
            let _ = handle.join();
            result
        }
        // The thread is left to finish on its own; its result is dropped.
        Err(_) => always("took too long to analyse"),
    }
}

/// Longest command analysed at all.
const MAX_INPUT_BYTES: usize = 64 * 1024;
/// Most nesting constructs (`(`, `{`, `[`, backticks, `if`, `while`, …) in one parsed text. The
/// parser recurses once per nesting level (about 25 KiB of stack per level in a debug build), so
/// this together with [`PARSE_STACK_BYTES`] keeps it far from a stack overflow.
const MAX_OPENERS: usize = 1000;
/// Stack of the analysis thread.
const PARSE_STACK_BYTES: usize = 64 << 20;
/// Deepest nesting the walk follows (substitutions, compound commands, nested shells, wrappers).
const MAX_DEPTH: usize = 48;
/// Most walk steps (commands and words) for one classification.
const MAX_STEPS: usize = 50_000;
/// Most words one brace expansion may produce; beyond it the word is left unexpanded.
const MAX_BRACE_WORDS: usize = 256;
/// Longest word that gets brace-expanded.
const MAX_BRACE_WORD_CHARS: usize = 4096;
/// Time limit for one classification.
const ANALYSIS_TIMEOUT: Duration = Duration::from_secs(5);

fn always(reason: &str) -> Classification {
    Classification {
        class: ShellClass::Always,
        reasons: vec![reason.to_owned()],
    }
}

fn classify_here(command: &str, secrets: &[String]) -> Classification {
    let mut walker = Walker {
        secrets,
        notes: Vec::new(),
        steps: 0,
        functions: Vec::new(),
        assigned: HashSet::new(),
        deferred: Vec::new(),
        commands_seen: 0,
        guessing: false,
        source: Vec::new(),
    };
    walker.walk_script(command, 0, Stdin::Inherited);
    if walker.commands_seen == 0 && walker.notes.is_empty() {
        walker.note(ShellClass::Always, "empty command");
    }
    walker.finish()
}

// ---------------------------------------------------------------------------------------------
// Words
// ---------------------------------------------------------------------------------------------

/// How a character of a word came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Literal and unquoted: subject to brace expansion and globbing.
    Unquoted,
    /// Literal and quoted or escaped.
    Quoted,
    /// Placeholder text for an expansion whose value is not known.
    Dynamic,
}

/// A word after quote removal, with its dynamic parts marked.
#[derive(Debug, Clone, Default)]
struct Arg {
    chars: Vec<(char, Kind)>,
    /// Names of simple `$NAME` / `${NAME}` expansions in the word.
    vars: Vec<String>,
    /// Has an expansion other than a simple named variable (positional, special, operators).
    opaque: bool,
    /// Has a command substitution.
    cmdsub: bool,
    /// Is a process substitution `<(…)` / `>(…)`.
    procsub: bool,
}

impl Arg {
    /// A word of quoted literal text.
    fn literal(s: &str) -> Arg {
        let mut arg = Arg::default();
        arg.push_str(s, Kind::Quoted);
        arg
    }

    fn push_str(&mut self, s: &str, kind: Kind) {
        self.chars.extend(s.chars().map(|c| (c, kind)));
    }

    fn text(&self) -> String {
        self.chars.iter().map(|(c, _)| *c).collect()
    }

    fn is_static(&self) -> bool {
        !self.procsub && self.chars.iter().all(|(_, k)| *k != Kind::Dynamic)
    }

    fn has_glob(&self) -> bool {
        let mut prev: Option<(char, Kind)> = None;
        for (i, &(c, k)) in self.chars.iter().enumerate() {
            if k == Kind::Unquoted && matches!(c, '*' | '?') {
                return true;
            }
            // `[` starts a pattern only with a closing `]` after it (`[` alone is `test`).
            if k == Kind::Unquoted
                && c == '['
                && self.chars[i + 1..]
                    .iter()
                    .any(|&(d, dk)| d == ']' && dk == Kind::Unquoted)
            {
                return true;
            }
            if k == Kind::Unquoted && c == '(' {
                if let Some((p, Kind::Unquoted)) = prev {
                    if matches!(p, '@' | '!' | '+') {
                        return true;
                    }
                }
            }
            prev = Some((c, k));
        }
        false
    }

    fn starts_dynamic(&self) -> bool {
        self.procsub || matches!(self.chars.first(), Some((_, Kind::Dynamic)))
    }

    fn is_dynamic(&self) -> bool {
        !self.is_static()
    }
}

fn texts(argv: &[Arg]) -> Vec<String> {
    argv.iter().map(Arg::text).collect()
}

/// Decodes the body of a `$'…'` word.
fn decode_ansi_c(s: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '\\' || i + 1 >= chars.len() {
            out.push(c);
            i += 1;
            continue;
        }
        let e = chars[i + 1];
        i += 2;
        match e {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'a' => out.push('\u{7}'),
            'b' => out.push('\u{8}'),
            'e' | 'E' => out.push('\u{1b}'),
            'f' => out.push('\u{c}'),
            'v' => out.push('\u{b}'),
            '\\' | '\'' | '"' | '?' => out.push(e),
            'c' => {
                if let Some(&x) = chars.get(i) {
                    out.push(char::from((x as u32 & 0x1f) as u8));
                    i += 1;
                }
            }
            'x' | 'u' | 'U' => {
                let max = match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let mut value: u32 = 0;
                let mut n = 0;
                while n < max {
                    match chars.get(i).and_then(|d| d.to_digit(16)) {
                        Some(d) => {
                            value = value.saturating_mul(16).saturating_add(d);
                            i += 1;
                            n += 1;
                        }
                        None => break,
                    }
                }
                if n == 0 {
                    out.push('\\');
                    out.push(e);
                } else {
                    out.push(char::from_u32(value).unwrap_or('\u{fffd}'));
                }
            }
            '0'..='7' => {
                let mut value: u32 = e.to_digit(8).unwrap_or(0);
                let mut n = 1;
                while n < 3 {
                    match chars.get(i).and_then(|d| d.to_digit(8)) {
                        Some(d) => {
                            value = value * 8 + d;
                            i += 1;
                            n += 1;
                        }
                        None => break,
                    }
                }
                out.push(char::from_u32(value & 0xff).unwrap_or('\u{fffd}'));
            }
            other => {
                out.push('\\');
                out.push(other);
            }
        }
    }
    out
}

/// The code inside backquotes as bash runs it. brush-parser turns `` \` `` into a backtick but
/// leaves the other escapes; bash also removes the backslash before `\`, `$` and, inside double
/// quotes, `"`. Without this, nested backquotes would hide their innermost command.
fn unescape_backquoted(s: &str, in_double_quotes: bool) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('\\') | Some('$') => {
                    out.extend(chars.next());
                    continue;
                }
                Some('"') if in_double_quotes => {
                    out.extend(chars.next());
                    continue;
                }
                _ => {}
            }
        }
        out.push(c);
    }
    out
}

/// Whether the last line of some code is a comment, so that a `)` right after it would be part
/// of the comment for bash.
fn ends_in_comment(code: &str) -> bool {
    let last: Vec<char> = code.rsplit('\n').next().unwrap_or(code).chars().collect();
    last.iter().enumerate().any(|(i, &c)| {
        c == '#' && (i == 0 || last[i - 1].is_whitespace() || ";&|(<>".contains(last[i - 1]))
    })
}

fn tilde_text(t: &TildeExpr) -> String {
    match t {
        TildeExpr::Home => "~".to_owned(),
        TildeExpr::UserHome(user) => format!("~{user}"),
        TildeExpr::WorkingDir => "~+".to_owned(),
        TildeExpr::OldWorkingDir => "~-".to_owned(),
        TildeExpr::NthDirFromTopOfDirStack { n, .. } => format!("~+{n}"),
        TildeExpr::NthDirFromBottomOfDirStack { n } => format!("~-{n}"),
    }
}

fn parameter_name(p: &Parameter) -> Option<&str> {
    match p {
        Parameter::Named(name)
        | Parameter::NamedWithIndex { name, .. }
        | Parameter::NamedWithAllIndices { name, .. } => Some(name),
        Parameter::Positional(_) | Parameter::Special(_) => None,
    }
}

/// The parameter, whether it is indirect (`${!X}`), and every nested string that bash expands
/// when evaluating the expression.
fn parameter_parts(e: &ParameterExpr) -> (Option<&Parameter>, bool, Vec<&str>) {
    fn opt(s: &Option<String>) -> Vec<&str> {
        s.as_deref().into_iter().collect()
    }
    match e {
        ParameterExpr::Parameter {
            parameter,
            indirect,
        }
        | ParameterExpr::ParameterLength {
            parameter,
            indirect,
        }
        | ParameterExpr::Transform {
            parameter,
            indirect,
            ..
        } => (Some(parameter), *indirect, Vec::new()),
        ParameterExpr::UseDefaultValues {
            parameter,
            indirect,
            default_value: v,
            ..
        }
        | ParameterExpr::AssignDefaultValues {
            parameter,
            indirect,
            default_value: v,
            ..
        }
        | ParameterExpr::IndicateErrorIfNullOrUnset {
            parameter,
            indirect,
            error_message: v,
            ..
        }
        | ParameterExpr::UseAlternativeValue {
            parameter,
            indirect,
            alternative_value: v,
            ..
        }
        | ParameterExpr::RemoveSmallestSuffixPattern {
            parameter,
            indirect,
            pattern: v,
        }
        | ParameterExpr::RemoveLargestSuffixPattern {
            parameter,
            indirect,
            pattern: v,
        }
        | ParameterExpr::RemoveSmallestPrefixPattern {
            parameter,
            indirect,
            pattern: v,
        }
        | ParameterExpr::RemoveLargestPrefixPattern {
            parameter,
            indirect,
            pattern: v,
        }
        | ParameterExpr::UppercaseFirstChar {
            parameter,
            indirect,
            pattern: v,
        }
        | ParameterExpr::UppercasePattern {
            parameter,
            indirect,
            pattern: v,
        }
        | ParameterExpr::LowercaseFirstChar {
            parameter,
            indirect,
            pattern: v,
        }
        | ParameterExpr::LowercasePattern {
            parameter,
            indirect,
            pattern: v,
        } => (Some(parameter), *indirect, opt(v)),
        ParameterExpr::Substring {
            parameter,
            indirect,
            offset,
            length,
        } => {
            let mut v = vec![offset.value.as_str()];
            if let Some(l) = length {
                v.push(l.value.as_str());
            }
            (Some(parameter), *indirect, v)
        }
        ParameterExpr::ReplaceSubstring {
            parameter,
            indirect,
            pattern,
            replacement,
            ..
        } => {
            let mut v = vec![pattern.as_str()];
            v.extend(replacement.as_deref());
            (Some(parameter), *indirect, v)
        }
        ParameterExpr::VariableNames { .. } | ParameterExpr::MemberKeys { .. } => {
            (None, false, Vec::new())
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Brace expansion
// ---------------------------------------------------------------------------------------------

type Chars = Vec<(char, Kind)>;

/// Expands unquoted brace expressions (`{a,b}`, `{1..3}`, `{a..c}`) like bash. Returns the word
/// unchanged when it has none, is too long, or expands to too many words.
fn brace_expand(arg: Arg) -> Vec<Arg> {
    let has_brace = arg
        .chars
        .iter()
        .any(|&(c, k)| c == '{' && k == Kind::Unquoted);
    if !has_brace || arg.chars.len() > MAX_BRACE_WORD_CHARS {
        return vec![arg];
    }
    let mut queue: Vec<Chars> = vec![arg.chars.clone()];
    let mut done: Vec<Chars> = Vec::new();
    let mut iterations = 0usize;
    while let Some(chars) = queue.pop() {
        iterations += 1;
        if iterations > MAX_BRACE_WORDS * 8 {
            return vec![arg];
        }
        match find_brace(&chars) {
            None => {
                done.push(chars);
                if done.len() > MAX_BRACE_WORDS {
                    return vec![arg];
                }
            }
            Some((start, end, alternatives)) => {
                for alt in alternatives.into_iter().rev() {
                    let mut next = Vec::with_capacity(chars.len());
                    next.extend_from_slice(&chars[..start]);
                    next.extend(alt);
                    next.extend_from_slice(&chars[end + 1..]);
                    queue.push(next);
                }
                if queue.len() + done.len() > MAX_BRACE_WORDS * 2 {
                    return vec![arg];
                }
            }
        }
    }
    done.into_iter()
        .map(|chars| Arg {
            chars,
            ..arg.clone()
        })
        .collect()
}

/// The first expandable brace expression: its `{` and `}` positions and the alternatives.
fn find_brace(chars: &[(char, Kind)]) -> Option<(usize, usize, Vec<Chars>)> {
    // Match braces and attach top-level commas to their innermost open brace, in one pass.
    let mut stack: Vec<(usize, Vec<usize>)> = Vec::new();
    let mut found: Vec<(usize, usize, Vec<usize>)> = Vec::new();
    for (i, &(c, k)) in chars.iter().enumerate() {
        if k != Kind::Unquoted {
            continue;
        }
        match c {
            '{' => stack.push((i, Vec::new())),
            ',' => {
                if let Some(top) = stack.last_mut() {
                    top.1.push(i);
                }
            }
            '}' => {
                if let Some((open, commas)) = stack.pop() {
                    found.push((open, i, commas));
                }
            }
            _ => {}
        }
    }
    found.sort_by_key(|f| f.0);
    for (open, close, commas) in found {
        if !commas.is_empty() {
            let mut alternatives = Vec::new();
            let mut from = open + 1;
            for comma in commas.iter().copied().chain(std::iter::once(close)) {
                alternatives.push(chars[from..comma].to_vec());
                from = comma + 1;
            }
            return Some((open, close, alternatives));
        }
        let inner: String = chars[open + 1..close].iter().map(|(c, _)| *c).collect();
        if let Some(items) = brace_sequence(&inner) {
            let alternatives = items
                .into_iter()
                .map(|s| s.chars().map(|c| (c, Kind::Quoted)).collect())
                .collect();
            return Some((open, close, alternatives));
        }
    }
    None
}

/// `a..b` or `a..b..step` over integers or single letters.
fn brace_sequence(inner: &str) -> Option<Vec<String>> {
    let parts: Vec<&str> = inner.split("..").collect();
    if parts.len() != 2 && parts.len() != 3 {
        return None;
    }
    let step: i64 = match parts.get(2) {
        Some(s) => s.parse::<i64>().ok()?.checked_abs()?.max(1),
        None => 1,
    };
    let (from, to, letters) = match (parts[0].parse::<i64>(), parts[1].parse::<i64>()) {
        (Ok(a), Ok(b)) => (a, b, false),
        _ => {
            let mut a = parts[0].chars();
            let mut b = parts[1].chars();
            match (a.next(), a.next(), b.next(), b.next()) {
                (Some(x), None, Some(y), None)
                    if x.is_ascii_alphabetic() && y.is_ascii_alphabetic() =>
                {
                    (x as i64, y as i64, true)
                }
                _ => return None,
            }
        }
    };
    let count = (from.abs_diff(to) / step.unsigned_abs()).saturating_add(1);
    if count > MAX_BRACE_WORDS as u64 {
        return None;
    }
    let mut out = Vec::new();
    let mut v = from;
    for _ in 0..count {
        if letters {
            out.push(char::from_u32(u32::try_from(v).ok()?)?.to_string());
        } else {
            out.push(v.to_string());
        }
        v = if from <= to {
            v.saturating_add(step)
        } else {
            v.saturating_sub(step)
        };
    }
    Some(out)
}

// ---------------------------------------------------------------------------------------------
// Paths
// ---------------------------------------------------------------------------------------------

/// Representative names that secret-looking path components match; used to test globs.
const SECRET_SAMPLES: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".docker",
    ".kube",
    ".netrc",
    ".git-credentials",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    ".envrc",
    ".env",
    ".env.local",
    "prod.env",
    "server.pem",
    "server.key",
    "cert.p12",
    "cert.pfx",
    "store.jks",
    "key.ppk",
    "credentials",
    "credentials.json",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    ".ethan",
];

/// Whether one path component looks like it holds secrets: the one list the file tools and the
/// sandbox use ([`crate::sandbox::protected::secret_looking`]).
fn secret_component(c: &str) -> bool {
    crate::sandbox::protected::secret_looking(c)
}

fn is_component_separator(c: char) -> bool {
    matches!(c, '/' | '=' | ':' | '@' | ',' | ';') || c.is_whitespace()
}

/// The secret-looking part of a word, if any: a literal component, a glob that could match one,
/// or a system file that holds secrets.
fn secret_path(arg: &Arg) -> Option<String> {
    let text = arg.text();
    let lower = text.to_lowercase();
    for component in lower.split(is_component_separator) {
        if secret_component(component) {
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

#[derive(Debug, Clone)]
enum Pat {
    Lit(char),
    Any,
    Star,
    Class {
        ranges: Vec<(char, char)>,
        negated: bool,
        any: bool,
    },
}

fn compile_glob(chars: &[(char, Kind)]) -> Vec<Pat> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let (c, k) = chars[i];
        let c = c.to_ascii_lowercase();
        if k != Kind::Unquoted {
            out.push(Pat::Lit(c));
            i += 1;
            continue;
        }
        match c {
            '*' => {
                if !matches!(out.last(), Some(Pat::Star)) {
                    out.push(Pat::Star);
                }
                i += 1;
            }
            '?' => {
                out.push(Pat::Any);
                i += 1;
            }
            '[' => {
                let mut j = i + 1;
                let mut negated = false;
                if matches!(chars.get(j), Some(('!' | '^', _))) {
                    negated = true;
                    j += 1;
                }
                let mut ranges = Vec::new();
                let mut any = false;
                let mut first = true;
                let mut closed = None;
                while j < chars.len() {
                    let (d, _) = chars[j];
                    if d == ']' && !first {
                        closed = Some(j);
                        break;
                    }
                    first = false;
                    if d == '[' && matches!(chars.get(j + 1), Some((':' | '=' | '.', _))) {
                        any = true;
                        // Skip to the closing `:]`.
                        let mut m = j + 2;
                        while m + 1 < chars.len() && chars[m + 1].0 != ']' {
                            m += 1;
                        }
                        j = m + 2;
                        continue;
                    }
                    let d = d.to_ascii_lowercase();
                    if matches!(chars.get(j + 1), Some(('-', _)))
                        && chars.get(j + 2).is_some_and(|(e, _)| *e != ']')
                    {
                        let e = chars[j + 2].0.to_ascii_lowercase();
                        ranges.push((d.min(e), d.max(e)));
                        j += 3;
                    } else {
                        ranges.push((d, d));
                        j += 1;
                    }
                }
                match closed {
                    Some(end) => {
                        out.push(Pat::Class {
                            ranges,
                            negated,
                            any,
                        });
                        i = end + 1;
                    }
                    None => {
                        out.push(Pat::Lit('['));
                        i += 1;
                    }
                }
            }
            _ => {
                out.push(Pat::Lit(c));
                i += 1;
            }
        }
    }
    out
}

fn pat_matches_char(p: &Pat, c: char) -> bool {
    match p {
        Pat::Lit(l) => *l == c,
        Pat::Any => true,
        Pat::Star => true,
        Pat::Class {
            ranges,
            negated,
            any,
        } => {
            if *any {
                return true;
            }
            let hit = ranges.iter().any(|(a, b)| *a <= c && c <= *b);
            hit != *negated
        }
    }
}

/// Glob matching with backtracking on the last star: O(pattern × text).
fn glob_match(pattern: &[Pat], text: &[char]) -> bool {
    let (mut p, mut t) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(Pat::Star) => {
                star = Some((p, t));
                p += 1;
            }
            Some(pat) if pat_matches_char(pat, text[t]) => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    while matches!(pattern.get(p), Some(Pat::Star)) {
        p += 1;
    }
    p == pattern.len()
}

/// Lexically normalises an absolute path (`//`, `.`, `..`); other paths are returned as given.
fn normalize_path(path: &str) -> String {
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
fn is_top_level_dir(text: &str) -> bool {
    if let Some(rest) = text
        .strip_prefix("$HOME")
        .or_else(|| text.strip_prefix('~'))
    {
        return rest.is_empty() || (rest.starts_with('/') && normalize_path(rest) == "/");
    }
    let path = normalize_path(text);
    path.starts_with('/') && path.matches('/').count() == 1
}

fn under(path: &str, dir: &str) -> bool {
    path == dir
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

const HARMLESS_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/tty",
    "/dev/fd/1",
    "/dev/fd/2",
];

/// Whether writing to this path is dangerous, and why.
fn dangerous_write_target(text: &str) -> Option<String> {
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

fn shorten(s: &str) -> String {
    const MAX: usize = 48;
    if s.chars().count() <= MAX {
        s.to_owned()
    } else {
        let mut out: String = s.chars().take(MAX).collect();
        out.push('…');
        out
    }
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A short option cluster like `-rf` (not `--long`, not `-`).
fn short_cluster(s: &str) -> Option<&str> {
    s.strip_prefix('-')
        .filter(|rest| !rest.is_empty() && !rest.starts_with('-'))
}

/// Whether an argument is a long option that `name` abbreviates (GNU getopt accepts unique
/// prefixes of at least a few letters).
fn long_option_is(arg: &str, name: &str) -> bool {
    let arg = arg.split('=').next().unwrap_or(arg);
    arg.len() >= 3 && name.starts_with(arg)
}

// ---------------------------------------------------------------------------------------------
// The daemon's own files and secrets
// ---------------------------------------------------------------------------------------------

const DAEMON_MARKERS: &[&str] = &[
    "ethan_home",
    "openai_api_key",
    "telegram_bot_token",
    "lark_app_secret",
    "ethan__",
    "ethan.db",
];

/// Variables that make ordinary programs run code of the caller's choice.
const CODE_VARIABLES: &[&str] = &[
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    "PS4",
    "SHELLOPTS",
    "BASHOPTS",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_EXTERNAL_DIFF",
    "GIT_PAGER",
    "GIT_EDITOR",
    "GIT_ASKPASS",
    "GIT_EXEC_PATH",
    "GIT_CONFIG_PARAMETERS",
    "SSH_ASKPASS",
    "PAGER",
    "MANPAGER",
    "EDITOR",
    "VISUAL",
    "LESSOPEN",
    "PYTHONSTARTUP",
    "PYTHONPATH",
    "NODE_OPTIONS",
    "PERL5OPT",
    "PERL5LIB",
    "RUBYOPT",
    "RIPGREP_CONFIG_PATH",
    "GIT_DIR",
    "GIT_WORK_TREE",
];

/// Environment variables that are harmless to use in arguments of read-only commands, as long as
/// the command does not set them itself.
const BENIGN_VARIABLES: &[&str] = &["HOME", "PWD", "OLDPWD", "USER", "LOGNAME", "TMPDIR"];

/// An environment variable (upper case by convention) whose name suggests a secret value.
fn secret_variable(name: &str) -> bool {
    name.chars()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && [
            "KEY",
            "TOKEN",
            "SECRET",
            "PASSWORD",
            "PASSWD",
            "CREDENTIAL",
            "PRIVATE",
        ]
        .iter()
        .any(|w| name.contains(w))
}

fn mentions_ethan_dir(lower: &str) -> bool {
    let bytes = lower.as_bytes();
    let mut from = 0;
    while let Some(pos) = lower[from..].find(".ethan") {
        let start = from + pos;
        let end = start + ".ethan".len();
        let before_ok = start == 0 || !bytes[start - 1].is_ascii_alphanumeric();
        let after_ok = end >= bytes.len()
            || !(bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_' || bytes[end] == b'-');
        if before_ok && after_ok {
            return true;
        }
        from = end;
    }
    false
}

// ---------------------------------------------------------------------------------------------
// The walk
// ---------------------------------------------------------------------------------------------

/// Where a command's standard input comes from, as far as it matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Stdin {
    /// The tool's own standard input.
    #[default]
    Inherited,
    /// A pipe or other data produced by the command line itself.
    Piped,
}

/// Standard input of one simple command after its redirections.
#[derive(Debug, Clone)]
enum Input {
    Inherited,
    Piped,
    /// A here-document or here-string; `is_static` is false when it has expansions.
    Text {
        text: String,
        is_static: bool,
    },
    /// `< file`.
    File(Arg),
}

impl Input {
    fn as_stdin(&self) -> Stdin {
        match self {
            Input::Inherited => Stdin::Inherited,
            _ => Stdin::Piped,
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Ctx {
    stdin: Stdin,
    /// Inside a pipeline of two or more commands.
    pipeline: bool,
    /// Run in the background (`&`).
    background: bool,
    /// Gets extra arguments from its input (`xargs`).
    args_from_input: bool,
}

impl Ctx {
    fn nested(stdin: Stdin) -> Ctx {
        Ctx {
            stdin,
            ..Ctx::default()
        }
    }
}

struct Walker<'a> {
    secrets: &'a [String],
    notes: Vec<(ShellClass, String)>,
    steps: usize,
    /// Functions whose bodies are being walked.
    functions: Vec<String>,
    /// Every variable name the command sets in any way we can see.
    assigned: HashSet<String>,
    /// Checks on benign variables, decided at the end: (variable, class, reason).
    deferred: Vec<(String, ShellClass, String)>,
    /// Commands of any kind seen.
    commands_seen: usize,
    /// Inside a guess at commands embedded in an unknown command's arguments (no nested guesses).
    guessing: bool,
    /// The characters of the script being walked (source spans index into it).
    source: Vec<char>,
}

const SHELLS: &[&str] = &[
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

const SAFE_COMMANDS: &[&str] = &[
    "ls", "pwd", "echo", "printf", "cat", "head", "tail", "wc", "stat", "file", "du", "df", "date",
    "whoami", "id", "uname", "hostname", "uptime", "which", "type", "grep", "egrep", "fgrep", "rg",
    "sort", "uniq", "cut", "tr", "diff", "tree", "cd", "true", "false", ":", "test", "[",
    "basename", "dirname", "realpath", "readlink", "nl", "seq", "sleep", "cmp", "read", "unset",
    "shift", "wait", "exit", "return", "break", "continue", "let", "pushd", "popd", "dirs",
];

/// Safe commands that may take dynamic arguments: they neither read files nor run anything.
const DYNAMIC_ARGS_OK: &[&str] = &[
    "echo", "printf", "true", "false", ":", "test", "[", "sleep", "read", "unset", "shift", "wait",
    "exit", "return", "break", "continue", "let", "seq",
];

/// Names that, found among the arguments of an unknown command, suggest it runs them.
const EMBEDDED_TRIGGERS: &[&str] = &[
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
    fn note(&mut self, class: ShellClass, reason: impl Into<String>) {
        if class == ShellClass::Safe {
            return;
        }
        let reason = reason.into();
        if !self.notes.iter().any(|(c, r)| *c == class && *r == reason) {
            self.notes.push((class, reason));
        }
    }

    fn finish(mut self) -> Classification {
        for (var, class, reason) in std::mem::take(&mut self.deferred) {
            if self.assigned.contains(&var) {
                self.note(class, reason);
            }
        }
        let class = self
            .notes
            .iter()
            .map(|(c, _)| *c)
            .max()
            .unwrap_or(ShellClass::Safe);
        let reasons = self
            .notes
            .into_iter()
            .filter(|(c, _)| *c == class)
            .map(|(_, r)| r)
            .collect();
        Classification { class, reasons }
    }

    /// Counts one step of work; false once the budget is spent.
    fn tick(&mut self) -> bool {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            self.note(ShellClass::Always, "too complex to analyse");
            return false;
        }
        true
    }

    fn deep(&mut self, depth: usize) -> bool {
        if depth > MAX_DEPTH {
            self.note(ShellClass::Always, "nested too deeply");
            return true;
        }
        false
    }

    /// References to configured secrets or to the daemon's own files and variables.
    fn check_text(&mut self, text: &str) {
        if self
            .secrets
            .iter()
            .any(|s| !s.is_empty() && text.contains(s.as_str()))
        {
            self.note(ShellClass::Always, "contains a configured secret");
        }
        let lower = text.to_lowercase();
        if DAEMON_MARKERS.iter().any(|m| lower.contains(m)) || mentions_ethan_dir(&lower) {
            self.note(
                ShellClass::Always,
                "references the daemon's own files or secrets",
            );
        }
    }

    fn check_secret_path(&mut self, arg: &Arg) {
        if let Some(p) = secret_path(arg) {
            self.note(
                ShellClass::Always,
                format!("touches a secret-looking path ({})", shorten(&p)),
            );
        }
    }

    // --- scripts -------------------------------------------------------------------------------

    /// Parses and walks a piece of shell code.
    fn walk_script(&mut self, src: &str, depth: usize, stdin: Stdin) {
        self.walk_script_ctx(src, depth, Ctx::nested(stdin));
    }

    /// Parses and walks a piece of shell code run in a given context.
    fn walk_script_ctx(&mut self, src: &str, depth: usize, ctx: Ctx) {
        if self.deep(depth) || !self.tick() {
            return;
        }
        self.check_text(src);
        if src.len() > MAX_INPUT_BYTES {
            self.note(ShellClass::Always, "too long to analyse");
            return;
        }
        if count_openers(src) > MAX_OPENERS {
            self.note(ShellClass::Always, "too complex to analyse");
            return;
        }
        if has_oversized_fd_number(src) {
            self.note(ShellClass::Always, "a file descriptor number out of range");
            return;
        }
        let mut parser = Parser::new(
            std::io::Cursor::new(src.as_bytes()),
            &ParserOptions::default(),
        );
        let program = match parser.parse_program() {
            Ok(program) => program,
            Err(_) => {
                self.note(ShellClass::Always, "cannot parse");
                return;
            }
        };
        let outer = std::mem::replace(&mut self.source, src.chars().collect());
        for list in &program.complete_commands {
            self.walk_list(list, ctx, depth);
        }
        self.source = outer;
    }

    fn walk_list(&mut self, list: &ast::CompoundList, ctx: Ctx, depth: usize) {
        if self.deep(depth) {
            return;
        }
        for ast::CompoundListItem(and_or, sep) in &list.0 {
            let background = matches!(sep, ast::SeparatorOperator::Async);
            let ctx = Ctx {
                background: ctx.background || background,
                ..ctx
            };
            self.walk_pipeline(&and_or.first, ctx, depth);
            for next in &and_or.additional {
                match next {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => self.walk_pipeline(p, ctx, depth),
                }
            }
        }
    }

    fn walk_pipeline(&mut self, pipeline: &ast::Pipeline, ctx: Ctx, depth: usize) {
        let many = pipeline.seq.len() > 1;
        for (i, command) in pipeline.seq.iter().enumerate() {
            let ctx = Ctx {
                stdin: if i == 0 { ctx.stdin } else { Stdin::Piped },
                pipeline: ctx.pipeline || many,
                ..ctx
            };
            self.walk_command(command, ctx, depth);
        }
    }

    fn walk_command(&mut self, command: &ast::Command, ctx: Ctx, depth: usize) {
        if self.deep(depth) || !self.tick() {
            return;
        }
        self.commands_seen += 1;
        match command {
            ast::Command::Simple(simple) => self.walk_simple(simple, ctx, depth),
            ast::Command::Compound(compound, redirects) => {
                let stdin = self.walk_redirect_list(redirects.as_ref(), ctx, depth);
                let ctx = Ctx { stdin, ..ctx };
                self.walk_compound(compound, ctx, depth + 1);
            }
            ast::Command::Function(def) => self.walk_function(def, depth + 1),
            ast::Command::ExtendedTest(test, redirects) => {
                self.walk_redirect_list(redirects.as_ref(), ctx, depth);
                self.walk_extended_test(&test.expr, ctx, depth + 1);
            }
        }
    }

    /// Walks the redirections of a compound command; returns the stdin its body sees.
    fn walk_redirect_list(
        &mut self,
        redirects: Option<&ast::RedirectList>,
        ctx: Ctx,
        depth: usize,
    ) -> Stdin {
        let mut input = match ctx.stdin {
            Stdin::Inherited => Input::Inherited,
            Stdin::Piped => Input::Piped,
        };
        if let Some(list) = redirects {
            for r in &list.0 {
                self.walk_redirect(r, ctx, depth, &mut input);
            }
        }
        input.as_stdin()
    }

    fn walk_function(&mut self, def: &ast::FunctionDefinition, depth: usize) {
        if self.deep(depth) {
            return;
        }
        let name = def.fname.value.clone();
        self.functions.push(name);
        let ast::FunctionBody(body, redirects) = &def.body;
        let stdin = self.walk_redirect_list(redirects.as_ref(), Ctx::default(), depth);
        self.walk_compound(body, Ctx::nested(stdin), depth + 1);
        self.functions.pop();
    }

    fn walk_compound(&mut self, compound: &ast::CompoundCommand, ctx: Ctx, depth: usize) {
        if self.deep(depth) {
            return;
        }
        let plain = Ctx::nested(ctx.stdin);
        match compound {
            ast::CompoundCommand::Arithmetic(a) => {
                // brush-parser reads `( ( cmd ) )` and `((cmd) )` as arithmetic; bash reads them
                // as nested subshells. Only adjacent `((` … `))` is arithmetic in bash, and even
                // that is two subshells in a POSIX shell such as dash (the shell tool's fallback
                // and what `sh -c` runs on many systems), so that reading is walked too.
                let span = self
                    .source
                    .get(a.loc.start.index..a.loc.end.index)
                    .map(|chars| chars.iter().collect::<String>().trim().to_owned());
                let squeeze =
                    |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
                match span {
                    Some(text)
                        if text.starts_with("((") && text.ends_with("))") && text.len() >= 4 =>
                    {
                        if squeeze(&text[2..text.len() - 2]) != squeeze(&a.expr.value) {
                            self.note(
                                ShellClass::Always,
                                "cannot parse (arithmetic changed by the parser)",
                            );
                        }
                        self.walk_arithmetic(&a.expr.value, plain, depth);
                        let mut inner = self.sub_walker();
                        inner.walk_script(&text[2..text.len() - 2], depth + 1, ctx.stdin);
                        self.absorb(inner, |r| !r.starts_with("cannot parse"));
                    }
                    Some(text)
                        if text.starts_with('(') && text.ends_with(')') && text.len() >= 2 =>
                    {
                        let inner = &text[1..text.len() - 1];
                        self.walk_script(inner, depth + 1, ctx.stdin);
                    }
                    _ => {
                        self.walk_arithmetic(&a.expr.value, plain, depth);
                        self.walk_script(&a.expr.value, depth + 1, ctx.stdin);
                    }
                }
            }
            ast::CompoundCommand::ArithmeticForClause(f) => {
                for e in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    self.walk_arithmetic(&e.value, plain, depth);
                }
                self.walk_list(&f.body.list, ctx, depth + 1);
            }
            ast::CompoundCommand::BraceGroup(g) => self.walk_list(&g.list, ctx, depth + 1),
            ast::CompoundCommand::Subshell(s) => self.walk_list(&s.list, ctx, depth + 1),
            ast::CompoundCommand::ForClause(f) => {
                self.assigned.insert(f.variable_name.clone());
                if let Some(values) = &f.values {
                    for w in values {
                        let arg = self.ast_word(w, plain, depth);
                        self.check_text(&arg.text());
                    }
                }
                self.walk_list(&f.body.list, ctx, depth + 1);
            }
            ast::CompoundCommand::CaseClause(c) => {
                self.ast_word(&c.value, plain, depth);
                for item in &c.cases {
                    for p in &item.patterns {
                        self.ast_word(p, plain, depth);
                    }
                    if let Some(list) = &item.cmd {
                        self.walk_list(list, ctx, depth + 1);
                    }
                }
            }
            ast::CompoundCommand::IfClause(i) => {
                self.walk_list(&i.condition, ctx, depth + 1);
                self.walk_list(&i.then, ctx, depth + 1);
                for e in i.elses.iter().flatten() {
                    if let Some(cond) = &e.condition {
                        self.walk_list(cond, ctx, depth + 1);
                    }
                    self.walk_list(&e.body, ctx, depth + 1);
                }
            }
            ast::CompoundCommand::WhileClause(w) | ast::CompoundCommand::UntilClause(w) => {
                self.walk_list(&w.0, ctx, depth + 1);
                self.walk_list(&w.1.list, ctx, depth + 1);
            }
            ast::CompoundCommand::Coprocess(c) => {
                if let Some(name) = &c.name {
                    self.ast_word(name, plain, depth);
                }
                let ctx = Ctx {
                    background: true,
                    ..ctx
                };
                self.walk_command(&c.body, ctx, depth + 1);
            }
        }
    }

    fn walk_extended_test(&mut self, expr: &ast::ExtendedTestExpr, ctx: Ctx, depth: usize) {
        if self.deep(depth) || !self.tick() {
            return;
        }
        match expr {
            ast::ExtendedTestExpr::And(a, b) | ast::ExtendedTestExpr::Or(a, b) => {
                self.walk_extended_test(a, ctx, depth + 1);
                self.walk_extended_test(b, ctx, depth + 1);
            }
            ast::ExtendedTestExpr::Not(a) | ast::ExtendedTestExpr::Parenthesized(a) => {
                self.walk_extended_test(a, ctx, depth + 1);
            }
            ast::ExtendedTestExpr::UnaryTest(_, w) => {
                let arg = self.ast_word(w, Ctx::nested(ctx.stdin), depth);
                self.check_arg_common(&arg);
                self.check_arith_injection(&arg, depth);
            }
            ast::ExtendedTestExpr::BinaryTest(_, a, b) => {
                for w in [a, b] {
                    let arg = self.ast_word(w, Ctx::nested(ctx.stdin), depth);
                    self.check_arg_common(&arg);
                    self.check_arith_injection(&arg, depth);
                }
            }
        }
    }

    /// Arithmetic text (`$(( … ))`, `(( … ))`, subscripts): substitutions inside run.
    fn walk_arithmetic(&mut self, text: &str, ctx: Ctx, depth: usize) {
        if self.deep(depth) || !self.tick() {
            return;
        }
        self.check_text(text);
        // Quotes do not quote inside arithmetic: `$(( '$(cmd)' ))` runs cmd.
        let parsed = word::parse_heredoc(text, &ParserOptions::default())
            .or_else(|_| word::parse(text, &ParserOptions::default()));
        match parsed {
            Ok(pieces) => {
                let mut arg = Arg::default();
                self.pieces(&pieces, false, &mut arg, ctx, depth + 1);
                let literal: String = arg
                    .chars
                    .iter()
                    .filter(|(_, k)| *k != Kind::Dynamic)
                    .map(|(c, _)| *c)
                    .collect();
                if literal.contains("$(") || literal.contains('`') {
                    self.note(ShellClass::Always, "command substitution inside arithmetic");
                }
            }
            Err(_) => {
                if text.contains("$(") || text.contains('`') {
                    self.note(ShellClass::Always, "cannot parse arithmetic");
                }
            }
        }
    }

    /// A literal value that bash evaluates arithmetically (array subscripts in `let`, `declare`,
    /// `test`, `[[ ]]`, `read`, `printf -v`, …) runs the substitutions it contains.
    fn check_arith_injection(&mut self, arg: &Arg, depth: usize) {
        let text = arg.text();
        if arg.is_static() && (text.contains("$(") || text.contains('`')) {
            self.walk_arithmetic(&text, Ctx::default(), depth + 1);
            self.note(
                ShellClass::Always,
                "quoted command substitution in an arithmetic context",
            );
        }
    }

    // --- words ---------------------------------------------------------------------------------

    /// [`Self::word`] for a word of the syntax tree, after checking that the parser kept it as
    /// written: a word that differs from its source text was mangled by the tokenizer (it does so
    /// with substitutions on the line of a pending here-document), so what bash runs is unknown.
    fn ast_word(&mut self, w: &ast::Word, ctx: Ctx, depth: usize) -> Arg {
        self.verify_word(w);
        self.word(&w.value, ctx, depth)
    }

    fn verify_word(&mut self, w: &ast::Word) {
        let Some(loc) = &w.loc else {
            return;
        };
        let source: Option<String> = self
            .source
            .get(loc.start.index..loc.end.index)
            .map(|chars| chars.iter().collect());
        // Positions after a pending here-document can be one off, hence the trimming.
        let matches = source.is_some_and(|text| {
            let text = text.trim();
            text == w.value || text.replace("\\\n", "") == w.value
        });
        if !matches {
            self.note(
                ShellClass::Always,
                "cannot parse (word changed by the parser)",
            );
        }
    }

    /// A here-document body starts on a line after its `<<` operator; brush-parser sometimes
    /// loses tokens around here-documents inside `((…) )`, which shows up as a body on the same
    /// line.
    fn verify_here_document(&mut self, doc: &ast::IoHereDocument) {
        let (Some(end), Some(body)) = (&doc.here_end.loc, &doc.doc.loc) else {
            return;
        };
        if doc.doc.value.is_empty() {
            return;
        }
        let between = self.source.get(end.end.index..body.start.index);
        if !between.is_some_and(|chars| chars.contains(&'\n')) {
            self.note(ShellClass::Always, "cannot parse (here-document)");
        }
    }

    /// Parses a word, walks the commands it runs, and returns it after quote removal.
    fn word(&mut self, raw: &str, ctx: Ctx, depth: usize) -> Arg {
        let mut arg = Arg::default();
        if !self.tick() {
            arg.push_str(raw, Kind::Dynamic);
            return arg;
        }
        if self.deep(depth) {
            arg.push_str(raw, Kind::Dynamic);
            return arg;
        }
        match word::parse(raw, &ParserOptions::default()) {
            Ok(pieces) => self.pieces(&pieces, false, &mut arg, ctx, depth),
            Err(_) => {
                self.note(ShellClass::Always, "cannot parse (word)");
                arg.push_str(raw, Kind::Dynamic);
                arg.opaque = true;
            }
        }
        arg
    }

    fn pieces(
        &mut self,
        pieces: &[WordPieceWithSource],
        quoted: bool,
        arg: &mut Arg,
        ctx: Ctx,
        depth: usize,
    ) {
        if self.deep(depth) {
            return;
        }
        let literal = if quoted { Kind::Quoted } else { Kind::Unquoted };
        // Literal text (unquoted or double-quoted) just before the current piece.
        let mut text_before = String::new();
        for p in pieces {
            if let WordPiece::Text(s) = &p.piece {
                // brush-parser keeps a substitution it cannot parse as literal text (`$`,
                // `(cmd …`); bash would run it. Such text means the word was not understood.
                text_before.push_str(s);
                if ["$(", "${", "$[", "`"]
                    .iter()
                    .any(|m| text_before.contains(m))
                {
                    self.note(ShellClass::Always, "cannot parse (substitution)");
                }
            } else {
                text_before.clear();
            }
            match &p.piece {
                WordPiece::Text(s) => arg.push_str(s, literal),
                WordPiece::SingleQuotedText(s) => arg.push_str(s, Kind::Quoted),
                WordPiece::AnsiCQuotedText(s) => arg.push_str(&decode_ansi_c(s), Kind::Quoted),
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    self.pieces(inner, true, arg, ctx, depth + 1);
                }
                WordPiece::TildeExpansion(t) => arg.push_str(&tilde_text(t), Kind::Quoted),
                WordPiece::ParameterExpansion(e) => self.parameter(e, arg, ctx, depth),
                WordPiece::CommandSubstitution(s) => {
                    if ends_in_comment(s) {
                        // bash does not close `$(` inside a comment; brush-parser's word parser
                        // does, so the text after it would be misread as literal.
                        self.note(ShellClass::Always, "cannot parse (comment in substitution)");
                    }
                    self.walk_script(s, depth + 1, ctx.stdin);
                    arg.push_str("$(…)", Kind::Dynamic);
                    arg.cmdsub = true;
                }
                WordPiece::BackquotedCommandSubstitution(s) => {
                    self.walk_script(&unescape_backquoted(s, quoted), depth + 1, ctx.stdin);
                    arg.push_str("$(…)", Kind::Dynamic);
                    arg.cmdsub = true;
                }
                WordPiece::EscapeSequence(s) => {
                    let rest: String = s.chars().skip(1).collect();
                    if rest != "\n" {
                        arg.push_str(&rest, Kind::Quoted);
                    }
                }
                WordPiece::ArithmeticExpression(e) => {
                    self.walk_arithmetic(&e.value, ctx, depth + 1);
                    arg.push_str("$((…))", Kind::Dynamic);
                    arg.opaque = true;
                }
            }
        }
    }

    fn parameter(&mut self, e: &ParameterExpr, arg: &mut Arg, ctx: Ctx, depth: usize) {
        let (param, indirect, nested) = parameter_parts(e);
        if indirect {
            self.note(ShellClass::Always, "indirect variable expansion");
        }
        if matches!(
            e,
            ParameterExpr::Transform {
                op: word::ParameterTransformOp::PromptExpand,
                ..
            }
        ) {
            self.note(ShellClass::Always, "prompt expansion of a variable");
        }
        if let Some(Parameter::NamedWithIndex { index, .. }) = param {
            self.walk_arithmetic(index, ctx, depth + 1);
        }
        for s in nested {
            if s.contains('$') || s.contains('`') || s.contains('<') || s.contains('>') {
                let inner = self.word(s, ctx, depth + 1);
                self.check_text(&inner.text());
                // Inside double quotes, single quotes in these operands do not quote: bash runs
                // the `$(…)` in `"${x:-'$(cmd)'}"`. Walk that reading too.
                if s.contains('\'') {
                    if let Ok(pieces) = word::parse_heredoc(s, &ParserOptions::default()) {
                        let mut ignored = Arg::default();
                        self.pieces(&pieces, true, &mut ignored, ctx, depth + 1);
                    }
                }
            }
        }
        let name = param.and_then(parameter_name);
        if let Some(name) = name {
            self.check_text(name);
            if secret_variable(name) {
                self.note(
                    ShellClass::Always,
                    format!("uses a secret-looking variable (${name})"),
                );
            }
        }
        match (e, name) {
            (
                ParameterExpr::Parameter {
                    parameter: Parameter::Named(n),
                    indirect: false,
                },
                _,
            ) => {
                arg.push_str(&format!("${n}"), Kind::Dynamic);
                arg.vars.push(n.clone());
            }
            (_, Some(n)) => {
                arg.push_str(&format!("${{{n}…}}"), Kind::Dynamic);
                arg.opaque = true;
            }
            _ => {
                arg.push_str("${…}", Kind::Dynamic);
                arg.opaque = true;
            }
        }
    }

    // --- redirections --------------------------------------------------------------------------

    fn walk_redirect(&mut self, r: &ast::IoRedirect, ctx: Ctx, depth: usize, input: &mut Input) {
        let plain = Ctx::nested(ctx.stdin);
        let is_stdin = |fd: &Option<ast::IoFd>| fd.is_none_or(|fd| fd == 0);
        match r {
            ast::IoRedirect::File(fd, kind, target) => match target {
                ast::IoFileRedirectTarget::Filename(w) => {
                    let arg = self.ast_word(w, plain, depth);
                    self.check_arg_common(&arg);
                    match kind {
                        ast::IoFileRedirectKind::Read => {
                            if is_stdin(fd) {
                                *input = Input::File(arg);
                            }
                        }
                        ast::IoFileRedirectKind::DuplicateInput => {}
                        _ => self.write_target(&arg),
                    }
                }
                ast::IoFileRedirectTarget::Fd(_) => {}
                ast::IoFileRedirectTarget::Duplicate(w) => {
                    let arg = self.ast_word(w, plain, depth);
                    let text = arg.text();
                    let is_fd = arg.is_static()
                        && (text == "-"
                            || text
                                .trim_end_matches('-')
                                .chars()
                                .all(|c| c.is_ascii_digit()));
                    if matches!(kind, ast::IoFileRedirectKind::DuplicateOutput) && !is_fd {
                        self.check_arg_common(&arg);
                        self.write_target(&arg);
                    }
                }
                ast::IoFileRedirectTarget::ProcessSubstitution(pkind, sub) => {
                    let inner_stdin = match pkind {
                        ast::ProcessSubstitutionKind::Write => Stdin::Piped,
                        ast::ProcessSubstitutionKind::Read => ctx.stdin,
                    };
                    self.walk_list(&sub.list, Ctx::nested(inner_stdin), depth + 1);
                    if matches!(kind, ast::IoFileRedirectKind::Read) && is_stdin(fd) {
                        *input = Input::Piped;
                    }
                }
            },
            ast::IoRedirect::HereDocument(fd, doc) => {
                self.verify_here_document(doc);
                let mut is_static = true;
                if doc.requires_expansion {
                    match word::parse_heredoc(&doc.doc.value, &ParserOptions::default()) {
                        Ok(pieces) => {
                            let mut arg = Arg::default();
                            self.pieces(&pieces, true, &mut arg, plain, depth + 1);
                            is_static = arg.is_static();
                        }
                        Err(_) => {
                            self.note(ShellClass::Always, "cannot parse (here-document)");
                            is_static = false;
                        }
                    }
                }
                if is_stdin(fd) {
                    *input = Input::Text {
                        text: doc.doc.value.clone(),
                        is_static,
                    };
                }
            }
            ast::IoRedirect::HereString(fd, w) => {
                let arg = self.ast_word(w, plain, depth);
                self.check_text(&arg.text());
                if is_stdin(fd) {
                    *input = Input::Text {
                        text: arg.text(),
                        is_static: arg.is_static(),
                    };
                }
            }
            ast::IoRedirect::OutputAndError(w, _) => {
                let arg = self.ast_word(w, plain, depth);
                self.check_arg_common(&arg);
                self.write_target(&arg);
            }
        }
    }

    /// Writing to a file given by `arg` (a redirection, `tee`, …).
    fn write_target(&mut self, arg: &Arg) {
        let text = arg.text();
        if arg.procsub {
            return;
        }
        if arg.has_glob() {
            self.note(
                ShellClass::Always,
                format!("writes to a glob pattern ({})", shorten(&text)),
            );
            return;
        }
        if let Some(reason) = dangerous_write_target(&text) {
            self.note(ShellClass::Always, reason);
            return;
        }
        if HARMLESS_DEVICES.contains(&normalize_path(&text).as_str()) {
            return;
        }
        if arg.starts_dynamic() {
            let benign_start = arg.vars.first().is_some_and(|v| {
                BENIGN_VARIABLES.contains(&v.as_str()) && text.starts_with(&format!("${v}"))
            });
            if !benign_start {
                self.note(
                    ShellClass::Always,
                    format!("writes to a non-literal path ({})", shorten(&text)),
                );
                return;
            }
            if let Some(v) = arg.vars.first() {
                self.deferred.push((
                    v.clone(),
                    ShellClass::Always,
                    format!("writes to a path built from a reassigned ${v}"),
                ));
            }
        }
        self.note(
            ShellClass::Ask,
            format!("writes to a file ({})", shorten(&text)),
        );
    }

    /// Checks every argument gets: the daemon's secrets and secret-looking paths.
    fn check_arg_common(&mut self, arg: &Arg) {
        self.check_text(&arg.text());
        self.check_secret_path(arg);
    }

    // --- simple commands -----------------------------------------------------------------------

    fn walk_simple(&mut self, cmd: &ast::SimpleCommand, ctx: Ctx, depth: usize) {
        let plain = Ctx::nested(ctx.stdin);
        let mut input = match ctx.stdin {
            Stdin::Inherited => Input::Inherited,
            Stdin::Piped => Input::Piped,
        };
        let mut words: Vec<Arg> = Vec::new();
        let prefix = cmd
            .prefix
            .iter()
            .flat_map(|p| p.0.iter())
            .map(|item| (true, item));
        let suffix = cmd
            .suffix
            .iter()
            .flat_map(|s| s.0.iter())
            .map(|item| (false, item));
        let mut name_done = false;
        for (in_prefix, item) in prefix.chain(suffix) {
            if !in_prefix && !name_done {
                name_done = true;
                if let Some(name) = &cmd.word_or_name {
                    words.push(self.ast_word(name, plain, depth));
                }
            }
            match item {
                ast::CommandPrefixOrSuffixItem::IoRedirect(r) => {
                    self.walk_redirect(r, ctx, depth, &mut input);
                }
                ast::CommandPrefixOrSuffixItem::Word(w) => {
                    words.push(self.ast_word(w, plain, depth));
                }
                ast::CommandPrefixOrSuffixItem::AssignmentWord(a, w) => {
                    self.verify_word(w);
                    if in_prefix {
                        self.assignment(a, plain, depth);
                    } else {
                        // An argument of a declaration builtin (`export X=…`).
                        words.push(self.ast_word(w, plain, depth));
                    }
                }
                ast::CommandPrefixOrSuffixItem::ProcessSubstitution(kind, sub) => {
                    let inner_stdin = match kind {
                        ast::ProcessSubstitutionKind::Write => Stdin::Piped,
                        ast::ProcessSubstitutionKind::Read => ctx.stdin,
                    };
                    self.walk_list(&sub.list, Ctx::nested(inner_stdin), depth + 1);
                    let mut arg = Arg::default();
                    arg.push_str("<(…)", Kind::Dynamic);
                    arg.procsub = true;
                    words.push(arg);
                }
            }
        }
        if !name_done {
            if let Some(name) = &cmd.word_or_name {
                words.push(self.ast_word(name, plain, depth));
            }
        }
        let mut argv = Vec::new();
        for (i, w) in words.into_iter().enumerate() {
            let braces = w
                .chars
                .iter()
                .any(|&(c, k)| c == '{' && k == Kind::Unquoted)
                && w.chars
                    .iter()
                    .any(|&(c, k)| c == '}' && k == Kind::Unquoted);
            let expanded = brace_expand(w);
            if i == 0 && (expanded.len() > 1 || braces) {
                self.note(ShellClass::Always, "command name uses brace expansion");
            }
            argv.extend(expanded);
        }
        self.command(&argv, &input, ctx, depth);
    }

    fn assignment(&mut self, a: &ast::Assignment, ctx: Ctx, depth: usize) {
        let name = match &a.name {
            ast::AssignmentName::VariableName(n) => n.clone(),
            ast::AssignmentName::ArrayElementName(n, index) => {
                self.walk_arithmetic(index, ctx, depth + 1);
                n.clone()
            }
        };
        self.assigned_name(&name);
        let values: Vec<&ast::Word> = match &a.value {
            ast::AssignmentValue::Scalar(w) => vec![w],
            ast::AssignmentValue::Array(items) => items
                .iter()
                .flat_map(|(k, v)| k.iter().chain(std::iter::once(v)))
                .collect(),
        };
        for w in values {
            let arg = self.ast_word(w, ctx, depth);
            self.check_arg_common(&arg);
        }
    }

    fn assigned_name(&mut self, name: &str) {
        self.check_text(name);
        if CODE_VARIABLES.contains(&name)
            || name.starts_with("BASH_FUNC_")
            || name.starts_with("GIT_CONFIG")
        {
            self.note(
                ShellClass::Always,
                format!("sets {name}, which makes programs run other code"),
            );
        } else if matches!(name, "PATH" | "IFS" | "HOME" | "CDPATH" | "GLOBIGNORE") {
            self.note(ShellClass::Ask, format!("changes {name}"));
        }
        self.assigned.insert(name.to_owned());
    }

    /// Classifies one command given as its words after expansion.
    fn command(&mut self, argv: &[Arg], input: &Input, ctx: Ctx, depth: usize) {
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
        let args = &argv[1..];
        match name.as_str() {
            // Wrappers that run their arguments as a command.
            "sudo" | "doas" | "pkexec" => {
                self.note(
                    ShellClass::Always,
                    format!("runs with elevated privileges ({name})"),
                );
                let (short, long): (&str, &[&str]) = match name.as_str() {
                    "sudo" => (
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
                    ),
                    "doas" => ("uC", &[]),
                    _ => ("", &["--user"]),
                };
                let i = skip_options(argv, 1, short, long);
                self.wrapped(argv, i, input, ctx, depth);
            }
            "su" | "runuser" => {
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
            "env" => self.env_command(argv, input, ctx, depth),
            "command" => {
                let texts = texts(args);
                if texts
                    .iter()
                    .take_while(|t| t.starts_with('-'))
                    .any(|t| t.contains('v') || t.contains('V'))
                {
                    return;
                }
                let i = skip_options(argv, 1, "", &[]);
                self.wrapped(argv, i, input, ctx, depth);
            }
            "builtin" | "busybox" => self.wrapped(argv, 1, input, ctx, depth),
            "exec" => {
                let i = skip_options(argv, 1, "a", &[]);
                self.wrapped(argv, i, input, ctx, depth);
            }
            "nice" => {
                let i = skip_options(argv, 1, "n", &["--adjustment"]);
                self.wrapped(argv, i, input, ctx, depth);
            }
            "nohup" => {
                self.note(ShellClass::Ask, "nohup writes nohup.out");
                let i = skip_options(argv, 1, "", &[]);
                self.wrapped(argv, i, input, ctx, depth);
            }
            "timeout" => {
                let i = skip_options(argv, 1, "sk", &["--signal", "--kill-after"]);
                self.wrapped(argv, i + 1, input, ctx, depth);
            }
            "stdbuf" => {
                let i = skip_options(argv, 1, "ioe", &["--input", "--output", "--error"]);
                self.wrapped(argv, i, input, ctx, depth);
            }
            "time" => {
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
                let i = skip_options(argv, 1, "fo", &["--format", "--output"]);
                self.wrapped(argv, i, input, ctx, depth);
            }
            "xargs" => self.xargs_command(argv, input, ctx, depth),
            "parallel" => self.parallel_command(argv, input, ctx, depth),
            "watch" => self.watch_command(argv, input, ctx, depth),
            "flock" => self.flock_command(argv, input, ctx, depth),
            "ionice" => {
                let texts = texts(args);
                if texts.iter().any(|t| {
                    matches!(
                        t.as_str(),
                        "-p" | "-P" | "-u" | "--pid" | "--pgid" | "--uid"
                    )
                }) {
                    self.note(ShellClass::Ask, "ionice changes other processes");
                    return;
                }
                let i = skip_options(argv, 1, "cn", &["--class", "--classdata"]);
                self.wrapped(argv, i, input, ctx, depth);
            }
            "chrt" => {
                let texts = texts(args);
                if texts
                    .iter()
                    .take_while(|t| t.starts_with('-'))
                    .any(|t| t == "-p" || t == "--pid" || t == "-m" || t == "--max")
                {
                    self.note(ShellClass::Ask, "chrt changes scheduling");
                    return;
                }
                let i = skip_options(
                    argv,
                    1,
                    "TPD",
                    &["--sched-runtime", "--sched-period", "--sched-deadline"],
                );
                self.wrapped(argv, i + 1, input, ctx, depth);
            }
            "setsid" | "unbuffer" => {
                let i = skip_options(argv, 1, "", &[]);
                self.wrapped(argv, i, input, ctx, depth);
            }

            // Shells and interpreters.
            n if SHELLS.contains(&n) => self.shell_command(argv, input, ctx, depth),
            n if interpreter_family(n).is_some() => self.interpreter_command(argv, input, ctx),
            "awk" | "gawk" | "mawk" | "nawk" | "busybox-awk" => self.awk_command(argv),
            "sed" | "gsed" => self.sed_command(argv),
            "eval" => {
                self.note(ShellClass::Always, "eval");
                let code: Vec<String> = args.iter().map(Arg::text).collect();
                let mut inner = self.sub_walker();
                inner.walk_script(&code.join(" "), depth + 1, input.as_stdin());
                self.absorb(inner, |r| !r.starts_with("cannot parse"));
            }
            "source" | "." => self.source_command(args),

            // Destructive commands.
            "rm" => self.rm_command(args),
            "dd" => {
                if args
                    .iter()
                    .any(|a| a.text().starts_with("of=") || a.is_dynamic())
                {
                    self.note(ShellClass::Always, "dd with of=");
                } else {
                    self.note(ShellClass::Ask, "runs dd");
                }
            }
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
            "chown" | "chgrp" => {
                if args.iter().any(|a| {
                    let t = a.text();
                    t == "--recursive" || short_cluster(&t).is_some_and(|c| c.contains('R'))
                }) {
                    self.note(ShellClass::Always, format!("{name} -R"));
                } else {
                    self.note(ShellClass::Ask, format!("runs {name}"));
                }
            }
            "find" => self.find_command(argv, input, ctx, depth),
            "git" => self.git_command(argv),
            "tee" | "truncate" | "touch" => {
                for a in args {
                    let t = a.text();
                    if !t.starts_with('-') || a.is_dynamic() {
                        self.write_target(a);
                    }
                }
                self.note(ShellClass::Ask, format!("runs {name}"));
            }
            "cp" | "mv" | "install" | "ln" => {
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
            "rename" => {
                self.moved_sources(&rename_sources(args));
                self.note(ShellClass::Ask, "runs rename");
                self.embedded_commands(&name, argv, ctx, depth);
            }

            // Environment dumps and shell state.
            "printenv" => self.note(
                ShellClass::Always,
                "prints environment variables (printenv)",
            ),
            "export" | "declare" | "typeset" | "local" | "readonly" => {
                self.declaration_command(&name, args, depth)
            }
            "set" => {
                let texts = texts(args);
                if texts.is_empty() {
                    self.note(ShellClass::Always, "environment dump (set)");
                }
            }
            "alias" => {
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
            "trap" => {
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

            // System administration.
            "crontab" => {
                if args
                    .iter()
                    .any(|a| short_cluster(&a.text()).is_some_and(|c| c.contains('r')))
                {
                    self.note(ShellClass::Always, "crontab -r");
                } else {
                    self.note(ShellClass::Ask, "runs crontab");
                }
            }
            "kill" => {
                let texts = texts(args);
                // The first argument is a signal when it starts with a dash: `kill -9 -1`,
                // `kill -s KILL -1`, `kill -1 -1`; pid -1 means every process.
                let mut i = 0;
                if matches!(texts.first().map(String::as_str), Some("-s" | "-n")) {
                    i = 2;
                } else if texts
                    .first()
                    .is_some_and(|t| t.starts_with('-') && t != "--")
                {
                    i = 1;
                }
                if texts.get(i).is_some_and(|t| t == "--") {
                    i += 1;
                }
                if texts.iter().skip(i).any(|t| t == "-1") {
                    self.note(ShellClass::Always, "kills every process (kill -1)");
                } else {
                    self.note(ShellClass::Ask, "runs kill");
                }
            }
            "shutdown" | "reboot" | "halt" | "poweroff" => {
                self.note(ShellClass::Always, name.clone());
            }
            "init" | "telinit" => {
                if args
                    .iter()
                    .any(|a| matches!(a.text().as_str(), "0" | "6" | "1" | "s" | "S"))
                {
                    self.note(ShellClass::Always, format!("{name} changes the runlevel"));
                } else {
                    self.note(ShellClass::Ask, format!("runs {name}"));
                }
            }
            "systemctl" => {
                let sub = args
                    .iter()
                    .map(Arg::text)
                    .find(|t| !t.starts_with('-'))
                    .unwrap_or_default();
                if matches!(
                    sub.as_str(),
                    "stop"
                        | "disable"
                        | "mask"
                        | "kill"
                        | "poweroff"
                        | "reboot"
                        | "halt"
                        | "isolate"
                        | "emergency"
                        | "rescue"
                        | "suspend"
                        | "hibernate"
                        | "kexec"
                        | "soft-reboot"
                ) {
                    self.note(ShellClass::Always, format!("systemctl {sub}"));
                } else {
                    self.note(ShellClass::Ask, "runs systemctl");
                }
            }
            "iptables" | "ip6tables" | "iptables-legacy" | "iptables-nft" => {
                if args.iter().any(|a| {
                    let t = a.text();
                    matches!(t.as_str(), "--flush" | "--delete-chain")
                        || short_cluster(&t)
                            .is_some_and(|c| c.starts_with('F') || c.starts_with('X'))
                }) {
                    self.note(ShellClass::Always, format!("{name} -F"));
                } else {
                    self.note(ShellClass::Ask, format!("runs {name}"));
                }
            }
            "nft" => {
                if args.iter().any(|a| a.text() == "flush") {
                    self.note(ShellClass::Always, "nft flush");
                } else {
                    self.note(ShellClass::Ask, "runs nft");
                }
            }
            "userdel" | "deluser" | "passwd" | "chpasswd" | "usermod" | "groupdel" | "delgroup" => {
                self.note(
                    ShellClass::Always,
                    format!("changes user accounts ({name})"),
                );
            }
            "ps" => {
                if args.iter().any(|a| {
                    let t = a.text();
                    !t.starts_with('-') && t.contains('e')
                }) {
                    self.note(ShellClass::Always, "ps shows process environments");
                } else {
                    self.note(ShellClass::Ask, "runs ps");
                }
            }
            "tar" | "bsdtar" | "gtar" => {
                if args.iter().any(|a| {
                    let t = a.text();
                    t.contains("--to-command")
                        || t.contains("--checkpoint-action")
                        || t.contains("--use-compress-program")
                        || t.contains("--rsh-command")
                        || t.contains("--info-script")
                        || t.contains("--new-volume-script")
                        || t == "-I"
                }) {
                    self.note(ShellClass::Always, "tar runs a command");
                } else {
                    self.note(ShellClass::Ask, format!("runs {name}"));
                }
            }
            "ssh" => self.ssh_command(argv, depth),
            n if SAFE_COMMANDS.contains(&n) => self.safe_command(n, argv, depth),
            _ => {
                self.note(ShellClass::Ask, format!("runs {}", shorten(&name)));
                self.embedded_commands(&name, argv, ctx, depth);
            }
        }
    }

    /// Classifies `argv[i..]` as the command a wrapper runs.
    fn wrapped(&mut self, argv: &[Arg], i: usize, input: &Input, ctx: Ctx, depth: usize) {
        let rest = argv.get(i..).unwrap_or(&[]);
        self.command(rest, input, ctx, depth + 1);
    }

    /// Code given to a shell as a string.
    fn code_string(&mut self, code: &Arg, stdin: Stdin, depth: usize) {
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

    fn sub_walker(&self) -> Walker<'a> {
        Walker {
            secrets: self.secrets,
            notes: Vec::new(),
            steps: self.steps,
            functions: self.functions.clone(),
            assigned: HashSet::new(),
            deferred: Vec::new(),
            commands_seen: 0,
            guessing: self.guessing,
            source: Vec::new(),
        }
    }

    fn absorb(&mut self, inner: Walker<'_>, keep: impl Fn(&str) -> bool) {
        self.steps = inner.steps;
        for (c, r) in inner.notes {
            if keep(&r) {
                self.note(c, r);
            }
        }
        self.assigned.extend(inner.assigned);
        self.deferred.extend(inner.deferred);
    }

    fn env_command(&mut self, argv: &[Arg], input: &Input, ctx: Ctx, depth: usize) {
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
            if matches!(t.as_str(), "-u" | "--unset" | "-C" | "--chdir" | "-P") {
                i += 2;
                continue;
            }
            if matches!(t.as_str(), "-S" | "--split-string")
                || t.starts_with("--split-string=")
                || (t.starts_with("-S") && t.len() > 2)
            {
                // `env -S 'cmd args'` splits a string into a command line.
                let mut code = if let Some(code) = t.strip_prefix("--split-string=") {
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
                    self.assigned_name(name);
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

    fn xargs_command(&mut self, argv: &[Arg], input: &Input, ctx: Ctx, depth: usize) {
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
    fn parallel_command(&mut self, argv: &[Arg], input: &Input, ctx: Ctx, depth: usize) {
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

    fn watch_command(&mut self, argv: &[Arg], input: &Input, ctx: Ctx, depth: usize) {
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

    fn flock_command(&mut self, argv: &[Arg], input: &Input, ctx: Ctx, depth: usize) {
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

    fn shell_command(&mut self, argv: &[Arg], input: &Input, ctx: Ctx, depth: usize) {
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

    fn shell_reads_stdin(&mut self, name: &str, input: &Input, depth: usize) {
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

    fn interpreter_command(&mut self, argv: &[Arg], input: &Input, ctx: Ctx) {
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

    fn interpreter_reads_stdin(&mut self, name: &str, input: &Input) {
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

    fn awk_command(&mut self, argv: &[Arg]) {
        let texts = texts(argv);
        let mut programs: Vec<&Arg> = Vec::new();
        let mut from_file = false;
        let mut i = 1;
        while let Some(t) = texts.get(i) {
            if t == "--" {
                i += 1;
                break;
            }
            if matches!(t.as_str(), "-f" | "--file") {
                from_file = true;
                i += 2;
                continue;
            }
            if matches!(t.as_str(), "-e" | "--source") {
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
            let text = p.text();
            if p.is_dynamic() {
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
        self.note(ShellClass::Ask, "runs awk");
    }

    fn sed_command(&mut self, argv: &[Arg]) {
        let texts = texts(argv);
        let mut scripts: Vec<(String, bool)> = Vec::new();
        let mut has_script_option = false;
        let mut first_operand: Option<(String, bool)> = None;
        let mut i = 1;
        while let Some(t) = texts.get(i) {
            if matches!(t.as_str(), "-e" | "--expression") {
                has_script_option = true;
                if let Some(a) = argv.get(i + 1) {
                    scripts.push((a.text(), a.is_dynamic()));
                }
                i += 2;
                continue;
            }
            if let Some(s) = t.strip_prefix("--expression=") {
                has_script_option = true;
                scripts.push((s.to_owned(), argv[i].is_dynamic()));
            } else if matches!(t.as_str(), "-f" | "--file") {
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

    fn source_command(&mut self, args: &[Arg]) {
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

    fn rm_command(&mut self, args: &[Arg]) {
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
    fn moved_sources(&mut self, sources: &[&Arg]) {
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

    fn chmod_command(&mut self, args: &[Arg]) {
        let texts = texts(args);
        let recursive = texts
            .iter()
            .any(|t| t == "--recursive" || short_cluster(t).is_some_and(|c| c.contains('R')));
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

    fn find_command(&mut self, argv: &[Arg], input: &Input, ctx: Ctx, depth: usize) {
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
    fn found_top_level_moves(
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

    fn git_command(&mut self, argv: &[Arg]) {
        let texts = texts(argv);
        let mut i = 1;
        while let Some(t) = texts.get(i) {
            if argv[i].is_dynamic() {
                self.note(ShellClass::Always, "git with a non-literal argument");
                return;
            }
            match t.as_str() {
                "-C" | "--git-dir" | "--work-tree" | "--namespace" | "--super-prefix"
                | "--config-env" => i += 2,
                "-c" => {
                    if let Some(config) = texts.get(i + 1) {
                        if git_config_runs_code(config) {
                            self.note(
                                ShellClass::Always,
                                "git -c with a setting that runs a command",
                            );
                        }
                    }
                    i += 2;
                }
                s if s.starts_with("--exec-path=") || s.starts_with("--config-env=") => {
                    self.note(ShellClass::Always, "git with a changed exec path or config");
                    i += 1;
                }
                s if s.starts_with('-') => i += 1,
                _ => break,
            }
        }
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
        let has_short = |c: char| {
            rest.iter()
                .any(|t| short_cluster(t).is_some_and(|s| s.contains(c)))
        };
        match sub.as_str() {
            "reset" => {
                if rest
                    .iter()
                    .any(|t| matches!(t.as_str(), "--hard" | "--merge" | "--keep"))
                {
                    self.note(ShellClass::Always, "git reset --hard");
                } else {
                    self.note(ShellClass::Ask, "git reset");
                }
            }
            "clean" => {
                if has_short('f') || rest.iter().any(|t| long_option_is(t, "--force")) {
                    self.note(ShellClass::Always, "git clean -f");
                } else {
                    self.note(ShellClass::Ask, "git clean");
                }
            }
            "push" => {
                let forced = has_short('f')
                    || has_short('d')
                    || rest.iter().any(|t| {
                        t.starts_with("--force")
                            || matches!(t.as_str(), "--mirror" | "--delete" | "--prune")
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
            "status" | "log" | "diff" | "show" | "blame" | "shortlog" | "describe"
            | "rev-parse" | "ls-files" | "ls-tree" | "cat-file" | "rev-list" | "show-ref"
            | "merge-base" | "version" | "whatchanged" | "grep" => {
                let writes = rest
                    .iter()
                    .any(|t| t == "--output" || t.starts_with("--output="));
                let runs = rest.iter().any(|t| {
                    t == "--ext-diff"
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
            "branch" => {
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
            "tag" | "remote" | "stash" => {
                let listing = match sub.as_str() {
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
            _ => self.note(ShellClass::Ask, format!("git {}", shorten(sub))),
        }
    }

    fn declaration_command(&mut self, name: &str, args: &[Arg], depth: usize) {
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
        for (a, t) in operands {
            let var = t.split_once('=').map_or(t.as_str(), |(n, _)| n);
            let var = var.split('[').next().unwrap_or(var);
            let var = var.trim_end_matches('+');
            if a.is_dynamic() && !t.contains('=') {
                self.note(ShellClass::Ask, format!("{name} of a non-literal name"));
            }
            self.assigned_name(var);
            self.check_arith_injection(a, depth);
        }
    }

    fn ssh_command(&mut self, argv: &[Arg], depth: usize) {
        self.note(ShellClass::Ask, "runs ssh");
        let texts = texts(argv);
        let mut i = 1;
        while let Some(t) = texts.get(i) {
            if t.to_lowercase().contains("proxycommand")
                || t.to_lowercase().contains("localcommand")
            {
                self.note(ShellClass::Always, "ssh option that runs a local command");
            }
            if t == "--" {
                i += 1;
                break;
            }
            if let Some(cluster) = short_cluster(t) {
                let last = cluster.chars().last().unwrap_or(' ');
                if "BbcDEeFIiJLlmOopQRSWw".contains(last) {
                    if let Some(v) = texts.get(i + 1) {
                        if v.to_lowercase().contains("proxycommand")
                            || v.to_lowercase().contains("localcommand")
                        {
                            self.note(ShellClass::Always, "ssh option that runs a local command");
                        }
                    }
                    i += 2;
                } else {
                    i += 1;
                }
                continue;
            }
            break;
        }
        // argv[i] is the host; the rest is a remote command line.
        let remote: Vec<&Arg> = argv.iter().skip(i + 1).collect();
        if remote.is_empty() {
            return;
        }
        if remote.iter().any(|a| a.is_dynamic()) {
            self.note(ShellClass::Always, "remote command is not literal");
        }
        let code: Vec<String> = remote.iter().map(|a| a.text()).collect();
        let mut inner = self.sub_walker();
        inner.walk_script(&code.join(" "), depth + 1, Stdin::Inherited);
        self.absorb(inner, |_| true);
    }

    /// A command on the read-only list: safe unless something about its arguments is not.
    fn safe_command(&mut self, name: &str, argv: &[Arg], depth: usize) {
        let texts = texts(argv);
        let args = &texts[1.min(texts.len())..];
        let has = |opts: &[&str]| {
            args.iter().any(|t| {
                opts.iter()
                    .any(|o| t == o || (o.starts_with("--") && t.starts_with(&format!("{o}="))))
            })
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
                if has(&["-o", "--output"])
                    || args
                        .iter()
                        .any(|t| short_cluster(t).is_some_and(|c| c.contains('o')))
                {
                    self.note(ShellClass::Ask, "sort -o writes a file");
                }
                if has(&["--compress-program"]) {
                    self.note(ShellClass::Always, "sort runs a compression program");
                }
            }
            "tree" if has(&["-o", "-R"]) => self.note(ShellClass::Ask, "tree -o/-R writes files"),
            "date"
                if has(&["-s", "--set"])
                    || args
                        .iter()
                        .any(|t| short_cluster(t).is_some_and(|c| c.contains('s'))) =>
            {
                self.note(ShellClass::Ask, "date -s sets the clock");
            }
            "hostname"
                if args.iter().any(|t| !t.starts_with('-'))
                    || has(&["-F", "--file", "-b", "--boot"]) =>
            {
                self.note(ShellClass::Ask, "hostname sets the host name");
            }
            "uniq" if args.iter().filter(|t| !t.starts_with('-')).count() > 1 => {
                self.note(ShellClass::Ask, "uniq writes an output file");
            }
            "file" if has(&["-C", "--compile"]) => {
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
    fn embedded_commands(&mut self, outer: &str, argv: &[Arg], ctx: Ctx, depth: usize) {
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

/// How the options of a wrapper command are read.
struct OptionSpec {
    /// Short options that take a value, attached (`-n1`) or as the next word (`-n 1`).
    short_required: &'static str,
    /// Short options whose value is optional and can only be attached (`-i{}`, `-i`).
    short_optional: &'static str,
    /// Long options (without `--`) that take a value (`--jobs 4`, `--jobs=4`).
    long_required: &'static [&'static str],
    /// The other long options (no value, or an optional `=value`), to resolve abbreviations.
    long_other: &'static [&'static str],
    /// Whether a unique prefix of a long option is accepted (`getopt_long` does).
    abbreviations: bool,
}

const XARGS_OPTIONS: OptionSpec = OptionSpec {
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
const PARALLEL_OPTIONS: OptionSpec = OptionSpec {
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
fn wrapper_options(
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
fn resolve_long_option<'n>(name: &'n str, spec: &OptionSpec) -> &'n str {
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
fn has_replacement(word: &str, custom: Option<&str>) -> bool {
    if custom.is_some_and(|r| !r.is_empty() && word.contains(r)) {
        return true;
    }
    word.find('{')
        .is_some_and(|open| word[open..].contains('}'))
}

/// Splits the arguments of `mv` or `rename` into options and operands, the way getopt does:
/// `short_with_arg` lists short options that take a value (`-S .bak`, `-S.bak`), `long_with_arg`
/// long ones (`--suffix .bak`, `--suffix=.bak`, or a unique prefix like `--suf`); `--` ends the
/// options. Returns the operands and the options with their values.
fn operands<'x>(
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
fn mv_sources(args: &[Arg]) -> Vec<&Arg> {
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
fn rename_sources(args: &[Arg]) -> Vec<&Arg> {
    let (operands, options) = operands(args, "eE", &[]);
    if options.iter().any(|(o, _)| o == "-e" || o == "-E") {
        operands
    } else {
        operands.into_iter().skip(1).collect()
    }
}

/// Skips options before a wrapped command. `short_with_arg` lists short options that take a
/// value (`-n 5` or `-n5`); `long_with_arg` lists long options that take the next argument
/// (`--signal KILL`; `--signal=KILL` needs no listing). Returns the index of the command.
fn skip_options(argv: &[Arg], start: usize, short_with_arg: &str, long_with_arg: &[&str]) -> usize {
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
            i += if !t.contains('=') && long_with_arg.contains(&t.as_str()) {
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

/// The starting points of `find` (`.` when none is given): the words after its leading options
/// (`-H`, `-L`, `-P`, `-D LIST`, `-O3`) up to the first expression word.
fn find_start_points(texts: &[String]) -> Vec<&str> {
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

fn is_stdin_path(t: &str) -> bool {
    matches!(t, "-" | "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
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

fn interpreter_family(name: &str) -> Option<Family> {
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
fn inline_code_flag(family: Family, t: &str) -> bool {
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

/// chmod modes that open files to everyone or set privilege bits.
fn dangerous_mode(t: &str) -> Option<String> {
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

/// `git -c name=value` settings that make git run a program.
fn git_config_runs_code(config: &str) -> bool {
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

/// Whether a sed script uses the `e` command or the `e` flag of `s`, which run shell commands.
fn sed_executes(script: &str) -> bool {
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

fn find_unescaped(s: &str, delim: char) -> Option<usize> {
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

/// Whether `src` has a redirection whose file descriptor number (`2>`, `10<&0`) does not fit in
/// an `i32`: brush-parser 0.4 unwraps that conversion and panics (found by the `shell_classifier`
/// fuzz target with `7777777777>`). Bash refuses such a command ("file descriptor out of range").
/// Quoting is ignored: a false alarm only makes the result more cautious.
fn has_oversized_fd_number(src: &str) -> bool {
    let b = src.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let starts_token =
            start == 0 || !(b[start - 1].is_ascii_alphanumeric() || b[start - 1] == b'_');
        let redirects = matches!(b.get(i), Some(b'<' | b'>'));
        if starts_token && redirects && src[start..i].parse::<i32>().is_err() {
            return true;
        }
    }
    false
}

/// Counts constructs that make the parser recurse. Quoting is ignored on purpose: counting too
/// many only makes the result more cautious, counting too few could overflow the stack.
fn count_openers(src: &str) -> usize {
    let mut n = src
        .chars()
        .filter(|c| matches!(c, '(' | '{' | '[' | '`'))
        .count();
    for word in src.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if matches!(
            word,
            "if" | "while"
                | "until"
                | "for"
                | "select"
                | "case"
                | "function"
                | "coproc"
                | "do"
                | "then"
        ) {
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(s: &str) -> Arg {
        let mut a = Arg::default();
        a.push_str(s, Kind::Unquoted);
        a
    }

    #[test]
    fn brace_expansion_follows_bash() {
        let words: Vec<String> = brace_expand(lit("{rm,-rf,/}"))
            .iter()
            .map(Arg::text)
            .collect();
        assert_eq!(words, ["rm", "-rf", "/"]);
        let words: Vec<String> = brace_expand(lit("a{1..3}b"))
            .iter()
            .map(Arg::text)
            .collect();
        assert_eq!(words, ["a1b", "a2b", "a3b"]);
        let words: Vec<String> = brace_expand(lit("x{a,b{c,d}}"))
            .iter()
            .map(Arg::text)
            .collect();
        assert_eq!(words, ["xa", "xbc", "xbd"]);
        // Too many words: left as it is.
        assert_eq!(brace_expand(lit("{1..100000}")).len(), 1);
        let many = "{a,b}".repeat(20);
        assert_eq!(brace_expand(lit(&many)).len(), 1);
    }

    #[test]
    fn globs_match_secret_samples() {
        let m = |p: &str, s: &str| {
            let pat = compile_glob(&lit(p).chars);
            glob_match(&pat, &s.chars().collect::<Vec<_>>())
        };
        assert!(m("*.pem", "server.pem"));
        assert!(m(".e*", ".env"));
        assert!(m(".ss?", ".ssh"));
        assert!(m("id_[r]sa", "id_rsa"));
        assert!(m("[!x]d_rsa", "id_rsa"));
        assert!(!m("*.rs", "server.pem"));
        assert!(m("*", ""));
    }

    #[test]
    fn ansi_c_quotes_decode() {
        assert_eq!(decode_ansi_c("\\x72m"), "rm");
        assert_eq!(decode_ansi_c("\\162\\155"), "rm");
        assert_eq!(decode_ansi_c("\\u0072m"), "rm");
        assert_eq!(decode_ansi_c("a\\nb"), "a\nb");
        assert_eq!(decode_ansi_c("\\"), "\\");
    }

    #[test]
    fn sed_exec_detection() {
        assert!(sed_executes("1e rm -rf /"));
        assert!(sed_executes("s/x/rm -rf \\//e"));
        assert!(sed_executes("/foo/e"));
        assert!(!sed_executes("s/foo/bar/g"));
        assert!(!sed_executes("s/e/E/g"));
        assert!(!sed_executes("1d"));
    }

    #[test]
    fn chmod_modes() {
        assert!(dangerous_mode("777").is_some());
        assert!(dangerous_mode("0777").is_some());
        assert!(dangerous_mode("a+rwx").is_some());
        assert!(dangerous_mode("o+w").is_some());
        assert!(dangerous_mode("u+s").is_some());
        assert!(dangerous_mode("4755").is_some());
        assert!(dangerous_mode("755").is_none());
        assert!(dangerous_mode("+x").is_none());
        assert!(dangerous_mode("-R").is_none());
    }

    #[test]
    fn oversized_fd_numbers_are_refused_before_the_parser() {
        // brush-parser panics on these (caught, but the class would say "classifier error").
        for cmd in [
            "7777777777>",
            "cat 99999999999<x",
            "echo $(2147483648>&2)",
            "bash -c '7777777777>f'",
            "ls; 12345678901<>f",
        ] {
            let c = classify(cmd, &[]);
            assert_eq!(c.class, ShellClass::Always, "{cmd}: {c:?}");
            assert!(
                c.reasons.iter().any(|r| r.contains("out of range")),
                "{cmd}: {c:?}"
            );
        }
        assert!(has_oversized_fd_number("2147483648>x"));
        assert!(!has_oversized_fd_number("2147483647>x"));
        assert!(!has_oversized_fd_number("echo 2>/dev/null 12345678901"));
        assert!(!has_oversized_fd_number("echo x12345678901>f"));
        // Other large numbers near redirections are fine.
        for cmd in ["echo 2>&1", "head -c 99999999999 f >out", "cat <in 3>&1"] {
            let c = classify(cmd, &[]);
            assert!(
                !c.reasons.iter().any(|r| r.contains("classifier error")),
                "{cmd}: {c:?}"
            );
        }
    }

    fn judged(cmd: &str) -> Classification {
        classify(cmd, &[])
    }

    #[test]
    fn moving_home_root_or_a_top_level_folder_is_always() {
        for cmd in [
            "mv /usr /usr.old",
            "mv ~ /mnt/x",
            "mv ~/ /mnt/x",
            "mv $HOME /tmp/h",
            "mv \"$HOME\" /tmp/h",
            "mv ${HOME}/ /tmp/h",
            "mv /etc /tmp/",
            "mv -t /tmp /bin",
            "mv -t/tmp /bin",
            "mv --target-directory=/tmp /bin",
            "mv --target-directory /tmp /lib",
            "mv -- / /x",
            "mv /usr/ /x",
            "mv /usr/. /x",
            "mv //usr// /x",
            "mv /opt/../usr /x",
            "mv -v -f /var /srv /x",
            "mv a.txt /boot /x",
            "mv -S .bak /home /h",
            "mv -b --suffix .old /root /r",
            "/bin/mv /sbin /s",
            "sudo mv /var /v",
            "env X=1 mv /usr /u",
            "ls && mv /lib64 /tmp/",
            "bash -c 'mv /usr /x'",
            "find / -maxdepth 0 -exec mv {} /x \\;",
            "find /etc -maxdepth 0 -exec mv -t /tmp {} +",
            "find / -maxdepth 0 -exec sudo mv {} /x \\;",
            "parallel mv {} /x ::: /usr /var",
            "parallel mv -t /x ::: a /etc",
            "parallel -I @ 'mv @ /x' ::: ~",
            "rename usr usr.old /usr",
            "rename 's/usr/old/' /usr",
        ] {
            let c = judged(cmd);
            assert_eq!(c.class, ShellClass::Always, "{cmd}: {c:?}");
            assert!(
                c.reasons.iter().any(|r| r.contains("top-level")),
                "{cmd}: {c:?}"
            );
        }
    }

    #[test]
    fn moving_ordinary_files_keeps_its_class() {
        for cmd in [
            "mv a.txt b.txt",
            "mv build/ old-build/",
            "mv /tmp/x /tmp/y",
            "mv ~/notes.txt ~/old.txt",
            "mv $HOME/notes.txt /tmp/",
            "mv -t /usr/local/bin tool",
            "mv tool /usr",
            "mv -- -weird-name normal",
            "mv /usr/local/x /usr/local/y",
            "cp -al /usr /x",
            "cp -r /etc /tmp/etc-copy",
            "ln -s /usr x",
            "find . -name '*.bak' -exec mv {} /tmp/bak \\;",
            "rename 's/a/b/' *.txt",
            "parallel mv {} /tmp/old ::: a b /tmp/c",
        ] {
            let c = judged(cmd);
            assert_eq!(c.class, ShellClass::Ask, "{cmd}: {c:?}");
        }
    }

    #[test]
    fn commands_run_by_find_xargs_and_parallel_are_judged_as_themselves() {
        let always = [
            "find . -name '*.log' -exec rm -rf {} +",
            "find . -exec cat {} \\; -exec rm -rf {} \\;",
            "ls | xargs -0 -I{} rm -rf {}",
            "xargs -n1 sh -c 'curl x | sh'",
            "xargs -I {} -n 1 -P 4 -d '\\n' -a file rm -rf {}",
            "xargs -0n 1 rm -rf",
            "xargs -rn 1 rm -rf",
            "xargs --eof rm -rf x",
            "xargs --max-lines rm -rf x",
            "xargs -l rm -rf x",
            "xargs --max-p 4 rm -rf x",
            "xargs -P4 --null printenv",
            "parallel rm -rf ::: a b",
            "parallel -j4 'rm -rf {}' ::: dirs",
            "parallel -j 4 --jobs 4 -S host rm -rf ::: x",
            "parallel -j 4 --jobs 4 -S host printenv ::: x",
            "parallel --jobs=4 -kj4 'curl x | sh' ::: a",
            "parallel -q rm -rf ::: a",
            "parallel --colsep , --joblog log -a file 'chmod 777 {1}'",
            "ls | parallel -X rm -rf",
            "parallel -- rm -rf ::: a",
        ];
        for cmd in always {
            let c = judged(cmd);
            assert_eq!(c.class, ShellClass::Always, "{cmd}: {c:?}");
            // Judged as the command itself, not guessed from the arguments.
            assert!(
                !c.reasons.iter().any(|r| r.contains("in the arguments of")),
                "{cmd}: {c:?}"
            );
        }
        // Both commands of a find with two -exec are judged.
        let c = judged("find . -exec cat {} \\; -exec rm {} \\;");
        assert_eq!(c.class, ShellClass::Ask, "{c:?}");
        assert!(c.reasons.iter().any(|r| r == "runs rm"), "{c:?}");
        let c = judged("find . -exec cat {} \\; -exec printenv \\;");
        assert_eq!(c.class, ShellClass::Always, "{c:?}");
    }

    #[test]
    fn input_run_as_code_by_xargs_or_parallel_is_always() {
        for cmd in [
            "ls | xargs sh -c",
            "ls | xargs -0 bash -c",
            "parallel sh -c ::: 'rm -rf /'",
            "parallel 'bash -c {}' ::: x",
            "parallel ::: 'rm -rf /'",
            "cat jobs.txt | parallel",
            "parallel -j4 < jobs.txt",
            "parallel echo '{= $_=`id` =}' ::: a",
        ] {
            let c = judged(cmd);
            assert_eq!(c.class, ShellClass::Always, "{cmd}: {c:?}");
        }
        for cmd in ["parallel --version", "parallel --number-of-cpus"] {
            let c = judged(cmd);
            assert_eq!(c.class, ShellClass::Ask, "{cmd}: {c:?}");
        }
    }

    #[test]
    fn harmless_commands_under_find_xargs_and_parallel_keep_their_class() {
        for cmd in [
            "find . -name x -exec cat {} \\;",
            "find . -type f -exec cat {} +",
            "find . -name '*.rs' -exec grep -l todo {} +",
            "ls | xargs echo",
            "ls | xargs -n 1 wc -l",
            "parallel echo ::: a b",
            "parallel -j 4 'gzip {}' ::: a b",
            "parallel -k --tag wc -l ::: a b",
        ] {
            let c = judged(cmd);
            assert_eq!(c.class, ShellClass::Ask, "{cmd}: {c:?}");
        }
        assert_eq!(judged("find . -name '*.rs'").class, ShellClass::Safe);
    }
}
