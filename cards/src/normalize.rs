//! Text clean-up applied to everything the model sends: literal `\n` → newline, bullet markers,
//! scalar values → text.

use serde_json::Value;

/// Repairs text as models write it: the two characters `\` `n` become a newline (models often
/// double-escape inside JSON arguments), `\r\n` and a literal `\r\n` become `\n`, a literal `\t`
/// becomes a tab. Surrounding whitespace is trimmed.
pub fn fix_text(s: &str) -> String {
    let s = if s.contains('\\') || s.contains('\r') {
        s.replace("\\r\\n", "\n")
            .replace("\\n", "\n")
            .replace("\\t", "\t")
            .replace("\r\n", "\n")
    } else {
        s.to_string()
    };
    s.trim().to_string()
}

/// Strips one leading list marker (`-`, `*`, `+` followed by a space, or `•` / `·` with or
/// without one) and the whitespace around it. `-5%` and `**bold**` are left alone.
pub fn strip_bullet(line: &str) -> &str {
    let t = line.trim_start();
    let mut chars = t.chars();
    match chars.next() {
        Some('•' | '·' | '▪' | '◦') => chars.as_str().trim_start(),
        Some('-' | '*' | '+') if chars.as_str().starts_with([' ', '\t']) => {
            chars.as_str().trim_start()
        }
        _ => t,
    }
}

/// Whether `line` starts with a list marker that [`strip_bullet`] would remove.
pub fn has_bullet(line: &str) -> bool {
    strip_bullet(line).len() != line.trim_start().len()
}

/// A JSON scalar as display text: strings are [`fix_text`]ed, numbers keep their JSON form
/// (`3`, `2.5`), booleans become `true`/`false`, null becomes the empty string. `None` for
/// arrays and objects.
pub fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(fix_text(s)),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null => Some(String::new()),
        Value::Array(_) | Value::Object(_) => None,
    }
}

/// Replaces runs of whitespace containing a newline with a single space, for places where a
/// newline cannot go (table cells, one-line labels).
pub fn one_line(s: &str) -> String {
    if !s.contains('\n') {
        return s.to_string();
    }
    s.split('\n')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Repairs literal `\n` in every string inside `v` (keys untouched).
pub fn fix_strings_in(v: &mut Value) {
    match v {
        Value::String(s) if s.contains("\\n") || s.contains("\\r") => {
            *s = s.replace("\\r\\n", "\n").replace("\\n", "\n");
        }
        Value::Array(a) => a.iter_mut().for_each(fix_strings_in),
        Value::Object(m) => m.values_mut().for_each(fix_strings_in),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn literal_backslash_n_becomes_newline() {
        assert_eq!(fix_text("a\\nb\\r\\nc\r\nd  "), "a\nb\nc\nd");
        assert_eq!(fix_text("tab\\there"), "tab\there");
    }

    #[test]
    fn bullets() {
        assert_eq!(strip_bullet("- a"), "a");
        assert_eq!(strip_bullet("  * b"), "b");
        assert_eq!(strip_bullet("•c"), "c");
        assert_eq!(strip_bullet("+ d"), "d");
        assert_eq!(strip_bullet("-5%"), "-5%");
        assert_eq!(strip_bullet("**bold**"), "**bold**");
        assert!(has_bullet("- x"));
        assert!(!has_bullet("x - y"));
    }

    #[test]
    fn scalars() {
        assert_eq!(scalar_text(&json!(3)).unwrap(), "3");
        assert_eq!(scalar_text(&json!(2.5)).unwrap(), "2.5");
        assert_eq!(scalar_text(&json!(null)).unwrap(), "");
        assert_eq!(scalar_text(&json!(true)).unwrap(), "true");
        assert!(scalar_text(&json!([1])).is_none());
    }

    #[test]
    fn one_line_joins() {
        assert_eq!(one_line("a\n b\n\nc"), "a b c");
    }
}
