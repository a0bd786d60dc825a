//! `web_search{query, max_results=5}`: title, URL and snippet of each result, from one of three
//! providers — [`duckduckgo`] (default, no key; the HTML endpoint), [`tavily`] (`api_key`) and
//! [`searxng`] (a self-hosted or public instance, JSON format). One file per provider; this
//! module owns the tool, the provider order and the provider health.
//!
//! Settings (`tools.web_search`, docs/configuration.md): `provider`, `fallback` (tried in order after it) and
//! a section per provider whose `base_url` overrides the public endpoint. `SEARXNG_BASE_URL`
//! switches to SearXNG when the config file sets no SearXNG base URL (the configured provider
//! then comes right after it). Built with [`WebSearch::watching`], the tool reads the settings
//! through a [`LiveSettings`] (the config file watched) at every call, so an edit of the config file takes effect without a
//! restart.
//!
//! Fallback: when a provider fails (network error, timeout, HTTP error, an answer that cannot be
//! read, a CAPTCHA page), the next available one is tried; a provider lacking its setting (Tavily
//! without a key, SearXNG without a base URL) is not available. A provider that failed
//! [`FAILURES_BEFORE_COOLDOWN`] times in a row is skipped for [`COOLDOWN`] (tried last, only if
//! every other one fails); health is kept per provider *and* base URL. The error of a call
//! where every provider failed names each failure (`Tavily: 401 invalid API key; DuckDuckGo:
//! timed out after 10 s`).

pub mod duckduckgo;
pub mod searxng;
pub mod tavily;

use crate::args::{opt_u64, req_str};
use crate::settings::{LiveSettings, SearchProvider, WebSearchConfig};
use crate::{CallPlan, ToolDecl};
use crate::{ErrorKind, Risk, Tool, ToolContext};
use crate::{ToolError, ToolOutput};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Consecutive failures after which a provider is put aside.
pub const FAILURES_BEFORE_COOLDOWN: u32 = 2;
/// How long a provider that keeps failing is skipped.
pub const COOLDOWN: Duration = Duration::from_secs(5 * 60);
/// Redirects a provider's answer may take, each judged by the egress guard.
pub const MAX_REDIRECTS: usize = 5;
/// Time limit of one provider request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time limit of one call (`tools.web_search.timeout_secs` overrides).
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;
pub const DEFAULT_MAX_RESULTS: u64 = 5;
pub const MAX_RESULTS_CAP: u64 = 20;
/// Longest snippet shown, in characters.
const MAX_SNIPPET_CHARS: usize = 400;

/// One search result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub title: String,
    pub url: String,
    pub snippet: String,
}

/// The hits of a JSON answer whose `results` list holds `{title, url, content}` objects (Tavily,
/// SearXNG): entries without a URL are dropped, text goes through `clean`, at most `max` kept.
pub(super) fn hits_from_results(
    v: &Value,
    max: usize,
    clean: fn(&str) -> String,
) -> Result<Vec<Hit>, ProviderFailure> {
    let results = v
        .get("results")
        .and_then(Value::as_array)
        .ok_or_else(|| ProviderFailure::new("the answer has no `results` list"))?;
    Ok(results
        .iter()
        .filter_map(|r| {
            let url = r.get("url").and_then(Value::as_str)?.trim().to_string();
            if url.is_empty() {
                return None;
            }
            let s = |k: &str| clean(r.get(k).and_then(Value::as_str).unwrap_or(""));
            Some(Hit {
                title: s("title"),
                url,
                snippet: s("content"),
            })
        })
        .take(max)
        .collect())
}

/// Why a provider request failed (the text follows the provider's name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderFailure {
    pub message: String,
}

impl ProviderFailure {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// A setting that is wrong (a bad `base_url`).
    pub fn config(message: String) -> Self {
        Self::new(message)
    }

    /// A request the egress guard refused or that failed, phrased for the model.
    pub fn egress(e: &ethan_egress::EgressError, timeout: Duration) -> Self {
        match e {
            ethan_egress::EgressError::Refused(r) => Self::new(format!("refused: {r}")),
            ethan_egress::EgressError::Http(e) => Self::request(e, timeout),
        }
    }

