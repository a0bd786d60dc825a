//! Reading a rendered page: its readable text (the same Readability extraction as `web_fetch`,
//! run on the DOM after JavaScript built it, by the daemon's page reader in its limited child
//! process) and its interactive elements, numbered in the tools' own world ([`super::world`])
//! so `click{element: N}` finds the one the model saw and the page can neither see the numbers
//! nor move them.
//!
//! Each read is recorded as the session's [`View`]: which tab, which read (an id the read
//! leaves in the tools' world of that document, gone with the document), the document's URL and
//! [`Site`] (its real origin: a `blob:` or `about:` document's is that of the page that made
//! it), and the labels shown. Approvals name what the view shows, and an action runs only while
//! the current tab still shows that very read ([`same_read`]).

use super::hub::{BrowserHub, Site, Tab, View};
use super::world;
use crate::Taint;
use serde::Deserialize;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Most interactive elements listed per read.
pub const MAX_ELEMENTS: usize = 200;

/// The most of a page's HTML a read brings out of the browser, UTF-16 code units (at most
/// 15 MB of UTF-8: within the page reader's 16 MB). Written into [`READ_JS`].
pub const MAX_HTML_CHARS: usize = 5_000_000;

/// Numbers the visible interactive elements and returns them with the page's HTML, URL and
/// origin. Runs in the tools' world, where the page's scripts cannot patch what it calls; keeps
/// there, as `__ethan`, the read's id (`read`), each element (`els[N]`), what was shown of it
/// (`marks[N]`: kind, name, label, link) and `same(N)`, whether the element is still attached
/// and shows the same — an action refuses an element the page changed since the read (the
/// approval named what the read showed). Called with the read's id.
///
/// Every string it returns is cut there, in the browser ([`MAX_HTML_CHARS`] of HTML, short
/// titles, URLs, names and options): a page can make its document as big as Chromium allows,
/// and a read of 28 MB of HTML (a script's 20 MB text and 8 MB title) never came back over
/// CDP — the call hung until its time limit while the renderer held 1.2 GB
/// (`attack_browser_page`). The page cannot patch `slice` in this world.
const READ_JS: &str = r#"((read) => {
  const sel = 'a[href],button,input:not([type=hidden]),select,textarea,summary,[role=button],[role=link],[role=checkbox],[role=tab],[onclick],[contenteditable=""],[contenteditable=true]';
  const cut = (s, n) => {
    s = String(s == null ? '' : s);
    if (s.length <= n) return s;
    const t = s.slice(0, n), c = t.charCodeAt(n - 1);
    return c >= 0xD800 && c <= 0xDBFF ? t.slice(0, n - 1) : t;
  };
  const clean = s => cut((s || '').replace(/\s+/g, ' ').trim(), 80);
  const describe = e => {
    const tag = e.tagName.toLowerCase();
    const type = tag === 'input' ? cut(e.getAttribute('type') || 'text', 40).toLowerCase() : '';
    let label = clean(e.getAttribute('aria-label'));
    if (!label && e.id) {
      const l = document.querySelector('label[for="' + CSS.escape(e.id) + '"]');
      if (l) label = clean(l.innerText);
    }
    if (!label && e.closest('label')) label = clean(e.closest('label').innerText);
    if (!label && tag !== 'input' && tag !== 'textarea' && tag !== 'select') label = clean(e.innerText);
    if (!label && (type === 'submit' || type === 'button')) label = clean(e.value);
    if (!label) label = clean(e.getAttribute('placeholder') || e.getAttribute('title') || e.getAttribute('name'));
    const item = {tag};
    if (type) item.type = type;
    if (e.name) item.name = cut(e.name, 200);
    if (label) item.label = label;
    if (tag === 'a') item.href = cut(e.href, 2048);
    if (tag === 'select') item.options = Array.from(e.options).slice(0, 30).map(o => cut(o.value, 200));
    return item;
  };
  const els = [null], marks = [null];
  const same = n => {
    const e = els[n];
    return !!e && e.isConnected && JSON.stringify(describe(e)) === marks[n];
  };
  globalThis.__ethan = {read, els, marks, same};
  const out = [];
  let n = 0;
  for (const e of document.querySelectorAll(sel)) {
    const r = e.getBoundingClientRect();
    const st = getComputedStyle(e);
    if ((r.width === 0 && r.height === 0) || st.visibility === 'hidden' || st.display === 'none') continue;
    n += 1;
    const item = describe(e);
    els.push(e);
    marks.push(JSON.stringify(item));
    out.push(Object.assign({n}, item));
    if (n >= 200) break;
  }
  return {url: cut(location.href, 8192), origin: cut(location.origin, 2048),
          title: cut(document.title, 1000),
          html: cut(document.documentElement.outerHTML, 5000000), elements: out};
})"#;

#[derive(Debug, Deserialize)]
struct Snapshot {
    url: String,
    #[serde(default)]
    origin: String,
    title: String,
    html: String,
    elements: Vec<Element>,
}

#[derive(Debug, Deserialize)]
struct Element {
    n: u64,
    tag: String,
    #[serde(default)]
    r#type: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    href: Option<String>,
    #[serde(default)]
    options: Option<Vec<String>>,
}

