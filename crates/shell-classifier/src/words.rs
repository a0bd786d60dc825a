//! Words as bash reads them: characters marked literal, quoted or dynamic after quote removal,
//! ANSI-C `$'…'` decoding, backquote unescaping, parameter-expansion parts, brace expansion
//! (`{a,b}`, `{1..3}`) and glob patterns, plus small helpers on argument text.

use brush_parser::word::{Parameter, ParameterExpr, TildeExpr};

use crate::parse::{MAX_BRACE_WORDS, MAX_BRACE_WORD_CHARS};

/// How a character of a word came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Literal and unquoted: subject to brace expansion and globbing.
    Unquoted,
    /// Literal and quoted or escaped.
    Quoted,
    /// Placeholder text for an expansion whose value is not known.
    Dynamic,
}

/// A word after quote removal, with its dynamic parts marked.
#[derive(Debug, Clone, Default)]
pub(crate) struct Arg {
    pub(crate) chars: Vec<(char, Kind)>,
    /// Names of simple `$NAME` / `${NAME}` expansions in the word.
    pub(crate) vars: Vec<String>,
    /// Has an expansion other than a simple named variable (positional, special, operators).
    pub(crate) opaque: bool,
    /// Has a command substitution.
    pub(crate) cmdsub: bool,
    /// Is a process substitution `<(…)` / `>(…)`.
    pub(crate) procsub: bool,
}

impl Arg {
    /// A word of quoted literal text.
    pub(crate) fn literal(s: &str) -> Arg {
        let mut arg = Arg::default();
        arg.push_str(s, Kind::Quoted);
        arg
    }

    pub(crate) fn push_str(&mut self, s: &str, kind: Kind) {
        self.chars.extend(s.chars().map(|c| (c, kind)));
    }

    pub(crate) fn text(&self) -> String {
        self.chars.iter().map(|(c, _)| *c).collect()
    }

    pub(crate) fn is_static(&self) -> bool {
        !self.procsub && self.chars.iter().all(|(_, k)| *k != Kind::Dynamic)
    }

