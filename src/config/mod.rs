//! Configuration: where it lives, how it is read, and what is refused.
//!
//! Sources, lowest precedence first: built-in defaults; the well-known environment variables
//! `TELEGRAM_BOT_TOKEN`, `LARK_APP_ID`, `LARK_APP_SECRET`, `SEARXNG_BASE_URL`; the YAML file (`--config PATH`, else `ETHAN_CONFIG`, else
//! `$ETHAN_HOME/config.yaml`, `ETHAN_HOME` defaulting to `~/.ethan`); `ETHAN__SECTION__KEY`
//! overrides (double underscores separate levels: `ETHAN__MODEL__NAME`,
//! `ETHAN__CHANNELS__TELEGRAM__DM_POLICY`). Read with the `config` crate, then deserialised into
//! the typed [`Config`] with the failing key's path in every error. Keys are those of docs/configuration.md;
//! unknown keys and bad values stop the start. A model endpoint (`model`, each
//! `model.fallback` entry) left without `base_url` or `api_key` takes its provider's variables
//! (`OPENAI_BASE_URL`/`OPENAI_API_KEY`, `ANTHROPIC_BASE_URL`/`ANTHROPIC_API_KEY`), then the
//! provider's public endpoint.

mod channels;
pub mod origin;
pub mod problems;
mod types;
mod validate;
pub mod watch;

pub use channels::{lark_config, telegram_config};
pub use ethan_core::secret::Secret;
pub use problems::Problem;
pub use types::*;

use validate::validate_all;

use std::path::{Path, PathBuf};

/// A configuration error, always naming the key (or the file) at fault.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("config key `{key}`: {message}")]
    Key { key: String, message: String },
    #[error("cannot find the home directory; set ETHAN_HOME")]
    NoHome,
    /// Every problem found, in file order (then those from variables and defaults).
    #[error("{}", show_problems(.0))]
    Invalid(Vec<Problem>),
}

fn show_problems(p: &[Problem]) -> String {
    match p {
        [one] => one.to_string(),
        many => format!(
            "{} problems in the configuration:\n  {}",
            many.len(),
            many.iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join("\n  ")
        ),
    }
}

impl ConfigError {
    /// Each problem on its own (one for the variants other than [`ConfigError::Invalid`]).
    pub fn lines(&self) -> Vec<String> {
        match self {
            ConfigError::Invalid(p) => p.iter().map(|p| p.to_string()).collect(),
            other => vec![other.to_string()],
        }
    }
}

/// The loaded configuration and where it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: Config,
    /// `$ETHAN_HOME`: config, database, `knowledge/`, `spill/`, `workspace/`.
    pub home: PathBuf,
    /// The config file path that was looked at.
    pub path: PathBuf,
    /// Whether that file existed.
    pub file_found: bool,
    /// One line per key that is accepted but has no effect in this version.
    pub notices: Vec<String>,
}

impl Loaded {
    /// `$ETHAN_HOME/ethan.db`.
    pub fn db_path(&self) -> PathBuf {
        self.home.join("ethan.db")
    }

    /// `$ETHAN_HOME/spill`: full outputs of tool calls cut for the model.
    pub fn spill_dir(&self) -> PathBuf {
        self.home.join("spill")
    }

    /// `tools.workspace`, default `$ETHAN_HOME/workspace`.
    /// `tools.workspace`, by default `$ETHAN_HOME/workspace`. `$ETHAN_HOME` itself is never a
    /// workspace (all of it is the daemon's and hidden from tools: its config, database,
    /// history, skills…): named as one, its `workspace` folder is used instead, with a notice.
    pub fn workspace(&self) -> PathBuf {
        if self.config.tools.workspace.trim().is_empty() || self.workspace_is_home() {
            self.home.join("workspace")
        } else {
            PathBuf::from(&self.config.tools.workspace)
        }
    }

