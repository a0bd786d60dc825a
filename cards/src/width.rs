//! Display width in terminal columns, for aligning tables in monospace text (the terminal and
//! Telegram `<pre>`): East Asian wide and fullwidth characters and emoji count 2, combining
//! marks and zero-width joiners 0 (Unicode UAX #11 via the `unicode-width` crate).

use unicode_width::UnicodeWidthStr;

/// Columns `s` occupies in a monospace font.
pub fn display_width(s: &str) -> usize {
    UnicodeWidthStr::width(s)
}

/// `s` followed by spaces up to `width` columns (no padding when already wider).
pub fn pad_to(s: &str, width: usize) -> String {
    let w = display_width(s);
    let mut out = String::with_capacity(s.len() + width.saturating_sub(w));
    out.push_str(s);
    out.extend(std::iter::repeat_n(' ', width.saturating_sub(w)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cjk_and_emoji_are_two_columns() {
        assert_eq!(display_width("abc"), 3);
        assert_eq!(display_width("中文"), 4);
        assert_eq!(display_width("🚀"), 2);
        assert_eq!(display_width("é"), 1);
        assert_eq!(pad_to("中", 4), "中  ");
    }
}
