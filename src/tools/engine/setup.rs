//! [`ToolsSetup`]: everything the built-in tools are given when the registry builds them — the
//! tools' settings and the services they use. The daemon fills it from its configuration in
//! one place (`crate::daemon::tool_setup`); nothing here reads the configuration itself.

use crate::tools::lark_common::LarkClient;
use crate::tools::settings::{LiveSettings, ToolsConfig};
use ethan_core::knowledge::KnowledgeBase;
use std::sync::Arc;

/// What [`crate::tools::registry::Registry::builtin`] builds the built-in tools from.
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
    pub egress: crate::egress::Egress,
}
