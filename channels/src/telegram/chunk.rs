//! Splitting outgoing Telegram text into messages that fit the Bot API limit.
//!
//! This module owns the length rules for `sendMessage` / `editMessageText`:
//! a message text may be at most 4096 characters *after entity parsing*, and
//! Telegram counts those characters in UTF-16 code units
//! (<https://core.telegram.org/bots/api#sendmessage>,
//! <https://core.telegram.org/api/entities#entity-length>), so an emoji
//! outside the BMP costs two. To be safe regardless of how entities are
//! parsed, [`chunk_html`] bounds the *raw HTML string* of every chunk
//! (tags and entities included), which is always at least as long as the
//! displayed text.
//!
//! Every HTML chunk is self-contained, as `parse_mode = "HTML"` requires
//! (<https://core.telegram.org/bots/api#html-style>): tags open at a split
//! are closed at the end of one chunk and re-opened, with their original
//! attributes, at the start of the next; splits never fall inside a tag, an
//! entity (`&amp;` …) or a code point; bare `<`, `>` and `&` are escaped.
//! The displayed text is preserved exactly (see
//! [`super::render::html_to_display_text`]).

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;

use super::render::{push_escaped_char, HtmlLexer, HtmlToken};

/// Maximum length of a Telegram message text, in UTF-16 code units.
pub const TELEGRAM_TEXT_LIMIT: usize = 4096;

/// Length of `s` in UTF-16 code units, the unit Telegram counts message
/// length and entity offsets in (characters outside the BMP count as 2).
pub fn utf16_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// Splits rendered Telegram HTML into ordered chunks that can each be sent as
/// one message with `parse_mode = "HTML"`.
///
/// Guarantees, for any input (it never panics):
///
/// * every chunk's whole HTML string is at most `limit` UTF-16 code units
///   (the only exception: when `limit` is smaller than a single escaped
///   character, i.e. below 5, that character is emitted alone);
/// * every chunk is balanced on its own: tags open at a split are closed at
///   the end of the chunk and re-opened with their original attributes
///   (e.g. `<pre><code class="language-rust">`, `<a href="…">`) at the start
///   of the next one; stray closing tags are dropped, unclosed ones closed;
/// * no split falls inside a code point, a tag or an entity;
/// * concatenating [`html_to_display_text`](super::render::html_to_display_text) of all chunks gives exactly
///   `html_to_display_text(html)`; chunks with no display text are dropped.
///
/// A split is made after the last newline in the latter half of the chunk,
/// else after the last space there, else at the hard limit. When no progress
/// is possible (a single tag longer than `limit`, or nesting so deep that
/// re-opening the tags fills the chunk) the rest of the input is stripped of
/// tags and chunked as escaped plain text.
pub fn chunk_html(html: &str, limit: usize) -> Vec<String> {
    let units = html_units(html);
    let mut chunks = Vec::new();
    // Open-tag units still open at the start of the current chunk.
    let mut open: Vec<usize> = Vec::new();
    let mut i = 0;
    while i < units.len() {
        // `total` is the chunk length so far plus the closing tags it would
        // need; appending units never makes it smaller.
        let mut total: usize = open.iter().map(|&k| units[k].cost()).sum();
        let mut j = i;
        let mut newline = None;
        let mut space = None;
        while let Some(unit) = units.get(j) {
            if total + unit.cost() > limit {
                break;
            }
            total += unit.cost();
            j += 1;
            match unit.kind {
                Kind::Text('\n') => newline = Some((j, total)),
                Kind::Text(' ') => space = Some((j, total)),
                _ => {}
            }
        }
        let mut end = j;
        if j < units.len() {
            let in_latter_half = |&(_, len): &(usize, usize)| len.saturating_mul(2) >= total;
            if let Some((point, _)) = newline
                .filter(in_latter_half)
                .or(space.filter(in_latter_half))
            {
                end = point;
            }
            // Do not end a chunk with freshly opened (empty) elements.
            while end > i && matches!(units[end - 1].kind, Kind::Open { .. }) {
                end -= 1;
            }
        }
        if end == i {
            let rest: String = units[i..].iter().filter_map(Unit::display).collect();
            chunks.extend(chunk_escaped(&rest, limit));
            break;
        }
        // Closing tags cost nothing extra (their length was already counted).
        while end < units.len() && matches!(units[end].kind, Kind::Close) {
            end += 1;
        }

        let mut chunk = String::new();
        for &k in &open {
            chunk.push_str(&units[k].html);
        }
        let mut has_text = false;
        for (k, unit) in units.iter().enumerate().take(end).skip(i) {
            chunk.push_str(&unit.html);
            match unit.kind {
                Kind::Open { .. } => open.push(k),
                Kind::Close => {
                    open.pop();
                }
                Kind::Text(_) => has_text = true,
                Kind::Void => {}
            }
        }
        for &k in open.iter().rev() {
            if let Kind::Open { close } = &units[k].kind {
                chunk.push_str(close);
            }
        }
        if has_text {
            chunks.push(chunk);
        }
        i = end;
    }
    chunks
}

