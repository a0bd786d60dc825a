//! Web tools: `web_fetch` and `web_search` (DuckDuckGo, Tavily, SearXNG), both reaching the
//! network through the egress guard ([`ethan_egress`]).

pub mod markup_depth;
pub mod web_fetch;
pub mod web_search;