    /// Whether `tools.workspace` names `$ETHAN_HOME` itself.
    fn workspace_is_home(&self) -> bool {
        let named = self.config.tools.workspace.trim();
        if named.is_empty() {
            return false;
        }
        let named = Path::new(named);
        match (named.canonicalize(), self.home.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => named.components().eq(self.home.components()),
        }
    }

    /// Every non-empty secret value of the config, for redaction in logs and audit entries.
    pub fn secret_values(&self) -> Vec<String> {
        secret_values(&self.config)
    }
}

/// Every non-empty secret value of `c`.
pub fn secret_values(c: &Config) -> Vec<String> {
    let t = &c.channels.telegram;
    let l = &c.channels.lark;
    let fallback_keys = c.model.fallback.iter().map(|f| &f.api_key);
    [
        &c.model.api_key,
        &t.token,
        &t.webhook_secret,
        &l.app_secret,
        &l.encrypt_key,
        &l.verification_token,
        &l.user_access_token,
        &l.user_refresh_token,
        &c.tools.web_search.tavily.api_key,
        &c.knowledge.embeddings.api_key,
        &c.media.transcription.api_key,
        &c.gateway.token,
        &c.store.url,
    ]
    .into_iter()
    .chain(fallback_keys)
    .chain(c.mcp.servers.values().flat_map(|s| {
        s.env
            .iter()
            .chain(s.headers.iter())
            .filter(|(name, value)| mcp_value_is_secret(name, value))
            .map(|(_, value)| value)
    }))
    .filter(|s| !s.is_empty())
    .map(|s| s.expose().to_string())
    // A header such as `Authorization: Bearer <token>` also hides the token on its own.
    .flat_map(|v| {
        let token = v
            .split_once(' ')
            .map(|(_, t)| t.trim().to_string())
            .filter(|t| t.len() >= 8);
        // A URL's password (`store.url`) also hides on its own, as written and decoded.
        let password = url_password(&v);
        std::iter::once(v).chain(token).chain(password)
    })
    .collect()
}

/// The password of a URL such as `postgres://user:password@host/db`, percent-encoded as written
/// and decoded; none when shorter than 6 characters (too short to hide without blanking out
/// ordinary text).
fn url_password(v: &str) -> Vec<String> {
    let Some(raw) = reqwest::Url::parse(v)
        .ok()
        .and_then(|u| u.password().map(str::to_owned))
    else {
        return Vec::new();
    };
    let decoded = percent_decode(&raw);
    let mut out = vec![raw];
    if decoded != out[0] {
        out.push(decoded);
    }
    out.retain(|p| p.chars().count() >= 6);
    out
}

/// `%XX` sequences decoded (invalid ones kept as written).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).and_then(|c| hex(*c)),
            b.get(i + 2).and_then(|c| hex(*c)),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether an MCP server's `env` or header value counts as a secret: its name says it holds
/// one (key, token, secret, password, auth, credential, cookie), or it is long enough (20+
/// characters) to be a credential. A short plain setting (`NODE_ENV: production`, `PORT: 3000`,
/// `Accept: application/json`) is not one: it is not hidden from logs or from tools' output.
pub fn mcp_value_is_secret(name: &str, value: &Secret) -> bool {
    let name = name.to_ascii_lowercase();
    let named = [
        "key",
        "token",
        "secret",
        "password",
        "passwd",
        "auth",
        "credential",
        "cookie",
    ]
    .iter()
    .any(|w| name.contains(w));
    named || value.expose().trim().chars().count() >= 20
}

/// Where to look: `--config` if given.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    pub config_path: Option<PathBuf>,
}

/// `ETHAN_HOME`, else `~/.ethan`.
pub fn home_dir() -> Result<PathBuf, ConfigError> {
    if let Some(h) = std::env::var_os("ETHAN_HOME").filter(|h| !h.is_empty()) {
        return Ok(PathBuf::from(h));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".ethan"))
        .ok_or(ConfigError::NoHome)
}

