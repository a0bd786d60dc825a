//! The typed configuration, key for key as in docs/configuration.md. Every struct refuses unknown keys;
//! defaults are the documented ones.

pub use crate::tools::settings::{
    AgentTools, BaseUrlSection, BrowserConfig, Profile, SearchProvider, TavilySection,
    ToolOverride, ToolsConfig, WebFetchConfig, WebSearchConfig, TOOLS_SECTION_KEYS,
};
use ethan_core::secret::{string_or_number, Secret};
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;

/// `channels.<name>.streaming`: a mode name, or a YAML boolean (`off` unquoted arrives as
/// `false`; `true` means `auto`).
fn stream_mode<'de, D: Deserializer<'de>>(d: D) -> Result<ethan_channels::StreamMode, D::Error> {
    let s = string_or_number(d)?;
    ethan_channels::StreamMode::parse(&s).map_err(serde::de::Error::custom)
}

/// An id that may be absent: a YAML string or number.
fn opt_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    struct Id(#[serde(deserialize_with = "string_or_number")] String);
    Ok(Option::<Id>::deserialize(d)?.map(|i| i.0))
}

fn ids<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    struct Id(#[serde(deserialize_with = "string_or_number")] String);
    Ok(Vec::<Id>::deserialize(d)?
        .into_iter()
        .map(|i| i.0)
        .collect())
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// IANA zone (e.g. `Asia/Shanghai`); default: the system zone.
    pub timezone: Option<String>,
    pub model: ModelConfig,
    pub channels: ChannelsConfig,
    /// `telegram:<user id>` / `lark:<open_id>`.
    #[serde(deserialize_with = "ids")]
    pub owners: Vec<String>,
    pub consent: ConsentConfig,
    pub tools: ToolsConfig,
    pub knowledge: KnowledgeConfig,
    pub scheduler: SchedulerConfig,
    pub retention: RetentionConfig,
    pub gateway: GatewayConfig,
    pub budget: BudgetConfig,
    pub mcp: McpConfig,
    pub store: StoreConfig,
    pub media: MediaConfig,
    pub memory: MemoryConfig,
    /// Named agents beside the implicit `default` one (the top-level `model` and `tools`).
    pub agents: BTreeMap<String, AgentConfig>,
    /// Which agent answers where; the most specific match wins (sender > thread > chat >
    /// channel), else `default`.
    pub bindings: Vec<Binding>,
}

/// `media`: pictures, voice notes and files sent in chats ([`crate::media`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MediaConfig {
    /// The largest picture sent to the model, in bytes: a Telegram photo is taken at the
    /// largest size under it; a bigger picture is saved but not shown.
    pub max_image_bytes: u64,
    /// Where voice notes and audio files are transcribed (OpenAI-compatible); empty
    /// `base_url` = not transcribed.
    pub transcription: TranscriptionConfig,
    /// Show the transcript of a voice note in the first line of the reply.
    pub echo_transcript: bool,
}

impl Default for MediaConfig {
    fn default() -> Self {
        Self {
            max_image_bytes: 5_000_000,
            transcription: TranscriptionConfig::default(),
            echo_transcript: false,
        }
    }
}

/// `media.transcription`: `POST {base_url}/audio/transcriptions` (multipart `file`, `model`),
/// as OpenAI's Whisper API and its compatibles (Groq, a local whisper server) take it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TranscriptionConfig {
    /// Ends in `/v1`, like `model.base_url`; empty = voice notes are not transcribed.
    pub base_url: String,
    pub api_key: Secret,
    /// e.g. `whisper-1`.
    pub model: String,
}

/// One named agent (`agents.<name>`): its own prompt, model, tools (which can only narrow what
/// the top-level `tools` and the sender allow), memory and iteration cap.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    /// Replaces `model.system_prompt` for this agent (empty: that one).
    pub system_prompt: String,
    /// The model to ask first: `model.name` or a `model.fallback` name (empty: the usual order).
    pub model: String,
    pub tools: AgentTools,
    /// Which memory it uses: `personal` (direct chats only), `chat` (groups only) or `none`;
    /// unset: the chat's own (personal in a direct chat, the group's in a group).
    pub memory: Option<AgentMemory>,
    /// Model calls per turn (unset: `model.max_tool_iterations`).
    pub max_tool_iterations: Option<u32>,
}