    /// A `reqwest` error, phrased for the model.
    pub fn request(e: &reqwest::Error, timeout: Duration) -> Self {
        if e.is_timeout() {
            return Self::new(format!("timed out after {} s", timeout.as_secs().max(1)));
        }
        if e.is_connect() {
            return Self::new(format!("cannot connect ({})", root_cause(e)));
        }
        Self::new(root_cause(e))
    }
}

fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = s.to_string();
        if !msg.contains(&t) {
            msg = format!("{msg}: {t}");
        }
        cur = s.source();
    }
    msg
}

/// The provider's name as users know it.
pub fn provider_name(p: SearchProvider) -> &'static str {
    match p {
        SearchProvider::Duckduckgo => "DuckDuckGo",
        SearchProvider::Tavily => "Tavily",
        SearchProvider::Searxng => "SearXNG",
    }
}

/// A provider ready to be asked: which one, where, with what key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub provider: SearchProvider,
    pub base_url: String,
    api_key: String,
}

/// The providers to try, in order: each either usable or with the reason it is not.
pub fn provider_chain(
    cfg: &WebSearchConfig,
    searxng_env: Option<&str>,
) -> Vec<(SearchProvider, Result<Endpoint, String>)> {
    let env = searxng_env.map(str::trim).filter(|e| !e.is_empty());
    // `SEARXNG_BASE_URL` is merged into the config as the default of searxng.base_url, so a
    // base URL equal to it did not come from the file.
    let env_switch = env.filter(|e| {
        let b = cfg.searxng.base_url.trim();
        b.is_empty() || b == *e
    });
    let mut order = Vec::new();
    if env_switch.is_some() {
        order.push(SearchProvider::Searxng);
    }
    order.push(cfg.provider);
    order.extend(cfg.fallback.iter().copied());
    let mut seen = Vec::new();
    order.retain(|p| {
        let new = !seen.contains(p);
        seen.push(*p);
        new
    });
    order
        .into_iter()
        .map(|p| {
            let ep = match p {
                SearchProvider::Duckduckgo => Ok(Endpoint {
                    provider: p,
                    base_url: non_empty(&cfg.duckduckgo.base_url)
                        .unwrap_or(duckduckgo::DEFAULT_BASE_URL)
                        .to_string(),
                    api_key: String::new(),
                }),
                SearchProvider::Tavily => {
                    let key = cfg.tavily.api_key.expose().trim().to_string();
                    if key.is_empty() {
                        Err("no API key (set tools.web_search.tavily.api_key)".to_string())
                    } else {
                        Ok(Endpoint {
                            provider: p,
                            base_url: non_empty(&cfg.tavily.base_url)
                                .unwrap_or(tavily::DEFAULT_BASE_URL)
                                .to_string(),
                            api_key: key,
                        })
                    }
                }
                SearchProvider::Searxng => match non_empty(&cfg.searxng.base_url).or(env_switch) {
                    Some(b) => Ok(Endpoint {
                        provider: p,
                        base_url: b.to_string(),
                        api_key: String::new(),
                    }),
                    None => Err("no instance configured (set \
                                     tools.web_search.searxng.base_url or SEARXNG_BASE_URL)"
                        .to_string()),
                },
            };
            (p, ep)
        })
        .collect()
}

fn non_empty(s: &str) -> Option<&str> {
    Some(s.trim()).filter(|s| !s.is_empty())
}

/// Where the settings come from.
enum Settings {
    Fixed(Box<WebSearchConfig>),
    Watched(Arc<dyn LiveSettings>),
}