const LIST_KEYS: &[&str] = &[
    "owners",
    "channels.telegram.allow_from",
    "channels.telegram.groups",
    "channels.lark.allow_from",
    "channels.lark.groups",
    "tools.allow",
    "tools.also_allow",
    "tools.deny",
    "tools.fast_path",
    "tools.web_search.fallback",
    "tools.web_fetch.allow_private",
];

/// A check of a read configuration that this module cannot make itself (the tool names: the
/// tool registry depends on the configuration): each problem as its key path and what is
/// wrong, e.g. `("tools.deny[1]", "no tool named \"shel\" …")`.
pub type ExtraCheck = fn(&Config) -> Vec<(String, String)>;

/// Read, merge and check the configuration. Errors: the file missing (when named), a directory,
/// unreadable, or not YAML ([`ConfigError::File`]); else every problem at once, in file order,
/// each naming the line or the variable its value came from ([`ConfigError::Invalid`]).
pub fn load(opts: &LoadOptions) -> Result<Loaded, ConfigError> {
    load_checked(opts, |_| Vec::new())
}

/// [`load`], with the problems `extra` finds in what was read reported in the same run, each
/// with its line, among the others.
pub fn load_checked(opts: &LoadOptions, extra: ExtraCheck) -> Result<Loaded, ConfigError> {
    let home = home_dir()?;
    let (path, explicit) = match (&opts.config_path, std::env::var_os("ETHAN_CONFIG")) {
        (Some(p), _) => (p.clone(), true),
        (None, Some(p)) if !p.is_empty() => (PathBuf::from(p), true),
        _ => (home.join("config.yaml"), false),
    };
    let text = read_file(&path, explicit)?;
    let file_found = text.is_some();
    let lines = match &text {
        Some(t) => {
            Some(
                origin::FileLines::parse(t).map_err(|(line, message)| ConfigError::File {
                    path: path.clone(),
                    message: format!("line {line}: {message}"),
                })?,
            )
        }
        None => None,
    };
    let raw = read_raw(&path, text.as_deref())?;
    let (config, mut problems) = from_value_all(raw.clone());
    problems.extend(validate_all(&config).into_iter().map(to_problem));
    problems.extend(
        extra(&config)
            .into_iter()
            .map(|(key, message)| Problem::new(problems::parse_key(&key), message)),
    );
    if !problems.is_empty() {
        return Err(ConfigError::Invalid(locate(
            problems,
            lines.as_ref(),
            &path,
        )));
    }
    let mut notices = notices(&raw);
    notices.extend(origin::env_warnings());
    let mut loaded = Loaded {
        notices,
        config,
        home,
        path,
        file_found,
    };
    if loaded.workspace_is_home() {
        loaded.notices.push(format!(
            "tools.workspace is Ethan's home itself, which stays hidden from tools; using {} \
             instead",
            loaded.workspace().display()
        ));
    }
    Ok(loaded)
}

/// The file's text; `None` when it does not exist and was not named. A directory, a file that
/// cannot be read, and a missing file are told apart.
fn read_file(path: &Path, explicit: bool) -> Result<Option<String>, ConfigError> {
    let err = |message: String| ConfigError::File {
        path: path.to_path_buf(),
        message,
    };
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if explicit {
                Err(err(
                    "not found (`ethan init` writes one; see README.md)".into()
                ))
            } else {
                Ok(None)
            }
        }
        Err(e) => Err(err(format!("cannot be read: {e}"))),
        Ok(m) if m.is_dir() => Err(err(format!(
            "is a directory; give the YAML file itself (e.g. {})",
            path.join("config.yaml").display()
        ))),
        Ok(_) => std::fs::read_to_string(path)
            .map(Some)
            .map_err(|e| err(format!("cannot be read: {e}"))),
    }
}