/// Splits plain text (no markup) into ordered chunks of at most `limit`
/// UTF-16 code units each, on `char` boundaries, preferring to split after
/// the last newline (else space) in the latter half of a chunk.
///
/// Concatenating the chunks gives back `text`. A character longer than
/// `limit` (only possible when `limit` < 2) is emitted alone. Empty input
/// gives no chunks.
pub fn chunk_plain(text: &str, limit: usize) -> Vec<String> {
    let pieces: Vec<(usize, char)> = text.chars().map(|c| (c.len_utf16(), c)).collect();
    let mut chunks = Vec::new();
    let mut byte = 0;
    for range in plan_pieces(&pieces, limit) {
        let len: usize = pieces[range].iter().map(|&(_, c)| c.len_utf8()).sum();
        chunks.push(text[byte..byte + len].to_string());
        byte += len;
    }
    chunks
}

/// Plain text chunked as escaped HTML (`&`, `<`, `>` escaped), for the
/// no-progress fallback of [`chunk_html`].
fn chunk_escaped(text: &str, limit: usize) -> Vec<String> {
    let pieces: Vec<(usize, char)> = text
        .chars()
        .map(|c| {
            let len = match c {
                '&' => 5,
                '<' | '>' => 4,
                _ => c.len_utf16(),
            };
            (len, c)
        })
        .collect();
    plan_pieces(&pieces, limit)
        .into_iter()
        .map(|range| {
            let mut chunk = String::new();
            for &(_, c) in &pieces[range] {
                push_escaped_char(&mut chunk, c);
            }
            chunk
        })
        .collect()
}

/// Greedy split of atomic pieces `(utf16 length, displayed char)` into ranges
/// of total length ≤ `limit`, preferring newline then space break points in
/// the latter half. A single piece longer than `limit` forms its own range.
fn plan_pieces(pieces: &[(usize, char)], limit: usize) -> Vec<Range<usize>> {
    let mut ranges = Vec::new();
    let mut i = 0;
    while i < pieces.len() {
        let mut total = 0;
        let mut j = i;
        let mut newline = None;
        let mut space = None;
        while let Some(&(len, c)) = pieces.get(j) {
            if total + len > limit {
                break;
            }
            total += len;
            j += 1;
            match c {
                '\n' => newline = Some((j, total)),
                ' ' => space = Some((j, total)),
                _ => {}
            }
        }
        let end = if j == pieces.len() {
            j
        } else if j == i {
            i + 1
        } else {
            let in_latter_half = |&(_, len): &(usize, usize)| len.saturating_mul(2) >= total;
            newline
                .filter(in_latter_half)
                .or(space.filter(in_latter_half))
                .map_or(j, |(point, _)| point)
        };
        ranges.push(i..end);
        i = end;
    }
    ranges
}

