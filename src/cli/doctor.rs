//! `ethan doctor`: one line per check (config, database, model endpoint, each channel), with what
//! to do when something is missing. Exit code 1 when any check fails.

use crate::config::Loaded;
use crate::config::{ModelConfig, ModelEndpoint};
use crate::consent::owners::Owners;
use crate::store::inbound::DEDUPE_WINDOW_SECS;
use crate::store::SharedStorage;
use crate::store::{DaemonStoreRef, OpenStore};
use ethan_channels::telegram::{TelegramChannel, TelegramConfig};
use ethan_channels::{Channel, ChannelKind};
use std::process::ExitCode;
use std::sync::Arc;

struct Report {
    failed: bool,
}

impl Report {
    fn ok(&self, what: &str, detail: impl AsRef<str>) {
        println!("ok    {what}: {}", detail.as_ref());
    }
    fn warn(&self, what: &str, detail: impl AsRef<str>) {
        println!("warn  {what}: {}", detail.as_ref());
    }
    fn fail(&mut self, what: &str, detail: impl AsRef<str>) {
        self.failed = true;
        println!("FAIL  {what}: {}", detail.as_ref());
    }
}

/// One line: the rows in each table that retention prunes, and how long each is kept.
async fn retention_line(r: &mut Report, loaded: &Loaded, store: &DaemonStoreRef) {
    let days = &loaded.config.retention;
    match store.retention_counts().await {
        Ok(n) => r.ok(
            "retention",
            format!(
                "{} inbound events and {} lark.seen keys (finished ones kept {} days), {} audit \
                 rows and {} replay keys (kept {} days)",
                n.inbound_events,
                n.lark_seen,
                i64::from(days.inbound_days).max(DEDUPE_WINDOW_SECS / 86_400),
                n.audit_rows,
                n.replay_keys,
                days.audit_days
            ),
        ),
        Err(e) => r.warn("retention", format!("cannot count rows: {e}")),
    }
}

