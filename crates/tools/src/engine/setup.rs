//! [`ToolsSetup`]: everything the built-in tools are given when the registry builds them — the
//! tools' settings and the services they use. The daemon fills it from its configuration in
//! one place (`crate::daemon::tool_setup`); nothing here reads the configuration itself.

use crate::lark_common::LarkClient;
use crate::settings::{LiveSettings, ToolsConfig};
use ethan_core::knowledge::KnowledgeBase;
use std::sync::Arc;

/// What [`crate::registry::Registry::builtin`] builds the built-in tools from.
pub struct ToolsSetup {
    /// The `tools:` section: per-tool overrides (the shell's timeout and git hooks),
    /// `web_search`, `web_fetch`, `browser`.
    pub tools: ToolsConfig,
    /// The secret values the shell keeps out of its commands' environment and output.
    pub secrets: Vec<String>,
    /// The owner's IANA time zone (none: the system's), for the schedule and Lark tools.
    pub timezone: Option<String>,
    /// The model names a scheduled job may ask for.
    pub models: Vec<String>,
    /// The largest picture (bytes) the browser hands to the model.
    pub max_image_bytes: u64,
    /// Where `web_search` re-reads its settings at each call (none: `tools.web_search` as
    /// given, fixed).
    pub live: Option<Arc<dyn LiveSettings>>,
    /// The knowledge base of the `knowledge_*` tools (none: they answer that there is none).
    pub knowledge: Option<Arc<dyn KnowledgeBase>>,
    /// The Lark Open API client of the Lark tools (none: no Lark tools).
    pub lark: Option<Arc<LarkClient>>,
    /// The daemon's egress, shared by the guards of the web tools and the browser.
    pub egress: ethan_egress::Egress,
    /// Who turns a web page's HTML into text for `web_fetch` and the browser (the daemon's
    /// limited child process; [`crate::page_reader::NoPageReader`]: pages are not read).
    pub pages: Arc<dyn crate::page_reader::PageReader>,
}

/// The built-in tools as the daemon builds them from its default configuration (no secrets, no
/// time zone, no Lark app, no knowledge base), for this crate's unit tests.
#[cfg(test)]
pub(crate) fn default_registry() -> crate::registry::Registry {
    crate::registry::Registry::builtin(ToolsSetup {
        tools: ToolsConfig::default(),
        secrets: Vec::new(),
        timezone: None,
        models: Vec::new(),
        max_image_bytes: 5_000_000,
        live: None,
        knowledge: None,
        lark: None,
        egress: Default::default(),
        pages: Arc::new(crate::page_reader::NoPageReader),
    })
}
