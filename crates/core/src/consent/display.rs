//! What the owner sees in an approval: the tool's description of the call, made so that every
//! character that will run is visible, the same text for every interface (Telegram, Lark, the
//! web stream, the terminal). The daemon's consent step ([`ConsentGate`](super::ConsentGate))
//! applies [`for_approval`] once, before any provider is asked; the adapters then only escape
//! for their format. Counts in approvals (and in usage reports) are written by [`thousands`].
//!
//! The rules, in one pass over the text:
//! - a run of spaces and tabs is shown as one space, so padding cannot push the rest of a command
//!   out of sight (`echo hi` + 3,000 spaces + `; touch X` shows `echo hi ; touch X`);
//! - a line break (`\n`) is shown as [`LINE_BREAK_MARK`] (`⏎`) followed by the real line break,
//!   so every line of a multi-line command is seen to be one;
//! - characters that are invisible or change how the text around them looks are shown as
//!   escapes, never raw: C0 controls (`\r`, ESC, …), DEL and C1 controls as `\xHH` (`\x1b`,
//!   `\x0d`, `\x7f`, `\x85`); everything else as `\uXXXX` (`\u{XXXXX}` above U+FFFF): bidi
//!   embeddings, overrides, isolates and marks (U+202A–202E, U+2066–2069, U+200E/200F, U+061C),
//!   zero-width characters (U+200B–200D, U+2060, U+FEFF), the other format characters and
//!   default-ignorable code points (soft hyphen, variation selectors, tag characters, Hangul
//!   fillers, …), spaces other than U+0020 (no-break, em, ideographic, …), the line and
//!   paragraph separators, and private-use and non-characters (whose look depends on the font).
//!   Backslashes are not doubled, so a command keeps its shell spelling; a `\x1b` in an approval
//!   is therefore either that escape or those four characters typed literally, and neither hides
//!   anything;
//! - a result longer than [`MAX_LEN`] is not cut: the call is refused with [`TOO_LONG`], an
//!   [`ErrorKind::Validation`] error (the arguments must change, the owner refused nothing), and
//!   no approval is sent. The length is counted in UTF-16 code units, as Telegram counts its
//!   4,096-character message limit; 3,000 leaves room for the request's framing.

use crate::tool::{ErrorKind, ToolResult};

/// Most UTF-16 code units an approval description may have once made visible.
pub const MAX_LEN: usize = 3000;

/// Shown before each real line break.
pub const LINE_BREAK_MARK: char = '⏎';

/// The start of the model's error for a description over [`MAX_LEN`].
pub const TOO_LONG: &str = "command too long to show for approval; split it into shorter calls";

/// A description that cannot be shown in one approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooLong {
    /// Its length once made visible, in UTF-16 code units.
    pub len: usize,
}

impl TooLong {
    /// The error for the model.
    pub fn result(&self, tool: &str) -> ToolResult {
        ToolResult::err(
            ErrorKind::Validation,
            format!(
                "{TOO_LONG}. This {tool} call shows as {} characters once whitespace is folded and \
                 invisible characters are escaped, and an approval shows at most {MAX_LEN}; nothing \
                 was sent to the user and nothing ran.",
                self.len
            ),
        )
    }
}

/// The description as the owner sees it (see the module docs), or [`TooLong`].
pub fn for_approval(description: &str) -> Result<String, TooLong> {
    let shown = visible(description);
    let len = shown.encode_utf16().count();
    if len > MAX_LEN {
        Err(TooLong { len })
    } else {
        Ok(shown)
    }
}

