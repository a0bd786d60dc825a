//! The title and readable text of a web page's HTML ([`readable`]): Readability
//! (`dom_smoothie`) for the article as Markdown, else the text of `<body>` walked with
//! `dom_query`. It parses an attacker's HTML, so only the daemon's page reader calls it, in its
//! limited child process ([`super::page_reader`]); the nesting scan ([`super::markup_depth`])
//! keeps the parse and Readability from the deepest pages there.

use super::markup_depth::{
    markup_deeper_than, nested_deeper_than, unparsed_text, MAX_PARSED_DEPTH, MAX_READABLE_DEPTH,
};

/// Title and readable Markdown of an HTML document. Nesting bounds what each step gets
/// ([`super::markup_depth`]): a document whose markup nests deeper than
/// [`MAX_PARSED_DEPTH`] is not parsed at all (its text with the tags removed), one whose tree
/// is deeper than [`MAX_READABLE_DEPTH`] gets its title and body text without Readability.
pub fn readable(html: &str, url: &str) -> (String, String) {
    if markup_deeper_than(html, MAX_PARSED_DEPTH) {
        return unparsed_text(html);
    }
    let doc = dom_query::Document::from(html);
    if nested_deeper_than(&doc, MAX_READABLE_DEPTH) {
        return (document_title(html), body_text(html));
    }
    let cfg = dom_smoothie::Config {
        text_mode: dom_smoothie::TextMode::Markdown,
        max_elements_to_parse: 200_000,
        ..Default::default()
    };
    // The page's URL only when Readability takes it (an absolute one).
    let url_taken =
        dom_smoothie::Readability::with_document(dom_query::Document::from(""), Some(url), None)
            .is_ok();
    let article =
        dom_smoothie::Readability::with_document(doc, url_taken.then_some(url), Some(cfg))
            .and_then(|mut r| r.parse());
    match article {
        Ok(a) if !a.text_content.trim().is_empty() => {
            let title = if a.title.trim().is_empty() {
                document_title(html)
            } else {
                a.title.trim().to_string()
            };
            (title, tidy(&a.text_content))
        }
        _ => (document_title(html), body_text(html)),
    }
}

/// `<title>` of a document, whitespace collapsed.
fn document_title(html: &str) -> String {
    let doc = dom_query::Document::from(html);
    let Ok(sel) = dom_query::Matcher::new("title") else {
        return String::new();
    };
    collapse_ws(&doc.select_single_matcher(&sel).text())
}

/// The text of `<body>` (or the whole document), one line per block element, scripts and
/// styles left out.
fn body_text(html: &str) -> String {
    const SKIP: &[&str] = &[
        "script", "style", "noscript", "template", "head", "svg", "iframe", "object",
    ];
    const BLOCK: &[&str] = &[
        "p",
        "div",
        "br",
        "li",
        "ul",
        "ol",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "tr",
        "table",
        "section",
        "article",
        "header",
        "footer",
        "nav",
        "aside",
        "main",
        "pre",
        "blockquote",
        "dd",
        "dt",
        "dl",
        "hr",
        "form",
        "figure",
        "figcaption",
        "address",
    ];
    let doc = dom_query::Document::from(html);
    let root = doc.body().unwrap_or_else(|| doc.root());
    let mut out = String::new();
    let mut stack = vec![(root, false)];
    // Depth-first walk with explicit "closing" markers to put line breaks after blocks.
    while let Some((node, closing)) = stack.pop() {
        if node.is_text() {
            if closing {
                continue;
            }
            let s = collapse_ws(&node.text());
            if !s.is_empty() {
                if !out.is_empty() && !out.ends_with('\n') && !out.ends_with(' ') {
                    out.push(' ');
                }
                out.push_str(&s);
            }
        } else if let Some(name) = node.node_name() {
            let name: &str = &name;
            if SKIP.contains(&name) {
                continue;
            }
            let block = BLOCK.contains(&name);
            if closing {
                if block && !out.ends_with('\n') {
                    out.push('\n');
                }
                continue;
            }
            if block && !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            stack.push((node, true));
            stack.extend(node.children_it(true).map(|c| (c, false)));
        } else if !closing {
            stack.extend(node.children_it(true).map(|c| (c, false)));
        }
    }
    tidy(&out)
}

fn collapse_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Trim trailing spaces and squeeze runs of blank lines.
fn tidy(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut blank = 0;
    for line in s.lines() {
        let line = line.trim_end();
        if line.trim().is_empty() {
            blank += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank > 0 { "\n\n" } else { "\n" });
        }
        blank = 0;
        out.push_str(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_text_has_the_title() {
        let html = r#"<html><head><title>A small page</title><style>p{}</style></head>
            <body><nav><a href="/">Home</a></nav><script>var x = 1;</script>
            <h1>Heading</h1><p>First paragraph with <b>bold</b> text.</p><p>Second.</p></body></html>"#;
        let (title, text) = readable(html, "http://example.com/");
        assert_eq!(title, "A small page");
        assert!(text.contains("First paragraph with"), "{text}");
        assert!(!text.contains("var x"), "{text}");
        let body = body_text(html);
        assert!(body.contains("First paragraph with bold text."), "{body}");
        assert!(!body.contains("var x"), "{body}");
    }
}
