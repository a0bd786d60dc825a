//! The terminal's consent provider: a y/N question on stderr, the answer read from stdin — also
//! when stdin is not a terminal, so `yes | ethan chat -m …` works. EOF or anything but
//! y/yes/a/always means no; `a`/`always` grants the scope for the session. Ctrl-C at the
//! question means no and stops the whole turn ([`TerminalInput::stop_turn`]): the person wants
//! out, not a model that carries on without the call.
//!
//! Stdin is read by one thread ([`TerminalInput`], in `input.rs`), shared by the chat prompt and
//! the consent question so they never compete for the same bytes.

pub use super::input::{Line, TerminalInput};
use std::sync::atomic::Ordering;

/// The person's answer at the terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminalAnswer {
    Once,
    Session,
    No,
}

/// Interpret an answer line.
pub fn parse_answer(line: &str) -> TerminalAnswer {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => TerminalAnswer::Once,
        "a" | "always" | "s" | "session" => TerminalAnswer::Session,
        _ => TerminalAnswer::No,
    }
}

/// The question as written to the terminal. `tool` and `description` come already made visible
/// by [`super::display`]; escaping invisible characters once more here (which leaves such text
/// unchanged) keeps raw escape sequences off the terminal whatever the caller passed.
pub fn question(tool: &str, description: &str, choices: &str) -> String {
    let tool = super::display::escape_invisible(tool);
    let description = super::display::escape_invisible(description);
    format!("\nEthan wants to run {tool}: {description}\nAllow? {choices} \n")
}

/// Ask on stderr and wait for a line (or EOF / Ctrl-C = no).
pub async fn ask(
    input: &TerminalInput,
    tool: &str,
    description: &str,
    always: bool,
) -> TerminalAnswer {
    let choices = if always {
        "[y/N]"
    } else {
        "[y/a(lways this session)/N]"
    };
    let asking = input.asking();
    asking.store(true, Ordering::SeqCst);
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        // Only what is typed after the question is shown answers it: input queued before (typed
        // ahead, or pushed into the terminal by a program) is dropped.
        // SAFETY: tcflush on standard input takes integers only.
        unsafe { libc::tcflush(0, libc::TCIFLUSH) };
    }
    if std::io::stderr().is_terminal() {
        // Over a status line, if one is shown.
        eprint!("\r\x1b[2K");
    }
    eprint!("{}", question(tool, description, choices));
    let answer = tokio::select! {
        line = input.read("", false) => match line {
            Line::Text(l) => parse_answer(&l),
            Line::Eof => TerminalAnswer::No,
            Line::Interrupted => {
                input.stop_turn();
                TerminalAnswer::No
            }
        },
        _ = tokio::signal::ctrl_c() => {
            input.stop_turn();
            TerminalAnswer::No
        }
    };
    asking.store(false, Ordering::SeqCst);
    match (answer, always) {
        (TerminalAnswer::Session, true) => TerminalAnswer::Once,
        (a, _) => a,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers() {
        assert_eq!(parse_answer("y"), TerminalAnswer::Once);
        assert_eq!(parse_answer(" YES "), TerminalAnswer::Once);
        assert_eq!(parse_answer("a"), TerminalAnswer::Session);
        assert_eq!(parse_answer(""), TerminalAnswer::No);
        assert_eq!(parse_answer("n"), TerminalAnswer::No);
        assert_eq!(parse_answer("sure"), TerminalAnswer::No);
    }

    #[test]
    fn the_question_carries_no_raw_control_characters() {
        let q = question("sh\x1b]0;x\x07", "echo \x1b[2J\u{202e}hi\nnext", "[y/N]");
        assert!(!q.contains('\x1b') && !q.contains('\x07') && !q.contains('\u{202e}'));
        assert_eq!(
            q,
            "\nEthan wants to run sh\\x1b]0;x\\x07: echo \\x1b[2J\\u202ehi\nnext\nAllow? [y/N] \n"
        );
    }
}