impl Element {
    fn line(&self) -> String {
        let mut kind = self.tag.clone();
        if let Some(t) = &self.r#type {
            kind = format!("{kind} {t}");
        }
        let mut s = format!("[{}] {kind}", self.n);
        if let Some(l) = &self.label {
            s.push_str(&format!(" \"{l}\""));
        }
        if let Some(n) = &self.name {
            s.push_str(&format!(" name={n}"));
        }
        if let Some(h) = &self.href {
            s.push_str(&format!(" -> {h}"));
        }
        if let Some(o) = &self.options {
            s.push_str(&format!(" options: {}", o.join(" | ")));
        }
        s
    }
}

/// Wait until the page's document is loaded (`readyState == "complete"`), at most `limit`.
pub async fn settle(tab: &Tab, limit: Duration) {
    let start = Instant::now();
    while start.elapsed() < limit {
        let done = world::eval::<String>(tab, "document.readyState")
            .await
            .is_ok_and(|s| s == "complete");
        if done {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The current page of `tab` as text for the model: title, URL, readable text, numbered
/// elements, and the requests the egress guard stopped. Records the [`View`] for the consent
/// hooks and the actions.
///
/// When the session's pages reached a host of `tools.web_fetch.allow_private` (the owner's own
/// network), what they show may hold private data: marked on `taint` ([`mark_private`]).
pub async fn read(
    hub: &BrowserHub,
    session_key: &str,
    tab: &Tab,
    taint: &Taint,
) -> Result<String, String> {
    let read = uuid::Uuid::new_v4().simple().to_string();
    let snap: Snapshot = world::eval(tab, &format!("{READ_JS}({})", world::js_str(&read)))
        .await
        .map_err(|e| format!("the page could not be read: {e}"))?;
    mark_private(hub, session_key, taint).await;
    let site = Site::of(&snap.url, &snap.origin);
    // The HTML goes to the daemon's page reader (a limited child process), never parsed here.
    let (title, text) = match hub.page_reader().read(snap.html, snap.url.clone()).await {
        Ok(tc) => tc,
        Err(reason) => (
            String::new(),
            format!(
                "({})",
                crate::page_reader::unreadable_page(&snap.url, &reason)
            ),
        ),
    };
    let title = if title.is_empty() { snap.title } else { title };
    let mut out = String::new();
    if !title.is_empty() {
        out.push_str(&format!("# {title}\n"));
    }
    out.push_str(&format!("URL: {} (tab {})\n\n", snap.url, tab.id));
    out.push_str(if text.trim().is_empty() {
        "(no readable text)"
    } else {
        text.trim()
    });
    let mut labels = HashMap::new();
    if !snap.elements.is_empty() {
        out.push_str("\n\nInteractive elements (use their numbers with click, type, select):\n");
        for e in snap.elements.iter().take(MAX_ELEMENTS) {
            out.push_str(&e.line());
            out.push('\n');
            labels.insert(
                e.n,
                e.label
                    .clone()
                    .or_else(|| e.name.clone())
                    .unwrap_or_else(|| e.tag.clone()),
            );
        }
    }
    out.push_str(&refused_note(tab));
    hub.set_view(
        session_key,
        View {
            tab: tab.id,
            read,
            url: snap.url,
            site,
            labels,
        },
    );
    Ok(out)
}

/// Whether `tab` still shows the document of the read `read` (the id is in its tools' world
/// until the document goes, or another read replaces it).
pub async fn same_read(tab: &Tab, read: &str) -> bool {
    world::eval::<String>(tab, "(globalThis.__ethan && globalThis.__ethan.read) || ''")
        .await
        .is_ok_and(|r| !r.is_empty() && r == read)
}

/// The taint rule for the browser: once the session's pages reached a host of the owner's
/// network, the turn has seen private data.
pub async fn mark_private(hub: &BrowserHub, session_key: &str, taint: &Taint) {
    if let Some(host) = hub.private_reached(session_key).await {
        taint.mark(&format!("browser page of {host}, a private address"));
    }
}

/// The connections the egress guard refused for `tab` since the last look, as a paragraph
/// (empty when none).
pub fn refused_note(tab: &Tab) -> String {
    let blocked = tab.proxy.take_refused();
    if blocked.is_empty() {
        return String::new();
    }
    let mut s = String::from("\n\nRequests of this page refused by the egress guard:\n");
    for b in blocked.iter().take(20) {
        s.push_str(&format!("- {b}\n"));
    }
    if blocked.len() > 20 {
        s.push_str(&format!("- … and {} more\n", blocked.len() - 20));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_read_cuts_the_html_where_the_constant_says() {
        let cut = format!("cut(document.documentElement.outerHTML, {MAX_HTML_CHARS})");
        assert!(READ_JS.contains(&cut), "{READ_JS}");
        // Three bytes of UTF-8 at most per code unit: within what the page reader takes.
        const { assert!(MAX_HTML_CHARS * 3 <= 16 * 1024 * 1024) };
    }
}
