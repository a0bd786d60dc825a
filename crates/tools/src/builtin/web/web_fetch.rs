//! `web_fetch{url}`: the readable text of a web page.
//!
//! - HTML (`text/html`, `application/xhtml+xml`) is read by the daemon's page reader
//!   ([`super::page_reader`]: a limited child process running [`super::readable`]): Readability
//!   keeps the article as Markdown, else the text of `<body>`; the page title comes first
//!   (`# Title`, then `Source: <final URL>`). A page the reader cannot read (too slow or too big
//!   to parse) is a `validation` error saying so (not retried); it is never parsed in the daemon.
//! - Other text (`text/*`, JSON, XML, YAML, JavaScript, …) is returned as it is.
//! - Binary content (images, PDFs, archives, `application/octet-stream` that does not look like
//!   text) is refused with its content type, before its body is downloaded where the header
//!   already says so.
//! - The charset comes from a byte-order mark, the `Content-Type` charset, or (HTML) a
//!   `<meta charset>` / `<meta http-equiv>` in the first bytes, decoded with `encoding_rs`
//!   (WHATWG labels: `gbk`, `shift_jis`, `iso-8859-1` = windows-1252, …); without one, UTF-8 when
//!   the bytes are valid UTF-8, else windows-1252.
//! - The download stops at [`MAX_BYTES`] (5 MB); the text says so when it was cut. The model's
//!   copy is cut further by the executor (8000 characters, the rest spilled).
//! - Every request goes through the egress guard ([`ethan_egress`]): the address rule on every
//!   address the host resolves to, the connection to a checked address only, the destination
//!   recorded, and a host of `tools.web_fetch.allow_private` marking the turn (what it returns
//!   is private data). Redirects are followed by this tool, at most [`MAX_REDIRECTS`], each
//!   target a new request judged like the first.
//!
//! Every failure is a [`ToolResult`] error: `denied` for the egress guard, `validation` for a bad
//! URL, a binary body or a page its reader could not read, `timeout`, `dependency` for network
//! and HTTP errors.

use super::page_reader::{unreadable_page, NoPageReader, PageReader};
use crate::args::req_str;
use crate::settings::WebFetchConfig;
use crate::{CallPlan, ToolDecl};
use crate::{ErrorKind, Risk, Tool, ToolContext};
use crate::{ToolError, ToolOutput};
use async_trait::async_trait;
use encoding_rs::Encoding;
use ethan_egress::{EgressClient, EgressError, EgressGuard, Lookup, Route, SystemLookup};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// Largest body downloaded, in bytes.
pub const MAX_BYTES: usize = 5 * 1024 * 1024;
/// Redirects followed before giving up.
pub const MAX_REDIRECTS: usize = 10;
/// Default time limit of one call, in seconds (`tools.web_fetch.timeout_secs` overrides).
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;

const USER_AGENT: &str = concat!(
    "Mozilla/5.0 (compatible; Ethan/",
    env!("CARGO_PKG_VERSION"),
    "; +https://github.com/ethan-agent/ethan)"
);

pub struct WebFetch {
    client: Result<EgressClient, String>,
    decl: ToolDecl,
    max_bytes: usize,
    /// Who turns an HTML page into text (none given: HTML is not read).
    pages: Arc<dyn PageReader>,
}

impl WebFetch {
    /// The tool as configured by `tools.web_fetch`, resolving names with the system resolver.
    pub fn new(cfg: &WebFetchConfig) -> Self {
        Self::with_lookup(cfg, Arc::new(SystemLookup))
    }

    /// The tool with another name resolver (tests map names to addresses with
    /// [`ethan_egress::StaticLookup`]).
    pub fn with_lookup(cfg: &WebFetchConfig, lookup: Arc<dyn Lookup>) -> Self {
        Self::guarded(cfg, EgressGuard::new(&cfg.allow_private, lookup))
    }

