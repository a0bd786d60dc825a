use super::*;

const ALLOWED_TAGS: [&str; 8] = ["b", "i", "u", "s", "code", "pre", "a", "blockquote"];

/// Asserts `html` only uses the allowed tags, properly nested and closed.
fn assert_valid_telegram_html(html: &str) {
    let mut stack: Vec<String> = Vec::new();
    for token in HtmlLexer::new(html) {
        match token {
            HtmlToken::StartTag {
                name,
                raw,
                self_closing,
            } => {
                assert!(!self_closing, "self-closing tag {raw} in {html:?}");
                assert!(
                    ALLOWED_TAGS.contains(&name.as_str()),
                    "tag {raw} not allowed in {html:?}"
                );
                match name.as_str() {
                    "a" => assert!(raw.starts_with("<a href=\""), "{raw}"),
                    "code" => assert!(
                        raw == "<code>"
                            || (raw.starts_with("<code class=\"language-")
                                && stack.last().map(String::as_str) == Some("pre")),
                        "{raw} in {html:?}"
                    ),
                    _ => assert_eq!(raw, format!("<{name}>")),
                }
                if name == "blockquote" {
                    assert!(!stack.contains(&name), "nested blockquote in {html:?}");
                }
                if let Some(top) = stack.last() {
                    assert!(
                        top != "pre" || name == "code",
                        "{raw} inside <pre> in {html:?}"
                    );
                    assert!(top != "code", "{raw} inside <code> in {html:?}");
                }
                stack.push(name);
            }
            HtmlToken::EndTag { name } => {
                assert_eq!(stack.pop().as_deref(), Some(name.as_str()), "{html:?}");
            }
            HtmlToken::Char(c) => {
                assert!(!matches!(c, '<' | '>' | '&'), "unescaped {c:?} in {html:?}")
            }
            HtmlToken::Entity { .. } => {}
        }
    }
    assert!(stack.is_empty(), "unclosed {stack:?} in {html:?}");
    assert_eq!(html, html.trim_end(), "trailing whitespace in {html:?}");
}

fn render(md: &str) -> String {
    let html = markdown_to_html(md);
    assert_valid_telegram_html(&html);
    html
}

#[test]
fn empty_and_whitespace_input() {
    assert_eq!(render(""), "");
    assert_eq!(render("   \n\n  \n"), "");
}

#[test]
fn paragraphs_are_separated_by_a_blank_line() {
    assert_eq!(render("one\n\ntwo\n\n\nthree"), "one\n\ntwo\n\nthree");
}

#[test]
fn soft_and_hard_breaks_become_newlines() {
    assert_eq!(render("a\nb"), "a\nb");
    assert_eq!(render("a  \nb"), "a\nb");
    assert_eq!(render("a\\\nb"), "a\nb");
}

#[test]
fn inline_formatting() {
    assert_eq!(
        render("**bold** *it* _it2_ __b2__ ~~gone~~ `x < y`"),
        "<b>bold</b> <i>it</i> <i>it2</i> <b>b2</b> <s>gone</s> <code>x &lt; y</code>"
    );
    assert_eq!(
        render("***both*** **b *i* b**"),
        "<i><b>both</b></i> <b>b <i>i</i> b</b>"
    );
}

#[test]
fn headings_become_bold() {
    assert_eq!(
        render("# Title\n\nBody\n## Sub *x*\ntext"),
        "<b>Title</b>\n\nBody\n\n<b>Sub <i>x</i></b>\n\ntext"
    );
    assert_eq!(render("#"), "");
}

#[test]
fn text_is_escaped() {
    assert_eq!(
        render("a & b < c > d \"q\""),
        "a &amp; b &lt; c &gt; d \"q\""
    );
    assert_eq!(render("&amp; &lt;"), "&amp; &lt;");
    assert_eq!(render("AT&T"), "AT&amp;T");
}

#[test]
fn raw_html_is_shown_as_text() {
    assert_eq!(
        render("hi <b>there</b> <script>x</script>"),
        "hi &lt;b&gt;there&lt;/b&gt; &lt;script&gt;x&lt;/script&gt;"
    );
    assert_eq!(
        render("<div>\nblock\n</div>\n\nafter"),
        "&lt;div&gt;\nblock\n&lt;/div&gt;\n\nafter"
    );
    assert_eq!(render("<!-- c -->"), "&lt;!-- c --&gt;");
}

#[test]
fn unordered_and_ordered_lists() {
    assert_eq!(render("- a\n- b\n- c"), "• a\n• b\n• c");
    assert_eq!(render("1. a\n2. b\n3. c"), "1. a\n2. b\n3. c");
    assert_eq!(render("7. a\n1. b"), "7. a\n8. b");
    assert_eq!(
        render("intro\n\n- a\n- b\n\nafter"),
        "intro\n\n• a\n• b\n\nafter"
    );
}

#[test]
fn loose_lists_still_use_single_newlines() {
    assert_eq!(render("- a\n\n- b\n\n- c"), "• a\n• b\n• c");
    assert_eq!(render("- a\n\n  more\n- b"), "• a\n  more\n• b");
}

