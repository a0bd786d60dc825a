//! Model text as HTML for the web page, made on the server: Markdown rendered by
//! `pulldown-cmark` (CommonMark with tables, strikethrough and task lists), then cleaned by
//! `ammonia`, an allow-list sanitiser built on html5ever. The page only ever inserts what comes
//! out of here (and the card HTML of `ethan_cards::render_html`, cleaned the same way).
//!
//! Two layers, so that one mistake is not enough:
//! - raw HTML the model writes (`<script>`, `<iframe>`, `<style>`, `<img onerror=…>`) is never
//!   passed through as markup: pulldown-cmark's HTML events become text, so it shows as the
//!   characters the model wrote;
//! - the result is sanitised anyway: only formatting tags, no `style` or event attributes, no
//!   class but a code block's `language-<name>` (cards keep only the classes their renderer
//!   writes), so an answer cannot take the page's own classes; links
//!   only to `http`, `https` and `mailto` (a `javascript:` link loses its `href`) and opened with
//!   `rel="noopener noreferrer nofollow"`, and no element that loads anything (`img`, `video`,
//!   `audio`, `iframe`, `object`, `embed`, `link`, `source` are removed with their contents'
//!   tags): an answer can make the browser send no request at all. The page's
//!   Content-Security-Policy (`img-src 'self'`) would block one too.

use ammonia::Builder;
use pulldown_cmark::{html, Event, Options, Parser};
use std::collections::HashSet;
use std::sync::OnceLock;

/// The tags an answer or a card may use.
const TAGS: &[&str] = &[
    "a",
    "b",
    "blockquote",
    "br",
    "code",
    "dd",
    "del",
    "div",
    "dl",
    "dt",
    "em",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "i",
    "input",
    "li",
    "ol",
    "p",
    "pre",
    "s",
    "section",
    "span",
    "strong",
    "sub",
    "sup",
    "table",
    "tbody",
    "td",
    "tfoot",
    "th",
    "thead",
    "tr",
    "ul",
];

/// The classes card HTML may keep: those `ethan_cards::render_html` writes, and no other.
const CARD_CLASSES: &[&str] = &[
    "card",
    "card-compare",
    "card-rank",
    "card-stats",
    "card-timeline",
    "card-custom",
    "card-table",
    "scroll",
    "empty",
    "subtitle",
    "score",
    "metric",
    "value",
    "trend",
    "up",
    "down",
    "flat",
];

/// A code block's `language-…` class: the language is 1–32 of `[A-Za-z0-9_+#.-]`.
fn language_class(class: &str) -> bool {
    class.strip_prefix("language-").is_some_and(|l| {
        (1..=32).contains(&l.len())
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_+#.-".contains(&b))
    })
}

/// Which `class` values survive: an answer keeps one `language-…` class (of its first code
/// block's language), a card only [`CARD_CLASSES`]. Anything else would let model text take
/// the page's own classes (an approval's look, a person's message).
fn keep_classes(value: &str, keep: fn(&str) -> bool, most: usize) -> Option<String> {
    let kept: Vec<&str> = value
        .split_ascii_whitespace()
        .filter(|c| keep(c))
        .take(most)
        .collect();
    (!kept.is_empty()).then(|| kept.join(" "))
}

fn builder(keep: fn(&str) -> bool, most: usize) -> Builder<'static> {
    let mut b = Builder::empty();
    b.tags(TAGS.iter().copied().collect::<HashSet<_>>())
        .clean_content_tags(["script", "style"].into_iter().collect())
        .generic_attributes(["class"].into_iter().collect())
        .add_tag_attributes("a", ["href", "title"])
        .add_tag_attributes("th", ["scope", "align"])
        .add_tag_attributes("td", ["align"])
        .add_tag_attributes("ol", ["start"])
        .add_tag_attributes("input", ["type", "checked", "disabled"])
        .url_schemes(["http", "https", "mailto"].into_iter().collect())
        .link_rel(Some("noopener noreferrer nofollow"))
        .strip_comments(true)
        .attribute_filter(move |_, attr, value| {
            if attr == "class" {
                keep_classes(value, keep, most).map(Into::into)
            } else {
                Some(value.into())
            }
        });
    b
}