    /// The tool whose requests pass `guard` (the daemon's:
    /// [`ethan_egress::Egress::system_guard`]).
    pub fn guarded(cfg: &WebFetchConfig, guard: EgressGuard) -> Self {
        let timeout = Duration::from_secs(cfg.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS).max(1));
        // The request gives up a little before the executor would, so the model gets our text.
        let request_timeout = timeout
            .saturating_sub(Duration::from_secs(2))
            .max(Duration::from_secs(1));
        let client = EgressClient::new(&guard, Route::WebFetch, Vec::new(), |b| {
            b.user_agent(USER_AGENT)
                .connect_timeout(Duration::from_secs(10).min(request_timeout))
                .timeout(request_timeout)
        });
        Self {
            client,
            decl: declaration()
                .timeout(timeout)
                .max_retries(cfg.max_retries.unwrap_or(1)),
            max_bytes: MAX_BYTES,
            pages: Arc::new(NoPageReader),
        }
    }

    /// HTML pages read by `pages` (the daemon's: its limited child process).
    pub fn reading_with(mut self, pages: Arc<dyn PageReader>) -> Self {
        self.pages = pages;
        self
    }

    /// Change the download cap (tests).
    pub fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes.max(1);
        self
    }
}

/// What kind of body a `Content-Type` announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Html,
    Text,
    Binary,
    /// No or a vague type: decided from the bytes.
    Sniff,
}

fn kind_of(mime: &str) -> Kind {
    let m = mime.trim().to_ascii_lowercase();
    if m.is_empty() || m == "application/octet-stream" || m == "binary/octet-stream" {
        return Kind::Sniff;
    }
    if m == "text/html" || m == "application/xhtml+xml" {
        return Kind::Html;
    }
    const TEXT_APP: &[&str] = &[
        "application/json",
        "application/xml",
        "application/javascript",
        "application/ecmascript",
        "application/x-javascript",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/x-toml",
        "application/x-sh",
        "application/x-shellscript",
        "application/sql",
        "application/graphql",
        "application/x-ndjson",
        "application/csv",
        "application/rss+xml",
        "application/atom+xml",
        "application/x-www-form-urlencoded",
        "application/x-tex",
        "application/x-latex",
        "application/x-subrip",
        "image/svg+xml",
    ];
    if m.starts_with("text/")
        || TEXT_APP.contains(&m.as_str())
        || m.ends_with("+json")
        || m.ends_with("+xml")
    {
        return Kind::Text;
    }
    Kind::Binary
}

/// Whether the first bytes look like text rather than binary data.
fn looks_like_text(bytes: &[u8]) -> bool {
    if Encoding::for_bom(bytes).is_some() {
        return true;
    }
    let head = &bytes[..bytes.len().min(1024)];
    if head.contains(&0) {
        return false;
    }
    let controls = head
        .iter()
        .filter(|b| **b < 0x20 && !matches!(**b, b'\n' | b'\r' | b'\t' | 0x0c | 0x1b))
        .count();
    controls * 20 <= head.len()
}

fn looks_like_html(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(512)];
    let lower = head.to_ascii_lowercase();
    let start = lower
        .iter()
        .position(|b| !b.is_ascii_whitespace() && *b != 0xef && *b != 0xbb && *b != 0xbf)
        .unwrap_or(0);
    let s = &lower[start..];
    s.starts_with(b"<!doctype html") || s.starts_with(b"<html") || s.starts_with(b"<head")
}

/// The `charset` parameter of a `Content-Type` value.
fn charset_param(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        if k.trim().eq_ignore_ascii_case("charset") {
            Some(v.trim().trim_matches(|c| c == '"' || c == '\'').to_string())
        } else {
            None
        }
    })
}

/// The charset declared by a `<meta>` element in the first 4 KiB of an HTML document (the
/// HTML "prescan", simplified: `<meta charset=X>` and `<meta http-equiv … content="…charset=X">`).
fn meta_charset(bytes: &[u8]) -> Option<&'static Encoding> {
    let head = bytes[..bytes.len().min(4096)].to_ascii_lowercase();
    let mut i = 0;
    while let Some(pos) = find(&head[i..], b"<meta") {
        let start = i + pos + 5;
        let end = find(&head[start..], b">").map_or(head.len(), |e| start + e);
        let tag = &head[start..end];
        if let Some(c) = find(tag, b"charset") {
            let mut rest = &tag[c + 7..];
            rest = trim_ascii_start(rest);
            if let Some(r) = rest.strip_prefix(b"=") {
                let r = trim_ascii_start(r);
                let r = r
                    .strip_prefix(b"\"")
                    .or_else(|| r.strip_prefix(b"'"))
                    .unwrap_or(r);
                let label: Vec<u8> = r
                    .iter()
                    .copied()
                    .take_while(|b| {
                        !matches!(b, b'"' | b'\'' | b';' | b'/' | b'>') && !b.is_ascii_whitespace()
                    })
                    .collect();
                if let Some(enc) = Encoding::for_label(&label) {
                    // A page cannot declare itself UTF-16 in ASCII; the spec reads it as UTF-8.
                    if enc == encoding_rs::UTF_16LE || enc == encoding_rs::UTF_16BE {
                        return Some(encoding_rs::UTF_8);
                    }
                    if enc == encoding_rs::X_USER_DEFINED {
                        return Some(encoding_rs::WINDOWS_1252);
                    }
                    return Some(enc);
                }
            }
        }
        i = end.min(head.len());
        if i >= head.len() {
            break;
        }
    }
    None
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn trim_ascii_start(b: &[u8]) -> &[u8] {
    let n = b.iter().take_while(|c| c.is_ascii_whitespace()).count();
    &b[n..]
}