/// Each problem with where its value came from, in file order; those from variables and
/// defaults after them.
fn locate(
    mut problems: Vec<Problem>,
    lines: Option<&origin::FileLines>,
    path: &Path,
) -> Vec<Problem> {
    let shown = path.display().to_string();
    for p in &mut problems {
        p.source = origin::source_of(&p.segs, lines, &shown);
        if p.source.as_deref().is_some_and(|s| s.starts_with(&shown)) {
            p.line = lines.and_then(|l| l.line_of(&p.segs));
        }
    }
    ethan_core::sort::sort_by_key(&mut problems, |p| (p.line.is_none(), p.line));
    problems
}

fn to_problem(e: ConfigError) -> Problem {
    match e {
        ConfigError::Key { key, message } => Problem::new(problems::parse_key(&key), message),
        other => Problem::new(Vec::new(), other.to_string()),
    }
}

fn read_raw(path: &Path, text: Option<&str>) -> Result<serde_json::Value, ConfigError> {
    let file_err = |message: String| ConfigError::File {
        path: path.to_path_buf(),
        message,
    };
    let mut b = config::Config::builder();
    for (var, key) in origin::WELL_KNOWN_VARS {
        if let Ok(v) = std::env::var(var) {
            if !v.is_empty() {
                b = b
                    .set_default(*key, v)
                    .map_err(|e| file_err(e.to_string()))?;
            }
        }
    }
    if let Some(text) = text {
        b = b.add_source(config::File::from_str(text, config::FileFormat::Yaml));
    }
    let mut env = config::Environment::with_prefix("ETHAN")
        .prefix_separator("__")
        .separator("__")
        .try_parsing(true)
        .list_separator(",");
    for k in LIST_KEYS {
        env = env.with_list_parse_key(k);
    }
    b = b.add_source(env);
    let built = b.build().map_err(|e| file_err(e.to_string()))?;
    let mut raw: serde_json::Value = built
        .try_deserialize()
        .map_err(|e| file_err(e.to_string()))?;
    strip_nulls(&mut raw);
    Ok(raw)
}

