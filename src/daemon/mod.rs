//! `ethan run`: the daemon. Opens the store, builds the agent, starts every configured channel,
//! resumes events a crash left unfinished, and runs until SIGINT/SIGTERM. Never reads stdin.

pub mod access;
pub mod commands;
pub mod router;

use crate::agent::Agent;
use crate::config::Loaded;
use crate::provider::OpenAiClient;
use crate::store::Store;
use crate::tools::executor::Executor;
use crate::tools::registry::Registry;
use anyhow::{bail, Context};
use ethan_channels::telegram::{TelegramChannel, TelegramConfig};
use ethan_channels::{Channel, ChannelKind, InboundSink, StateStore};
use std::collections::HashMap;
use std::sync::Arc;

/// Turns in flight across all sessions.
pub const MAX_CONCURRENT_TURNS: usize = 8;

/// Build the agent shared by `run` and `chat`.
pub fn build_agent(loaded: Arc<Loaded>, store: Store) -> anyhow::Result<Arc<Agent>> {
    let provider = OpenAiClient::new(&loaded.config.model).context("model client")?;
    let registry = Arc::new(Registry::builtin(&loaded.config));
    Ok(Arc::new(Agent {
        provider,
        executor: Executor::new(registry),
        store,
        config: loaded,
    }))
}

pub async fn run(loaded: Arc<Loaded>) -> anyhow::Result<()> {
    for n in &loaded.notices {
        tracing::info!("{n}");
    }
    let store = Store::open(&loaded.db_path())
        .with_context(|| format!("opening the database {}", loaded.db_path().display()))?;
    let agent = build_agent(loaded.clone(), store.clone())?;

    let mut channels: HashMap<ChannelKind, Arc<dyn Channel>> = HashMap::new();
    let mut telegram: Option<Arc<TelegramChannel>> = None;
    let tg = &loaded.config.channels.telegram;
    if !tg.token.is_empty() {
        let ch = Arc::new(TelegramChannel::new(TelegramConfig {
            token: tg.token.expose().to_string(),
            api_url: tg.api_url.clone(),
            poll_timeout_secs: 25,
        })?);
        channels.insert(ChannelKind::Telegram, ch.clone());
        telegram = Some(ch);
    }
    if channels.is_empty() {
        bail!(
            "no channel is configured: set channels.telegram.token in {} (or TELEGRAM_BOT_TOKEN). \
             For a terminal session use `ethan chat`.",
            loaded.path.display()
        );
    }

    let router = router::Router::new(store.clone(), agent, channels, MAX_CONCURRENT_TURNS);
    let sink: Arc<dyn InboundSink> = Arc::new(router::RouterSink(router.clone()));
    let state: Arc<dyn StateStore> = Arc::new(store.clone());
    let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);

    let resumed = router.resume_unfinished().await;
    if resumed > 0 {
        tracing::info!("resumed {resumed} unfinished event(s)");
    }

    let mut tasks = Vec::new();
    if let Some(ch) = telegram {
        let (sink, state, rx) = (sink.clone(), state.clone(), shutdown_rx.clone());
        tasks.push(tokio::spawn(async move {
            if let Err(e) = ch.run(sink, state, rx).await {
                tracing::error!("telegram channel stopped: {e}");
            }
        }));
    }
    tracing::info!("ethan is running (database {})", loaded.db_path().display());

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term.recv() => {},
    }
    tracing::info!("shutting down");
    let _ = shutdown_tx.send(true);
    for t in tasks {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), t).await;
    }
    Ok(())
}