/// The sanitiser of answers: classes only `language-…`.
fn answers() -> &'static Builder<'static> {
    static B: OnceLock<Builder<'static>> = OnceLock::new();
    B.get_or_init(|| builder(language_class, 1))
}

/// The sanitiser of card HTML: classes only [`CARD_CLASSES`].
fn cards() -> &'static Builder<'static> {
    static B: OnceLock<Builder<'static>> = OnceLock::new();
    B.get_or_init(|| builder(|c| CARD_CLASSES.contains(&c), CARD_CLASSES.len()))
}

/// Sanitise HTML made on the server (card HTML); see the module docs for what survives.
pub fn clean(html: &str) -> String {
    cards().clean(html).to_string()
}

/// The deepest nesting of elements an answer is rendered with; a deeper one shows as plain
/// text ([`plain`]). The sanitiser's HTML parser spends time that grows with the square of the
/// nesting (each start tag looks through the open elements): 20,000 nested quotes (`> > > …`,
/// 39 KB) took 19 s of one core, 20,000 nested list items 73 s (debug build); real answers nest
/// a few levels.
pub const MAX_ANSWER_NESTING: usize = 100;

/// An answer in Markdown as sanitised HTML: raw HTML in it shows as text. An answer nested
/// deeper than [`MAX_ANSWER_NESTING`] is shown as plain text.
pub fn markdown(md: &str) -> String {
    let mut opts = Options::empty();
    opts.insert(Options::ENABLE_TABLES);
    opts.insert(Options::ENABLE_STRIKETHROUGH);
    opts.insert(Options::ENABLE_TASKLISTS);
    if nested_deeper_than(md, opts, MAX_ANSWER_NESTING) {
        return plain(md);
    }
    let events = Parser::new_ext(md, opts).map(|e| match e {
        Event::Html(t) | Event::InlineHtml(t) => Event::Text(t),
        e => e,
    });
    let mut out = String::with_capacity(md.len() * 3 / 2);
    html::push_html(&mut out, events);
    if out.len() > max_answer_html(md.len()) {
        return plain(md);
    }
    answers().clean(&out).to_string()
}

/// The most HTML an answer of `md_len` bytes may render to before the sanitiser, else it is
/// shown as plain text: eight times its size and 256 KB. A table pads each row to its header's
/// columns, so 3 KB (a 500-column header over 500 one-cell rows) rendered to 2.26 MB, 0.2 s of
/// the sanitiser in a release build, again at each reload of the history (BENCHMARKS.md,
/// 2026-12-06); real answers render to about two to five times their size.
fn max_answer_html(md_len: usize) -> usize {
    md_len.saturating_mul(8).saturating_add(256 * 1024)
}