/// `agents.<name>.memory`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentMemory {
    Personal,
    Chat,
    None,
}

/// `bindings[]`: the agent that answers in a channel, a chat, a thread (Telegram topic, Lark
/// thread) or for one sender. Ids are the platform's: a Telegram chat or user id (a number or a
/// string), a Lark `chat_id` (`oc_…`) or `open_id` (`ou_…`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Binding {
    /// An `agents` name, or `default`.
    pub agent: String,
    /// `telegram`, `lark`, `terminal` or `web`.
    pub channel: String,
    #[serde(deserialize_with = "opt_id")]
    pub chat_id: Option<String>,
    #[serde(deserialize_with = "opt_id")]
    pub thread: Option<String>,
    #[serde(deserialize_with = "opt_id")]
    pub sender: Option<String>,
}

/// Long-term memory and compaction (`memory`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// A fact not confirmed or found by a search for this many days leaves the snapshot (it
    /// stays searchable); 0 = never.
    pub decay_days: u32,
    /// The most characters of remembered facts put in a session's system prompt.
    pub snapshot_chars: usize,
    /// The model that summarises (compaction, long tool output) and extracts facts: the name of
    /// `model.name` or of a `model.fallback` entry; empty = the main model.
    pub summary_model: String,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            decay_days: 90,
            snapshot_chars: 2_000,
            summary_model: String::new(),
        }
    }
}

/// Which wire protocol a model endpoint speaks (`model.provider`, `model.fallback[].provider`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// OpenAI Chat Completions (`POST {base_url}/chat/completions`): OpenAI, DeepSeek, Qwen,
    /// OpenRouter, vLLM, Ollama, llama.cpp, …
    #[default]
    Openai,
    /// Anthropic Messages (`POST {base_url}/v1/messages`).
    Anthropic,
}

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Openai => "openai",
            ProviderKind::Anthropic => "anthropic",
        }
    }

    /// The base URL used when none is configured (after the provider's `*_BASE_URL` variable).
    pub fn default_base_url(self) -> &'static str {
        match self {
            ProviderKind::Openai => "https://api.openai.com/v1",
            ProviderKind::Anthropic => "https://api.anthropic.com",
        }
    }

    /// The environment variables read for an empty `api_key` and `base_url`.
    pub fn env_vars(self) -> (&'static str, &'static str) {
        match self {
            ProviderKind::Openai => ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
            ProviderKind::Anthropic => ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    /// The wire protocol: `openai` (default) or `anthropic`.
    pub provider: ProviderKind,
    /// OpenAI: the prefix to which `/chat/completions` is appended, e.g.
    /// `https://api.openai.com/v1`. Anthropic: the host, e.g. `https://api.anthropic.com`
    /// (`/v1/messages` is appended). Empty: the provider's `*_BASE_URL` variable, else its
    /// public endpoint (filled in when the config is loaded).
    pub base_url: String,
    /// Empty: the provider's `*_API_KEY` variable (filled in when the config is loaded).
    pub api_key: Secret,
    pub name: String,
    /// Added before the built-in system prompt.
    pub system_prompt: String,
    pub max_tool_iterations: u32,
    /// The most messages of a session loaded per turn (those since its last summary), cut at
    /// user-message boundaries; a long session is compacted by size first (`context_tokens`).
    pub history_messages: u32,
    /// The model's context window in tokens (estimated at 4 characters a token): every request
    /// stays under `context_tokens × 4` characters, and a session's history is compacted into
    /// a summary once it would pass 70 % of it.
    pub context_tokens: u32,
    /// Per-request timeout in seconds (answers that are not streamed).
    pub timeout_secs: u64,
    /// Streamed answers: the longest silence between two chunks, in seconds, before the
    /// request counts as timed out (replaces `timeout_secs` for them).
    pub idle_timeout_secs: u64,
    /// Anthropic: the most tokens an answer may have (`max_tokens`, required by that API).
    pub max_tokens: u32,
    /// Models tried in order when the one before failed in a way another could fix.
    pub fallback: Vec<ModelEndpoint>,
    /// Seconds a model whose requests failed 3 times in a row is skipped before one call
    /// probes it again.
    pub fallback_cooldown_secs: u64,
    /// The model accepts pictures (OpenAI `image_url` parts, Anthropic `image` blocks); when
    /// false, a picture reaches it as a sentence saying one was sent.
    pub vision: bool,
    /// OpenAI: send a `prompt_cache_key` naming the conversation with each request, so the
    /// server routes a conversation's requests to where its cached prefix is.
    pub prompt_cache_key: PromptCacheKey,
}

/// When an OpenAI request carries a `prompt_cache_key` (`model.prompt_cache_key`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptCacheKey {
    /// Only to `api.openai.com` (a server that does not know the parameter may refuse the
    /// request).
    #[default]
    Auto,
    Always,
    Never,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            provider: ProviderKind::Openai,
            base_url: String::new(),
            api_key: Secret::default(),
            name: "gpt-4o-mini".into(),
            system_prompt: String::new(),
            max_tool_iterations: 20,
            history_messages: 400,
            context_tokens: 32_000,
            timeout_secs: 120,
            idle_timeout_secs: 60,
            max_tokens: 8192,
            fallback: Vec::new(),
            fallback_cooldown_secs: 60,
            vision: false,
            prompt_cache_key: PromptCacheKey::Auto,
        }
    }
}

