//! Markdown → Telegram HTML rendering, and the inverse "what will the user see" view.
//!
//! This module owns the conversion of model-written Markdown (CommonMark plus
//! strikethrough, tables and task lists, parsed with `pulldown-cmark`) into the
//! HTML subset that the Telegram Bot API accepts with `parse_mode = "HTML"`
//! (<https://core.telegram.org/bots/api#html-style>):
//!
//! * only `<b>`, `<i>`, `<u>`, `<s>`, `<code>`, `<pre>`, `<a href="…">`,
//!   `<blockquote>` and `<pre><code class="language-…">` are emitted;
//! * every `<`, `>` and `&` that is not part of a tag or entity is escaped as
//!   `&lt;`, `&gt;`, `&amp;` (the only named entities Telegram understands are
//!   `&lt; &gt; &amp; &quot;`, plus numeric ones);
//! * entity nesting follows the Bot API rules: nothing is nested inside `pre`
//!   or `code`, and `blockquote` is never nested inside another `blockquote`.
//!
//! It also owns [`html_to_display_text`], the plain text Telegram displays for
//! such HTML, which the chunker ([`super::chunk`]) uses to prove it neither
//! drops nor invents visible text. Message length limits (4096 UTF-16 code
//! units) are enforced by [`super::chunk`], not here.

use pulldown_cmark::{CodeBlockKind, Event, LinkType, Options, Parser, Tag, TagEnd};

/// Renders Markdown written by a model into Telegram-flavoured HTML.
///
/// The result is meant to be sent with `parse_mode = "HTML"`:
///
/// * headings become `<b>…</b>`, paragraphs are separated by a blank line;
/// * list items are prefixed with `"• "` (unordered) or `"N. "` (ordered),
///   nested lists are indented by two spaces per level, items are separated by
///   single newlines; task list markers become `☐ ` / `☑ `;
/// * emphasis → `<i>`, strong → `<b>`, strikethrough → `<s>`, inline code →
///   `<code>`, block quotes → `<blockquote>`;
/// * fenced code with a language → `<pre><code class="language-LANG">…</code></pre>`
///   (LANG restricted to `[A-Za-z0-9_+-]`), other code blocks → `<pre>…</pre>`;
/// * links → `<a href="…">text</a>` when the target is `http`, `https`, `tg`
///   or `mailto`, otherwise just their text; images → their alt text (as a
///   link to the image when possible);
/// * raw HTML in the Markdown is escaped and shown as text;
/// * tables → one `a | b | c` line per row inside `<pre>`;
/// * thematic breaks → a `———` line; soft and hard breaks → `"\n"`.
///
/// The output never ends with whitespace. It is not length-limited; split it
/// with [`super::chunk::chunk_html`] before sending.
pub fn markdown_to_html(md: &str) -> String {
    let mut options = Options::empty();
    options.insert(Options::ENABLE_STRIKETHROUGH);
    options.insert(Options::ENABLE_TABLES);
    options.insert(Options::ENABLE_TASKLISTS);
    let mut renderer = Renderer::default();
    for event in Parser::new_ext(md, options) {
        renderer.event(event);
    }
    renderer.finish()
}

/// Returns the text Telegram displays for `html` after parsing it in HTML
/// parse mode: tags are removed and the entities `&lt;`, `&gt;`, `&amp;`,
/// `&quot;`, `&#NN;` and `&#xHH;` are decoded.
///
/// Anything that is not a well-formed tag or one of those entities (a lone
/// `<` or `&`, `&nbsp;`, an invalid code point) is kept literally.
pub fn html_to_display_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    for token in HtmlLexer::new(html) {
        match token {
            HtmlToken::Char(c) | HtmlToken::Entity { ch: c, .. } => out.push(c),
            HtmlToken::StartTag { .. } | HtmlToken::EndTag { .. } => {}
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Escaping helpers
// ---------------------------------------------------------------------------

/// Appends `text` to `out`, escaping `&`, `<` and `>`.
pub(crate) fn escape_text_into(out: &mut String, text: &str) {
    for c in text.chars() {
        push_escaped_char(out, c);
    }
}

/// Appends one character escaped for Telegram HTML text content.
pub(crate) fn push_escaped_char(out: &mut String, c: char) {
    match c {
        '&' => out.push_str("&amp;"),
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        _ => out.push(c),
    }
}

/// Appends `value` to `out` escaped for a double-quoted attribute value.
fn escape_attr_into(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '"' => out.push_str("&quot;"),
            _ => push_escaped_char(out, c),
        }
    }
}

