//! SearXNG (`GET {base}/search?q=…&format=json`; `base_url` from
//! `tools.web_search.searxng.base_url` or `SEARXNG_BASE_URL`). Answer: `{"results": [{"title",
//! "url", "content"}, …]}`. An instance answers 403 when its `settings.yml` does not list `json`
//! under `search.formats`; the error says so. Public instances rate-limit with 429.

use super::{Hit, ProviderFailure};
use reqwest::Url;
use serde_json::Value;
use std::time::Duration;

fn endpoint(base: &str) -> Result<Url, String> {
    let base = base.trim().trim_end_matches('/');
    let full = if base.ends_with("/search") {
        base.to_string()
    } else {
        format!("{base}/search")
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
    url.query_pairs_mut()
        .append_pair("q", query)
        .append_pair("format", "json");
    let resp = client
        .get(url.as_str())
        .header(reqwest::header::ACCEPT, "application/json")
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| ProviderFailure::egress(&e, timeout))?;
    let status = resp.status().as_u16();
    let body = resp
        .text()
        .await
        .map_err(|e| ProviderFailure::request(&e, timeout))?;
    match status {
        200 => parse(&body, max),
        403 => Err(ProviderFailure::new(
            "403 Forbidden: this instance does not serve the JSON format; enable it in the \
             instance's settings.yml (search: formats: [html, json]) or use another instance",
        )),
        429 => Err(ProviderFailure::new(
            "429 Too Many Requests: the instance is rate-limiting this address",
        )),
        s => Err(ProviderFailure::new(format!("HTTP {s}"))),
    }
}

/// Read a SearXNG JSON answer.
pub fn parse(body: &str, max: usize) -> Result<Vec<Hit>, ProviderFailure> {
    let v: Value = serde_json::from_str(body).map_err(|_| {
        ProviderFailure::new(
            "the answer is not JSON (is base_url the root of a SearXNG instance with the JSON \
             format enabled?)",
        )
    })?;
    super::hits_from_results(&v, max, |t| {
        t.split_whitespace().collect::<Vec<_>>().join(" ")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses() {
        let hits = parse(
            r#"{"query":"q","number_of_results":0,"results":[{"url":"https://a/","title":"A","content":"x\n y","engine":"ddg"}]}"#,
            5,
        )
        .unwrap();
        assert_eq!(hits[0].snippet, "x y");
        assert!(parse("<html>", 5).unwrap_err().message.contains("not JSON"));
        assert_eq!(
            endpoint("http://127.0.0.1:8888/").unwrap().as_str(),
            "http://127.0.0.1:8888/search"
        );
    }
}