/// What a [`Unit`] is, for splitting purposes.
enum Kind {
    /// An opening tag; `close` is the matching `</name>`.
    Open { close: String },
    /// A closing tag (always matching the innermost open tag after
    /// normalisation).
    Close,
    /// One displayed character (a literal character or an entity).
    Text(char),
    /// A self-closing tag such as `<br/>`: no text, nothing to balance.
    Void,
}

/// An atomic piece of normalised HTML that is never split.
struct Unit<'a> {
    html: Cow<'a, str>,
    /// Length of `html` in UTF-16 code units.
    len: usize,
    kind: Kind,
}

impl Unit<'_> {
    fn new<'a>(html: Cow<'a, str>, kind: Kind) -> Unit<'a> {
        Unit {
            len: utf16_len(&html),
            html,
            kind,
        }
    }

    /// Growth of "chunk length + closing tags owed" when this unit is added.
    fn cost(&self) -> usize {
        match &self.kind {
            Kind::Open { close } => self.len + utf16_len(close),
            Kind::Close => 0,
            Kind::Text(_) | Kind::Void => self.len,
        }
    }

    fn display(&self) -> Option<char> {
        match self.kind {
            Kind::Text(c) => Some(c),
            _ => None,
        }
    }
}

/// Lexes `html` into units and normalises it into a properly nested stream:
/// closing tags without a matching open tag are dropped, closing an outer tag
/// first closes the inner ones, unclosed tags are closed at the end, closing
/// tags are written as `</name>`, and bare `<`, `>`, `&` are escaped. None of
/// this changes the displayed text.
fn html_units(html: &str) -> Vec<Unit<'_>> {
    let mut units = Vec::new();
    let mut stack: Vec<String> = Vec::new();
    // How many of each tag name are on `stack`, so stray closing tags are
    // rejected without scanning the stack (keeps this linear on any input).
    let mut open_counts: HashMap<String, usize> = HashMap::new();
    for token in HtmlLexer::new(html) {
        match token {
            HtmlToken::StartTag {
                raw,
                self_closing: true,
                ..
            } => units.push(Unit::new(Cow::Borrowed(raw), Kind::Void)),
            HtmlToken::StartTag { name, raw, .. } => {
                let close = format!("</{name}>");
                units.push(Unit::new(Cow::Borrowed(raw), Kind::Open { close }));
                *open_counts.entry(name.clone()).or_default() += 1;
                stack.push(name);
            }
            HtmlToken::EndTag { name } => {
                if open_counts.get(&name).copied().unwrap_or(0) == 0 {
                    continue;
                }
                // Close inner tags first, then the matching one.
                while let Some(open) = stack.pop() {
                    if let Some(count) = open_counts.get_mut(&open) {
                        *count = count.saturating_sub(1);
                    }
                    units.push(Unit::new(Cow::Owned(format!("</{open}>")), Kind::Close));
                    if open == name {
                        break;
                    }
                }
            }
            HtmlToken::Entity { raw, ch } => {
                units.push(Unit::new(Cow::Borrowed(raw), Kind::Text(ch)));
            }
            HtmlToken::Char(c) => {
                let html = match c {
                    '&' => Cow::Borrowed("&amp;"),
                    '<' => Cow::Borrowed("&lt;"),
                    '>' => Cow::Borrowed("&gt;"),
                    _ => Cow::Owned(c.to_string()),
                };
                units.push(Unit::new(html, Kind::Text(c)));
            }
        }
    }
    for open in stack.into_iter().rev() {
        units.push(Unit::new(Cow::Owned(format!("</{open}>")), Kind::Close));
    }
    units
}

#[cfg(test)]
mod tests {
    use super::super::render::{html_to_display_text, markdown_to_html};
    use super::*;

    /// The display text of `chunks` concatenated equals that of `html`.
    fn display_preserved(html: &str, chunks: &[String]) -> bool {
        let joined: String = chunks.iter().map(|c| html_to_display_text(c)).collect();
        joined == html_to_display_text(html)
    }

    const ALLOWED_TAGS: [&str; 8] = ["b", "i", "u", "s", "code", "pre", "a", "blockquote"];

