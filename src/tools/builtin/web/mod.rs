//! Web tools: `web_fetch` and `web_search` (DuckDuckGo, Tavily, SearXNG), both reaching the
//! network through the egress guard ([`crate::egress`]).

pub mod web_fetch;
pub mod web_search;