/// A model endpoint: the primary (`model.provider`, `base_url`, `api_key`, `name`) or one entry
/// of `model.fallback`. Time limits and `max_tokens` are those of `model`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelEndpoint {
    pub provider: ProviderKind,
    /// As `model.base_url` (empty: the provider's variable, else its public endpoint).
    pub base_url: String,
    /// As `model.api_key` (empty: the provider's variable).
    pub api_key: Secret,
    /// The model name; also how a scheduled job picks this entry (`schedule_create.model`).
    pub name: String,
    /// Anthropic: `max_tokens` for this model; `None` (the primary, or not given): `model.max_tokens`.
    pub max_tokens: Option<u32>,
}

impl ModelConfig {
    /// The primary endpoint (`model.provider`, `base_url`, `api_key`, `name`).
    pub fn primary(&self) -> ModelEndpoint {
        ModelEndpoint {
            provider: self.provider,
            base_url: self.base_url.clone(),
            api_key: self.api_key.clone(),
            name: self.name.clone(),
            max_tokens: None,
        }
    }

    /// The primary endpoint, then the fallback entries, in order.
    pub fn endpoints(&self) -> Vec<ModelEndpoint> {
        std::iter::once(self.primary())
            .chain(self.fallback.iter().cloned())
            .collect()
    }
}

impl ModelEndpoint {
    /// Whether the endpoint lacks a key it needs: no `api_key`, and `base_url` is the provider's
    /// public endpoint (a local server usually takes none).
    pub fn missing_key(&self) -> bool {
        self.api_key.is_empty()
            && self
                .base_url
                .trim_end_matches('/')
                .starts_with(self.provider.default_base_url())
    }

    /// The variable that supplies this provider's key (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`).
    pub fn key_var(&self) -> &'static str {
        self.provider.env_vars().0
    }
}

/// `budget.*`: token limits per day (0 = no limit). A day starts at midnight in the configured
/// zone (`timezone`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BudgetConfig {
    /// Tokens (input + output, cache reads and writes included) the whole daemon may use a day.
    pub daily_tokens: u64,
    /// Tokens one chat (a DM, a group, the terminal) may use a day.
    pub chat_daily_tokens: u64,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ChannelsConfig {
    pub telegram: TelegramSection,
    pub lark: LarkSection,
}