fn escape_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    escape_text_into(&mut out, text);
    out
}

/// Link schemes Telegram will accept in `<a href>` and we are willing to send.
const ALLOWED_SCHEMES: [&str; 4] = ["http://", "https://", "tg://", "mailto:"];

/// Returns the href to use for a Markdown link target, or `None` when the
/// target must be rendered as plain text (unsupported scheme, relative URL,
/// whitespace or control characters).
fn safe_href(link_type: LinkType, dest: &str) -> Option<String> {
    let dest = dest.trim();
    let href = if link_type == LinkType::Email && !dest.to_ascii_lowercase().starts_with("mailto:")
    {
        format!("mailto:{dest}")
    } else {
        dest.to_string()
    };
    if href.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return None;
    }
    let allowed = ALLOWED_SCHEMES.iter().any(|scheme| {
        href.len() > scheme.len()
            && href
                .get(..scheme.len())
                .is_some_and(|prefix| prefix.eq_ignore_ascii_case(scheme))
    });
    allowed.then_some(href)
}

/// Extracts a code-block language from a fence info string: the leading run
/// of `[A-Za-z0-9_+-]` characters of its first word (at most 32).
fn sanitize_lang(info: &str) -> Option<String> {
    let lang: String = info
        .split_whitespace()
        .next()
        .unwrap_or("")
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '+' | '-'))
        .take(32)
        .collect();
    (!lang.is_empty()).then_some(lang)
}

// ---------------------------------------------------------------------------
// Renderer
// ---------------------------------------------------------------------------

/// An inline element that was opened and must be closed at its `End` event.
struct OpenInline {
    /// Closing tag, or `None` when the element is rendered without a tag.
    close: Option<&'static str>,
    /// `out.len()` before the opening tag was written.
    start: usize,
    /// `out.len()` after the opening tag was written.
    content_start: usize,
    /// Text to show when the element turns out to be empty (link targets).
    fallback: Option<String>,
}

struct ImageState {
    url: String,
    alt: String,
    /// Images nested inside this image's alt text.
    depth: usize,
}

struct CodeState {
    lang: Option<String>,
    text: String,
}

#[derive(Default)]
struct TableState {
    rows: Vec<String>,
    cells: Vec<String>,
    cell: String,
}

#[derive(Default)]
struct Renderer {
    out: String,
    /// Newlines owed before the next piece of content (block separation).
    pending_newlines: usize,
    /// One entry per open list: the next number for ordered lists.
    lists: Vec<Option<u64>>,
    quote_depth: usize,
    link_depth: usize,
    inline: Vec<OpenInline>,
    image: Option<ImageState>,
    code: Option<CodeState>,
    html_block: Option<String>,
    table: Option<TableState>,
}

