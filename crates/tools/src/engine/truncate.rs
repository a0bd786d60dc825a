//! Cutting a tool's output for the model: head and tail kept on UTF-8 character boundaries, with
//! a marker stating the original size.

/// The most characters of one tool output the model receives.
pub const MODEL_OUTPUT_LIMIT: usize = 8000;

/// Returns the text unchanged when it has at most `limit` characters; otherwise the first ~2/3
/// and last ~1/3 of the allowed characters around a marker line such as
/// `[… output truncated: 123456 characters in all, 113456 omitted …]`.
pub fn truncate_for_model(text: &str, limit: usize) -> (String, bool) {
    let total = text.chars().count();
    if total <= limit {
        return (text.to_string(), false);
    }
    let (head_n, tail_n) = kept_counts(limit);
    let head_end = text
        .char_indices()
        .nth(head_n)
        .map(|(i, _)| i)
        .unwrap_or(text.len());
    let tail_start = text
        .char_indices()
        .nth(total - tail_n)
        .map(|(i, _)| i)
        .unwrap_or(text.len());
    (
        marked(&text[..head_end], &text[tail_start..], total, text.len()),
        true,
    )
}

/// How many characters of the head and of the tail a text cut to `limit` keeps.
pub fn kept_counts(limit: usize) -> (usize, usize) {
    let budget = limit.saturating_sub(120).max(2);
    let head_n = budget * 2 / 3;
    (head_n, budget - head_n)
}

/// `head` and `tail` of a text of `total` characters (`bytes` in UTF-8) around the marker line.
pub fn marked(head: &str, tail: &str, total: usize, bytes: usize) -> String {
    let omitted = total - head.chars().count() - tail.chars().count();
    format!(
        "{head}\n[… output truncated: {total} characters ({bytes} bytes) in all, {omitted} omitted …]\n{tail}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_untouched() {
        assert_eq!(truncate_for_model("abc", 10), ("abc".to_string(), false));
    }

    #[test]
    fn long_text_keeps_head_tail_and_states_size() {
        let text: String = "é😀x".repeat(5000); // 15000 chars, multi-byte
        let (out, cut) = truncate_for_model(&text, 8000);
        assert!(cut);
        assert!(out.chars().count() <= 8000, "{}", out.chars().count());
        assert!(out.contains("15000 characters"));
        assert!(out.starts_with("é😀x"));
        assert!(out.ends_with("é😀x"));
    }
}
