//! `ethan run`: the daemon. Opens the store, builds the agent, starts every configured channel and
//! the scheduler and the MCP servers ([`crate::mcp`], in the background), resumes events a
//! crash left unfinished, and runs until SIGINT/SIGTERM (then closes the MCP servers). Never
//! reads stdin.

pub mod access;
pub mod commands;
pub mod fence;
pub mod group_view;
pub mod open_store;
pub mod owner_hint;
pub mod replica;
pub mod router;
pub mod running;
pub mod stream;
pub mod trim;
pub mod typing;

use crate::agent::Agent;
use crate::config::Loaded;
use crate::consent::owners::Owners;
use crate::consent::terminal::TerminalInput;
use crate::consent::Consent;
use crate::store::SharedStorage;
use crate::store::{DaemonStoreRef, OpenStore};
use crate::tools::executor::{Executor, ExecutorOptions};
use crate::tools::policy::Policy;
use crate::tools::registry::Registry;
use anyhow::{bail, Context};
use ethan_channels::lark::{LarkChannel, LarkMode};
use ethan_channels::telegram::TelegramChannel;
use ethan_channels::{Channel, ChannelKind, InboundSink, StateStore};
use std::collections::HashMap;
use std::sync::Arc;

/// Turns in flight across all sessions.
pub const MAX_CONCURRENT_TURNS: usize = 8;

/// The consent service (`terminal`: stdin for `ethan chat`; `None` in the daemon).
pub fn build_consent(
    loaded: &Loaded,
    store: &DaemonStoreRef,
    terminal: Option<TerminalInput>,
) -> Arc<Consent> {
    Arc::new(Consent::new(
        Owners::new(&loaded.config, store.shared()),
        std::time::Duration::from_secs(loaded.config.consent.timeout_secs),
        terminal,
    ))
}

/// Build the agent shared by `run` and `chat`; `consent` becomes the executor's consent step.
/// Commands that run turns also start the knowledge sync ([`crate::knowledge::spawn_start_sync`]);
/// `tools list` does not.
pub fn build_agent(
    loaded: Arc<Loaded>,
    stores: &OpenStore,
    consent: Option<Arc<Consent>>,
) -> anyhow::Result<Arc<Agent>> {
    let store = &stores.main;
    let models = crate::provider::chain(&loaded.config.model).context("model client")?;
    let registry = Arc::new(Registry::builtin_at(
        &loaded.config,
        loaded.file_found.then_some(loaded.path.as_path()),
        Some((loaded.home.join("knowledge"), stores.index.clone())),
    ));
    let mut executor = Executor::new(
        registry,
        ExecutorOptions {
            store: Some(store.shared()),
            secrets: loaded.secret_values(),
            spill_dir: Some(loaded.spill_dir()),
            overrides: loaded.config.tools.per_tool.clone(),
            policy: Some(Policy::from_config(&loaded.config.tools)),
        },
    );
    if let Some(c) = consent {
        executor = executor.with_gate(c);
    }
    let summariser =
        crate::memory::summarise::Summariser::new(&models, &loaded.config, Some(store.shared()));
    executor = executor.with_summariser(
        Arc::new(summariser.clone()),
        loaded.config.tools.summarise_over_chars,
    );
    let agents = crate::agent::agents::Agents::from_config(&loaded.config);
    Ok(Arc::new_cyclic(|me| Agent {
        models,
        executor,
        policy: Policy::from_config(&loaded.config.tools),
        store: store.shared(),
        config: loaded,
        summariser,
        agents,
        me: me.clone(),
    }))
}

/// Remove spill files, audit rows, replay keys, finished inbound events and `lark.seen:*` keys
/// past `retention.*` (at start, then daily).
pub async fn prune_retention(loaded: &Loaded, store: &DaemonStoreRef) {
    let r = &loaded.config.retention;
    let (dir, days) = (loaded.spill_dir(), r.spill_days);
    let files = tokio::task::spawn_blocking(move || crate::tools::spill::prune(&dir, days))
        .await
        .unwrap_or(0);
    match store.prune_audit(r.audit_days).await {
        Ok(rows) if rows + files > 0 => {
            tracing::info!("retention: removed {files} spill file(s) and {rows} audit row(s)")
        }
        Ok(_) => {}
        Err(e) => tracing::warn!("retention: {e}"),
    }
    match store.prune_inbound(r.inbound_days).await {
        Ok((events, seen)) if events + seen > 0 => tracing::info!(
            "retention: removed {events} inbound event(s) and {seen} lark.seen key(s)"
        ),
        Ok(_) => {}
        Err(e) => tracing::warn!("retention: {e}"),
    }
}