    /// Checks every invariant of [`chunk_html`] and returns the chunks.
    fn checked_chunks(html: &str, limit: usize, only_allowed_tags: bool) -> Vec<String> {
        let chunks = chunk_html(html, limit);
        for chunk in &chunks {
            if limit >= 5 {
                assert!(
                    utf16_len(chunk) <= limit,
                    "chunk of {} > {limit} units: {chunk:?}\ninput: {html:?}",
                    utf16_len(chunk)
                );
            }
            assert!(
                !html_to_display_text(chunk).is_empty(),
                "empty chunk {chunk:?} from {html:?}"
            );
            let mut stack: Vec<String> = Vec::new();
            for token in HtmlLexer::new(chunk) {
                match token {
                    HtmlToken::StartTag {
                        name,
                        self_closing,
                        raw,
                    } => {
                        if only_allowed_tags {
                            assert!(ALLOWED_TAGS.contains(&name.as_str()), "{raw} in {chunk:?}");
                        }
                        if !self_closing {
                            stack.push(name);
                        }
                    }
                    HtmlToken::EndTag { name } => {
                        assert_eq!(
                            stack.pop().as_deref(),
                            Some(name.as_str()),
                            "unbalanced {chunk:?} from {html:?}"
                        );
                    }
                    HtmlToken::Char(c) => assert!(
                        !matches!(c, '<' | '>' | '&'),
                        "bare {c:?} in {chunk:?} (split entity or tag?) from {html:?}"
                    ),
                    HtmlToken::Entity { .. } => {}
                }
            }
            assert!(stack.is_empty(), "unclosed {stack:?} in {chunk:?}");
        }
        assert!(
            display_preserved(html, &chunks),
            "display text changed for {html:?} at limit {limit}: {chunks:?}"
        );
        chunks
    }

    fn lens(chunks: &[String]) -> Vec<usize> {
        chunks.iter().map(|c| utf16_len(c)).collect()
    }

    #[test]
    fn utf16_len_counts_code_units() {
        assert_eq!(utf16_len(""), 0);
        assert_eq!(utf16_len("abc"), 3);
        assert_eq!(utf16_len("é"), 1);
        assert_eq!(utf16_len("漢字"), 2);
        assert_eq!(utf16_len("😀"), 2);
        assert_eq!(utf16_len("👍🏽"), 4);
        assert_eq!(utf16_len("a😀b"), 4);
    }

    #[test]
    fn empty_input_gives_no_chunks() {
        assert!(chunk_html("", TELEGRAM_TEXT_LIMIT).is_empty());
        assert!(chunk_html("<b></b><i></i>", TELEGRAM_TEXT_LIMIT).is_empty());
        assert!(chunk_html("", 0).is_empty());
        assert!(chunk_plain("", TELEGRAM_TEXT_LIMIT).is_empty());
        assert!(chunk_plain("", 0).is_empty());
    }

    #[test]
    fn short_input_is_one_unchanged_chunk() {
        let html = "<b>hi</b> <a href=\"https://x.y/?a=1&amp;b=2\">there</a> &lt;3";
        assert_eq!(
            chunk_html(html, TELEGRAM_TEXT_LIMIT),
            vec![html.to_string()]
        );
        assert_eq!(chunk_html(html, utf16_len(html)), vec![html.to_string()]);
        assert_eq!(chunk_plain("hello", 5), vec!["hello".to_string()]);
    }

