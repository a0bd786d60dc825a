//! Who turns a web page's HTML into its title and text ([`PageReader`]). A page is an
//! attacker's text, and HTML parsing can be made to take a long time (deep or tangled markup
//! costs the tree builder time that grows faster than the page), so the tools never parse it
//! themselves: `web_fetch` and the browser tools hand the HTML to the reader the daemon gives
//! them — its child process under CPU, memory and wall-clock limits, which calls
//! [`super::readable::readable`] there. Without one ([`NoPageReader`], the default) a page is
//! not read at all: there is no in-process fallback.

use async_trait::async_trait;

/// Turns a page's HTML into `(title, readable text)`, somewhere its cost cannot hurt the
/// daemon. The error is a short reason for the model ("reading it took longer than 15 s").
#[async_trait]
pub trait PageReader: Send + Sync {
    async fn read(&self, html: String, url: String) -> Result<(String, String), String>;
}

/// The reader of a tool nobody gave one: it reads nothing.
pub struct NoPageReader;

#[async_trait]
impl PageReader for NoPageReader {
    async fn read(&self, _html: String, _url: String) -> Result<(String, String), String> {
        Err("no page reader is set up in this process".into())
    }
}

/// The model's sentence for a page that could not be read: `reason` from the reader.
pub fn unreadable_page(url: &str, reason: &str) -> String {
    format!("could not read the page {url}: {reason}; its HTML was not parsed (try another source)")
}
