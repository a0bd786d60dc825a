//! Web tools: `web_fetch` (with its SSRF guard, [`ssrf`]) and `web_search` (DuckDuckGo,
//! Tavily, SearXNG).

pub mod ssrf;
pub mod web_fetch;
pub mod web_search;
