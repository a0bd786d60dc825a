//! How deep a page's markup nests, and what a page too deep to parse is read as.
//!
//! A web page is an attacker's text, and nesting is what makes HTML expensive: the HTML parser's
//! tree builder checks the stack of open elements for each tag (time grows with the square of
//! the depth: 10,000 nested `<div>`s took seconds, and a 5 MB page holds a million), and
//! Readability's matching recurses once per level (10,000 levels overflowed a thread's stack,
//! which ends the whole process). So a page's nesting is measured before either runs:
//! [`markup_deeper_than`] scans the text once without parsing it, and a page deeper than
//! [`MAX_PARSED_DEPTH`] is read with its tags removed ([`unparsed_text`]); after the parse,
//! [`nested_deeper_than`] keeps trees deeper than [`MAX_READABLE_DEPTH`] from Readability.
//!
//! The scan reads tags, not the HTML grammar: markup can look shallow to it and still be slow to
//! parse (self-closed `<div/>`s nest). It is not what protects the daemon — pages are parsed
//! only in the daemon's limited child process ([`super::page_reader`]), which is killed at its
//! limits; the scan keeps the cost of the common deep page low there.

/// Markup nested deeper than this (by [`markup_deeper_than`]) is not parsed.
pub const MAX_PARSED_DEPTH: usize = 1_000;

/// A parsed tree deeper than this is not given to Readability. Real pages nest a few dozen
/// levels deep.
pub const MAX_READABLE_DEPTH: usize = 256;

/// Elements without content (never closed) and elements the parser closes by itself when the
/// next one starts (an unclosed `<p>` or `<li>` does not nest): neither counts as a level.
const NOT_A_LEVEL: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
    "track", "wbr", "p", "li", "dt", "dd", "tr", "td", "th", "option", "optgroup", "rb", "rt",
    "rp", "thead", "tbody", "tfoot", "colgroup", "caption",
];

/// Whether `html`'s elements nest more than `limit` levels deep as its tags say, in one pass
/// over the text without parsing it. Each start tag of an element that can hold others opens a
/// level; an end tag closes the levels down to the last open element of its name, as the parser
/// does, and is ignored when none is open (a stray `</x>` closes nothing there either);
/// comments, `<!…>`, `<?…>` and self-closed tags do not count. An estimate that errs high (a
/// `<div` written inside a script counts), not low. The open elements are kept only up to
/// `limit`, so each end tag looks through at most that many.
pub fn markup_deeper_than(html: &str, limit: usize) -> bool {
    let bytes = html.as_bytes();
    let mut open: Vec<&[u8]> = Vec::with_capacity(64);
    let mut i = 0usize;
    while let Some(at) = memchr(b'<', &bytes[i..]) {
        i += at + 1;
        let rest = &bytes[i..];
        if rest.starts_with(b"!--") {
            i += find(&rest[3..], b"-->").map_or(rest.len(), |end| end + 6);
            continue;
        }
        let closing = rest.first() == Some(&b'/');
        let name_at = usize::from(closing);
        let name_len = rest[name_at..]
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric())
            .count();
        if name_len == 0 {
            continue;
        }
        let name = &rest[name_at..name_at + name_len];
        if NOT_A_LEVEL
            .iter()
            .any(|n| n.as_bytes().eq_ignore_ascii_case(name))
        {
            continue;
        }
        if closing {
            if let Some(at) = open.iter().rposition(|o| o.eq_ignore_ascii_case(name)) {
                open.truncate(at);
            }
            continue;
        }
        let tag_end = rest
            .iter()
            .position(|&b| b == b'>' || b == b'<')
            .unwrap_or(rest.len());
        if tag_end > 0 && rest[tag_end - 1] == b'/' {
            continue;
        }
        open.push(name);
        if open.len() > limit {
            return true;
        }
    }
    false
}

/// Whether some node of `doc` lies more than `limit` levels below the root: a walk over the
/// tree by first child, next sibling and parent, without recursion, that stops at the first
/// node past the limit.
pub fn nested_deeper_than(doc: &dom_query::Document, limit: usize) -> bool {
    let mut node = doc.root();
    let mut depth = 0usize;
    loop {
        if let Some(child) = node.first_child() {
            depth += 1;
            if depth > limit {
                return true;
            }
            node = child;
            continue;
        }
        loop {
            if let Some(next) = node.next_sibling() {
                node = next;
                break;
            }
            match node.parent() {
                Some(parent) if depth > 0 => {
                    node = parent;
                    depth -= 1;
                }
                _ => return false,
            }
        }
    }
}