impl Settings {
    fn current(&self) -> WebSearchConfig {
        match self {
            Settings::Fixed(c) => (**c).clone(),
            Settings::Watched(w) => w.web_search(),
        }
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Health {
    failures: u32,
    until: Option<Instant>,
}

/// The `web_search` tool.
pub struct WebSearch {
    settings: Settings,
    /// One client per provider base URL, each allowed to reach that configured endpoint.
    clients: Mutex<HashMap<String, ethan_egress::EgressClient>>,
    guard: ethan_egress::EgressGuard,
    health: Mutex<HashMap<(&'static str, String), Health>>,
    failures_before_cooldown: u32,
    cooldown: Duration,
    request_timeout: Duration,
    decl: ToolDecl,
    /// `SEARXNG_BASE_URL`, read at construction (tests set it explicitly).
    searxng_env: Option<String>,
}

impl WebSearch {
    /// A tool with fixed settings.
    pub fn new(cfg: WebSearchConfig) -> Self {
        Self::build(Settings::Fixed(Box::new(cfg.clone())), &cfg)
    }

    /// A tool that reads `tools.web_search` from the config file at every call (changes apply
    /// without a restart).
    pub fn watching(watch: Arc<dyn LiveSettings>) -> Self {
        let cfg = watch.web_search();
        Self::build(Settings::Watched(watch), &cfg)
    }

    /// The tool whose requests pass a guard of the daemon's `egress` (see [`ethan_egress::shared`]).
    pub fn within(mut self, egress: &ethan_egress::Egress) -> Self {
        self.guard = egress.guard(&[], Arc::new(ethan_egress::SystemLookup));
        self
    }

    fn build(settings: Settings, cfg: &WebSearchConfig) -> Self {
        let timeout = Duration::from_secs(cfg.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS).max(1));
        Self {
            settings,
            clients: Mutex::new(HashMap::new()),
            guard: ethan_egress::EgressGuard::new(&[], Arc::new(ethan_egress::SystemLookup)),
            health: Mutex::new(HashMap::new()),
            failures_before_cooldown: FAILURES_BEFORE_COOLDOWN,
            cooldown: COOLDOWN,
            request_timeout: REQUEST_TIMEOUT,
            decl: declaration()
                .timeout(timeout)
                .max_retries(cfg.max_retries.unwrap_or(1)),
            searxng_env: std::env::var("SEARXNG_BASE_URL").ok(),
        }
    }

    /// Change the cooldown policy (tests).
    pub fn with_cooldown(mut self, failures: u32, cooldown: Duration) -> Self {
        self.failures_before_cooldown = failures.max(1);
        self.cooldown = cooldown;
        self
    }

    /// Change the per-request time limit (tests).
    pub fn with_request_timeout(mut self, t: Duration) -> Self {
        self.request_timeout = t;
        self
    }

    /// Override `SEARXNG_BASE_URL` as read from the environment (tests).
    pub fn with_searxng_env(mut self, value: Option<&str>) -> Self {
        self.searxng_env = value.map(str::to_string);
        self
    }

    fn health(&self) -> std::sync::MutexGuard<'_, HashMap<(&'static str, String), Health>> {
        match self.health.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    fn cooling(&self, ep: &Endpoint, now: Instant) -> bool {
        self.health()
            .get(&(provider_name(ep.provider), ep.base_url.clone()))
            .and_then(|h| h.until)
            .is_some_and(|u| u > now)
    }

    fn record(&self, ep: &Endpoint, ok: bool) {
        let mut h = self.health();
        let e = h
            .entry((provider_name(ep.provider), ep.base_url.clone()))
            .or_default();
        if ok {
            *e = Health::default();
        } else {
            e.failures += 1;
            if e.failures >= self.failures_before_cooldown {
                e.until = Some(Instant::now() + self.cooldown);
                tracing::warn!(
                    "web_search: {} ({}) failed {} times in a row; skipping it for {} s",
                    provider_name(ep.provider),
                    ep.base_url,
                    e.failures,
                    self.cooldown.as_secs()
                );
            }
        }
    }

    /// The client for `ep`: it reaches the provider's configured base URL (even on a private
    /// address: the owner wrote it there), and otherwise what the egress guard allows.
    fn client_for(&self, ep: &Endpoint) -> Result<ethan_egress::EgressClient, ProviderFailure> {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = clients.get(&ep.base_url) {
            return Ok(c.clone());
        }
        let c = ethan_egress::EgressClient::following(
            &self.guard,
            ethan_egress::Route::WebSearch,
            ethan_egress::Endpoint::all_of([ep.base_url.as_str()]),
            MAX_REDIRECTS,
            |b| {
                b.user_agent(concat!("Ethan/", env!("CARGO_PKG_VERSION")))
                    .connect_timeout(Duration::from_secs(5))
            },
        )
        .map_err(ProviderFailure::new)?;
        clients.insert(ep.base_url.clone(), c.clone());
        Ok(c)
    }

    async fn ask(
        &self,
        ep: &Endpoint,
        query: &str,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<Hit>, ProviderFailure> {
        let client = &self.client_for(ep)?;
        match ep.provider {
            SearchProvider::Duckduckgo => {
                duckduckgo::search(client, &ep.base_url, query, max, timeout).await
            }
            SearchProvider::Tavily => {
                tavily::search(client, &ep.base_url, &ep.api_key, query, max, timeout).await
            }
            SearchProvider::Searxng => {
                searxng::search(client, &ep.base_url, query, max, timeout).await
            }
        }
    }
}

fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max).collect();
    out.push('…');
    out
}

/// What `web_search` declares (the configured limits are set by its constructor).
fn declaration() -> ToolDecl {
    ToolDecl::new(
        "web_search",
        {

            "Search the web. Returns the title, URL and a snippet of each result; use web_fetch to \
             read a page."
    },
        {

            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to search for"},
                    "max_results": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS_CAP, "description": "Number of results; default 5"}
                },
                "required": ["query"],
                "additionalProperties": false
            })
    },
    )
    .risk(Risk::ReadOnly)
    // Search results are the web's, not the owner's.
    .not_private()
}