    #[test]
    fn emoji_surrogate_pairs_are_never_split() {
        let html = "😀".repeat(3000);
        let chunks = checked_chunks(&html, TELEGRAM_TEXT_LIMIT, true);
        assert_eq!(lens(&chunks), vec![4096, 1904]);
        let chunks = checked_chunks(&html, 4095, true);
        assert_eq!(lens(&chunks), vec![4094, 1906]);
        assert!(chunks.iter().all(|c| c.chars().all(|ch| ch == '😀')));

        // An emoji that would straddle the limit moves to the next chunk.
        let html = format!("{}😀tail", "a".repeat(4095));
        let chunks = checked_chunks(&html, TELEGRAM_TEXT_LIMIT, true);
        assert_eq!(chunks, vec!["a".repeat(4095), "😀tail".to_string()]);
        // ... and one that ends exactly at the limit stays.
        let html = format!("{}😀tail", "a".repeat(4094));
        let chunks = checked_chunks(&html, TELEGRAM_TEXT_LIMIT, true);
        assert_eq!(
            chunks,
            vec![format!("{}😀", "a".repeat(4094)), "tail".into()]
        );

        let plain = format!("{}😀tail", "a".repeat(4095));
        assert_eq!(
            chunk_plain(&plain, TELEGRAM_TEXT_LIMIT),
            vec!["a".repeat(4095), "😀tail".to_string()]
        );
        let chunks = chunk_plain(&"😀".repeat(5), 3);
        assert_eq!(chunks, vec!["😀"; 5]);
    }

    #[test]
    fn emoji_inside_tags_at_the_limit() {
        let html = format!("<b>{}</b>", "😀".repeat(100));
        for limit in 9..60 {
            let chunks = checked_chunks(&html, limit, true);
            for chunk in &chunks {
                assert!(
                    chunk.starts_with("<b>") && chunk.ends_with("</b>"),
                    "{chunk}"
                );
            }
        }
    }

    #[test]
    fn cjk_is_counted_in_utf16_units_not_bytes() {
        let text: String = "漢字かなカナ한글".chars().cycle().take(10_000).collect();
        let chunks = checked_chunks(&text, TELEGRAM_TEXT_LIMIT, true);
        assert_eq!(lens(&chunks), vec![4096, 4096, 1808]);
        assert_eq!(chunks[0].chars().count(), 4096);
        assert!(chunks[0].len() > 4096, "bytes are not the unit");
        let plain = chunk_plain(&text, TELEGRAM_TEXT_LIMIT);
        assert_eq!(plain.concat(), text);
        assert_eq!(lens(&plain), vec![4096, 4096, 1808]);
    }

    #[test]
    fn entities_are_never_split() {
        assert_eq!(chunk_html("ab&amp;", 6), vec!["ab", "&amp;"]);
        assert_eq!(chunk_html("ab&amp;", 7), vec!["ab&amp;"]);
        assert_eq!(chunk_html("&lt;&gt;&amp;", 8), vec!["&lt;&gt;", "&amp;"]);
        assert_eq!(chunk_html("&#128512;x", 9), vec!["&#128512;", "x"]);

        let mut escaped = String::new();
        super::super::render::escape_text_into(&mut escaped, &"&<>".repeat(200));
        for prefix in 0..8 {
            let html = format!("{}{escaped}", "x".repeat(prefix));
            for limit in 5..80 {
                checked_chunks(&html, limit, true);
            }
        }
    }

    #[test]
    fn entity_run_right_at_the_limit() {
        // 4091 chars + "&amp;" = exactly 4096; the next entity starts a chunk.
        let html = format!("{}&amp;&lt;&gt;", "a".repeat(4091));
        let chunks = checked_chunks(&html, TELEGRAM_TEXT_LIMIT, true);
        assert_eq!(
            chunks,
            vec![format!("{}&amp;", "a".repeat(4091)), "&lt;&gt;".to_string()]
        );
        let html = format!("{}&amp;&lt;", "a".repeat(4092));
        let chunks = checked_chunks(&html, TELEGRAM_TEXT_LIMIT, true);
        assert_eq!(chunks, vec!["a".repeat(4092), "&amp;&lt;".to_string()]);
    }

    #[test]
    fn bare_markup_characters_are_escaped() {
        let chunks = checked_chunks("a < b & c > d", TELEGRAM_TEXT_LIMIT, true);
        assert_eq!(chunks, vec!["a &lt; b &amp; c &gt; d"]);
        let chunks = checked_chunks("x &nbsp; y", TELEGRAM_TEXT_LIMIT, true);
        assert_eq!(chunks, vec!["x &amp;nbsp; y"]);
    }