/// `n` with thousands separators: `50,000`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `text` with whitespace folded, line breaks marked and invisible characters escaped; no
/// length limit (tool names, outcome lines).
pub fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = false;
    for c in text.chars() {
        if c == ' ' || c == '\t' {
            if !blank {
                out.push(' ');
                blank = true;
            }
            continue;
        }
        blank = false;
        if c == '\n' {
            out.push(LINE_BREAK_MARK);
            out.push('\n');
        } else if is_invisible(c) {
            push_escape(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` with invisible characters escaped and nothing else changed (`\n` and tabs kept): the
/// last guard of an output that must never carry raw control characters, such as the terminal.
/// Text from [`visible`] comes back unchanged.
pub fn escape_invisible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c != '\n' && c != '\t' && is_invisible(c) {
            push_escape(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

fn push_escape(out: &mut String, c: char) {
    use std::fmt::Write;
    let n = c as u32;
    let _ = if n < 0x100 {
        write!(out, "\\x{n:02x}")
    } else if n <= 0xffff {
        write!(out, "\\u{n:04x}")
    } else {
        write!(out, "\\u{{{n:x}}}")
    };
}

/// Whether `c` is shown escaped (see the module docs). Space, tab and `\n` are handled before.
pub fn is_invisible(c: char) -> bool {
    matches!(c as u32,
        // C0 controls, DEL, C1 controls
        0x00..=0x1f | 0x7f..=0x9f
        // no-break space, soft hyphen, combining grapheme joiner
        | 0xa0 | 0xad | 0x34f
        // Arabic format characters and letter mark, Syriac abbreviation mark, …
        | 0x600..=0x605 | 0x61c | 0x6dd | 0x70f | 0x890..=0x891 | 0x8e2
        // Hangul fillers, Khmer inherent vowels, Mongolian selectors and vowel separator
        | 0x115f..=0x1160 | 0x17b4..=0x17b5 | 0x180b..=0x180f
        // Ogham space mark, typographic spaces, zero-width characters, bidi marks
        | 0x1680 | 0x2000..=0x200f
        // line/paragraph separators, bidi embeddings and overrides, narrow no-break space
        | 0x2028..=0x202f
        // medium mathematical space, word joiner, invisible operators, bidi isolates, …
        | 0x205f..=0x206f
        // Braille blank, ideographic space, Hangul filler
        | 0x2800 | 0x3000 | 0x3164
        // private use
        | 0xe000..=0xf8ff
        // variation selectors, byte-order mark / zero-width no-break space, Hangul filler
        | 0xfe00..=0xfe0f | 0xfeff | 0xffa0
        // interlinear annotation, unassigned specials, non-characters
        | 0xfff0..=0xfffb | 0xfffe..=0xffff
        // Kaithi and Egyptian format characters, shorthand format controls, musical formatting
        | 0x110bd | 0x110cd | 0x13430..=0x1343f | 0x1bca0..=0x1bca3 | 0x1d173..=0x1d17a
        // tags, variation selectors supplement, private use planes
        | 0xe0000..=0xe0fff | 0xf0000..=0x10ffff
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_spaces_and_tabs_fold_to_one_space() {
        let padded = format!("echo hi{}; touch X", " ".repeat(3000));
        assert_eq!(for_approval(&padded).unwrap(), "echo hi ; touch X");
        assert_eq!(visible("a \t \t b\t\tc"), "a b c");
        assert_eq!(visible("  lead and trail  "), " lead and trail ");
        assert_eq!(visible("one space stays"), "one space stays");
    }

    #[test]
    fn line_breaks_show_a_mark_before_the_real_break() {
        assert_eq!(visible("a\nb"), "a⏎\nb");
        assert_eq!(visible("a\n\n"), "a⏎\n⏎\n");
        assert_eq!(visible("a  \n  b"), "a ⏎\n b");
        // A carriage return is a control character, not a line break.
        assert_eq!(visible("a\r\nb"), "a\\x0d⏎\nb");
        assert_eq!(
            visible("(dangerous: x)\nrm -rf /"),
            "(dangerous: x)⏎\nrm -rf /"
        );
    }

    #[test]
    fn controls_are_escaped() {
        assert_eq!(visible("echo \x1b[2Jhi"), "echo \\x1b[2Jhi");
        assert_eq!(
            visible("\0\x07\x08\x0b\x0c\r"),
            "\\x00\\x07\\x08\\x0b\\x0c\\x0d"
        );
        assert_eq!(visible("a\x7fb"), "a\\x7fb");
        assert_eq!(visible("a\u{85}b\u{9b}c"), "a\\x85b\\x9bc");
    }

    #[test]
    fn bidi_characters_are_escaped() {
        for (c, shown) in [
            ('\u{202a}', "\\u202a"),
            ('\u{202b}', "\\u202b"),
            ('\u{202c}', "\\u202c"),
            ('\u{202d}', "\\u202d"),
            ('\u{202e}', "\\u202e"),
            ('\u{2066}', "\\u2066"),
            ('\u{2067}', "\\u2067"),
            ('\u{2068}', "\\u2068"),
            ('\u{2069}', "\\u2069"),
            ('\u{200e}', "\\u200e"),
            ('\u{200f}', "\\u200f"),
            ('\u{061c}', "\\u061c"),
        ] {
            assert_eq!(visible(&format!("x{c}y")), format!("x{shown}y"), "{c:?}");
        }
        // The trojan-source shape: the override is visible, the text is in storage order.
        assert_eq!(
            visible("rm -rf ~ \u{202e}# safe\u{2066}"),
            "rm -rf ~ \\u202e# safe\\u2066"
        );
    }

    #[test]
    fn zero_width_and_other_invisible_characters_are_escaped() {
        for (c, shown) in [
            ('\u{200b}', "\\u200b"),
            ('\u{200c}', "\\u200c"),
            ('\u{200d}', "\\u200d"),
            ('\u{2060}', "\\u2060"),
            ('\u{feff}', "\\ufeff"),
            ('\u{ad}', "\\xad"),
            ('\u{a0}', "\\xa0"),
            ('\u{3000}', "\\u3000"),
            ('\u{2028}', "\\u2028"),
            ('\u{fe0f}', "\\ufe0f"),
            ('\u{3164}', "\\u3164"),
            ('\u{e000}', "\\ue000"),
            ('\u{e0041}', "\\u{e0041}"),
            ('\u{1d173}', "\\u{1d173}"),
        ] {
            assert_eq!(visible(&format!("x{c}y")), format!("x{shown}y"), "{c:?}");
        }
    }

    #[test]
    fn visible_text_is_kept_as_it_is() {
        let s = "grep -E 'a|b' <in >out && echo \"$HOME\" \\ 'é' 中文 😀 `x` ⏎";
        assert_eq!(visible(s), s);
        assert_eq!(escape_invisible(s), s);
    }

    #[test]
    fn escape_invisible_keeps_line_breaks_and_is_idempotent_on_visible_text() {
        assert_eq!(escape_invisible("a\x1b[31m\tb\nc"), "a\\x1b[31m\tb\nc");
        let shown = visible("a\n\x1b b\u{202e}");
        assert_eq!(escape_invisible(&shown), shown);
    }

    #[test]
    fn the_length_limit_is_exact_and_nothing_is_cut() {
        let at = "x".repeat(MAX_LEN);
        assert_eq!(for_approval(&at).unwrap(), at);
        let over = "x".repeat(MAX_LEN + 1);
        assert_eq!(for_approval(&over), Err(TooLong { len: MAX_LEN + 1 }));
        // Counted after folding: padding does not count, escapes do.
        let padded = format!("{}{}y", "x".repeat(MAX_LEN - 2), " ".repeat(10_000));
        assert_eq!(for_approval(&padded).unwrap().len(), MAX_LEN);
        let escaped = format!("{}\x1b", "x".repeat(MAX_LEN - 4));
        assert_eq!(for_approval(&escaped).unwrap().len(), MAX_LEN);
        let escaped = format!("{}\x1b", "x".repeat(MAX_LEN - 3));
        assert_eq!(for_approval(&escaped), Err(TooLong { len: MAX_LEN + 1 }));
        // A line break shows as two characters.
        let lines = "\n".repeat(MAX_LEN / 2);
        assert!(for_approval(&lines).is_ok());
        assert!(for_approval(&format!("{lines}\n")).is_err());
        // Characters outside the BMP count twice, as Telegram counts them.
        assert!(for_approval(&"😀".repeat(MAX_LEN / 2)).is_ok());
        assert_eq!(
            for_approval(&"😀".repeat(MAX_LEN / 2 + 1)),
            Err(TooLong { len: MAX_LEN + 2 })
        );
    }

    #[test]
    fn the_error_tells_the_model_what_to_do() {
        let r = TooLong { len: 5006 }.result("shell");
        assert_eq!(r.error_kind, Some(ErrorKind::Validation));
        let text = r.model_text();
        assert!(text.starts_with("Error (validation): "), "{text}");
        assert!(text.contains(TOO_LONG), "{text}");
        assert!(text.contains("5006") && text.contains("3000"), "{text}");
    }
}