/// An empty YAML value (`token:`) means "use the default".
fn strip_nulls(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(strip_nulls);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// Deserialise; every problem (with its key's path) in the error.
pub fn from_value(raw: serde_json::Value) -> Result<Config, ConfigError> {
    match from_value_all(raw) {
        (c, p) if p.is_empty() => Ok(c),
        (_, p) => Err(ConfigError::Invalid(p)),
    }
}

/// The config read from `raw` with every bad value left at its default, and the problems.
fn from_value_all(mut raw: serde_json::Value) -> (Config, Vec<Problem>) {
    use origin::Seg;
    let mut problems = Vec::new();
    problems::refuse_misshapen_sections(&mut raw, &mut problems);
    // `tools.<name>` sections are read apart, so their errors name `tools.<name>.<key>`.
    let mut per_tool = std::collections::BTreeMap::new();
    if let Some(tools) = raw.get_mut("tools").and_then(|t| t.as_object_mut()) {
        let names: Vec<String> = tools
            .keys()
            .filter(|k| !TOOLS_SECTION_KEYS.contains(&k.as_str()))
            .cloned()
            .collect();
        for name in names {
            let v = tools.remove(&name).unwrap_or_default();
            let prefix = [Seg::Key("tools".into()), Seg::Key(name.clone())];
            let o: ToolOverride = problems::deserialize_all(v, &prefix, &mut problems);
            per_tool.insert(name, o);
        }
    }
    let mut config: Config = problems::deserialize_all(raw, &[], &mut problems);
    config.tools.per_tool = per_tool;
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let m = &mut config.model;
    fill_endpoint(m.provider, &mut m.base_url, &mut m.api_key, true, env);
    for f in &mut m.fallback {
        fill_endpoint(f.provider, &mut f.base_url, &mut f.api_key, false, env);
    }
    (config, problems)
}

/// An empty `base_url` / `api_key` of a model endpoint from the provider's variables
/// (`OPENAI_BASE_URL` / `OPENAI_API_KEY`, `ANTHROPIC_BASE_URL` / `ANTHROPIC_API_KEY`), an
/// empty `base_url` without its variable from the provider's public endpoint.
///
/// The primary (`primary`) takes the key variable whatever its `base_url` (the variables are
/// meant for it). A fallback entry takes it only when its `base_url` is the one the variables
/// go with (empty, the provider's public endpoint, or `*_BASE_URL`): an entry pointing at
/// another host (a local server, another vendor) never receives the key meant for the provider.
fn fill_endpoint(
    provider: ProviderKind,
    base_url: &mut String,
    api_key: &mut Secret,
    primary: bool,
    env: impl Fn(&str) -> Option<String>,
) {
    let (key_var, url_var) = provider.env_vars();
    let env_url = env(url_var);
    let same = |a: &str, b: &str| a.trim().trim_end_matches('/') == b.trim().trim_end_matches('/');
    let keyed_host = base_url.trim().is_empty()
        || same(base_url, provider.default_base_url())
        || env_url.as_deref().is_some_and(|u| same(base_url, u));
    if base_url.trim().is_empty() {
        *base_url = env_url.unwrap_or_else(|| provider.default_base_url().to_string());
    }
    if api_key.is_empty() && (primary || keyed_host) {
        if let Some(k) = env(key_var) {
            *api_key = Secret::new(k);
        }
    }
}

fn key_err(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Key {
        key: key.into(),
        message: message.into(),
    }
}

fn check_url(key: &str, v: &str, allow_empty: bool) -> Result<(), ConfigError> {
    if v.is_empty() && allow_empty {
        return Ok(());
    }
    match reqwest::Url::parse(v) {
        Ok(u) if u.scheme() == "http" || u.scheme() == "https" => Ok(()),
        Ok(_) => Err(key_err(key, format!("{v:?} must be an http(s) URL"))),
        Err(e) => Err(key_err(key, format!("{v:?} is not a URL: {e}"))),
    }
}

/// `store.url` is empty or a PostgreSQL URL; `store.lease_secs` is 5..=3600.
fn check_store(s: &types::StoreConfig) -> Result<(), ConfigError> {
    let url = s.url.expose().trim();
    if !url.is_empty() {
        // Never echo the URL: it may hold a password.
        if !s.is_postgres() {
            return Err(key_err(
                "store.url",
                "must be empty (the SQLite file in $ETHAN_HOME) or a postgres:// URL",
            ));
        }
        if let Err(e) = reqwest::Url::parse(url) {
            return Err(key_err(
                "store.url",
                format!("is not a valid postgres:// URL: {e}"),
            ));
        }
    }
    if !(5..=3600).contains(&s.lease_secs) {
        return Err(key_err(
            "store.lease_secs",
            "must be between 5 and 3600 seconds",
        ));
    }
    Ok(())
}

/// Checks that serde cannot express; the first failing one (tests).
#[cfg(test)]
fn validate(c: &Config) -> Result<(), ConfigError> {
    match validate_all(c).into_iter().next() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Keys accepted now whose feature comes in a later version: (key prefix, what is missing).
/// Every key of docs/configuration.md has its feature in this version; a key added to the contract before
/// its feature lands goes here with a one-line notice.
const LATER: &[(&str, &str)] = &[];

fn flatten_keys(prefix: &str, v: &serde_json::Value, out: &mut Vec<String>) {
    if let serde_json::Value::Object(m) = v {
        for (k, v) in m {
            let key = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            if v.is_object() {
                flatten_keys(&key, v, out);
            } else {
                out.push(key);
            }
        }
    }
}

fn notices(raw: &serde_json::Value) -> Vec<String> {
    let mut keys = Vec::new();
    flatten_keys("", raw, &mut keys);
    let mut out: Vec<String> = Vec::new();
    for (prefix, feature) in LATER {
        let hits: Vec<&String> = keys
            .iter()
            .filter(|k| *k == prefix || k.starts_with(&format!("{prefix}.")))
            .collect();
        if !hits.is_empty() {
            out.push(format!(
                "config: {} accepted but ignored: {feature} is not in this version",
                hits.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests;