/// A page too deep to parse: its `<title>` and its text with every tag, script, style and
/// comment removed, whitespace collapsed (entities left as written).
pub fn unparsed_text(html: &str) -> (String, String) {
    let lower = html.to_ascii_lowercase();
    let title = lower
        .find("<title")
        .and_then(|at| Some(at + lower[at..].find('>')? + 1))
        .and_then(|start| Some((start, start + lower[start..].find("</title")?)))
        .map(|(start, end)| collapse(&html[start..end]))
        .unwrap_or_default();
    let mut text = String::with_capacity(html.len() / 2);
    let mut i = 0;
    while i < html.len() {
        let Some(at) = html[i..].find('<') else {
            text.push_str(&html[i..]);
            break;
        };
        text.push_str(&html[i..i + at]);
        text.push(' ');
        i += at;
        let skip_to = HIDDEN
            .iter()
            .find(|(open, _)| lower[i..].starts_with(open))
            .map(|(_, close)| close);
        i = match skip_to {
            Some(close) => lower[i..].find(close).map_or(html.len(), |end| i + end + 1),
            None => i + 1,
        };
        i = lower[i..].find('>').map_or(html.len(), |end| i + end + 1);
    }
    (title, collapse(&text))
}

/// What [`unparsed_text`] leaves out with its content: the start of each and where it ends.
const HIDDEN: &[(&str, &str)] = &[
    ("<script", "</script"),
    ("<style", "</style"),
    ("<title", "</title"),
    ("<template", "</template"),
    ("<noscript", "</noscript"),
    ("<!--", "-->"),
];

/// Runs of whitespace as one space, trimmed.
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&b| b == needle)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize, tag: &str) -> String {
        format!(
            "<html><head><title>Deep</title></head><body>{}the text at the bottom{}</body></html>",
            format!("<{tag}>").repeat(depth),
            format!("</{tag}>").repeat(depth)
        )
    }

    #[test]
    fn the_depth_of_ordinary_markup_is_its_nesting() {
        let page = "<!doctype html><html><head><meta charset=utf-8><title>t</title></head>\
                    <body><!-- <div><div><div> --><ul><li>one<li>two</ul><p>a<p>b<br>\
                    <img src=x /><div><span>x</span></div></body></html>";
        assert!(!markup_deeper_than(page, 4), "html > body > div > span");
        assert!(markup_deeper_than(page, 3));
        assert!(markup_deeper_than(&nested(5_000, "div"), 5_001));
        assert!(!markup_deeper_than(&nested(5_000, "div"), 5_002));
        assert!(
            !markup_deeper_than(&nested(5_000, "p"), 3),
            "a <p> does not nest"
        );
        assert!(markup_deeper_than("<div", 0));
        assert!(!markup_deeper_than("a < b and c <> d </ e", 0));
    }

    /// An end tag closes only what is open by its name: stray ones (ignored by the parser too)
    /// do not hide the nesting, and one closes what its element holds.
    #[test]
    fn stray_end_tags_do_not_hide_the_nesting() {
        let stray = "<div></x></span></DIV2>".repeat(2_000);
        assert!(markup_deeper_than(&stray, MAX_PARSED_DEPTH));
        let closing = "<div><span><b>x</div>".repeat(2_000);
        assert!(
            !markup_deeper_than(&closing, 3),
            "each </div> closes its span and b"
        );
    }

    /// A page nested far deeper than any real one is read without the parser (its time grows
    /// with the square of the depth) and without Readability (which overflowed the stack).
    #[test]
    fn a_page_too_deep_to_parse_is_read_as_text() {
        let html = nested(200_000, "div");
        assert!(markup_deeper_than(&html, MAX_PARSED_DEPTH));
        let (title, text) = super::super::readable::readable(&html, "http://example.com/");
        assert_eq!(title, "Deep");
        assert_eq!(text, "the text at the bottom");
        let (_, text) = unparsed_text("<p>a<script>var x = '<b>';</script>b<style>p{}</style>c");
        assert_eq!(text, "a b c");
    }

    #[test]
    fn a_tree_deeper_than_readability_takes_gets_its_body_text() {
        let html = nested(MAX_READABLE_DEPTH + 10, "div");
        assert!(!markup_deeper_than(&html, MAX_PARSED_DEPTH));
        let (title, text) = super::super::readable::readable(&html, "http://example.com/");
        assert_eq!(title, "Deep");
        assert!(text.contains("the text at the bottom"), "{text}");
        let shallow = dom_query::Document::from("<html><body><div><p>1</p></div></body></html>");
        assert!(!nested_deeper_than(&shallow, MAX_READABLE_DEPTH));
        assert!(
            nested_deeper_than(&shallow, 3),
            "html > body > div > p is four levels"
        );
        assert!(!nested_deeper_than(&shallow, 5));
    }
}
