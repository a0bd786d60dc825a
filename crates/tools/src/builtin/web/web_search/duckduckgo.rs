//! DuckDuckGo through its HTML endpoint (`GET {base}/html/?q=…`, default base
//! `https://html.duckduckgo.com`), the page parsed with `dom_query` (the HTML
//! parser `web_fetch`'s readability already brings).
//!
//! A result is a `div.result` (ads, `.result--ad`, are left out) with its title link `a.result__a`
//! and snippet `.result__snippet`. Links come wrapped as `//duckduckgo.com/l/?uddg=<target>`; the
//! target is unwrapped. A `.no-results` block means no results; a CAPTCHA page (DuckDuckGo's
//! answer to too many requests, often with HTTP 202) and a page without any result block are
//! errors, so the caller falls back to another provider.

use super::{Hit, ProviderFailure};
use reqwest::Url;
use std::time::Duration;

pub const DEFAULT_BASE_URL: &str = "https://html.duckduckgo.com";

/// DuckDuckGo serves the HTML page to browsers; an unknown agent gets an error page.
const BROWSER_UA: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";

/// `{base}/html/`, unless the base already ends in `/html`.
fn endpoint(base: &str) -> Result<Url, String> {
    let base = base.trim().trim_end_matches('/');
    let full = if base.ends_with("/html") {
        format!("{base}/")
    } else {
        format!("{base}/html/")
    };
    Url::parse(&full).map_err(|e| format!("base_url {base:?} is not a URL: {e}"))
}

pub async fn search(
    client: &ethan_egress::EgressClient,
    base: &str,
    query: &str,
    max: usize,
    timeout: Duration,
) -> Result<Vec<Hit>, ProviderFailure> {
    let mut url = endpoint(base).map_err(ProviderFailure::config)?;
    url.query_pairs_mut().append_pair("q", query);
    let resp = client
        .get(url.as_str())
        .header(reqwest::header::USER_AGENT, BROWSER_UA)
        .header(reqwest::header::ACCEPT, "text/html")
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| ProviderFailure::egress(&e, timeout))?;
    let status = resp.status();
    let body = resp
        .text()
        .await
        .map_err(|e| ProviderFailure::request(&e, timeout))?;
    if status.as_u16() != 200 {
        if is_captcha(&body) {
            return Err(ProviderFailure::new(captcha_message(status.as_u16())));
        }
        return Err(ProviderFailure::new(format!(
            "HTTP {}{}",
            status.as_u16(),
            match status.as_u16() {
                202 | 429 => " (too many requests; DuckDuckGo is rate-limiting this address)",
                403 => " (blocked)",
                _ => "",
            }
        )));
    }
    parse(&body, max)
}

fn captcha_message(status: u16) -> String {
    format!(
        "HTTP {status}, DuckDuckGo asked for a CAPTCHA (too many requests from this address); \
         try again later or configure another provider"
    )
}

/// A constant selector (a typo would fail every test of this module).
fn sel(s: &str) -> dom_query::Matcher {
    dom_query::Matcher::new(s).expect("constant CSS selector")
}

const CAPTCHA: &str = "#challenge-form, .anomaly-modal__modal, form[action*='anomaly']";

fn is_captcha(body: &str) -> bool {
    dom_query::Document::from(body)
        .select_single_matcher(&sel(CAPTCHA))
        .exists()
}

