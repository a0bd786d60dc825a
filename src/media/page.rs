//! Web pages read where they cannot hurt: the daemon's [`PageReader`] for `web_fetch` and the
//! browser tools. A page's HTML is an attacker's text, and the HTML parser (html5ever, under
//! `dom_query` and Readability's `dom_smoothie`) can be made to work for a long time by
//! markup a scan cannot judge (deep nesting the grammar allows, the adoption agency's
//! reconstruction of formatting elements, …), so the daemon never parses it: the child process
//! of [`super::parse`] does (job [`Job::Html`], [`super::parse::page_text`]: limits, no file, no socket, killed at its
//! wall-clock limit, at most [`super::parse::CONCURRENT`] at once with the PDFs and pictures),
//! running the same [`ethan_tools::builtin::web::readable::readable`]. A page the child does not
//! finish is not read at all; the model is told why.

use super::parse::{cut_to, in_child, slots, Job, Limits};
use async_trait::async_trait;
use ethan_tools::page_reader::PageReader;

/// What the child may use for one page, whoever asked. A 4.4 MB documentation page (the Rust
/// Reference on one page) takes 0.4 s of CPU and 68 MB in a release build, 2 s and 80 MB in a
/// debug one (BENCHMARKS.md, 2026-12-06); these leave room for a slower machine and a bigger
/// page, and stop a crafted one (20,000 self-closed `<div/>`s: 10 s in a release build).
pub const PAGE_LIMITS: Limits = Limits {
    memory: 1024 * 1024 * 1024,
    cpu_secs: 10,
    wall_secs: 15,
    inflated: 0,
};

/// The most HTML sent to the child, bytes (a 5 MB download decodes to at most 15 MB of UTF-8;
/// a browser's page is cut here at a character boundary).
pub const MAX_PAGE_BYTES: usize = 16 * 1024 * 1024;

/// Children reading pages at once, out of the [`super::parse::CONCURRENT`] shared with the
/// files: the others stay free for a PDF or a picture from any chat, however many pages one
/// turn asks for (six slow copies of one page held both for 30 s before, and another chat's
/// PDF waited behind them: `attack_page_slots`).
pub const CONCURRENT_PAGES: usize = 1;

/// The daemon's page reader: each page in a child process under [`PAGE_LIMITS`], one at a
/// time; a page that finds no free page slot within the wall-clock limit is refused as busy
/// (the wait is bounded like the parse, so pages queued behind slow ones do not pile up).
pub struct ChildPages {
    /// The daemon's reader slots, shared with the media service ([`super::parse::slots`]).
    shared: std::sync::Arc<tokio::sync::Semaphore>,
    /// The page slots ([`CONCURRENT_PAGES`]), taken before a shared one.
    pages: tokio::sync::Semaphore,
}

impl ChildPages {
    /// A reader whose children count against `shared` with the media service's.
    pub fn new(shared: std::sync::Arc<tokio::sync::Semaphore>) -> Self {
        Self {
            shared,
            pages: tokio::sync::Semaphore::new(CONCURRENT_PAGES),
        }
    }

    /// A reader with slots of its own (a command that runs no daemon, a test).
    pub fn alone() -> Self {
        Self::new(slots())
    }
}

#[async_trait]
impl PageReader for ChildPages {
    async fn read(&self, mut html: String, url: String) -> Result<(String, String), String> {
        let wait = std::time::Duration::from_secs(PAGE_LIMITS.wall_secs);
        let _page_slot = match tokio::time::timeout(wait, self.pages.acquire()).await {
            Ok(Ok(permit)) => permit,
            Ok(Err(_)) => return Err("the page reader is shutting down".into()),
            Err(_) => {
                return Err(format!(
                    "the page reader was busy with other pages for {} s",
                    PAGE_LIMITS.wall_secs
                ))
            }
        };
        cut_to(&mut html, MAX_PAGE_BYTES);
        // The URL has no line break (a parsed URL cannot); the child splits at the first one.
        let url = url.replace(['\n', '\r'], "");
        let mut input = Vec::with_capacity(url.len() + 1 + html.len());
        input.extend_from_slice(url.as_bytes());
        input.push(b'\n');
        input.extend_from_slice(html.as_bytes());
        drop(html);
        let out = in_child(Job::Html, input.into(), PAGE_LIMITS, &self.shared).await?;
        let (title, text) = out.split_once('\n').unwrap_or((out.as_str(), ""));
        Ok((title.to_string(), text.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::parse::page_text;

    #[tokio::test]
    async fn a_page_is_read_in_the_child() {
        let html = "<html><head><title>A small\npage</title></head><body><article>\
                    <h1>Heading</h1><p>First paragraph with <b>bold</b> text, long enough \
                    to be an article for Readability to keep as it is.</p></article></body></html>";
        let (title, text) = ChildPages::alone()
            .read(html.into(), "http://example.com/a".into())
            .await
            .unwrap();
        let here = ethan_tools::builtin::web::readable::readable(html, "http://example.com/a");
        assert_eq!(title, here.0.replace('\n', " "));
        assert_eq!(text, here.1);
        assert!(text.contains("First paragraph with"), "{text}");
    }

    #[test]
    fn a_page_is_cut_at_a_character_boundary() {
        let mut s = "aé".to_string();
        cut_to(&mut s, 2);
        assert_eq!(s, "a");
        let out = page_text(b"http://e/\n<title>T</title><p>caf\xc3\xa9</p>").unwrap();
        assert!(out.starts_with("T\n") && out.contains("café"), "{out}");
    }
}
