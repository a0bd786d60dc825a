//! Driving brush-parser safely: the caps on input, nesting, work and time, the checks made before
//! the parser sees a text (it recurses once per nesting level and panics on some inputs), and the
//! dedicated analysis thread with a large stack, a panic guard and a time limit.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::time::Duration;

use brush_parser::ast;
use brush_parser::{Parser, ParserOptions};

use crate::{always, Classification};

/// Longest command analysed at all.
pub(crate) const MAX_INPUT_BYTES: usize = 64 * 1024;

/// Most nesting constructs (`(`, `{`, `[`, backticks, `if`, `while`, …) in one parsed text. The
/// parser recurses once per nesting level (about 25 KiB of stack per level in a debug build), so
/// this together with [`PARSE_STACK_BYTES`] keeps it far from a stack overflow.
const MAX_OPENERS: usize = 1000;

/// Stack of the analysis thread.
const PARSE_STACK_BYTES: usize = 64 << 20;

/// Deepest nesting the walk follows (substitutions, compound commands, nested shells, wrappers).
pub(crate) const MAX_DEPTH: usize = 48;

/// Most walk steps (commands and words) for one classification.
pub(crate) const MAX_STEPS: usize = 50_000;

/// Most words one brace expansion may produce; beyond it the word is left unexpanded.
pub(crate) const MAX_BRACE_WORDS: usize = 256;

/// Longest word that gets brace-expanded.
pub(crate) const MAX_BRACE_WORD_CHARS: usize = 4096;

/// Time limit for one classification.
const ANALYSIS_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether `src` has a redirection whose file descriptor number (`2>`, `10<&0`) does not fit in
/// an `i32`: brush-parser 0.4 unwraps that conversion and panics (found by the `shell_classifier`
/// fuzz target with `7777777777>`). Bash refuses such a command ("file descriptor out of range").
/// Quoting is ignored: a false alarm only makes the result more cautious.
pub(crate) fn has_oversized_fd_number(src: &str) -> bool {
    let b = src.as_bytes();
    digit_runs(b).any(|r| {
        let starts_token =
            r.start == 0 || !(b[r.start - 1].is_ascii_alphanumeric() || b[r.start - 1] == b'_');
        let redirects = matches!(b.get(r.end), Some(b'<' | b'>'));
        starts_token && redirects && src[r].parse::<i32>().is_err()
    })
}

/// Whether `src` has a tilde with a directory-stack number (`~12`, `~+3`, `~-2`) that does not
/// fit in a `usize`: brush-parser 0.4 unwraps that conversion and panics (found by the
/// `shell_classifier` fuzz target with `~88888888888888888888888/x`). Quoting is ignored: a
/// false alarm only makes the result more cautious.
pub(crate) fn has_oversized_tilde_number(src: &str) -> bool {
    let b = src.as_bytes();
    digit_runs(b).any(|r| {
        let after_tilde = match r.start.checked_sub(1).map(|i| b[i]) {
            Some(b'~') => true,
            Some(b'+' | b'-') => r.start >= 2 && b[r.start - 2] == b'~',
            _ => false,
        };
        after_tilde && src[r].parse::<usize>().is_err()
    })
}

/// The runs of ASCII digits in `b`, each whole, as byte ranges.
fn digit_runs(b: &[u8]) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < b.len() && !b[i].is_ascii_digit() {
            i += 1;
        }
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        (i > start).then_some(start..i)
    })
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

/// Runs one analysis on a dedicated thread with a large stack: a panic counts as always-ask
/// ("classifier error"), and so does an analysis that takes longer than [`ANALYSIS_TIMEOUT`]
/// (the thread is then left to finish on its own and its result is dropped).
pub(crate) fn guarded(analyse: impl FnOnce() -> Classification + Send + 'static) -> Classification {
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("shell-classify".to_owned())
        .stack_size(PARSE_STACK_BYTES)
        .spawn(move || {
            let result = catch_unwind(AssertUnwindSafe(analyse))
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

/// Parses a piece of shell code, after the checks that keep the parser from overflowing its
/// stack or panicking. The error is the always-ask reason.
pub(crate) fn program(src: &str) -> Result<ast::Program, &'static str> {
    if src.len() > MAX_INPUT_BYTES {
        return Err("too long to analyse");
    }
    if count_openers(src) > MAX_OPENERS {
        return Err("too complex to analyse");
    }
    if has_oversized_fd_number(src) {
        return Err("a file descriptor number out of range");
    }
    if has_oversized_tilde_number(src) {
        return Err("a directory-stack number out of range");
    }
    let mut parser = Parser::new(
        std::io::Cursor::new(src.as_bytes()),
        &ParserOptions::default(),
    );
    parser.parse_program().map_err(|_| "cannot parse")
}