/// Decode `bytes`: BOM, then the header's charset, then (HTML) `<meta>`, then UTF-8 if valid
/// (a character cut by the download cap, when `cut`, does not count), else windows-1252.
fn decode(
    bytes: &[u8],
    header_charset: Option<&str>,
    html: bool,
    cut: bool,
) -> (String, &'static Encoding) {
    let enc = Encoding::for_bom(bytes)
        .map(|(e, _)| e)
        .or_else(|| header_charset.and_then(|c| Encoding::for_label(c.as_bytes())))
        .or_else(|| if html { meta_charset(bytes) } else { None })
        .unwrap_or_else(|| {
            if std::str::from_utf8(bytes).is_ok() || (cut && valid_utf8_but_cut(bytes)) {
                encoding_rs::UTF_8
            } else {
                encoding_rs::WINDOWS_1252
            }
        });
    let (text, used, _) = enc.decode(bytes);
    (text.into_owned(), used)
}

/// Valid UTF-8 except for a character cut at the end (a capped download).
fn valid_utf8_but_cut(bytes: &[u8]) -> bool {
    match std::str::from_utf8(bytes) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
    }
}

fn is_redirect(s: reqwest::StatusCode) -> bool {
    matches!(s.as_u16(), 301 | 302 | 303 | 307 | 308)
}

/// A failed request as a result for the model.
fn request_error(url: &reqwest::Url, e: &EgressError, timeout: Duration) -> ToolError {
    let e = match e {
        EgressError::Refused(refusal) => {
            return ToolError::new(ErrorKind::Denied, refusal.0.clone())
        }
        EgressError::Http(e) => e,
    };
    if e.is_timeout() {
        return ToolError::new(
            ErrorKind::Timeout,
            format!("{url} did not answer within {} s", timeout.as_secs()),
        );
    }
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        let t = s.to_string();
        if !msg.contains(&t) {
            msg.push_str(": ");
            msg.push_str(&t);
        }
        src = s.source();
    }
    ToolError::new(
        ErrorKind::Dependency,
        format!("could not fetch {url}: {msg}"),
    )
}

/// Parse the `url` argument; a bare `example.com/page` gets `https://`.
fn parse_url(raw: &str) -> Result<reqwest::Url, ToolError> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(ToolError::new(
            ErrorKind::Validation,
            "argument `url` is empty; give an http(s) URL",
        ));
    }
    let parsed = match reqwest::Url::parse(raw) {
        Ok(u) => Ok(u),
        Err(url_err) if !raw.contains("://") => {
            reqwest::Url::parse(&format!("https://{raw}")).map_err(|_| url_err)
        }
        Err(e) => Err(e),
    };
    parsed.map_err(|e| {
        ToolError::new(
            ErrorKind::Validation,
            format!("{raw:?} is not a valid URL ({e}); give an http(s) URL"),
        )
    })
}

/// What `web_fetch` declares (the configured limits are set by its constructor).
fn declaration() -> ToolDecl {
    ToolDecl::new(
        "web_fetch",
        {
            "Fetch a web page (http/https) and return its readable text as Markdown, title first; \
             plain-text resources (JSON, XML, source files) are returned as they are. Binary files \
             are refused."
        },
        json!({
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "The http(s) URL to fetch"}
            },
            "required": ["url"],
            "additionalProperties": false
        }),
    )
    .risk(Risk::ReadOnly)
    // A public page is not the owner's data; a host of `allow_private` marks the turn through the
    // egress guard instead.
    .not_private()
}