/// Who may talk to the bot in direct messages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DmPolicy {
    /// Owners plus `allow_from`.
    #[default]
    Allowlist,
    OwnerOnly,
    Open,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupMode {
    #[default]
    MentionOnly,
    Always,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TelegramMode {
    #[default]
    Polling,
    Webhook,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelegramSection {
    /// Bot token; the channel is on when it is set.
    pub token: Secret,
    /// Bot API base URL without `/bot<token>`.
    pub api_url: String,
    pub mode: TelegramMode,
    pub webhook_url: String,
    pub webhook_secret: Secret,
    pub dm_policy: DmPolicy,
    #[serde(deserialize_with = "ids")]
    pub allow_from: Vec<String>,
    #[serde(deserialize_with = "ids")]
    pub groups: Vec<String>,
    pub group_mode: GroupMode,
    /// `auto` (drafts in private chats, edits in groups), `draft`, `edit` or `off`.
    #[serde(deserialize_with = "stream_mode")]
    pub streaming: ethan_channels::StreamMode,
    /// The least time between two draft updates or edits, in ms (at least 250; never under 1 s
    /// in groups).
    pub stream_interval_ms: u64,
}

impl Default for TelegramSection {
    fn default() -> Self {
        Self {
            token: Secret::default(),
            api_url: "https://api.telegram.org".into(),
            mode: TelegramMode::Polling,
            webhook_url: String::new(),
            webhook_secret: Secret::default(),
            dm_policy: DmPolicy::Allowlist,
            allow_from: Vec::new(),
            groups: Vec::new(),
            group_mode: GroupMode::MentionOnly,
            streaming: ethan_channels::StreamMode::Auto,
            stream_interval_ms: 800,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LarkDomain {
    #[default]
    Feishu,
    Lark,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LarkMode {
    #[default]
    Websocket,
    Webhook,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LarkSection {
    #[serde(deserialize_with = "string_or_number")]
    pub app_id: String,
    pub app_secret: Secret,
    pub domain: LarkDomain,
    /// Overrides `domain`; serves `/open-apis` and `/callback`.
    pub base_url: String,
    pub mode: LarkMode,
    pub encrypt_key: Secret,
    pub verification_token: Secret,
    pub dm_policy: DmPolicy,
    #[serde(deserialize_with = "ids")]
    pub allow_from: Vec<String>,
    #[serde(deserialize_with = "ids")]
    pub groups: Vec<String>,
    pub group_mode: GroupMode,
    pub stale_after_secs: u64,
    pub user_access_token: Secret,
    pub user_refresh_token: Secret,
    /// `card` (CardKit streaming cards; also `auto`) or `off`.
    #[serde(deserialize_with = "stream_mode")]
    pub streaming: ethan_channels::StreamMode,
    /// The least time between two card updates, in ms (at least 100: CardKit allows 10
    /// operations per second per card).
    pub stream_interval_ms: u64,
}

impl Default for LarkSection {
    fn default() -> Self {
        Self {
            app_id: String::new(),
            app_secret: Secret::default(),
            domain: LarkDomain::Feishu,
            base_url: String::new(),
            mode: LarkMode::Websocket,
            encrypt_key: Secret::default(),
            verification_token: Secret::default(),
            dm_policy: DmPolicy::Allowlist,
            allow_from: Vec::new(),
            groups: Vec::new(),
            group_mode: GroupMode::MentionOnly,
            stale_after_secs: 900,
            user_access_token: Secret::default(),
            user_refresh_token: Secret::default(),
            streaming: ethan_channels::StreamMode::Auto,
            stream_interval_ms: 300,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConsentConfig {
    /// Seconds after which an unanswered approval is denied.
    pub timeout_secs: u64,
}

impl Default for ConsentConfig {
    fn default() -> Self {
        Self { timeout_secs: 300 }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KnowledgeConfig {
    pub embeddings: EmbeddingsConfig,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmbeddingsConfig {
    pub base_url: String,
    pub api_key: Secret,
    pub model: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulerConfig {
    pub misfire_grace_secs: u64,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            misfire_grace_secs: 300,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetentionConfig {
    pub spill_days: u32,
    pub audit_days: u32,
    /// Days a finished inbound event (and the Lark adapter's `lark.seen:*` key) is kept; 7 by
    /// default. Dedupe needs a record for as long as a platform may redeliver (Telegram keeps an
    /// update 24 hours, Lark redelivers for hours), so values below the 3-day dedupe window
    /// count as 3; unfinished events are never removed.
    pub inbound_days: u32,
    /// Days the daily log files of `$ETHAN_HOME/logs/` (written by an interactive `ethan chat`)
    /// are kept.
    pub log_days: u32,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self {
            spill_days: 7,
            audit_days: 90,
            inbound_days: 7,
            log_days: 14,
        }
    }
}

/// `store:`: where sessions, messages, jobs, audit and the rest live.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// Empty (the default): the SQLite file `$ETHAN_HOME/ethan.db`. `postgres://user:password@host:port/db`
    /// (or `postgresql://…`, libpq's URL form): a PostgreSQL database that several replicas can
    /// share. A secret (it may hold a password).
    pub url: Secret,
    /// Seconds a replica's hold on a session (or on the Telegram poller) lasts without being
    /// renewed: after a replica dies, another takes its sessions over within this time.
    pub lease_secs: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            url: Secret::default(),
            lease_secs: 30,
        }
    }
}

impl StoreConfig {
    /// Whether `url` names a PostgreSQL database.
    pub fn is_postgres(&self) -> bool {
        let url = self.url.expose().trim();
        url.starts_with("postgres://") || url.starts_with("postgresql://")
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GatewayConfig {
    pub enabled: bool,
    pub listen: String,
    pub token: Secret,
    /// The address browsers use when the gateway is behind a reverse proxy under a name
    /// (`https://chat.example.com`): the web page then answers that `Host` and `Origin`, and
    /// its cookie is `Secure` when it is `https`. Empty: addresses and `localhost` only.
    pub public_url: String,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            listen: "127.0.0.1:8900".into(),
            token: Secret::default(),
            public_url: String::new(),
        }
    }
}

/// `mcp:`: Model Context Protocol servers whose tools are registered beside the built-ins
/// (`mcp__<server>__<tool>`, see [`crate::mcp`]).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    /// By server name (`[A-Za-z0-9_-]+`).
    pub servers: BTreeMap<String, McpServerConfig>,
}

/// `mcp.servers.<name>`: exactly one of `command` (a child process speaking MCP over stdio) or
/// `url` (a streamable HTTP endpoint, MCP spec 2025-06-18 "Transports").
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpServerConfig {
    /// The program to start (looked up in `PATH`); run in the workspace with a cleared
    /// environment plus `env`.
    pub command: Option<String>,
    pub args: Vec<String>,
    /// Extra variables for the child; their values count as secrets (redacted).
    pub env: BTreeMap<String, Secret>,
    /// `http(s)://…` of a streamable HTTP endpoint.
    pub url: Option<String>,
    /// HTTP headers sent with every request to `url`; their values count as secrets.
    pub headers: BTreeMap<String, Secret>,
    /// Time limit of one tool call, seconds (default 60).
    pub timeout_secs: u64,
    pub enabled: bool,
    /// When non-empty: only these tools of the server (the server's own names).
    pub allow: Vec<String>,
    /// Tools of the server left out (the server's own names).
    pub deny: Vec<String>,
    /// The server's resources may be read with `mcp_resource_read` (off by default: a server
    /// is read only where the owner said so).
    pub resources: bool,
}

impl Default for McpServerConfig {
    fn default() -> Self {
        Self {
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            url: None,
            headers: BTreeMap::new(),
            timeout_secs: 60,
            enabled: true,
            allow: Vec::new(),
            deny: Vec::new(),
            resources: false,
        }
    }
}