#[test]
fn nested_lists_are_indented_two_spaces_per_level() {
    assert_eq!(
        render("- a\n  - b\n    - c\n  - d\n- e"),
        "• a\n  • b\n    • c\n  • d\n• e"
    );
    assert_eq!(
        render("1. one\n   - x\n   - y\n2. two"),
        "1. one\n  • x\n  • y\n2. two"
    );
}

#[test]
fn task_lists() {
    assert_eq!(render("- [ ] todo\n- [x] done"), "• ☐ todo\n• ☑ done");
}

#[test]
fn blockquotes() {
    assert_eq!(
        render("> quoted **text**\n> more\n\nafter"),
        "<blockquote>quoted <b>text</b>\nmore</blockquote>\n\nafter"
    );
    assert_eq!(render("> p1\n>\n> p2"), "<blockquote>p1\n\np2</blockquote>");
    // Telegram forbids nested blockquotes: only the outer one is kept.
    assert_eq!(
        render("> outer\n>\n> > inner"),
        "<blockquote>outer\n\ninner</blockquote>"
    );
    assert_eq!(render(">"), "");
    assert_eq!(render("> - a\n> - b"), "<blockquote>• a\n• b</blockquote>");
}

#[test]
fn fenced_code_with_and_without_language() {
    assert_eq!(
        render("```rust\nfn main() { a < b && c }\n```"),
        "<pre><code class=\"language-rust\">fn main() { a &lt; b &amp;&amp; c }</code></pre>"
    );
    assert_eq!(
        render("```\nplain\n  code\n```"),
        "<pre>plain\n  code</pre>"
    );
    assert_eq!(
        render("    indented\n    code"),
        "<pre>indented\ncode</pre>"
    );
    assert_eq!(
        render("before\n```py\nx = 1\n```\nafter"),
        "before\n\n<pre><code class=\"language-py\">x = 1</code></pre>\n\nafter"
    );
    assert_eq!(render("```rust\n```"), "");
    assert_eq!(render("```\n```"), "");
}

#[test]
fn code_language_is_sanitised() {
    let html = render("```c++ extra words\nx\n```");
    assert!(
        html.starts_with("<pre><code class=\"language-c++\">"),
        "{html}"
    );
    let html = render("```rust,ignore\nx\n```");
    assert!(
        html.starts_with("<pre><code class=\"language-rust\">"),
        "{html}"
    );
    let html = render("```\"><b>x\ny\n```");
    assert_eq!(html, "<pre>y</pre>");
    let html = render("```{.rust}\nz\n```");
    assert_eq!(html, "<pre>z</pre>");
    let html = render("```objective-c_2\nz\n```");
    assert!(html.contains("language-objective-c_2\""), "{html}");
}

#[test]
fn code_block_inside_list_item() {
    assert_eq!(
        render("- step\n\n  ```sh\n  ls\n  ```\n- next"),
        "• step\n  <pre><code class=\"language-sh\">ls</code></pre>\n• next"
    );
}

#[test]
fn links() {
    assert_eq!(
        render("[site](https://example.com/?a=1&b=\"2\")"),
        "<a href=\"https://example.com/?a=1&amp;b=&quot;2&quot;\">site</a>"
    );
    assert_eq!(
        render("[me](tg://user?id=1) [mail](mailto:a@b.c) [h](HTTP://X.Y)"),
        "<a href=\"tg://user?id=1\">me</a> <a href=\"mailto:a@b.c\">mail</a> \
             <a href=\"HTTP://X.Y\">h</a>"
    );
    assert_eq!(
        render("<https://example.com> <a@b.co>"),
        "<a href=\"https://example.com\">https://example.com</a> \
             <a href=\"mailto:a@b.co\">a@b.co</a>"
    );
    assert_eq!(
        render("[**bold** link](http://x.y)"),
        "<a href=\"http://x.y\"><b>bold</b> link</a>"
    );
    assert_eq!(
        render("[](https://x.y)"),
        "<a href=\"https://x.y\">https://x.y</a>"
    );
}

#[test]
fn unsafe_links_become_text() {
    assert_eq!(render("[click](javascript:alert(1))"), "click");
    assert_eq!(render("[rel](/relative/path)"), "rel");
    assert_eq!(render("[ftp](ftp://x.y)"), "ftp");
    assert_eq!(render("[empty](https://)"), "empty");
    assert_eq!(render("[x *y*](data:text/html,hi)"), "x <i>y</i>");
    assert_eq!(render("[](javascript:x)"), "");
}

#[test]
fn images_become_alt_text_or_links() {
    assert_eq!(
        render("![a cat](https://img.example/cat.png)"),
        "<a href=\"https://img.example/cat.png\">a cat</a>"
    );
    assert_eq!(render("![a *cat*](cat.png)"), "a cat");
    assert_eq!(render("![](cat.png)"), "cat.png");
    assert_eq!(
        render("[![logo](https://i/l.png)](https://home)"),
        "<a href=\"https://home\">logo</a>"
    );
    assert_eq!(render("![a<b](x)"), "a&lt;b");
}

