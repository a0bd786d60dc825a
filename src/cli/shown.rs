//! Text that came from outside the daemon (an MCP server's names, descriptions, URIs, errors)
//! made safe to print on the owner's terminal: a control character (escape sequences, carriage
//! return, newline, tab, C1 controls) or a character that reorders or hides text (bidirectional
//! overrides and isolates, zero-width characters) becomes `�`, so it can neither move the cursor,
//! erase or forge a line, nor make a name read as another; and the text is cut to a length.

/// `text` with every character that could change what the terminal shows replaced by `�`, and
/// cut to `max_chars` (with `…`).
pub fn shown(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars * 4));
    for (i, c) in text.chars().enumerate() {
        if i == max_chars {
            out.push('…');
            break;
        }
        out.push(if hides(c) { '\u{FFFD}' } else { c });
    }
    out
}

/// A control character, or one that reorders or hides text.
fn hides(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{2069}'
            | '\u{FEFF}'
            | '\u{061C}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_line_breaks_and_reordering_are_replaced_and_long_text_cut() {
        assert_eq!(
            shown("inbox\u{1b}[2K\u{1b}[1A\rother: ok\n", 100),
            "inbox\u{FFFD}[2K\u{FFFD}[1A\u{FFFD}other: ok\u{FFFD}"
        );
        assert_eq!(
            shown("a\u{202E}b\u{200B}c\u{9b}", 100),
            "a\u{FFFD}b\u{FFFD}c\u{FFFD}"
        );
        assert_eq!(shown("读取 note://inbox", 100), "读取 note://inbox");
        assert_eq!(shown("abcdef", 3), "abc…");
    }
}
