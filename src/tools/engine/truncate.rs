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
    let budget = limit.saturating_sub(120).max(2);
    let head_n = budget * 2 / 3;
    let tail_n = budget - head_n;
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
    let omitted = total - head_n - tail_n;
    let out = format!(
        "{}\n[… output truncated: {total} characters ({} bytes) in all, {omitted} omitted …]\n{}",
        &text[..head_end],
        text.len(),
        &text[tail_start..]
    );
    (out, true)
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