    pub(crate) fn has_glob(&self) -> bool {
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

    pub(crate) fn starts_dynamic(&self) -> bool {
        self.procsub || matches!(self.chars.first(), Some((_, Kind::Dynamic)))
    }

    pub(crate) fn is_dynamic(&self) -> bool {
        !self.is_static()
    }
}

pub(crate) fn texts(argv: &[Arg]) -> Vec<String> {
    argv.iter().map(Arg::text).collect()
}

/// Decodes the body of a `$'…'` word.
pub(crate) fn decode_ansi_c(s: &str) -> String {
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
pub(crate) fn unescape_backquoted(s: &str, in_double_quotes: bool) -> String {
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
pub(crate) fn ends_in_comment(code: &str) -> bool {
    let last: Vec<char> = code.rsplit('\n').next().unwrap_or(code).chars().collect();
    last.iter().enumerate().any(|(i, &c)| {
        c == '#' && (i == 0 || last[i - 1].is_whitespace() || ";&|(<>".contains(last[i - 1]))
    })
}

pub(crate) fn tilde_text(t: &TildeExpr) -> String {
    match t {
        TildeExpr::Home => "~".to_owned(),
        TildeExpr::UserHome(user) => format!("~{user}"),
        TildeExpr::WorkingDir => "~+".to_owned(),
        TildeExpr::OldWorkingDir => "~-".to_owned(),
        TildeExpr::NthDirFromTopOfDirStack { n, .. } => format!("~+{n}"),
        TildeExpr::NthDirFromBottomOfDirStack { n } => format!("~-{n}"),
    }
}

pub(crate) fn parameter_name(p: &Parameter) -> Option<&str> {
    match p {
        Parameter::Named(name)
        | Parameter::NamedWithIndex { name, .. }
        | Parameter::NamedWithAllIndices { name, .. } => Some(name),
        Parameter::Positional(_) | Parameter::Special(_) => None,
    }
}

/// The parameter, whether it is indirect (`${!X}`), and every nested string that bash expands
/// when evaluating the expression.
pub(crate) fn parameter_parts(e: &ParameterExpr) -> (Option<&Parameter>, bool, Vec<&str>) {
    pub(crate) fn opt(s: &Option<String>) -> Vec<&str> {
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

pub(crate) type Chars = Vec<(char, Kind)>;

/// Expands unquoted brace expressions (`{a,b}`, `{1..3}`, `{a..c}`) like bash. Returns the word
/// unchanged when it has none, is too long, or expands to too many words.
pub(crate) fn brace_expand(arg: Arg) -> Vec<Arg> {
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
pub(crate) fn find_brace(chars: &[(char, Kind)]) -> Option<(usize, usize, Vec<Chars>)> {
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
pub(crate) fn brace_sequence(inner: &str) -> Option<Vec<String>> {
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

#[derive(Debug, Clone)]
pub(crate) enum Pat {
    Lit(char),
    Any,
    Star,
    Class {
        ranges: Vec<(char, char)>,
        negated: bool,
        any: bool,
    },
}

pub(crate) fn compile_glob(chars: &[(char, Kind)]) -> Vec<Pat> {
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

pub(crate) fn pat_matches_char(p: &Pat, c: char) -> bool {
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
pub(crate) fn glob_match(pattern: &[Pat], text: &[char]) -> bool {
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

pub(crate) fn shorten(s: &str) -> String {
    const MAX: usize = 48;
    if s.chars().count() <= MAX {
        s.to_owned()
    } else {
        let mut out: String = s.chars().take(MAX).collect();
        out.push('…');
        out
    }
}

pub(crate) fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

pub(crate) fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A short option cluster like `-rf` (not `--long`, not `-`).
pub(crate) fn short_cluster(s: &str) -> Option<&str> {
    s.strip_prefix('-')
        .filter(|rest| !rest.is_empty() && !rest.starts_with('-'))
}

/// Whether an argument is a long option that `name` abbreviates: GNU `getopt_long` (and git's
/// parse-options) take any unique prefix (`--out` for `--output`, `--compress-prog` for
/// `--compress-program`), with the value attached (`--out=x`) or as the next word. A prefix that
/// is ambiguous makes the program refuse to run, so taking it for `name` only errs towards
/// asking.
pub(crate) fn long_option_is(arg: &str, name: &str) -> bool {
    let arg = arg.split('=').next().unwrap_or(arg);
    arg.len() >= 3 && arg.starts_with("--") && name.starts_with(arg)
}

/// [`long_option_is`] for a `--long` name, equality for a `-s` short one.
pub(crate) fn option_is(arg: &str, name: &str) -> bool {
    if name.starts_with("--") {
        long_option_is(arg, name)
    } else {
        arg == name
    }
}

/// The operands of a command whose options are read by `getopt_long`: words that are not
/// options, `-` included, skipping the values of `short_with_arg` (`-f 1`, `-f1`) and of
/// `long_with_arg` (`--skip-fields 1`, any unique prefix; `--x=1` carries its own); everything
/// after `--` is an operand.
pub(crate) fn getopt_operands<'t>(
    args: &'t [String],
    short_with_arg: &str,
    long_with_arg: &[&str],
) -> Vec<&'t String> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut done = false;
    while let Some(t) = args.get(i) {
        i += 1;
        if done || t == "-" || !t.starts_with('-') {
            out.push(t);
        } else if t == "--" {
            done = true;
        } else if t.starts_with("--") {
            if !t.contains('=') && long_with_arg.iter().any(|l| long_option_is(t, l)) {
                i += 1;
            }
        } else {
            let cluster: Vec<char> = t.chars().skip(1).collect();
            if let Some(k) = cluster.iter().position(|c| short_with_arg.contains(*c)) {
                if k + 1 == cluster.len() {
                    i += 1;
                }
            }
        }
    }
    out
}