#[test]
fn tables_become_preformatted_lines() {
    assert_eq!(
        render("| a | b | c |\n|---|:-:|--:|\n| 1 | **2** | `3` |\n| x<y | [l](https://l) | |"),
        "<pre>a | b | c\n1 | 2 | 3\nx&lt;y | l |</pre>"
    );
    assert_eq!(
        render("text\n\n| h |\n|---|\n| v |\n\nafter"),
        "text\n\n<pre>h\nv</pre>\n\nafter"
    );
}

#[test]
fn horizontal_rule() {
    assert_eq!(render("above\n\n---\n\nbelow"), "above\n\n———\n\nbelow");
    assert_eq!(render("***"), "———");
}

#[test]
fn no_trailing_whitespace() {
    assert_eq!(render("text   "), "text");
    assert_eq!(render("- "), "•");
    assert_eq!(render("> a  \n"), "<blockquote>a</blockquote>");
    assert_eq!(render("a\n\n\n\n"), "a");
    assert_eq!(render("- - a"), "•\n  • a");
    assert_eq!(render("para  \n\n- x"), "para\n\n• x");
}

#[test]
fn mixed_document_is_valid() {
    let md = "# Plan 🚀\n\nSome *text* with `code` & <tags>.\n\n\
                  1. First\n   - nested **bold**\n   - [link](https://x.y)\n2. Second\n\n\
                  > quote with `code`\n> > nested\n\n\
                  ```rust\nfn f() -> Vec<u8> { vec![] }\n```\n\n\
                  | k | v |\n|---|---|\n| 漢字 | 😀 |\n\n---\n\nbye";
    let html = render(md);
    assert!(html.contains("<b>Plan 🚀</b>"), "{html}");
    assert!(html.contains("1. First\n  • nested <b>bold</b>"), "{html}");
    assert!(html.contains("<pre>k | v\n漢字 | 😀</pre>"), "{html}");
}

#[test]
fn display_text_strips_tags_and_decodes_entities() {
    assert_eq!(
        html_to_display_text("<b>a</b> &lt;&gt;&amp;&quot; <a href=\"x&amp;y\">l</a>"),
        "a <>&\" l"
    );
    assert_eq!(html_to_display_text("&#65;&#x42;&#X43;&#128512;"), "ABC😀");
    assert_eq!(html_to_display_text(""), "");
    assert_eq!(
        html_to_display_text("<pre><code class=\"language-rust\">x</code></pre>"),
        "x"
    );
}

#[test]
fn display_text_keeps_non_markup_literally() {
    assert_eq!(html_to_display_text("a < b"), "a < b");
    assert_eq!(html_to_display_text("a <"), "a <");
    assert_eq!(html_to_display_text("<b"), "<b");
    assert_eq!(html_to_display_text("& &nbsp; &amp"), "& &nbsp; &amp");
    assert_eq!(
        html_to_display_text("&#xD800; &#; &#x; &#99999999999;"),
        "&#xD800; &#; &#x; &#99999999999;"
    );
    assert_eq!(html_to_display_text("&#1114112;"), "&#1114112;");
    assert_eq!(html_to_display_text("😀&"), "😀&");
}

#[test]
fn rendered_display_text_matches_source_text() {
    let html = render("**a & b** <x> `c<d` [e](https://f)");
    assert_eq!(html_to_display_text(&html), "a & b <x> c<d e");
}

#[test]
fn lexer_tokens() {
    let tokens: Vec<_> = HtmlLexer::new("<A href=\"x\">&amp;</a ><br/>é").collect();
    assert_eq!(
        tokens,
        vec![
            HtmlToken::StartTag {
                name: "a".into(),
                raw: "<A href=\"x\">",
                self_closing: false
            },
            HtmlToken::Entity {
                raw: "&amp;",
                ch: '&'
            },
            HtmlToken::EndTag { name: "a".into() },
            HtmlToken::StartTag {
                name: "br".into(),
                raw: "<br/>",
                self_closing: true
            },
            HtmlToken::Char('é'),
        ]
    );
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
}

#[test]
fn random_markdown_always_renders_valid_html() {
    const PIECES: [&str; 40] = [
        "word",
        " ",
        "\n",
        "\n\n",
        "*",
        "**",
        "_",
        "__",
        "~~",
        "`",
        "```",
        "```rust\n",
        "# ",
        "## ",
        "- ",
        "1. ",
        "  ",
        "> ",
        "[",
        "]",
        "(",
        ")",
        "https://e.x/?a&b",
        "javascript:x",
        "![",
        "<b>",
        "</i>",
        "&",
        "<",
        ">",
        "\"",
        "😀",
        "漢字",
        "|",
        "---",
        "- [ ] ",
        "\\",
        "&amp;",
        "    ",
        "\t",
    ];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..3000 {
        let mut md = String::new();
        for _ in 0..rng.below(60) {
            md.push_str(PIECES[rng.below(PIECES.len())]);
        }
        let html = markdown_to_html(&md);
        assert_valid_telegram_html(&html);
    }
}