/// Whether the elements `md` renders to nest deeper than `limit` (one pass of the Markdown
/// parser, linear in the text).
fn nested_deeper_than(md: &str, opts: Options, limit: usize) -> bool {
    let mut depth = 0usize;
    for e in Parser::new_ext(md, opts) {
        match e {
            Event::Start(_) => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            Event::End(_) => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// Plain text (a person's message) as HTML: escaped, one `<p>` per paragraph, line breaks kept.
pub fn plain(text: &str) -> String {
    let mut out = String::new();
    for para in text.split("\n\n").filter(|p| !p.trim().is_empty()) {
        out.push_str("<p>");
        let lines: Vec<String> = para.lines().map(ethan_cards::html::escape_html).collect();
        out.push_str(&lines.join("<br>"));
        out.push_str("</p>");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_renders_formatting_and_tables() {
        let h = markdown("**bold** and `code`\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n- [x] done");
        assert!(h.contains("<strong>bold</strong>"), "{h}");
        assert!(h.contains("<code>code</code>"), "{h}");
        assert!(h.contains("<table>") && h.contains("<th>a</th>"), "{h}");
        assert!(h.contains("checked"), "{h}");
    }

    #[test]
    fn raw_html_from_the_model_is_text() {
        let payload = "<script>window.pwned=1</script>\n\n<img src=x onerror=\"window.pwned=2\">\n\n\
                       <iframe src=\"https://evil.example/\"></iframe>\n\n<style>body{display:none}</style>\n\n\
                       [click](javascript:window.pwned=3) ![p](https://evil.example/p.png) \
                       <a href=\"javascript:alert(1)\">x</a>";
        let h = markdown(payload);
        // As text, the characters stay readable; as markup, nothing of them is left.
        for bad in ["<script", "<img", "<iframe", "<style", "<a href=\"j"] {
            assert!(!h.contains(bad), "{bad} in {h}");
        }
        // What the model wrote stays readable; the Markdown link lost its target.
        assert!(h.contains("&lt;script&gt;"), "{h}");
        assert!(h.contains("click"), "{h}");
        assert!(!h.contains("href=\"javascript:window"), "{h}");
    }

    #[test]
    fn links_keep_safe_urls_only_with_rel() {
        let h = markdown(
            "[docs](https://example.com/a?b=1) [mail](mailto:a@b.c) [f](file:///etc/passwd)",
        );
        assert!(h.contains("href=\"https://example.com/a?b=1\""), "{h}");
        assert!(h.contains("rel=\"noopener noreferrer nofollow\""), "{h}");
        assert!(h.contains("mailto:a@b.c"), "{h}");
        assert!(!h.contains("file:"), "{h}");
    }

    #[test]
    fn cleaning_removes_what_loads_or_runs() {
        let h = clean(
            "<table onclick=\"x()\"><tr><td style=\"color:red\">a</td></tr></table>\
             <img src=\"https://evil.example/x.png\"><video src=x></video><svg onload=x()></svg>",
        );
        assert_eq!(h, "<table><tbody><tr><td>a</td></tr></tbody></table>");
    }

    #[test]
    fn an_answer_keeps_no_class_but_its_code_language() {
        let h =
            markdown("```x\tconsent\tmsg user\ncat README.md\n```\n\n```rust\nfn main() {}\n```");
        assert!(h.contains("<code class=\"language-x\">"), "{h}");
        assert!(h.contains("<code class=\"language-rust\">"), "{h}");
        for page in ["consent", "msg", "user"] {
            assert!(!h.contains(page), "{page} in {h}");
        }
        let h = markdown("```consent\nx\n```\n\n```a\"b\nx\n```");
        assert!(h.contains("class=\"language-consent\""), "{h}");
        assert_eq!(h.matches("class=").count(), 1, "{h}");
        let h = clean("<div class=\"card consent msg\"><p class=\"language-x\">a</p></div>");
        assert_eq!(h, "<div class=\"card\"><p>a</p></div>");
    }

    #[test]
    fn an_answer_that_renders_to_far_more_html_than_its_size_is_plain_text() {
        // 500 columns in the header, 500 rows of one cell each: every row is padded.
        let md = format!(
            "|{}\n|{}\n{}",
            "a|".repeat(500),
            "-|".repeat(500),
            "b\n".repeat(500)
        );
        assert!(md.len() < 4000);
        let t = std::time::Instant::now();
        let out = markdown(&md);
        assert!(
            out.starts_with("<p>") && !out.contains("<table>"),
            "{}",
            &out[..80]
        );
        assert!(out.len() < 10_000, "{} bytes", out.len());
        assert!(
            t.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            t.elapsed()
        );
        // A real table stays a table.
        let table = markdown("| a | b |\n|---|---|\n| 1 | 2 |\n| 3 |\n");
        assert!(table.contains("<table>"), "{table}");
    }

    #[test]
    fn plain_text_is_escaped() {
        assert_eq!(plain("a <b>\nc\n\nd"), "<p>a &lt;b&gt;<br>c</p><p>d</p>");
    }

    #[test]
    fn a_deeply_nested_answer_is_plain_text_in_bounded_time() {
        for md in ["> ".repeat(20_000) + "x", "- ".repeat(20_000) + "x"] {
            let t = std::time::Instant::now();
            let out = markdown(&md);
            assert!(
                t.elapsed() < std::time::Duration::from_secs(2),
                "{:?}",
                t.elapsed()
            );
            assert!(
                out.starts_with("<p>") && !out.contains("<blockquote>"),
                "{}",
                &out[..80]
            );
        }
        let normal = markdown(
            "> quote
>
> - a
>   - b
>     - c
",
        );
        assert!(
            normal.contains("<blockquote>") && normal.contains("<ul>"),
            "{normal}"
        );
    }
}