    #[test]
    fn malformed_tags_are_balanced() {
        assert_eq!(chunk_html("<b>unclosed", 100), vec!["<b>unclosed</b>"]);
        assert_eq!(chunk_html("stray </i> close", 100), vec!["stray  close"]);
        assert_eq!(chunk_html("<b><i>x</b></i>", 100), vec!["<b><i>x</i></b>"]);
        assert_eq!(chunk_html("<B>x</B >", 100), vec!["<B>x</b>"]);
        checked_chunks("<b><i>x</b></i> <u>y", 8, false);
    }

    #[test]
    fn prefers_newline_then_space_in_latter_half() {
        assert_eq!(
            chunk_html("aaaaaaaaaa\nbbbb cccc dddd", 20),
            vec!["aaaaaaaaaa\n", "bbbb cccc dddd"]
        );
        assert_eq!(
            chunk_html("aaaa bbbb cccc dddd eeee", 12),
            vec!["aaaa bbbb ", "cccc dddd ", "eeee"]
        );
        // A newline in the first half is ignored in favour of a hard split.
        assert_eq!(
            chunk_html(&format!("a\n{}", "b".repeat(30)), 20),
            vec![format!("a\n{}", "b".repeat(18)), "b".repeat(12)]
        );
        assert_eq!(
            chunk_plain("aaaaaaaaaa\nbbbb cccc dddd", 20),
            vec!["aaaaaaaaaa\n", "bbbb cccc dddd"]
        );
        assert_eq!(
            chunk_plain("aaaa bbbb cccc dddd eeee", 12),
            vec!["aaaa bbbb ", "cccc dddd ", "eeee"]
        );
        assert_eq!(chunk_plain("abcdefghij", 4), vec!["abcd", "efgh", "ij"]);
    }

    #[test]
    fn does_not_end_a_chunk_with_an_empty_element() {
        assert_eq!(
            chunk_html("aaaaaaaaa<b>bbb</b>", 16),
            vec!["aaaaaaaaa", "<b>bbb</b>"]
        );
        assert_eq!(
            chunk_html("<b>aaaaaaaa</b>bbbbbbb", 15),
            vec!["<b>aaaaaaaa</b>", "bbbbbbb"]
        );
    }

    #[test]
    fn nested_tags_are_closed_and_reopened_across_a_split() {
        let words = "word ".repeat(30);
        let html = format!(
            "<b>bold <i>italic <a href=\"https://x.y/?q=1&amp;r=&quot;2&quot;\">{words}</a> \
             rest</i></b> tail"
        );
        let chunks = checked_chunks(&html, 80, true);
        assert!(chunks.len() > 2, "{chunks:?}");
        let open = "<b><i><a href=\"https://x.y/?q=1&amp;r=&quot;2&quot;\">";
        assert!(chunks[0].ends_with("</a></i></b>"), "{}", chunks[0]);
        assert!(chunks[1].starts_with(open), "{}", chunks[1]);
        assert!(chunks[1].ends_with("</a></i></b>"), "{}", chunks[1]);
        // The first chunk has no space in its latter half (the long opening tag
        // comes first), so it is split hard; the others end on a word boundary.
        assert!(
            html_to_display_text(&chunks[0]).ends_with("wor"),
            "{}",
            chunks[0]
        );
        for chunk in &chunks[1..chunks.len() - 1] {
            assert!(html_to_display_text(chunk).ends_with(' '), "{chunk}");
        }
    }

