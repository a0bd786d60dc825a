//! `ethan doctor`: one line per check (config, database, model endpoint, each channel), with what
//! to do when something is missing. Exit code 1 when any check fails.

use crate::config::Loaded;
use crate::provider::{OpenAiClient, ProviderError};
use crate::store::Store;
use ethan_channels::telegram::{TelegramChannel, TelegramConfig};
use ethan_channels::Channel;
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

pub async fn run(loaded: Arc<Loaded>) -> anyhow::Result<ExitCode> {
    let mut r = Report { failed: false };
    let c = &loaded.config;
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

    match Store::open(&loaded.db_path()).and_then(|s| s.schema_version()) {
        Ok(v) => r.ok(
            "database",
            format!("{} (schema {v})", loaded.db_path().display()),
        ),
        Err(e) => r.fail("database", e.to_string()),
    }

    let default_endpoint = c.model.base_url.starts_with("https://api.openai.com");
    if c.model.api_key.is_empty() && default_endpoint {
        r.fail(
            "model",
            "no API key: set model.api_key in the config or OPENAI_API_KEY (or point model.base_url at a local endpoint)",
        );
    } else {
        match OpenAiClient::new(&c.model) {
            Err(e) => r.fail("model", e.to_string()),
            Ok(client) => match client.check().await {
                Ok(s) => r.ok("model", s),
                Err(ProviderError::Http { status: 404, .. }) => r.ok(
                    "model",
                    format!(
                        "{} answers (no /models list; model {})",
                        c.model.base_url, c.model.name
                    ),
                ),
                Err(e) => r.fail("model", e.to_string()),
            },
        }
    }

    let tg = &c.channels.telegram;
    if tg.token.is_empty() {
        r.warn(
            "telegram",
            "not configured: set channels.telegram.token or TELEGRAM_BOT_TOKEN (a token from @BotFather)",
        );
    } else {
        match TelegramChannel::new(TelegramConfig {
            token: tg.token.expose().to_string(),
            api_url: tg.api_url.clone(),
            poll_timeout_secs: 1,
        }) {
            Err(e) => r.fail("telegram", e.to_string()),
            Ok(ch) => match ch.probe().await {
                Ok(me) => r.ok("telegram", format!("getMe: {me}")),
                Err(e) => r.fail("telegram", e.to_string()),
            },
        }
        if c.owners.is_empty()
            && tg.dm_policy != crate::config::DmPolicy::Open
            && tg.allow_from.is_empty()
        {
            r.warn(
                "telegram",
                "no owners and no allow_from: nobody may talk to the bot in DMs (add owners: [\"telegram:<your user id>\"])",
            );
        }
    }
    if tg.token.is_empty() && c.channels.lark.app_id.is_empty() {
        r.warn(
            "channels",
            "no chat channel is configured; `ethan run` needs one (`ethan chat` works without)",
        );
    }
    Ok(if r.failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
