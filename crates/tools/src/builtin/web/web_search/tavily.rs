//! Tavily (`POST {base}/search`, default base `https://api.tavily.com`), authenticated with
//! `Authorization: Bearer <tools.web_search.tavily.api_key>`. Request body:
//! `{"query", "max_results", "search_depth": "basic"}`; answer: `{"results": [{"title", "url",
//! "content", "score"}, …]}`. Errors carry `{"detail": {"error": "…"}}`; the status codes with a
//! meaning of their own (401 key, 429 rate limit, 432/433 plan limits) are spelled out.

use super::{Hit, ProviderFailure};
use serde_json::{json, Value};
use std::time::Duration;

pub const DEFAULT_BASE_URL: &str = "https://api.tavily.com";

fn endpoint(base: &str) -> String {
    let base = base.trim().trim_end_matches('/');
    if base.ends_with("/search") {
        base.to_string()
    } else {
        format!("{base}/search")
    }
}

/// The human part of an error body.
fn detail(body: &str) -> Option<String> {
    let v: Value = serde_json::from_str(body).ok()?;
    let d = v.get("detail").unwrap_or(&v);
    let msg = d
        .get("error")
        .or_else(|| d.get("message"))
        .and_then(Value::as_str)
        .or_else(|| d.as_str())?;
    Some(msg.trim().to_string()).filter(|m| !m.is_empty())
}

pub async fn search(
    client: &ethan_egress::EgressClient,
    base: &str,
    api_key: &str,
    query: &str,
    max: usize,
    timeout: Duration,
) -> Result<Vec<Hit>, ProviderFailure> {
    let resp = client
        .post(&endpoint(base))
        .bearer_auth(api_key)
        .json(&json!({
            "query": query,
            "max_results": max,
            "search_depth": "basic",
        }))
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| ProviderFailure::egress(&e, timeout))?;
    let status = resp.status().as_u16();
    let body = resp
        .text()
        .await
        .map_err(|e| ProviderFailure::request(&e, timeout))?;
    if status != 200 {
        let d = detail(&body);
        let what = match status {
            401 => "invalid API key (check tools.web_search.tavily.api_key)".to_string(),
            429 => "rate limited; try again in a minute".to_string(),
            432 => "the plan's usage limit is reached".to_string(),
            433 => "the pay-as-you-go limit is reached".to_string(),
            _ => d.clone().unwrap_or_else(|| "unexpected answer".to_string()),
        };
        let mut msg = format!("{status} {what}");
        if let Some(d) = d.filter(|d| !msg.contains(d.as_str()) && status != 401) {
            msg.push_str(&format!(" ({d})"));
        }
        return Err(ProviderFailure::new(msg));
    }
    parse(&body, max)
}

/// Read a Tavily `/search` answer.
pub fn parse(body: &str, max: usize) -> Result<Vec<Hit>, ProviderFailure> {
    let v: Value = serde_json::from_str(body)
        .map_err(|e| ProviderFailure::new(format!("the answer is not JSON: {e}")))?;
    super::hits_from_results(&v, max, |t| t.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_answers_and_errors() {
        let body = r#"{"query":"q","results":[{"title":"T","url":"https://a.example/","content":"C","score":0.9},{"title":"no url"}]}"#;
        let hits = parse(body, 5).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].snippet, "C");
        assert!(parse("{}", 5).is_err());
        assert_eq!(
            detail(r#"{"detail":{"error":"Unauthorized: missing or invalid API key."}}"#)
                .as_deref(),
            Some("Unauthorized: missing or invalid API key.")
        );
        assert_eq!(
            endpoint("https://api.tavily.com/"),
            "https://api.tavily.com/search"
        );
    }
}