    #[test]
    fn ten_thousand_character_answer_with_rust_code() {
        let mut md = String::from("# Answer 🚀\n\nHere is **the plan** with `inline` code.\n\n");
        for i in 0..40 {
            md.push_str(&format!(
                "Paragraph {i}: emoji 😀🎉 and CJK 漢字 and escapes a<b & c>d, \
                 some *italic* text and a [link](https://example.com/{i}).\n\n"
            ));
        }
        md.push_str("```rust\n");
        for i in 0..150 {
            md.push_str(&format!(
                "    let v{i}: Vec<&str> = vec![\"x\" ; {i}]; // 😀 comment {i}\n"
            ));
        }
        md.push_str("```\n\n");
        for i in 0..30 {
            md.push_str(&format!("- item {i} with ✨ sparkle & more text here\n"));
        }
        md.push_str("\n> a closing quote 🎯\n");
        assert!(md.chars().count() >= 10_000, "{}", md.chars().count());

        let html = markdown_to_html(&md);
        let chunks = checked_chunks(&html, TELEGRAM_TEXT_LIMIT, true);
        assert!(chunks.len() >= 3, "{} chunks", chunks.len());

        let pre = "<pre><code class=\"language-rust\">";
        let reopened: Vec<usize> = (1..chunks.len())
            .filter(|&k| chunks[k].starts_with(pre) && chunks[k - 1].contains(pre))
            .collect();
        assert!(
            !reopened.is_empty(),
            "code block was not split: {chunks:#?}"
        );
        for k in reopened {
            let before = &chunks[k - 1];
            assert!(before.ends_with("</code></pre>"), "{before}");
            // The code block split at a line boundary.
            assert!(html_to_display_text(before).ends_with('\n'));
        }
        let joined: String = chunks.iter().map(|c| html_to_display_text(c)).collect();
        assert_eq!(joined, html_to_display_text(&html));
    }

    #[test]
    fn single_tag_longer_than_limit_falls_back_to_plain_text() {
        let html = format!(
            "start here <b>bold</b> <a href=\"https://example.com/{}\">link &amp; text</a> end",
            "p".repeat(100)
        );
        let chunks = checked_chunks(&html, 40, true);
        let joined = chunks.concat();
        assert!(
            joined.contains("<b>bold</b>"),
            "formatting before the tag is kept"
        );
        assert!(!joined.contains("<a"), "{joined}");
        assert!(joined.contains("link &amp; text end"), "{joined}");
    }

    #[test]
    fn too_deep_nesting_falls_back_to_plain_text() {
        let html = "<b><i><u><s><code>deep text &lt;here&gt;</code></s></u></i></b>";
        // <b><i><u><s> + their closes = 28 units; <code></code> does not fit in 30.
        let chunks = checked_chunks(html, 30, true);
        assert_eq!(chunks, vec!["deep text &lt;here&gt;"]);
        let chunks = checked_chunks(html, 20, true);
        assert_eq!(chunks, vec!["deep text ", "&lt;here&gt;"]);

        let html = format!(
            "<pre><code class=\"language-rust\">{}</code></pre>",
            "fn x() {}\n".repeat(10)
        );
        let chunks = checked_chunks(&html, 30, true);
        assert!(chunks.iter().all(|c| !c.contains('<')), "{chunks:?}");

        let html = format!("{}x{}", "<b>".repeat(5000), "</b>".repeat(5000));
        let chunks = checked_chunks(&html, TELEGRAM_TEXT_LIMIT, true);
        assert_eq!(chunks, vec!["x"]);
    }

    #[test]
    fn tiny_limits_terminate() {
        for limit in 0..6 {
            let html = "<b>a&amp;b</b>😀 &lt;x&gt;";
            let chunks = chunk_html(html, limit);
            assert!(display_preserved(html, &chunks), "{limit}: {chunks:?}");
            assert!(chunks.len() <= 12);
            let plain = chunk_plain("a😀b\nc", limit);
            assert_eq!(plain.concat(), "a😀b\nc");
        }
        assert_eq!(chunk_html("&amp;&amp;", 3), vec!["&amp;", "&amp;"]);
    }