fn text_of(e: &dom_query::Selection<'_>) -> String {
    e.text().split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The target of a result link: `uddg` of a `/l/?uddg=` redirect link, else the link itself.
fn unwrap_link(href: &str) -> Option<String> {
    let href = href.trim();
    let absolute = if href.starts_with("//") {
        format!("https:{href}")
    } else if href.starts_with('/') {
        format!("https://duckduckgo.com{href}")
    } else {
        href.to_string()
    };
    let url = Url::parse(&absolute).ok()?;
    if url
        .host_str()
        .is_some_and(|h| h.ends_with("duckduckgo.com"))
    {
        if url.path() == "/l/" || url.path() == "/l" {
            return url
                .query_pairs()
                .find(|(k, _)| k == "uddg")
                .map(|(_, v)| v.into_owned());
        }
        // Ads and internal links (`/y.js`, settings) are not results.
        return None;
    }
    Some(absolute)
}

/// Read the results from a DuckDuckGo HTML page.
pub fn parse(body: &str, max: usize) -> Result<Vec<Hit>, ProviderFailure> {
    let doc = dom_query::Document::from(body);
    if doc.select_single_matcher(&sel(CAPTCHA)).exists() {
        return Err(ProviderFailure::new(captcha_message(200)));
    }
    let (title_sel, snippet_sel, url_sel) = (
        sel("a.result__a"),
        sel(".result__snippet"),
        sel(".result__url"),
    );
    let mut hits = Vec::new();
    let mut blocks = 0;
    for r in doc.select_matcher(&sel("div.result")).iter() {
        if r.has_class("result--ad") || r.has_class("result--no-result") {
            continue;
        }
        blocks += 1;
        let a = r.select_single_matcher(&title_sel);
        if !a.exists() {
            continue;
        }
        let title = text_of(&a);
        let url = a.attr("href").and_then(|h| unwrap_link(&h)).or_else(|| {
            Some(text_of(&r.select_single_matcher(&url_sel)))
                .filter(|u| !u.is_empty())
                .map(|u| {
                    if u.contains("://") {
                        u
                    } else {
                        format!("https://{u}")
                    }
                })
        });
        let Some(url) = url else { continue };
        if title.is_empty() {
            continue;
        }
        let snippet = text_of(&r.select_single_matcher(&snippet_sel));
        hits.push(Hit {
            title,
            url,
            snippet,
        });
        if hits.len() >= max {
            break;
        }
    }
    if hits.is_empty() && blocks == 0 && !doc.select_single_matcher(&sel(".no-results")).exists() {
        return Err(ProviderFailure::new(
            "no results could be read from the page (its layout may have changed)",
        ));
    }
    Ok(hits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_results_and_skips_ads() {
        let page = r#"<html><body><div class="serp__results"><div id="links" class="results">
          <div class="result results_links results_links_deep result--ad">
            <a class="result__a" href="https://duckduckgo.com/y.js?ad_provider=x">Buy now</a>
          </div>
          <div class="result results_links results_links_deep web-result">
            <h2 class="result__title"><a rel="nofollow" class="result__a"
              href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fwww.rust-lang.org%2F&amp;rut=abc">Rust
              Programming <b>Language</b></a></h2>
            <a class="result__url" href="//duckduckgo.com/l/?uddg=x">www.rust-lang.org</a>
            <a class="result__snippet" href="//duckduckgo.com/l/?uddg=x">A language empowering
              everyone.</a>
          </div>
          <div class="result results_links web-result">
            <h2 class="result__title"><a class="result__a" href="https://example.org/direct">Direct</a></h2>
          </div>
        </div></div></body></html>"#;
        let hits = parse(page, 10).unwrap();
        assert_eq!(hits.len(), 2);
        assert_eq!(hits[0].title, "Rust Programming Language");
        assert_eq!(hits[0].url, "https://www.rust-lang.org/");
        assert_eq!(hits[0].snippet, "A language empowering everyone.");
        assert_eq!(hits[1].url, "https://example.org/direct");
        assert_eq!(parse(page, 1).unwrap().len(), 1);
    }

    #[test]
    fn no_results_captcha_and_garbage() {
        let none = r#"<div class="result results_links result--no-result"><div class="no-results">No results.</div></div>"#;
        assert!(parse(none, 5).unwrap().is_empty());
        let captcha = r#"<form id="challenge-form" action="//duckduckgo.com/anomaly.js"></form>"#;
        assert!(parse(captcha, 5).unwrap_err().message.contains("CAPTCHA"));
        assert!(parse("<html><body>hello</body></html>", 5)
            .unwrap_err()
            .message
            .contains("layout"));
    }

    #[test]
    fn endpoints() {
        assert_eq!(
            endpoint("https://html.duckduckgo.com").unwrap().as_str(),
            "https://html.duckduckgo.com/html/"
        );
        assert_eq!(
            endpoint("http://127.0.0.1:9/html/").unwrap().as_str(),
            "http://127.0.0.1:9/html/"
        );
    }
}
