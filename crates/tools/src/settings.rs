//! The tools' own settings: the `tools:` section of the configuration (policy profile and
//! lists, per-tool overrides, `web_search`, `web_fetch`, `browser`) and an agent's `tools`
//! lists (`agents.<name>.tools`). The configuration reads them from the file and re-exports
//! them (`config::ToolsConfig`, …); the tools take them as values, never the whole
//! configuration. Every struct refuses unknown keys; defaults are the documented ones
//! (docs/configuration.md).

use ethan_core::secret::Secret;
use serde::Deserialize;
use std::collections::BTreeMap;

/// An agent's tools: a profile or an allow list, then `also_allow`, then `deny`, as the
/// top-level `tools` keys; applied on top of them (a tool must pass both).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentTools {
    /// Unset (and no `allow`): every tool the top-level policy allows.
    pub profile: Option<Profile>,
    pub allow: Vec<String>,
    pub also_allow: Vec<String>,
    pub deny: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    Minimal,
    Messaging,
    Coding,
    #[default]
    Full,
}

/// Per-tool overrides: `tools.<name>.timeout_secs` / `tools.<name>.max_retries`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolOverride {
    pub timeout_secs: Option<u64>,
    pub max_retries: Option<u32>,
    /// `tools.shell.git_hooks`: whether approved git commands run the repository's hooks
    /// (default false: `core.hooksPath` points at an empty place; the shell tool only).
    pub git_hooks: Option<bool>,
}

/// Keys of `tools:` that are not tool names.
pub const TOOLS_SECTION_KEYS: &[&str] = &[
    "profile",
    "allow",
    "also_allow",
    "deny",
    "fast_path",
    "workspace",
    "web_search",
    "web_fetch",
    "summarise_over_chars",
    "browser",
];

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolsConfig {
    pub profile: Profile,
    pub allow: Vec<String>,
    pub also_allow: Vec<String>,
    pub deny: Vec<String>,
    pub fast_path: Vec<String>,
    /// Working directory of tools; empty = `$ETHAN_HOME/workspace`.
    pub workspace: String,
    pub web_search: WebSearchConfig,
    pub web_fetch: WebFetchConfig,
    /// A tool output longer than this (characters) reaches the model as a summary by
    /// `memory.summary_model`, the full output spilled (tools that declare `no_compress` are
    /// cut instead); 0 = never summarise.
    pub summarise_over_chars: usize,
    /// `tools.browser`: the headless Chromium behind the browser tools.
    pub browser: BrowserConfig,
    /// Every other key is a tool name with its overrides (`shell: { timeout_secs: 30 }`);
    /// filled by `config::from_value`, which reads them with their own key paths.
    #[serde(skip)]
    pub per_tool: BTreeMap<String, ToolOverride>,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        Self {
            profile: Profile::default(),
            allow: Vec::new(),
            also_allow: Vec::new(),
            deny: Vec::new(),
            fast_path: Vec::new(),
            workspace: String::new(),
            web_search: WebSearchConfig::default(),
            web_fetch: WebFetchConfig::default(),
            summarise_over_chars: 12_000,
            browser: BrowserConfig::default(),
            per_tool: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchProvider {
    #[default]
    Duckduckgo,
    Tavily,
    Searxng,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BaseUrlSection {
    pub base_url: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TavilySection {
    pub api_key: Secret,
    pub base_url: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebSearchConfig {
    pub provider: SearchProvider,
    pub fallback: Vec<SearchProvider>,
    pub duckduckgo: BaseUrlSection,
    pub tavily: TavilySection,
    pub searxng: BaseUrlSection,
    pub timeout_secs: Option<u64>,
    pub max_retries: Option<u32>,
}

impl Default for WebSearchConfig {
    fn default() -> Self {
        Self {
            provider: SearchProvider::Duckduckgo,
            fallback: vec![SearchProvider::Duckduckgo],
            duckduckgo: BaseUrlSection::default(),
            tavily: TavilySection::default(),
            searxng: BaseUrlSection::default(),
            timeout_secs: None,
            max_retries: None,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebFetchConfig {
    /// Hosts of the owner's network the egress guard ([`ethan_egress`]) lets tools reach; what
    /// they return counts as private data.
    pub allow_private: Vec<String>,
    pub timeout_secs: Option<u64>,
    pub max_retries: Option<u32>,
}

/// `tools.browser`: the headless Chromium the browser tools drive (src/builtin/browser/).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BrowserConfig {
    /// Path or name of the Chromium binary; empty = the first of `chromium`, `chromium-browser`,
    /// `google-chrome` found on `PATH`.
    pub executable: String,
    /// Seconds without a browser call after which the browser is closed (its sessions wiped);
    /// the next call starts it again.
    pub idle_secs: u64,
}

impl Default for BrowserConfig {
    fn default() -> Self {
        Self {
            executable: String::new(),
            idle_secs: 300,
        }
    }
}

/// Settings read again at every use, so that an edit of the configuration file applies without
/// a restart (today `tools.web_search`). The configuration's file watch implements it; a tool
/// given none keeps the settings it was built with.
pub trait LiveSettings: Send + Sync {
    /// `tools.web_search` as it is now.
    fn web_search(&self) -> WebSearchConfig;
}