pub async fn run(loaded: Arc<Loaded>) -> anyhow::Result<ExitCode> {
    let mut r = Report { failed: false };
    let c = &loaded.config;
    config_lines(&mut r, &loaded);

    let stores = crate::daemon::open_store::open(&loaded).await;
    let stores = store_check(&mut r, &loaded, stores).await;
    if let Some(stores) = &stores {
        retention_line(&mut r, &loaded, &stores.main).await;
        knowledge_check(&mut r, &loaded, stores).await;
    }

    sandbox_lines(&mut r, &loaded);

    for (i, ep) in c.model.endpoints().iter().enumerate() {
        let what = if i == 0 {
            "model".to_string()
        } else {
            format!("model.fallback[{}]", i - 1)
        };
        check_model(&mut r, &what, ep, &c.model).await;
    }

    telegram_check(&mut r, &loaded, stores.as_ref().map(|s| &s.main)).await;
    #[cfg(feature = "browser")]
    browser_line(&mut r, &c.tools.browser);
    lark_checks(&mut r, &loaded, stores.as_ref().map(|s| &s.main)).await;
    owners_line(&mut r, &loaded, stores.as_ref().map(|s| &s.main)).await;
    for (name, result) in crate::cli::mcp::check(&loaded).await {
        match result {
            Ok(n) => r.ok(&format!("mcp {name}"), format!("{n} tools")),
            Err(why) => r.fail(&format!("mcp {name}"), why),
        }
    }
    if c.channels.telegram.token.is_empty() && c.channels.lark.app_id.is_empty() {
        r.warn(
            "channels",
            "no chat channel is configured: `ethan run` serves only the HTTP gateway (`ethan chat` works without)",
        );
    }
    Ok(if r.failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Which config file was read, and what its loading noticed.
fn config_lines(r: &mut Report, loaded: &Loaded) {
    if loaded.file_found {
        r.ok("config", loaded.path.display().to_string());
    } else {
        r.warn(
            "config",
            format!(
                "{} not found; using defaults and environment variables",
                loaded.path.display()
            ),
        );
    }
    for n in &loaded.notices {
        r.warn("config", n);
    }
}

/// What the sandbox can enforce on this machine, and a protected file it cannot hide.
fn sandbox_lines(r: &mut Report, loaded: &Loaded) {
    let protection = protection(loaded);
    let probe = if loaded.file_found {
        loaded.path.clone()
    } else {
        loaded.db_path()
    };
    for line in crate::sandbox::doctor::report(&protection, &probe) {
        match line {
            Ok(line) => r.ok("sandbox", line),
            Err(line) => r.warn("sandbox", line),
        }
    }
    if let Some(f) = protection.linked_file() {
        r.warn(
            "sandbox",
            format!(
                "{} has a second name (a hard link) that the sandbox cannot hide; every shell \
                 command asks until it is removed (find it with `find / -samefile {}`)",
                f.display(),
                f.display()
            ),
        );
    }
}

/// The Telegram token (`getMe`), and whether anybody may talk to the bot in DMs.
async fn telegram_check(r: &mut Report, loaded: &Loaded, store: Option<&DaemonStoreRef>) {
    let c = &loaded.config;
    let tg = &c.channels.telegram;
    if tg.token.is_empty() {
        r.warn(
            "telegram",
            "not configured: set channels.telegram.token or TELEGRAM_BOT_TOKEN (a token from @BotFather)",
        );
    } else {
        match TelegramChannel::new(TelegramConfig {
            poll_timeout_secs: 1,
            webhook_url: None,
            ..crate::config::telegram_config(c)
        }) {
            Err(e) => r.fail("telegram", e.to_string()),
            Ok(ch) => match ch.probe().await {
                Ok(me) => r.ok("telegram", format!("getMe: {me}")),
                Err(e) => r.fail("telegram", e.to_string()),
            },
        }
        if !has_owner(loaded, store, ChannelKind::Telegram).await
            && tg.dm_policy != crate::config::DmPolicy::Open
            && tg.allow_from.is_empty()
        {
            r.warn(
                "telegram",
                "no owners and no allow_from: nobody may talk to the bot in DMs (add owners: [\"telegram:<your user id>\"])",
            );
        }
    }
}

/// Whether the browser tools find a Chromium they can drive.
#[cfg(feature = "browser")]
fn browser_line(r: &mut Report, browser: &crate::config::BrowserConfig) {
    match crate::tools::builtin::browser::hub::find_executable(browser) {
        Some(exe) => match crate::tools::builtin::browser::relay::version_check(&exe) {
            Ok(v) => r.ok(
                "browser",
                format!("{v} (browser_session, browser_tab, browser_page)"),
            ),
            Err(why) => r.warn("browser", why),
        },
        None => r.warn(
            "browser",
            "no Chromium found (tools.browser.executable, or chromium / chromium-browser / \
             google-chrome on PATH): the browser tools say so when called; install it with \
             `apt install chromium`",
        ),
    }
}

/// The places the sandbox protects, as the daemon would (the config file too, wherever it is).
fn protection(loaded: &Loaded) -> crate::sandbox::protected::Protection {
    let config_file = loaded.file_found.then_some(loaded.path.as_path());
    crate::sandbox::protected::Protection::new(Some(loaded.home.as_path()), &loaded.workspace())
        .and(&crate::sandbox::settings::protected_also(config_file))
}

/// The store line: backend, where, server version, schema version. Fails when the store cannot
/// be opened (unreachable, refused, a schema newer than this binary's).
async fn store_check(
    r: &mut Report,
    loaded: &Loaded,
    stores: anyhow::Result<OpenStore>,
) -> Option<OpenStore> {
    let stores = match stores {
        Ok(s) => s,
        Err(e) => {
            r.fail("store", format!("{e:#}"));
            return None;
        }
    };
    match stores.main.backend_info().await {
        Ok(i) if i.schema_version > i.binary_schema_version => {
            r.fail(
                "store",
                format!(
                    "{} {} has schema version {}, newer than this ethan knows ({}): use a newer \
                     ethan",
                    i.backend, i.location, i.schema_version, i.binary_schema_version
                ),
            );
            None
        }
        Ok(i) => {
            let connection = i
                .connection
                .as_deref()
                .map(|c| format!("; connection {c}"))
                .unwrap_or_default();
            r.ok(
                "store",
                format!(
                    "{} {} ({}), schema {}{connection}",
                    i.backend, i.location, i.server_version, i.schema_version
                ),
            );
            if let Some(host) = plaintext_remote(&loaded.config.store) {
                r.warn(
                    "store",
                    format!(
                        "the connection to {host} is not encrypted (chat contents and, with \
                         password authentication, the password cross the network in clear): \
                         add ?sslmode=verify-full&sslrootcert=CA.pem to store.url"
                    ),
                );
            }
            Some(stores)
        }
        Err(e) => {
            r.fail(
                "store",
                format!("{}: {e}", crate::daemon::open_store::describe(loaded)),
            );
            None
        }
    }
}

/// The host of a PostgreSQL `store.url` that is neither loopback nor a Unix socket and is
/// reached without TLS (no `sslmode`, `disable` or `allow`).
fn plaintext_remote(store: &crate::config::StoreConfig) -> Option<String> {
    if !store.is_postgres() {
        return None;
    }
    let url = reqwest::Url::parse(store.url.expose().trim()).ok()?;
    let tls = url.query_pairs().any(|(k, v)| {
        (k == "sslmode" && !matches!(&*v, "disable" | "allow")) || k == "sslrootcert"
    });
    let host = url.host_str().unwrap_or("").to_string();
    let local = host.is_empty()
        || host == "localhost"
        || host.starts_with('/')
        || host
            .trim_matches(|c| c == '[' || c == ']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    (!tls && !local).then_some(host)
}

/// The knowledge base: how many notes, and keyword-only or semantic search (probing the
/// embeddings endpoint when one is configured).
async fn knowledge_check(r: &mut Report, loaded: &Loaded, stores: &OpenStore) {
    use crate::knowledge::embed::Embedder;
    let c = &loaded.config.knowledge.embeddings;
    let dir = loaded.home.join("knowledge");
    let index = stores.index.clone();
    let counted =
        ethan_core::task::spawn_blocking(move || index.count().map(|n| (n, index.describe())))
            .await;
    let notes = match counted {
        Ok(Ok((n, what))) => format!("{n} indexed note(s) in {} (index: {what})", dir.display()),
        Ok(Err(e)) => format!("index unreadable ({e})"),
        Err(e) => format!("index unreadable ({e})"),
    };
    match Embedder::from_config(c) {
        None => r.ok(
            "knowledge",
            format!(
                "{notes}; keyword search only (set knowledge.embeddings.base_url, api_key and \
                 model for semantic search)"
            ),
        ),
        Some(e) => match e.embed(&["ethan doctor".to_string()]).await {
            Ok(v) => r.ok(
                "knowledge",
                format!(
                    "{notes}; semantic + keyword search ({} at {}, {} dimensions)",
                    e.model(),
                    e.url(),
                    v.first().map_or(0, Vec::len)
                ),
            ),
            Err(err) => r.fail(
                "knowledge",
                format!("{notes}; semantic search is configured but fails: {err}"),
            ),
        },
    }
}

fn when(unix: i64) -> String {
    chrono::DateTime::from_timestamp(unix, 0)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| unix.to_string())
}

/// Lark: credentials (a `tenant_access_token`), the bot identity (`/open-apis/bot/v3/info`),
/// webhook secrets, and whether events arrive (from `lark.started_at` / `lark.last_event_at`,
/// which `ethan run` keeps in the state store).
async fn lark_checks(r: &mut Report, loaded: &Loaded, store: Option<&DaemonStoreRef>) {
    use ethan_channels::lark::{LarkChannel, LAST_EVENT_AT_KEY, STARTED_AT_KEY};
    let c = &loaded.config;
    let lk = &c.channels.lark;
    let (has_id, has_secret) = (!lk.app_id.trim().is_empty(), !lk.app_secret.is_empty());
    if !has_id && !has_secret {
        r.warn(
            "lark",
            "not configured: set channels.lark.app_id and app_secret (or LARK_APP_ID / LARK_APP_SECRET) from a self-built app",
        );
        return;
    }
    if !(has_id && has_secret) {
        r.fail(
            "lark",
            "channels.lark.app_id and channels.lark.app_secret are both needed",
        );
        return;
    }
    if lk.mode == crate::config::LarkMode::Webhook
        && lk.encrypt_key.is_empty()
        && lk.verification_token.is_empty()
    {
        r.fail(
            "lark",
            "mode webhook needs channels.lark.encrypt_key or verification_token (Events & Callbacks page of the app)",
        );
    }
    let ch = match LarkChannel::new(crate::config::lark_config(c)) {
        Ok(ch) => ch,
        Err(e) => return r.fail("lark", e.to_string()),
    };
    match ch.api().tenant_access_token().await {
        Ok(_) => r.ok(
            "lark",
            format!(
                "tenant_access_token: ok (app {} at {})",
                lk.app_id.trim(),
                ch.api().base_url()
            ),
        ),
        Err(e) => return r.fail("lark", format!("tenant_access_token: {e}")),
    }
    match ch.probe().await {
        Ok(me) => r.ok("lark", format!("bot info: {me}")),
        Err(e) => r.fail(
            "lark",
            format!(
                "bot info: {e}. Enable the bot capability (Features → Bot) and publish a version of the app"
            ),
        ),
    }
    let kv = match store {
        Some(s) => {
            let get = |k: &'static str| {
                let s = s.clone();
                async move {
                    s.kv_get(k)
                        .await
                        .ok()
                        .flatten()
                        .and_then(|v| v.trim().parse::<i64>().ok())
                }
            };
            Some((get(STARTED_AT_KEY).await, get(LAST_EVENT_AT_KEY).await))
        }
        None => None,
    };
    match kv {
        Some((Some(started), last)) if last.is_none_or(|l| l < started) => r.warn(
            "lark",
            format!(
                "no event has arrived since the daemon started at {}. If you have messaged the bot, \
                 check that the app subscribes to the im.message.receive_v1 event (Events & Callbacks; \
                 \"receive events through persistent connection\" for mode: websocket), has the bot \
                 capability and the im:message scopes, and that a version with these settings is published",
                when(started)
            ),
        ),
        Some((Some(_), Some(last))) => r.ok("lark", format!("last event received at {}", when(last))),
        _ => {}
    }
    if !has_owner(loaded, store, ChannelKind::Lark).await
        && lk.dm_policy != crate::config::DmPolicy::Open
        && lk.allow_from.is_empty()
    {
        r.warn(
            "lark",
            "no owners and no allow_from: nobody may talk to the bot in DMs (add owners: [\"lark:<your open_id>\"])",
        );
    }
}

/// Whether anyone owns the bot on `channel`: an `owners:` entry, or an owner claimed or added
/// (in the store; without a store, the config alone).
async fn has_owner(loaded: &Loaded, store: Option<&DaemonStoreRef>, channel: ChannelKind) -> bool {
    match store {
        Some(s) => {
            Owners::new(&loaded.config, s.shared())
                .has_owner(channel)
                .await
        }
        None => loaded
            .config
            .owners
            .iter()
            .any(|o| o.starts_with(&format!("{}:", channel.as_str()))),
    }
}

/// One line: how many owners the bot has (from the config, claimed or added), or, for each chat
/// channel nobody owns, how to claim it.
async fn owners_line(r: &mut Report, loaded: &Loaded, store: Option<&DaemonStoreRef>) {
    let stored = match store {
        Some(s) => match s.list_owners().await {
            Ok(o) => o,
            Err(e) => return r.warn("owners", format!("cannot read the claimed owners: {e}")),
        },
        None => Vec::new(),
    };
    let configured = loaded.config.owners.len();
    let total = configured + stored.len();
    if total > 0 {
        let names: Vec<String> = loaded
            .config
            .owners
            .iter()
            .map(|o| format!("{o} (config)"))
            .chain(
                stored
                    .iter()
                    .map(|(c, id, source, _)| format!("{c}:{id} ({source})")),
            )
            .collect();
        r.ok(
            "owners",
            format!(
                "{total} owner{}: {}",
                if total == 1 { "" } else { "s" },
                names.join(", ")
            ),
        );
    }
    let c = &loaded.config.channels;
    let chats = [
        (!c.telegram.token.is_empty()).then_some(ChannelKind::Telegram),
        (!c.lark.app_id.trim().is_empty()).then_some(ChannelKind::Lark),
    ];
    for channel in chats.into_iter().flatten() {
        if !has_owner(loaded, store, channel).await {
            r.warn(
                "owners",
                crate::daemon::owner_hint::claim_hint(channel, loaded),
            );
        }
    }
}

/// One model endpoint: a key where the public endpoint needs one, then whether it answers as
/// the chat will use it ([`model_answers`]).
async fn check_model(r: &mut Report, what: &str, ep: &ModelEndpoint, cfg: &ModelConfig) {
    if ep.missing_key() {
        let key_var = ep.key_var();
        let key = if what == "model" {
            "model.api_key".to_string()
        } else {
            format!("{what}.api_key")
        };
        r.fail(
            what,
            format!(
                "no API key for {} ({}): set {key} in the config or {key_var} (or point the \
                 base_url at a local endpoint)",
                ep.name,
                ep.provider.as_str()
            ),
        );
        return;
    }
    match model_answers(ep, cfg).await {
        Ok(s) => r.ok(what, format!("{s} [{}]", ep.provider.as_str())),
        Err(e) => r.fail(what, format!("{} ({}): {e}", ep.name, ep.provider.as_str())),
    }
}

/// Whether `ep` answers: an OpenAI-compatible endpoint judged as the chat uses it (its model
/// list, else a one-token completion; [`crate::provider::probe`]), an Anthropic one by its own
/// check.
pub async fn model_answers(ep: &ModelEndpoint, cfg: &ModelConfig) -> Result<String, String> {
    if ep.provider == crate::config::ProviderKind::Openai {
        return crate::provider::probe::judge(ep, cfg.timeout_secs)
            .await
            .map(|j| j.line)
            .map_err(|f| f.message);
    }
    let client = crate::provider::connect(ep, cfg).map_err(|e| e.to_string())?;
    client.check().await.map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::plaintext_remote;
    use crate::config::StoreConfig;

    fn store(url: &str) -> StoreConfig {
        serde_json::from_value(serde_json::json!({ "url": url })).unwrap()
    }

    #[test]
    fn a_remote_store_without_tls_is_named() {
        for named in [
            "postgres://u:p@db.internal:5432/e",
            "postgres://u:p@db.internal:5432/e?sslmode=disable",
        ] {
            assert_eq!(
                plaintext_remote(&store(named)).as_deref(),
                Some("db.internal"),
                "{named}"
            );
        }
        for quiet in [
            "postgres://u:p@db.internal/e?sslmode=require",
            "postgres://u:p@db.internal/e?sslmode=verify-full&sslrootcert=/ca.pem",
            "postgres://u:p@db.internal/e?sslmode=prefer",
            "postgres://u:p@127.0.0.1:5432/e",
            "postgres://u:p@localhost/e",
            "postgres://u:p@[::1]/e",
            "",
        ] {
            assert_eq!(plaintext_remote(&store(quiet)), None, "{quiet}");
        }
    }
}