#[async_trait]
impl Tool for WebSearch {
    fn decl(&self) -> &ToolDecl {
        &self.decl
    }
    fn describe(&self, args: &Value, ctx: &ToolContext) -> CallPlan {
        CallPlan {
            egress: self.egress(args, ctx),
            ..CallPlan::of(self.decl(), args)
        }
    }
    async fn run(&self, args: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let query = match req_str(&args, "query") {
            Ok(q) => q.trim().to_string(),
            Err(e) => return Err(e),
        };
        if query.is_empty() {
            return Err(ToolError::new(
                ErrorKind::Validation,
                "argument `query` is empty",
            ));
        }
        let max = match opt_u64(&args, "max_results") {
            Ok(n) => n.unwrap_or(DEFAULT_MAX_RESULTS).clamp(1, MAX_RESULTS_CAP) as usize,
            Err(e) => return Err(e),
        };
        let started = Instant::now();
        // Answer before the executor's limit, so the model reads which providers failed.
        let deadline = started + self.decl.timeout.saturating_sub(Duration::from_millis(500));
        let cfg = self.settings.current();
        let chain = provider_chain(&cfg, self.searxng_env.as_deref());
        let now = Instant::now();
        let mut unavailable = Vec::new();
        let (mut ready, mut cooling) = (Vec::new(), Vec::new());
        for (p, ep) in chain {
            match ep {
                Ok(ep) if self.cooling(&ep, now) => cooling.push(ep),
                Ok(ep) => ready.push(ep),
                Err(why) => unavailable.push(format!("{}: {why}", provider_name(p))),
            }
        }
        let skipped: Vec<&'static str> =
            cooling.iter().map(|e| provider_name(e.provider)).collect();
        ready.append(&mut cooling);
        let mut failed: Vec<String> = Vec::new();
        for ep in &ready {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                failed.push(format!(
                    "{}: not tried, no time left",
                    provider_name(ep.provider)
                ));
                continue;
            }
            let timeout = self.request_timeout.min(left);
            match self.ask(ep, &query, max, timeout).await {
                Ok(hits) => {
                    self.record(ep, true);
                    return render(&query, ep.provider, &hits, &failed, &skipped);
                }
                Err(f) => {
                    self.record(ep, false);
                    failed.push(format!("{}: {}", provider_name(ep.provider), f.message));
                }
            }
        }
        let mut reasons = failed;
        reasons.extend(unavailable);
        let msg = if reasons.is_empty() {
            "no search provider is configured (tools.web_search.provider)".to_string()
        } else {
            format!("web search failed — {}", reasons.join("; "))
        };
        Err(ToolError::new(ErrorKind::Dependency, msg).with_metadata(json!({"failed": reasons})))
    }
}