    /// Deterministic xorshift PRNG (no extra crates).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[self.below(items.len())]
        }
    }

    const MD_PIECES: [&str; 36] = [
        "word ",
        "lorem ipsum ",
        "\n",
        "\n\n",
        "**bold** ",
        "*it* ",
        "~~del~~ ",
        "`co<de>` ",
        "😀",
        "👍🏽 ",
        "漢字かな",
        "&",
        "<",
        ">",
        "\"",
        "&amp;",
        "# Heading\n",
        "- item\n",
        "  - nested\n",
        "1. one\n",
        "> quote ",
        "[link](https://e.x/?a=1&b=\"2\") ",
        "[bad](javascript:x) ",
        "![img](https://i.x/a.png) ",
        "\n```rust\nfn main() {}\n",
        "let x = a < b && c;\n",
        "```\n",
        "| a | b |\n|---|---|\n| 1 | 2 |\n",
        "---\n",
        "<b>raw</b>",
        "***x***",
        "- [x] done\n",
        "    indented code\n",
        "\\",
        "\t",
        " ",
    ];

    const SOUP_PIECES: [&str; 28] = [
        "<b>",
        "</b>",
        "<i>",
        "</i>",
        "<a href=\"https://x.y/?a&amp;b\">",
        "</a>",
        "<pre><code class=\"language-rust\">",
        "</code></pre>",
        "<blockquote>",
        "</blockquote>",
        "<br/>",
        "<",
        ">",
        "&",
        "&amp;",
        "&lt;",
        "&#128512;",
        "&#xZZ;",
        "&nbsp;",
        "😀",
        "é",
        "漢",
        " ",
        "\n",
        "text",
        "</nope>",
        "<u",
        "a;b",
    ];

    #[test]
    fn property_rendered_markdown_keeps_invariants() {
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        for case in 0..1500 {
            let mut md = String::new();
            for _ in 0..rng.below(80) {
                md.push_str(rng.pick(&MD_PIECES));
            }
            let html = markdown_to_html(&md);
            let limit = 20 + rng.below(181);
            let chunks = checked_chunks(&html, limit, true);
            if case % 10 == 0 {
                checked_chunks(&html, TELEGRAM_TEXT_LIMIT, true);
            }
            // Chunking only ever re-opens tags that were open in the input.
            for chunk in &chunks {
                for token in HtmlLexer::new(chunk) {
                    if let HtmlToken::StartTag { raw, .. } = token {
                        assert!(html.contains(raw), "invented tag {raw}");
                    }
                }
            }
        }
    }

    #[test]
    fn property_long_inputs_at_telegram_limit() {
        let mut rng = Rng(0xDEAD_BEEF_CAFE_F00D);
        for _ in 0..20 {
            let mut md = String::new();
            while md.len() < 20_000 {
                md.push_str(rng.pick(&MD_PIECES));
            }
            let html = markdown_to_html(&md);
            let chunks = checked_chunks(&html, TELEGRAM_TEXT_LIMIT, true);
            assert!(chunks.len() >= 2);
        }
    }

    #[test]
    fn property_arbitrary_html_soup_keeps_invariants() {
        let mut rng = Rng(0x0123_4567_89AB_CDEF);
        for _ in 0..3000 {
            let mut html = String::new();
            for _ in 0..rng.below(60) {
                html.push_str(rng.pick(&SOUP_PIECES));
            }
            let limit = 20 + rng.below(181);
            checked_chunks(&html, limit, false);
            let tiny = rng.below(20);
            let chunks = chunk_html(&html, tiny);
            assert!(display_preserved(&html, &chunks), "{html:?} at {tiny}");
        }
    }

    #[test]
    fn property_plain_chunks_concatenate_and_fit() {
        const PLAIN: [&str; 8] = ["a", "word", " ", "\n", "😀", "漢字", "👍🏽", "é"];
        let mut rng = Rng(0x1357_9BDF_2468_ACE0);
        for _ in 0..2000 {
            let mut text = String::new();
            for _ in 0..rng.below(100) {
                text.push_str(rng.pick(&PLAIN));
            }
            let limit = 2 + rng.below(199);
            let chunks = chunk_plain(&text, limit);
            assert_eq!(chunks.concat(), text);
            assert!(chunks
                .iter()
                .all(|c| !c.is_empty() && utf16_len(c) <= limit));
        }
    }
}