impl Renderer {
    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) | Event::Html(text) | Event::InlineHtml(text) => self.text(&text),
            Event::Code(code) | Event::InlineMath(code) | Event::DisplayMath(code) => {
                self.inline_code(&code)
            }
            Event::FootnoteReference(label) => self.text(&format!("[{label}]")),
            Event::SoftBreak | Event::HardBreak => self.line_break(),
            Event::Rule => {
                self.block_start();
                self.out.push_str("———");
                self.block_end();
            }
            Event::TaskListMarker(checked) => self.text(if checked { "☑ " } else { "☐ " }),
        }
    }

    /// Writes owed block separators, indenting continuation blocks in lists.
    fn flush(&mut self) {
        if self.flush_newlines() {
            for _ in 0..self.lists.len() {
                self.out.push_str("  ");
            }
        }
    }

    /// Writes owed block separators (no indentation); returns whether any
    /// were written.
    fn flush_newlines(&mut self) -> bool {
        let owed = std::mem::take(&mut self.pending_newlines);
        if owed == 0 || self.out.is_empty() {
            return false;
        }
        self.trim_trailing_spaces();
        for _ in 0..owed {
            self.out.push('\n');
        }
        true
    }

    fn trim_trailing_spaces(&mut self) {
        let trimmed = self.out.trim_end_matches([' ', '\t']).len();
        self.out.truncate(trimmed);
    }

    fn block_start(&mut self) {
        self.flush();
    }

    fn block_end(&mut self) {
        self.trim_trailing_spaces();
        let separator = if self.lists.is_empty() { 2 } else { 1 };
        self.pending_newlines = self.pending_newlines.max(separator);
    }

    /// Whether inline markup must be flattened to plain text right now.
    fn plain_context(&self) -> bool {
        self.image.is_some() || self.table.is_some() || self.code.is_some()
    }

    /// Appends already-unescaped text to whatever is currently being built.
    fn text(&mut self, text: &str) {
        if let Some(image) = &mut self.image {
            image.alt.push_str(text);
        } else if let Some(code) = &mut self.code {
            code.text.push_str(text);
        } else if let Some(block) = &mut self.html_block {
            block.push_str(text);
        } else if let Some(table) = &mut self.table {
            table.cell.push_str(text);
        } else {
            self.flush();
            escape_text_into(&mut self.out, text);
        }
    }

    fn line_break(&mut self) {
        if self.image.is_some() || self.table.is_some() {
            self.text(" ");
        } else {
            self.text("\n");
        }
    }

    fn inline_code(&mut self, code: &str) {
        if self.plain_context() || self.html_block.is_some() {
            self.text(code);
        } else {
            self.flush();
            self.out.push_str("<code>");
            escape_text_into(&mut self.out, code);
            self.out.push_str("</code>");
        }
    }

    /// Records an inline element that is rendered without any tag.
    fn open_untagged(&mut self) {
        self.inline.push(OpenInline {
            close: None,
            start: self.out.len(),
            content_start: self.out.len(),
            fallback: None,
        });
    }

    fn open_inline(&mut self, open: &str, close: &'static str, fallback: Option<String>) {
        if self.plain_context() {
            self.open_untagged();
            return;
        }
        self.flush();
        let start = self.out.len();
        self.out.push_str(open);
        self.inline.push(OpenInline {
            close: Some(close),
            start,
            content_start: self.out.len(),
            fallback,
        });
    }

    fn close_inline(&mut self) {
        let Some(open) = self.inline.pop() else {
            return;
        };
        let Some(close) = open.close else {
            return;
        };
        if self.out.len() == open.content_start {
            match open.fallback {
                Some(text) => escape_text_into(&mut self.out, &text),
                None => {
                    self.out.truncate(open.start);
                    return;
                }
            }
        }
        self.out.push_str(close);
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph
            | Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::MetadataBlock(_) => self.block_start(),
            Tag::Heading { .. } => {
                self.block_start();
                self.open_inline("<b>", "</b>", None);
            }
            Tag::BlockQuote(_) => {
                self.block_start();
                if self.quote_depth == 0 {
                    self.out.push_str("<blockquote>");
                }
                self.quote_depth += 1;
            }
            Tag::CodeBlock(kind) => {
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => sanitize_lang(&info),
                    CodeBlockKind::Indented => None,
                };
                self.code = Some(CodeState {
                    lang,
                    text: String::new(),
                });
            }
            Tag::HtmlBlock => self.html_block = Some(String::new()),
            Tag::List(first) => {
                if !self.lists.is_empty() {
                    self.pending_newlines = self.pending_newlines.max(1);
                }
                self.lists.push(first);
            }
            Tag::Item => {
                self.flush_newlines();
                for _ in 1..self.lists.len() {
                    self.out.push_str("  ");
                }
                match self.lists.last_mut() {
                    Some(Some(number)) => {
                        self.out.push_str(&format!("{number}. "));
                        *number = number.saturating_add(1);
                    }
                    _ => self.out.push_str("• "),
                }
            }
            Tag::Table(_) => self.table = Some(TableState::default()),
            Tag::TableHead | Tag::TableRow => {
                if let Some(table) = &mut self.table {
                    table.cells.clear();
                }
            }
            Tag::TableCell => {
                if let Some(table) = &mut self.table {
                    table.cell.clear();
                }
            }
            Tag::Emphasis => self.open_inline("<i>", "</i>", None),
            Tag::Strong => self.open_inline("<b>", "</b>", None),
            Tag::Strikethrough => self.open_inline("<s>", "</s>", None),
            Tag::Superscript | Tag::Subscript => self.open_untagged(),
            Tag::Link {
                link_type,
                dest_url,
                ..
            } => {
                self.link_depth += 1;
                match safe_href(link_type, &dest_url) {
                    Some(href) if !self.plain_context() => {
                        let mut open = String::from("<a href=\"");
                        escape_attr_into(&mut open, &href);
                        open.push_str("\">");
                        let shown = href.strip_prefix("mailto:").unwrap_or(&href).to_string();
                        self.open_inline(&open, "</a>", Some(shown));
                    }
                    _ => self.open_untagged(),
                }
            }
            Tag::Image { dest_url, .. } => {
                if let Some(image) = &mut self.image {
                    image.depth += 1;
                } else {
                    self.image = Some(ImageState {
                        url: dest_url.to_string(),
                        alt: String::new(),
                        depth: 0,
                    });
                }
            }
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph
            | TagEnd::FootnoteDefinition
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition
            | TagEnd::MetadataBlock(_) => self.block_end(),
            TagEnd::Heading(_) => {
                self.close_inline();
                self.block_end();
            }
            TagEnd::BlockQuote(_) => {
                self.quote_depth = self.quote_depth.saturating_sub(1);
                if self.quote_depth == 0 {
                    if self.out.ends_with("<blockquote>") {
                        self.out.truncate(self.out.len() - "<blockquote>".len());
                    } else {
                        let trimmed = self.out.trim_end().len();
                        self.out.truncate(trimmed);
                        self.out.push_str("</blockquote>");
                    }
                }
                self.block_end();
            }
            TagEnd::CodeBlock => {
                let Some(code) = self.code.take() else {
                    return;
                };
                let text = code.text.trim_end_matches(['\n', '\r']);
                if text.trim().is_empty() {
                    return;
                }
                self.block_start();
                match &code.lang {
                    Some(lang) => {
                        self.out.push_str("<pre><code class=\"language-");
                        self.out.push_str(lang);
                        self.out.push_str("\">");
                        escape_text_into(&mut self.out, text);
                        self.out.push_str("</code></pre>");
                    }
                    None => {
                        self.out.push_str("<pre>");
                        escape_text_into(&mut self.out, text);
                        self.out.push_str("</pre>");
                    }
                }
                self.block_end();
            }
            TagEnd::HtmlBlock => {
                let Some(block) = self.html_block.take() else {
                    return;
                };
                let text = block.trim_end();
                if text.is_empty() {
                    return;
                }
                self.block_start();
                escape_text_into(&mut self.out, text);
                self.block_end();
            }
            TagEnd::List(_) => {
                self.lists.pop();
                self.block_end();
            }
            TagEnd::Item => self.block_end(),
            TagEnd::Table => {
                let Some(table) = self.table.take() else {
                    return;
                };
                if table.rows.is_empty() {
                    return;
                }
                self.block_start();
                self.out.push_str("<pre>");
                self.out.push_str(&table.rows.join("\n"));
                self.out.push_str("</pre>");
                self.block_end();
            }
            TagEnd::TableHead | TagEnd::TableRow => {
                if let Some(table) = &mut self.table {
                    let row = std::mem::take(&mut table.cells).join(" | ");
                    table.rows.push(row.trim_end().to_string());
                }
            }
            TagEnd::TableCell => {
                if let Some(table) = &mut self.table {
                    let cell = escape_text(table.cell.trim());
                    table.cell.clear();
                    table.cells.push(cell);
                }
            }
            TagEnd::Emphasis
            | TagEnd::Strong
            | TagEnd::Strikethrough
            | TagEnd::Superscript
            | TagEnd::Subscript => self.close_inline(),
            TagEnd::Link => {
                self.link_depth = self.link_depth.saturating_sub(1);
                self.close_inline();
            }
            TagEnd::Image => self.end_image(),
        }
    }

    fn end_image(&mut self) {
        let Some(image) = &mut self.image else {
            return;
        };
        if image.depth > 0 {
            image.depth -= 1;
            return;
        }
        let Some(image) = self.image.take() else {
            return;
        };
        let alt = image.alt.trim();
        let shown = if alt.is_empty() {
            image.url.trim()
        } else {
            alt
        };
        if shown.is_empty() {
            return;
        }
        let href = if self.link_depth == 0 && !self.plain_context() {
            safe_href(LinkType::Inline, &image.url)
        } else {
            None
        };
        match href {
            Some(href) => {
                self.flush();
                self.out.push_str("<a href=\"");
                escape_attr_into(&mut self.out, &href);
                self.out.push_str("\">");
                escape_text_into(&mut self.out, shown);
                self.out.push_str("</a>");
            }
            None => {
                let shown = shown.to_string();
                self.text(&shown);
            }
        }
    }

    fn finish(mut self) -> String {
        // Defensive: close anything a malformed event stream left open.
        while !self.inline.is_empty() {
            self.close_inline();
        }
        if self.quote_depth > 0 {
            self.quote_depth = 0;
            self.out.push_str("</blockquote>");
        }
        let trimmed = self.out.trim_end().len();
        self.out.truncate(trimmed);
        self.out
    }
}