pub use crate::config::{lark_config, telegram_config};

pub async fn run(loaded: Arc<Loaded>) -> anyhow::Result<()> {
    for n in &loaded.notices {
        tracing::warn!("{n}");
    }
    let swept = crate::sandbox::sweep_private_tmps(&std::env::temp_dir());
    if swept > 0 {
        tracing::info!("removed {swept} temp folder(s) of daemons that are gone");
    }
    let stores = open_store::open(&loaded).await?;
    if let Some(sqlite) = &stores.sqlite {
        sqlite
            .checkpoint_in_background(&loaded.db_path(), std::time::Duration::from_secs(1))
            .await
            .context("starting the background checkpoint")?;
    }
    let store = stores.main.clone();
    let consent = build_consent(&loaded, &store, None);
    let agent = build_agent(loaded.clone(), &stores, Some(consent.clone()))?;
    crate::knowledge::spawn_start_sync(
        &loaded.home,
        stores.index.clone(),
        &loaded.config.knowledge,
    );
    // MCP servers start in the background; their tools appear when each has listed them.
    let mcp = crate::mcp::McpManager::new(&loaded, agent.executor.registry_slot());
    mcp.start();

    let mut channels: HashMap<ChannelKind, Arc<dyn Channel>> = HashMap::new();
    let mut telegram: Option<Arc<TelegramChannel>> = None;
    let tg = &loaded.config.channels.telegram;
    if !tg.token.is_empty() {
        if tg.mode == crate::config::TelegramMode::Webhook
            && (tg.webhook_url.is_empty() || tg.webhook_secret.is_empty())
        {
            bail!(
                "channels.telegram.mode is webhook, so channels.telegram.webhook_url (the public \
                 URL that reaches this gateway's /telegram/webhook) and channels.telegram.webhook_secret \
                 (1-256 characters A-Z a-z 0-9 _ -) must both be set"
            );
        }
        let ch = Arc::new(TelegramChannel::new(telegram_config(&loaded.config))?);
        channels.insert(ChannelKind::Telegram, ch.clone());
        telegram = Some(ch);
    }
    let mut lark: Option<Arc<LarkChannel>> = None;
    let lk = &loaded.config.channels.lark;
    if !lk.app_id.trim().is_empty() && !lk.app_secret.is_empty() {
        if lk.mode == crate::config::LarkMode::Webhook
            && lk.encrypt_key.is_empty()
            && lk.verification_token.is_empty()
        {
            bail!(
                "channels.lark.mode is webhook, but neither channels.lark.encrypt_key nor \
                 channels.lark.verification_token is set, so forged events could not be told \
                 apart. Copy them from the app's Events & Callbacks page, or use mode: websocket."
            );
        }
        let ch = Arc::new(LarkChannel::new(lark_config(&loaded.config))?);
        channels.insert(ChannelKind::Lark, ch.clone());
        lark = Some(ch);
    }
    if channels.is_empty() {
        let hint = format!(
            "no channel is configured: set channels.telegram.token (or TELEGRAM_BOT_TOKEN), or \
             channels.lark.app_id and app_secret (or LARK_APP_ID / LARK_APP_SECRET), in {}. \
             For a terminal session use `ethan chat`.",
            loaded.path.display()
        );
        if !loaded.config.gateway.enabled {
            bail!("{hint}");
        }
        tracing::warn!("{hint} Only the HTTP gateway (/api/chat) is served.");
    }

    let chats: Vec<ChannelKind> = channels.keys().copied().collect();
    owner_hint::warn_without_owner(&consent.owners, &loaded, &chats).await;
    // The gateway's web page is a channel too: its messages go through the router.
    let page_hub = loaded.config.gateway.enabled.then(|| {
        let hub = Arc::new(crate::gateway::page::hub::Hub::new());
        let web: Arc<dyn Channel> =
            Arc::new(crate::gateway::page::channel::WebChannel::new(hub.clone()));
        channels.insert(ChannelKind::Web, web);
        hub
    });
    consent.set_channels(channels.clone());
    let for_scheduler = (agent.clone(), channels.clone());
    let token = crate::gateway::auth::ensure_token(&loaded, &store)
        .await
        .context("gateway token")?;
    let replica = replica::Replica::for_store(
        &store,
        loaded.config.store.lease_secs,
        2 * MAX_CONCURRENT_TURNS,
    );
    let parts = router::Parts {
        store: store.clone(),
        config: loaded.clone(),
        agent: agent.clone(),
        consent: consent.clone(),
        channels: channels.clone(),
        max_turns: MAX_CONCURRENT_TURNS,
    };
    let router = match &replica {
        Some(r) => {
            consent.share(store.shared());
            tracing::info!(
                "replica {} on a shared store: sessions are leased for {} s",
                r.id,
                r.lease.as_secs()
            );
            router::Router::replicated(parts, r.clone())
        }
        None => router::Router::new(parts),
    };
    let sink: Arc<dyn InboundSink> = Arc::new(router::RouterSink(router.clone()));
    let state: Arc<dyn StateStore> = Arc::new(crate::store::KvState(store.shared()));
    let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
    let tokens = crate::gateway::auth::Tokens::new(
        (!loaded.config.gateway.token.is_empty()).then_some(token),
        store.clone(),
    );
    let public_url = &loaded.config.gateway.public_url;
    let public = match public_url.trim() {
        "" => None,
        url => Some(
            crate::gateway::guard::PublicUrl::parse(url)
                .map_err(|e| anyhow::anyhow!("gateway.public_url: {e}"))?,
        ),
    };
    let page = page_hub.map(|hub| {
        Arc::new(crate::gateway::page::PageState {
            hub,
            sink: sink.clone(),
            store: store.clone(),
            consent: consent.clone(),
            tokens: tokens.clone(),
            public,
            shutdown: shutdown_rx.clone(),
            guesses: Default::default(),
        })
    });
    let gateway_state = Arc::new(crate::gateway::GatewayState {
        agent,
        consent,
        store: store.clone(),
        tokens,
        channels,
        turns: Arc::new(router::RouterTurns(router.clone())),
        page,
    });

    {
        let (loaded, store) = (loaded.clone(), store.clone());
        tokio::spawn(async move {
            loop {
                prune_retention(&loaded, &store).await;
                tokio::time::sleep(std::time::Duration::from_secs(86_400)).await;
            }
        });
    }
    let resumed = router.resume_unfinished().await;
    if resumed > 0 {
        tracing::info!("resumed {resumed} unfinished event(s)");
    }

    let mut tasks = Vec::new();
    let (agent, channels) = for_scheduler;
    tasks.push(crate::scheduler::start(
        &loaded,
        store.clone(),
        agent,
        channels,
        shutdown_rx.clone(),
    ));
    // One HTTP server: the gateway's routes plus the webhook routes of channels in webhook mode.
    let mut app = crate::gateway::router(gateway_state);
    let mut needs_gateway = None;
    let mut gateway_addr = None;
    if let Some(ch) = &telegram {
        if loaded.config.channels.telegram.mode == crate::config::TelegramMode::Webhook {
            app = app.merge(ethan_channels::telegram::webhook::router(
                ch.clone(),
                sink.clone(),
            ));
            needs_gateway = Some("channels.telegram.mode: webhook");
        }
    }
    if let Some(ch) = &lark {
        if ch.config().mode == LarkMode::Webhook {
            app = app.merge(ch.webhook_router(sink.clone(), state.clone()));
            needs_gateway = Some("channels.lark.mode: webhook");
        }
    }
    if loaded.config.gateway.enabled {
        let listen: std::net::SocketAddr = loaded
            .config
            .gateway
            .listen
            .parse()
            .context("gateway.listen")?;
        let listener = crate::gateway::bind(listen).await.with_context(|| {
            format!("binding gateway.listen {listen} (is another ethan running?)")
        })?;
        gateway_addr = listener.local_addr().ok();
        let rx = shutdown_rx.clone();
        tasks.push(tokio::spawn(async move {
            if let Err(e) = crate::gateway::serve_listener(listener, app, rx).await {
                tracing::error!("the gateway stopped: {e}");
            }
        }));
    } else if let Some(why) = needs_gateway {
        bail!("{why} needs the HTTP gateway, but gateway.enabled is false");
    }
    if let Some(r) = &replica {
        r.release_dead_local().await;
        tasks.push(tokio::spawn(r.clone().renew_loop(shutdown_rx.clone())));
        tasks.push(tokio::spawn(router.clone().sweep_loop(shutdown_rx.clone())));
    }
    if let Some(ch) = telegram {
        let (sink, state, rx) = (sink.clone(), state.clone(), shutdown_rx.clone());
        let polling = loaded.config.channels.telegram.mode != crate::config::TelegramMode::Webhook;
        match &replica {
            // One poller among the replicas; in webhook mode every replica takes updates.
            Some(r) if polling => {
                tasks.push(tokio::spawn(replica::telegram_poller(
                    r.clone(),
                    ch,
                    sink,
                    state,
                    rx,
                )));
            }
            _ => tasks.push(tokio::spawn(async move {
                if let Err(e) = ch.run(sink, state, rx).await {
                    tracing::error!("telegram channel stopped: {e}");
                }
            })),
        }
    }
    if let Some(ch) = lark {
        let (sink, state, rx) = (sink.clone(), state.clone(), shutdown_rx.clone());
        tasks.push(tokio::spawn(async move {
            if let Err(e) = ch.run(sink, state, rx).await {
                tracing::error!("lark channel stopped: {e}");
            }
        }));
    }
    running::record_start(&loaded.home, gateway_addr).await;
    tracing::info!("ethan is running (store {})", open_store::describe(&loaded));
    notify_systemd("READY=1");

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term.recv() => {},
    }
    notify_systemd("STOPPING=1");
    running::record_stop(&loaded.home).await;
    tracing::info!(
        "shutting down: no new events; waiting up to {SHUTDOWN_GRACE_SECS} s for turns in flight"
    );
    let _ = shutdown_tx.send(true);
    let deadline =
        tokio::time::Instant::now() + std::time::Duration::from_secs(SHUTDOWN_GRACE_SECS);
    while router.turns_in_flight() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let left = router.turns_in_flight();
    if left > 0 {
        tracing::info!("{left} turn(s) still running; they will be answered after the restart");
    } else if let Some(r) = &replica {
        // Nothing runs here any more: the other replicas take these sessions at once.
        r.give_up_all().await;
    }
    for t in tasks {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(3), t).await;
    }
    mcp.shutdown().await;
    if let Err(e) = store.checkpoint().await {
        tracing::warn!("final database checkpoint failed: {e}");
    }
    crate::sandbox::remove_private_tmp();
    Ok(())
}

/// Seconds `ethan run` waits for turns in flight on SIGTERM; unfinished ones are resumed at
/// the next start (their inbound events stay recorded as unfinished).
pub const SHUTDOWN_GRACE_SECS: u64 = 5;

/// `sd_notify(3)` for `Type=notify` units: a datagram to `$NOTIFY_SOCKET` (a path, or an
/// abstract name starting with `@`). Does nothing outside systemd.
fn notify_systemd(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let Ok(sock) = std::os::unix::net::UnixDatagram::unbound() else {
        return;
    };
    let path = path.to_string_lossy().into_owned();
    let sent = if let Some(name) = path.strip_prefix('@') {
        use std::os::linux::net::SocketAddrExt;
        std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
            .and_then(|addr| sock.send_to_addr(state.as_bytes(), &addr))
    } else {
        sock.send_to(state.as_bytes(), &path)
    };
    if let Err(e) = sent {
        tracing::debug!("sd_notify failed: {e}");
    }
}