#[async_trait]
impl Tool for WebFetch {
    fn decl(&self) -> &ToolDecl {
        &self.decl
    }
    fn describe(&self, args: &Value, ctx: &ToolContext) -> CallPlan {
        CallPlan {
            egress: self.egress(args, ctx),
            ..CallPlan::of(self.decl(), args)
        }
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let requested = req_str(&args, "url").and_then(parse_url)?;
        let client =
            (self.client.as_ref()).map_err(|e| ToolError::new(ErrorKind::Internal, e.clone()))?;
        let (mut resp, url, redirects) = self.follow(client, &requested, ctx).await?;
        let landing = Landing::of(&resp, requested, url, redirects);
        landing.check_status()?;
        let mut kind = kind_of(&landing.mime);
        let declared_len = resp.content_length();
        if kind == Kind::Binary {
            let size = declared_len
                .map(|n| format!(", {n} bytes"))
                .unwrap_or_default();
            return Err(landing.binary(format!("{}{size}", landing.mime)));
        }

        let (body, truncated) = self.download(&mut resp, &landing.url).await?;

        if kind == Kind::Sniff {
            kind = if !looks_like_text(&body) {
                Kind::Binary
            } else if looks_like_html(&body) {
                Kind::Html
            } else {
                Kind::Text
            };
        }
        if kind == Kind::Binary || (kind == Kind::Text && !looks_like_text(&body)) {
            let shown = if landing.mime.is_empty() {
                "no content type"
            } else {
                landing.mime.as_str()
            };
            return Err(landing.binary(format!(
                "{shown}, {} bytes{}",
                declared_len.unwrap_or(body.len() as u64),
                if truncated { " or more" } else { "" }
            )));
        }
        self.page(&landing, &body, truncated, kind == Kind::Html)
            .await
    }
}

/// Where a fetch ended: the way there and the final response's head.
struct Landing {
    /// The URL the model asked for.
    requested: reqwest::Url,
    /// The URL of the final response (after redirects).
    url: reqwest::Url,
    redirects: usize,
    status: reqwest::StatusCode,
    /// The `Content-Type` header as sent, and its media type alone.
    content_type: String,
    mime: String,
}

impl Landing {
    fn of(
        resp: &reqwest::Response,
        requested: reqwest::Url,
        url: reqwest::Url,
        redirects: usize,
    ) -> Self {
        let content_type = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let mime = content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        Self {
            requested,
            url,
            redirects,
            status: resp.status(),
            content_type,
            mime,
        }
    }

    /// The result's metadata: the way and the head, with `extra`'s fields.
    fn meta(&self, extra: Value) -> Value {
        let mut m = json!({
            "url": self.requested.as_str(),
            "final_url": self.url.as_str(),
            "status": self.status.as_u16(),
            "content_type": self.content_type,
            "redirects": self.redirects,
        });
        if let (Some(m), Value::Object(e)) = (m.as_object_mut(), extra) {
            m.extend(e);
        }
        m
    }

    /// An HTTP error status as a `dependency` error.
    fn check_status(&self) -> Result<(), ToolError> {
        let status = self.status;
        if status.is_success() {
            return Ok(());
        }
        Err(ToolError::new(
            ErrorKind::Dependency,
            format!(
                "{} answered HTTP {} {}",
                self.url,
                status.as_u16(),
                status.canonical_reason().unwrap_or("")
            )
            .trim_end()
            .to_string(),
        )
        .with_metadata(self.meta(json!({}))))
    }

    /// The refusal of a binary body (`what`: its type and size as known).
    fn binary(&self, what: String) -> ToolError {
        ToolError::new(
            ErrorKind::Validation,
            format!(
                "{} is binary content ({what}); web_fetch returns text only \
                 (HTML pages and text files)",
                self.url
            ),
        )
        .with_metadata(self.meta(json!({})))
    }
}

/// Where a redirect response points (`None`: not a redirect, or one without a `Location`).
fn redirect_target(
    resp: &reqwest::Response,
    url: &reqwest::Url,
) -> Result<Option<reqwest::Url>, ToolError> {
    if !is_redirect(resp.status()) {
        return Ok(None);
    }
    let Some(location) = resp
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|l| l.to_str().ok())
    else {
        return Ok(None);
    };
    match url.join(location.trim()) {
        Ok(n) => Ok(Some(n)),
        Err(e) => Err(ToolError::new(
            ErrorKind::Dependency,
            format!("{url} redirected to an invalid location {location:?}: {e}"),
        )),
    }
}