// ---------------------------------------------------------------------------
// Minimal lexer for Telegram HTML (shared with the chunker)
// ---------------------------------------------------------------------------

/// One lexical unit of Telegram HTML.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HtmlToken<'a> {
    /// `<name …>`; `raw` is the whole tag, `name` is lower-cased.
    StartTag {
        name: String,
        raw: &'a str,
        self_closing: bool,
    },
    /// `</name …>`; `name` is lower-cased.
    EndTag { name: String },
    /// A supported entity and the character it stands for.
    Entity { raw: &'a str, ch: char },
    /// A literal character (including a `<` or `&` that starts no tag/entity).
    Char(char),
}

/// Splits Telegram HTML into tags, entities and characters.
///
/// A tag is `<` or `</` followed by an ASCII letter, up to the next `>`.
/// Entities are `&lt; &gt; &amp; &quot;`, `&#DDD;` and `&#xHHH;` naming a
/// valid Unicode scalar value. Everything else is a literal character.
pub(crate) struct HtmlLexer<'a> {
    src: &'a str,
    pos: usize,
}

impl<'a> HtmlLexer<'a> {
    pub(crate) fn new(src: &'a str) -> Self {
        Self { src, pos: 0 }
    }

    fn tag(&self, rest: &'a str) -> Option<HtmlToken<'a>> {
        let bytes = rest.as_bytes();
        let (is_end, name_at) = if bytes.get(1) == Some(&b'/') {
            (true, 2)
        } else {
            (false, 1)
        };
        if !bytes.get(name_at)?.is_ascii_alphabetic() {
            return None;
        }
        let gt = rest.find('>')?;
        let raw = &rest[..=gt];
        let name: String = raw[name_at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .map(|c| c.to_ascii_lowercase())
            .collect();
        Some(if is_end {
            HtmlToken::EndTag { name }
        } else {
            HtmlToken::StartTag {
                name,
                raw,
                self_closing: raw.ends_with("/>"),
            }
        })
    }

    fn entity(rest: &'a str) -> Option<HtmlToken<'a>> {
        let (semi, _) = rest.char_indices().take(16).find(|&(_, c)| c == ';')?;
        let raw = &rest[..=semi];
        let body = &raw[1..semi];
        let ch = if let Some(num) = body.strip_prefix('#') {
            let (digits, radix) = match num.strip_prefix(['x', 'X']) {
                Some(hex) => (hex, 16),
                None => (num, 10),
            };
            if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
                return None;
            }
            char::from_u32(u32::from_str_radix(digits, radix).ok()?)?
        } else {
            match body {
                "lt" => '<',
                "gt" => '>',
                "amp" => '&',
                "quot" => '"',
                _ => return None,
            }
        };
        Some(HtmlToken::Entity { raw, ch })
    }
}

impl<'a> Iterator for HtmlLexer<'a> {
    type Item = HtmlToken<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.src.get(self.pos..)?;
        let first = rest.chars().next()?;
        let structured = match first {
            '<' => self.tag(rest),
            '&' => Self::entity(rest),
            _ => None,
        };
        let token = structured.unwrap_or(HtmlToken::Char(first));
        self.pos += match &token {
            HtmlToken::StartTag { raw, .. } | HtmlToken::Entity { raw, .. } => raw.len(),
            HtmlToken::EndTag { .. } => rest.find('>').map_or(first.len_utf8(), |gt| gt + 1),
            HtmlToken::Char(c) => c.len_utf8(),
        };
        Some(token)
    }
}

#[cfg(test)]
mod tests;