impl WebSearch {
    /// The query leaves for the configured providers (their base URLs, in order); a session
    /// approval covers web searches through those providers.
    fn egress(&self, args: &Value, _ctx: &ToolContext) -> Option<crate::Egress> {
        let query = args.get("query").and_then(Value::as_str)?;
        let cfg = self.settings.current();
        let sent_to: Vec<String> = provider_chain(&cfg, self.searxng_env.as_deref())
            .into_iter()
            .filter_map(|(_, ep)| ep.ok())
            .map(|ep| ep.base_url)
            .collect();
        Some(crate::Egress {
            destination: format!("web search for {query:?}, sent to {}", sent_to.join(", ")),
            scope: format!("egress:search:{}", sent_to.join(",")),
        })
    }
}

fn render(
    query: &str,
    provider: SearchProvider,
    hits: &[Hit],
    failed: &[String],
    skipped: &[&str],
) -> Result<ToolOutput, ToolError> {
    let name = provider_name(provider);
    let mut out = String::new();
    if !failed.is_empty() {
        out.push_str(&format!(
            "({}; results from {name} instead)\n",
            failed.join("; ")
        ));
    }
    if hits.is_empty() {
        out.push_str(&format!("No results for \"{query}\" ({name})."));
    } else {
        out.push_str(&format!("Results for \"{query}\" ({name}):\n"));
        for (i, h) in hits.iter().enumerate() {
            let title = if h.title.is_empty() { &h.url } else { &h.title };
            out.push_str(&format!("\n{}. {}\n   {}\n", i + 1, title, h.url));
            if !h.snippet.is_empty() {
                out.push_str(&format!("   {}\n", cut(&h.snippet, MAX_SNIPPET_CHARS)));
            }
        }
        out.pop();
    }
    let meta = json!({
        "provider": name,
        "results": hits.len(),
        "failed": failed,
        "skipped": skipped,
        "urls": hits.iter().map(|h| h.url.as_str()).collect::<Vec<_>>(),
    });
    Ok(ToolOutput::new(out).with_metadata(meta))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ethan_core::secret::Secret;

    fn names(c: &[(SearchProvider, Result<Endpoint, String>)]) -> Vec<SearchProvider> {
        c.iter().map(|(p, _)| *p).collect()
    }

    #[test]
    fn chain_order_and_availability() {
        use SearchProvider::*;
        let mut cfg = WebSearchConfig {
            provider: Tavily,
            fallback: vec![Searxng, Duckduckgo, Tavily],
            ..Default::default()
        };
        let c = provider_chain(&cfg, None);
        assert_eq!(names(&c), [Tavily, Searxng, Duckduckgo]);
        assert!(c[0].1.as_ref().unwrap_err().contains("api_key"));
        assert!(c[1].1.as_ref().unwrap_err().contains("SEARXNG_BASE_URL"));
        assert_eq!(
            c[2].1.as_ref().unwrap().base_url,
            duckduckgo::DEFAULT_BASE_URL
        );
        cfg.tavily.api_key = Secret::new("tvly-x");
        assert!(provider_chain(&cfg, None)[0].1.is_ok());
    }

    #[test]
    fn searxng_env_switches_when_the_file_sets_no_base_url() {
        use SearchProvider::*;
        let cfg = WebSearchConfig::default();
        let c = provider_chain(&cfg, Some("http://sx.local"));
        assert_eq!(names(&c), [Searxng, Duckduckgo]);
        assert_eq!(c[0].1.as_ref().unwrap().base_url, "http://sx.local");
        // As merged by config::load (the variable is the default of searxng.base_url).
        let mut merged = WebSearchConfig::default();
        merged.searxng.base_url = "http://sx.local".into();
        assert_eq!(
            names(&provider_chain(&merged, Some("http://sx.local"))),
            [Searxng, Duckduckgo]
        );
        // The file names its own instance: the configured provider stays first.
        let mut own = WebSearchConfig::default();
        own.searxng.base_url = "http://mine.local".into();
        assert_eq!(
            names(&provider_chain(&own, Some("http://sx.local"))),
            [Duckduckgo]
        );
        assert_eq!(names(&provider_chain(&cfg, Some("  "))), [Duckduckgo]);
    }
}