impl WebFetch {
    /// Request `requested` and follow its redirects, each hop a request of its own: the final
    /// response, its URL and the number of redirects followed.
    async fn follow(
        &self,
        client: &EgressClient,
        requested: &reqwest::Url,
        ctx: &ToolContext,
    ) -> Result<(reqwest::Response, reqwest::Url, usize), ToolError> {
        let mut url = requested.clone();
        let mut redirects = 0usize;
        // Whether private data entered the session before this call (what the owner approved).
        let tainted = ctx.taint.source().is_some();
        loop {
            let resp = self.hop(client, requested, &url, redirects, ctx).await?;
            let Some(next) = redirect_target(&resp, &url)? else {
                return Ok((resp, url, redirects));
            };
            // After private data entered the turn, the owner approved this host, not wherever it
            // redirects: a redirect to another origin goes back to the model (its fetch asks).
            if tainted && next.origin() != url.origin() {
                return Err(ToolError::new(
                    ErrorKind::Denied,
                    format!(
                        "{url} redirected to another site, {next}; it was not followed because this \
                         conversation has read private data. Call web_fetch on {next} if you \
                         need it (the owner will be asked)."
                    ),
                ));
            }
            redirects += 1;
            if redirects > MAX_REDIRECTS {
                return Err(ToolError::new(
                    ErrorKind::Dependency,
                    format!("{requested}: more than {MAX_REDIRECTS} redirects; stopped at {next}"),
                ));
            }
            url = next;
        }
    }

    /// One request of a fetch (`url`, reached from `requested` after `redirects` redirects).
    async fn hop(
        &self,
        client: &EgressClient,
        requested: &reqwest::Url,
        url: &reqwest::Url,
        redirects: usize,
        ctx: &ToolContext,
    ) -> Result<reqwest::Response, ToolError> {
        // The guard judges every hop; a host of `allow_private` marks the turn (what it
        // returns is private data for the calls after this one).
        match client
            .get(url.as_str())
            .header(
                reqwest::header::ACCEPT,
                "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.8",
            )
            .for_turn(&ctx.taint)
            .send()
            .await
        {
            Ok(r) => Ok(r),
            Err(EgressError::Refused(refusal)) => {
                let mut msg = refusal.0;
                if redirects > 0 {
                    msg = format!("{requested} redirected to {url}; {msg}");
                }
                Err(ToolError::new(ErrorKind::Denied, msg).with_metadata(json!({
                    "url": requested.as_str(), "refused_url": url.as_str(), "redirects": redirects
                })))
            }
            Err(e) => {
                let mut r = request_error(url, &e, self.decl.timeout);
                if redirects > 0 {
                    r.message = format!("{requested} redirected to {url}: {}", r.message);
                }
                Err(r)
            }
        }
    }

    /// The body, downloaded up to the cap: the bytes and whether it was cut.
    async fn download(
        &self,
        resp: &mut reqwest::Response,
        url: &reqwest::Url,
    ) -> Result<(Vec<u8>, bool), ToolError> {
        let mut body: Vec<u8> = Vec::new();
        let mut truncated = false;
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    let room = self.max_bytes - body.len();
                    if chunk.len() > room {
                        body.extend_from_slice(&chunk[..room]);
                        truncated = true;
                        break;
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => Err(request_error(url, &EgressError::Http(e), self.decl.timeout))?,
            }
        }
        Ok((body, truncated))
    }

    /// The text of a downloaded body: decoded; for HTML, its readable part as Markdown under
    /// its title and source.
    async fn page(
        &self,
        landing: &Landing,
        body: &[u8],
        truncated: bool,
        html: bool,
    ) -> Result<ToolOutput, ToolError> {
        let url = &landing.url;
        let header_charset = charset_param(&landing.content_type);
        let (text, encoding) = decode(body, header_charset.as_deref(), html, truncated);
        let cut_note = if truncated {
            format!(
                "\n\n[the download stopped at {} bytes; the rest of the page is not included]",
                self.max_bytes
            )
        } else {
            String::new()
        };
        let extra = json!({
            "bytes": body.len(),
            "truncated": truncated,
            "charset": encoding.name(),
        });
        if !html {
            return Ok(
                ToolOutput::new(format!("{text}{cut_note}")).with_metadata(landing.meta(extra))
            );
        }
        let (title, content) = match self.pages.read(text, url.to_string()).await {
            Ok(tc) => tc,
            Err(reason) => {
                // Not retried (a `dependency` error would be): the same page costs the same.
                return Err(ToolError::new(
                    ErrorKind::Validation,
                    unreadable_page(url.as_str(), &reason),
                )
                .with_metadata(landing.meta(extra)));
            }
        };
        let mut out = String::new();
        if !title.is_empty() {
            out.push_str(&format!("# {title}\n\n"));
        }
        out.push_str(&format!("Source: {url}\n\n"));
        if content.is_empty() {
            out.push_str("(the page has no readable text)");
        } else {
            out.push_str(&content);
        }
        out.push_str(&cut_note);
        let mut m = landing.meta(extra);
        if let Some(o) = m.as_object_mut() {
            o.insert("title".into(), json!(title));
        }
        Ok(ToolOutput::new(out).with_metadata(m))
    }
}

