//! Web tools: `web_fetch` and `web_search` (DuckDuckGo, Tavily, SearXNG), both reaching the
//! network through the egress guard ([`ethan_egress`]); a page's HTML is read by the
//! daemon's [`page_reader::PageReader`], never in the tool.

pub mod markup_depth;
pub mod page_reader;
pub mod readable;
pub mod web_fetch;
pub mod web_search;