impl WebFetch {
    /// The whole URL leaves (path and query can carry data); a session approval covers one
    /// host.
    fn egress(&self, args: &Value, _ctx: &ToolContext) -> Option<crate::Egress> {
        let raw = args.get("url").and_then(Value::as_str)?;
        let host = reqwest::Url::parse(raw.trim())
            .ok()
            .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
            .unwrap_or_else(|| raw.to_string());
        // A host written with non-ASCII letters is shown as sent too (punycode), so a look-alike
        // (`gіthub.com` with a Cyrillic і) cannot pass for the real one.
        // The host is always named apart, so `https://github.com@evil.example/` cannot pass
        // for GitHub; a look-alike written in non-ASCII letters shows as sent (punycode).
        let destination = format!("GET {} (host: {host})", raw.trim());
        Some(crate::Egress {
            destination,
            scope: format!("egress:host:{host}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_kinds() {
        assert_eq!(kind_of("text/html"), Kind::Html);
        assert_eq!(kind_of("TEXT/HTML"), Kind::Html);
        assert_eq!(kind_of("text/plain"), Kind::Text);
        assert_eq!(kind_of("application/json"), Kind::Text);
        assert_eq!(kind_of("application/vnd.api+json"), Kind::Text);
        assert_eq!(kind_of("image/png"), Kind::Binary);
        assert_eq!(kind_of("application/pdf"), Kind::Binary);
        assert_eq!(kind_of(""), Kind::Sniff);
        assert_eq!(kind_of("application/octet-stream"), Kind::Sniff);
    }

    #[test]
    fn charsets() {
        assert_eq!(
            charset_param("text/html; charset=\"GBK\"").as_deref(),
            Some("GBK")
        );
        assert_eq!(charset_param("text/html"), None);
        let page = b"<html><head><META http-equiv=\"Content-Type\" content=\"text/html; charset=gb2312\"></head>";
        assert_eq!(meta_charset(page), Some(encoding_rs::GBK));
        assert_eq!(
            meta_charset(b"<meta charset='iso-8859-1'>"),
            Some(encoding_rs::WINDOWS_1252)
        );
        assert_eq!(
            meta_charset(b"<meta charset=utf-16>"),
            Some(encoding_rs::UTF_8)
        );
        assert_eq!(meta_charset(b"<p>charset=gbk</p>"), None);
        let (gbk, _, _) = encoding_rs::GBK.encode("中文");
        let (t, e) = decode(&gbk, Some("gbk"), false, false);
        assert_eq!((t.as_str(), e), ("中文", encoding_rs::GBK));
        let (t, _) = decode(&[0x63, 0x61, 0x66, 0xe9], None, false, false);
        assert_eq!(t, "café");
        let (t, _) = decode("naïve".as_bytes(), None, true, false);
        assert_eq!(t, "naïve");
    }

    #[test]
    fn text_sniffing() {
        assert!(looks_like_text(b"hello\nworld"));
        assert!(!looks_like_text(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"));
        assert!(looks_like_html(b"  <!DOCTYPE html><html>"));
        assert!(!looks_like_html(b"{\"a\": 1}"));
    }

    #[test]
    fn url_argument() {
        assert_eq!(
            parse_url("example.com/a").unwrap().as_str(),
            "https://example.com/a"
        );
        assert!(parse_url("").is_err());
        assert!(parse_url("http://").is_err());
    }
}
