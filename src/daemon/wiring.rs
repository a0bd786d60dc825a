//! The one wiring step: what `ethan run` (and, through the same functions, `ethan chat`,
//! `ethan jobs run` and `ethan tools list`) builds, in order — config → store → channels →
//! shared services → consent → tools → agent → router and gateway → the tasks that serve them.
//! Each part is given what it depends on when it is constructed; nothing is set on a part after
//! it exists, and nothing is kept in a process-wide static.

use super::{open_store, owner_hint, replica, router, MAX_CONCURRENT_TURNS};
use crate::agent::Agent;
use crate::config::{Loaded, TelegramMode};
use crate::consent::owners::Owners;
use crate::consent::terminal::TerminalInput;
use crate::consent::Consent;
use crate::egress::Egress;
use crate::gateway::page::hub::Hub;
use crate::metrics::Metrics;
use crate::sandbox::settings::SandboxSettings;
use crate::store::SharedStorage;
use crate::store::{DaemonStoreRef, OpenStore};
use crate::tools::executor::{Executor, ExecutorOptions};
use crate::tools::policy::Policy;
use crate::tools::registry::Registry;
use anyhow::{bail, Context};
use ethan_channels::lark::{LarkChannel, LarkMode};
use ethan_channels::telegram::TelegramChannel;
use ethan_channels::{Channel, ChannelKind, InboundSink, StateStore};
use ethan_core::sandbox::SandboxProbe;
use std::collections::HashMap;
use std::sync::Arc;

/// The daemon's store: opened (and its schema brought up to date), with SQLite's write-ahead
/// log checkpointed in the background.
pub async fn store(loaded: &Loaded) -> anyhow::Result<OpenStore> {
    let stores = open_store::open(loaded).await?;
    if let Some(sqlite) = &stores.sqlite {
        sqlite
            .checkpoint_in_background(&loaded.db_path(), std::time::Duration::from_secs(1))
            .await
            .context("starting the background checkpoint")?;
    }
    Ok(stores)
}

/// The chat channels of the daemon: each configured one, and the gateway's web page.
pub struct Channels {
    /// Every channel, by kind (what consent asks through and replies go out by).
    pub all: HashMap<ChannelKind, Arc<dyn Channel>>,
    pub telegram: Option<Arc<TelegramChannel>>,
    pub lark: Option<Arc<LarkChannel>>,
    /// The web page's hub, when the gateway is enabled.
    pub page_hub: Option<Arc<Hub>>,
}

/// Build the configured channels (none is started yet). Fails on a half-configured webhook,
/// or when nothing at all would take messages in.
pub fn channels(loaded: &Loaded) -> anyhow::Result<Channels> {
    let mut all: HashMap<ChannelKind, Arc<dyn Channel>> = HashMap::new();
    let telegram = telegram(loaded)?;
    if let Some(ch) = &telegram {
        all.insert(ChannelKind::Telegram, ch.clone());
    }
    let lark = lark(loaded)?;
    if let Some(ch) = &lark {
        all.insert(ChannelKind::Lark, ch.clone());
    }
    if all.is_empty() {
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
    // The gateway's web page is a channel too: its messages go through the router.
    let page_hub = loaded.config.gateway.enabled.then(|| {
        let hub = Arc::new(Hub::new());
        let web: Arc<dyn Channel> =
            Arc::new(crate::gateway::page::channel::WebChannel::new(hub.clone()));
        all.insert(ChannelKind::Web, web);
        hub
    });
    Ok(Channels {
        all,
        telegram,
        lark,
        page_hub,
    })
}

fn telegram(loaded: &Loaded) -> anyhow::Result<Option<Arc<TelegramChannel>>> {
    let tg = &loaded.config.channels.telegram;
    if tg.token.is_empty() {
        return Ok(None);
    }
    if tg.mode == TelegramMode::Webhook
        && (tg.webhook_url.is_empty() || tg.webhook_secret.is_empty())
    {
        bail!(
            "channels.telegram.mode is webhook, so channels.telegram.webhook_url (the public \
             URL that reaches this gateway's /telegram/webhook) and channels.telegram.webhook_secret \
             (1-256 characters A-Z a-z 0-9 _ -) must both be set"
        );
    }
    let config = crate::config::telegram_config(&loaded.config);
    Ok(Some(Arc::new(TelegramChannel::new(config)?)))
}

fn lark(loaded: &Loaded) -> anyhow::Result<Option<Arc<LarkChannel>>> {
    let lk = &loaded.config.channels.lark;
    if lk.app_id.trim().is_empty() || lk.app_secret.is_empty() {
        return Ok(None);
    }
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
    let config = crate::config::lark_config(&loaded.config);
    Ok(Some(Arc::new(LarkChannel::new(config)?)))
}

/// What every part of one daemon shares: the metrics registry (served at `/metrics`), what
/// its egress guards share (the browser proxies no guard lets a connection reach, the same
/// registry) and the slots of the child processes that parse files and web pages. A command
/// that builds parts without the daemon gives them a `Common` of their own.
#[derive(Clone)]
pub struct Common {
    pub metrics: Arc<Metrics>,
    pub egress: Egress,
    pub readers: Arc<tokio::sync::Semaphore>,
}

impl Default for Common {
    fn default() -> Self {
        let metrics = Arc::new(Metrics::new());
        Self {
            egress: Egress::new(metrics.clone()),
            metrics,
            readers: crate::media::parse::slots(),
        }
    }
}

/// The services the tools share, started for commands that run turns: the sandbox's settings
/// (its private temp folder made, the kernel probed; for the daemon, after the sweep of the
/// temp folders that daemons now gone left behind) and the knowledge index's sync.
pub fn services(loaded: &Loaded, stores: &OpenStore, daemon: bool) -> Arc<SandboxSettings> {
    start_sync(loaded, stores);
    Arc::new(probe_sandbox(loaded, daemon))
}

/// The sandbox's settings, probed (for the daemon, after the sweep of the temp folders that
/// daemons now gone left behind). Two process starts: the daemon runs it on a thread of its own
/// and does not wait for it ([`SandboxProbe`]).
fn probe_sandbox(loaded: &Loaded, daemon: bool) -> SandboxSettings {
    if daemon {
        let swept = crate::sandbox::sweep_private_tmps(&std::env::temp_dir());
        if swept > 0 {
            tracing::info!("removed {swept} temp folder(s) of daemons that are gone");
        }
    }
    crate::sandbox::settings::probe(loaded.file_found.then_some(loaded.path.as_path()))
}

/// The daemon's sandbox probe, run on a blocking thread when first awaited (by the first turn,
/// or by the daemon once it is ready: [`super::run`]); if it cannot finish, the settings are the
/// default (every command asks) with the config file still protected.
fn lazy_probe(loaded: &Arc<Loaded>) -> SandboxProbe {
    let loaded = loaded.clone();
    // Known without the probe: a config file outside the home stays protected whatever it finds.
    let protected = crate::sandbox::settings::protected_also(
        loaded.file_found.then_some(loaded.path.as_path()),
    );
    SandboxProbe::lazy(async move {
        let probed = ethan_core::task::spawn_blocking(move || probe_sandbox(&loaded, true)).await;
        Arc::new(probed.unwrap_or_else(|e| {
            tracing::warn!("probing the sandbox failed ({e}): every command asks");
            SandboxSettings {
                protected,
                ..SandboxSettings::default()
            }
        }))
    })
}

/// The knowledge index's sync, started in the background.
fn start_sync(loaded: &Loaded, stores: &OpenStore) {
    crate::knowledge::spawn_start_sync(
        &loaded.home,
        stores.index.clone(),
        &loaded.config.knowledge,
    );
}

/// The consent service, asking through `channels` (and `terminal`: stdin for `ethan chat`),
/// sharing approvals and grants through `shared` when replicas share the store; for a command
/// that builds parts without the daemon: its decisions are counted in a registry of its own.
pub fn consent(
    loaded: &Loaded,
    store: &DaemonStoreRef,
    channels: HashMap<ChannelKind, Arc<dyn Channel>>,
    terminal: Option<TerminalInput>,
    shared: Option<ethan_core::store::StorageRef>,
) -> Arc<Consent> {
    let metrics = Default::default();
    consent_in(loaded, store, channels, terminal, shared, &metrics)
}

/// [`consent`], its decisions counted in `metrics`.
pub fn consent_in(
    loaded: &Loaded,
    store: &DaemonStoreRef,
    channels: HashMap<ChannelKind, Arc<dyn Channel>>,
    terminal: Option<TerminalInput>,
    shared: Option<ethan_core::store::StorageRef>,
    metrics: &Arc<Metrics>,
) -> Arc<Consent> {
    let consent = Consent::new(
        Owners::new(&loaded.config, store.shared()),
        std::time::Duration::from_secs(loaded.config.consent.timeout_secs),
        terminal,
    )
    .with_channels(channels)
    .with_metrics(metrics.clone());
    Arc::new(match shared {
        Some(store) => consent.shared_through(store),
        None => consent,
    })
}

/// The tool executor: the built-in tools, the config's policy and overrides, `consent` as its
/// consent step (none: nothing that asks can run), `summariser` for long outputs; calls
/// counted, and the tools' egress guards built, with `common`.
pub fn tools(
    loaded: &Loaded,
    stores: &OpenStore,
    consent: Option<Arc<Consent>>,
    summariser: &crate::memory::summarise::Summariser,
    common: &Common,
) -> Executor {
    let store = &stores.main;
    let mut setup =
        super::tool_setup::setup(&loaded.config, &common.egress, common.readers.clone());
    if loaded.file_found {
        // `tools.web_search` re-read when the file changes.
        setup.live = Some(Arc::new(crate::config::watch::ConfigWatch::at(
            loaded.path.clone(),
            &loaded.config,
        )));
    }
    setup.knowledge = Some(Arc::new(crate::knowledge::KnowledgeHub::new(
        &loaded.config.knowledge,
        Some((loaded.home.join("knowledge"), stores.index.clone())),
    )));
    let registry = Arc::new(Registry::builtin(setup));
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
    executor = executor.with_metrics(common.metrics.clone());
    if let Some(c) = consent {
        executor = executor.with_gate(c);
    }
    executor.with_summariser(
        Arc::new(summariser.clone()),
        loaded.config.tools.summarise_over_chars,
    )
}

/// The agent shared by `run`, `chat` and `jobs run`: the model chain, the tools ([`tools`]),
/// the sub-agents; `sandbox` (from [`services`]) is lent to every call. For a command that
/// builds parts without the daemon: a [`Common`] of its own.
pub fn agent(
    loaded: Arc<Loaded>,
    stores: &OpenStore,
    consent: Option<Arc<Consent>>,
    sandbox: SandboxProbe,
) -> anyhow::Result<Arc<Agent>> {
    agent_in(loaded, stores, consent, sandbox, &Common::default())
}

/// [`agent`], counting into and building its egress guards from `common`.
pub fn agent_in(
    loaded: Arc<Loaded>,
    stores: &OpenStore,
    consent: Option<Arc<Consent>>,
    sandbox: SandboxProbe,
    common: &Common,
) -> anyhow::Result<Arc<Agent>> {
    let store = &stores.main;
    let models =
        crate::provider::chain(&loaded.config.model, &common.metrics).context("model client")?;
    let summariser =
        crate::memory::summarise::Summariser::new(&models, &loaded.config, Some(store.shared()));
    let executor = tools(&loaded, stores, consent, &summariser, common);
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
        sandbox,
        skills: Default::default(),
    }))
}

/// The router and what the channels publish into and keep their state in.
pub struct Routing {
    pub router: Arc<router::Router>,
    pub sink: Arc<dyn InboundSink>,
    pub state: Arc<dyn StateStore>,
    /// The registry the router counts in, which the gateway serves.
    pub metrics: Arc<Metrics>,
}

/// The router over `agent`, leasing sessions through `replica` when replicas share the store.
pub fn router(
    loaded: &Arc<Loaded>,
    store: &DaemonStoreRef,
    agent: &Arc<Agent>,
    consent: &Arc<Consent>,
    channels: &Channels,
    replica: Option<&Arc<replica::Replica>>,
    common: &Common,
) -> Routing {
    let parts = router::Parts {
        store: store.clone(),
        config: loaded.clone(),
        agent: agent.clone(),
        consent: consent.clone(),
        channels: channels.all.clone(),
        max_turns: MAX_CONCURRENT_TURNS,
        metrics: common.metrics.clone(),
        egress: common.egress.clone(),
        readers: common.readers.clone(),
    };
    let router = match replica {
        Some(r) => {
            tracing::info!(
                "replica {} on a shared store: sessions are leased for {} s",
                r.id,
                r.lease.as_secs()
            );
            router::Router::replicated(parts, r.clone())
        }
        None => router::Router::new(parts),
    };
    Routing {
        sink: Arc::new(router::RouterSink(router.clone())),
        state: Arc::new(crate::store::KvState(store.shared())),
        router,
        metrics: common.metrics.clone(),
    }
}

/// The HTTP gateway's shared state (its API, and the web page when enabled).
pub async fn gateway(
    loaded: &Loaded,
    store: &DaemonStoreRef,
    agent: Arc<Agent>,
    consent: Arc<Consent>,
    channels: &Channels,
    routing: &Routing,
    shutdown: &tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<Arc<crate::gateway::GatewayState>> {
    let token = crate::gateway::auth::ensure_token(loaded, store)
        .await
        .context("gateway token")?;
    let tokens = crate::gateway::auth::Tokens::new(
        (!loaded.config.gateway.token.is_empty()).then_some(token),
        store.clone(),
    );
    let public = match loaded.config.gateway.public_url.trim() {
        "" => None,
        url => Some(
            crate::gateway::guard::PublicUrl::parse(url)
                .map_err(|e| anyhow::anyhow!("gateway.public_url: {e}"))?,
        ),
    };
    let page = channels.page_hub.clone().map(|hub| {
        Arc::new(crate::gateway::page::PageState {
            hub,
            sink: routing.sink.clone(),
            store: store.clone(),
            consent: consent.clone(),
            tokens: tokens.clone(),
            public,
            shutdown: shutdown.clone(),
            guesses: Default::default(),
        })
    });
    Ok(Arc::new(crate::gateway::GatewayState {
        agent,
        consent,
        store: store.clone(),
        tokens,
        channels: channels.all.clone(),
        turns: Arc::new(router::RouterTurns(routing.router.clone())),
        page,
        metrics: routing.metrics.clone(),
    }))
}

/// What `ethan run` has built, ready to serve.
pub struct Daemon {
    pub loaded: Arc<Loaded>,
    pub store: DaemonStoreRef,
    pub agent: Arc<Agent>,
    pub channels: Channels,
    pub routing: Routing,
    pub replica: Option<Arc<replica::Replica>>,
    pub gateway: Arc<crate::gateway::GatewayState>,
    pub mcp: Arc<crate::mcp::McpManager>,
    /// The sandbox's settings, probed once the daemon is ready or a turn needs them.
    pub sandbox: SandboxProbe,
    /// The metrics registry and the egress guards' shared part, given to every part.
    pub common: Common,
}

/// Build the whole daemon, in order; `shutdown` is what its streams end on.
pub async fn daemon(
    loaded: Arc<Loaded>,
    shutdown: &tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<Daemon> {
    let sandbox = lazy_probe(&loaded);
    let stores = store(&loaded).await?;
    let store = stores.main.clone();
    let channels = channels(&loaded)?;
    start_sync(&loaded, &stores);
    let common = Common::default();
    let replica = replica::Replica::for_store(
        &store,
        loaded.config.store.lease_secs,
        2 * MAX_CONCURRENT_TURNS,
    );
    let shared = replica.as_ref().map(|_| store.shared());
    let consent = consent_in(
        &loaded,
        &store,
        channels.all.clone(),
        None,
        shared,
        &common.metrics,
    );
    let chats: Vec<ChannelKind> = [ChannelKind::Telegram, ChannelKind::Lark]
        .into_iter()
        .filter(|k| channels.all.contains_key(k))
        .collect();
    owner_hint::warn_without_owner(&consent.owners, &loaded, &chats).await;
    let agent = agent_in(
        loaded.clone(),
        &stores,
        Some(consent.clone()),
        sandbox.clone(),
        &common,
    )?;
    // MCP servers start in the background; their tools appear when each has listed them.
    let mcp =
        crate::mcp::McpManager::within(&loaded, agent.executor.registry_slot(), &common.egress);
    mcp.start();
    let routing = router(
        &loaded,
        &store,
        &agent,
        &consent,
        &channels,
        replica.as_ref(),
        &common,
    );
    let gateway = gateway(
        &loaded,
        &store,
        agent.clone(),
        consent,
        &channels,
        &routing,
        shutdown,
    )
    .await?;
    Ok(Daemon {
        loaded,
        store,
        agent,
        channels,
        routing,
        replica,
        gateway,
        mcp,
        sandbox,
        common,
    })
}

/// Start what serves the daemon: retention, the scheduler, the HTTP server (with the webhook
/// routes of channels in webhook mode), the replica's loops and the channels. Answers the
/// tasks and the gateway's address.
pub async fn serve(
    d: &Daemon,
    shutdown: &tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<(
    Vec<tokio::task::JoinHandle<()>>,
    Option<std::net::SocketAddr>,
)> {
    let loaded = &d.loaded;
    {
        let (loaded, store) = (loaded.clone(), d.store.clone());
        ethan_core::task::spawn(async move {
            loop {
                super::prune_retention(&loaded, &store).await;
                tokio::time::sleep(std::time::Duration::from_secs(86_400)).await;
            }
        });
    }
    let resumed = d.routing.router.resume_unfinished().await;
    if resumed > 0 {
        tracing::info!("resumed {resumed} unfinished event(s)");
    }
    let mut tasks = vec![crate::scheduler::start(
        loaded,
        d.store.clone(),
        d.agent.clone(),
        d.channels.all.clone(),
        d.common.metrics.clone(),
        shutdown.clone(),
    )];
    let gateway_addr = http(d, shutdown, &mut tasks).await?;
    if let Some(r) = &d.replica {
        r.release_dead_local().await;
        tasks.push(ethan_core::task::spawn(
            r.clone().renew_loop(shutdown.clone()),
        ));
        let router = d.routing.router.clone();
        tasks.push(ethan_core::task::spawn(router.sweep_loop(shutdown.clone())));
    }
    start_channels(d, shutdown, &mut tasks);
    Ok((tasks, gateway_addr))
}

/// One HTTP server: the gateway's routes plus the webhook routes of channels in webhook mode.
async fn http(
    d: &Daemon,
    shutdown: &tokio::sync::watch::Receiver<bool>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> anyhow::Result<Option<std::net::SocketAddr>> {
    let config = &d.loaded.config;
    let sink = &d.routing.sink;
    let mut app = crate::gateway::router(d.gateway.clone());
    let mut needs_gateway = None;
    if let Some(ch) = &d.channels.telegram {
        if config.channels.telegram.mode == TelegramMode::Webhook {
            let hook = ethan_channels::telegram::webhook::router(ch.clone());
            app = app.merge(hook);
            needs_gateway = Some("channels.telegram.mode: webhook");
        }
    }
    if let Some(ch) = &d.channels.lark {
        if ch.config().mode == LarkMode::Webhook {
            app = app.merge(ch.webhook_router(sink.clone(), d.routing.state.clone()));
            needs_gateway = Some("channels.lark.mode: webhook");
        }
    }
    if !config.gateway.enabled {
        if let Some(why) = needs_gateway {
            bail!("{why} needs the HTTP gateway, but gateway.enabled is false");
        }
        return Ok(None);
    }
    let listen: std::net::SocketAddr = config.gateway.listen.parse().context("gateway.listen")?;
    let listener = crate::gateway::bind(listen)
        .await
        .with_context(|| format!("binding gateway.listen {listen} (is another ethan running?)"))?;
    let addr = listener.local_addr().ok();
    let rx = shutdown.clone();
    tasks.push(ethan_core::task::spawn(async move {
        if let Err(e) = crate::gateway::serve_listener(listener, app, rx).await {
            tracing::error!("the gateway stopped: {e}");
        }
    }));
    Ok(addr)
}

/// Start the chat channels taking messages in.
fn start_channels(
    d: &Daemon,
    shutdown: &tokio::sync::watch::Receiver<bool>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) {
    let (sink, state) = (&d.routing.sink, &d.routing.state);
    if let Some(ch) = d.channels.telegram.clone() {
        let (sink, state, rx) = (sink.clone(), state.clone(), shutdown.clone());
        let polling = d.loaded.config.channels.telegram.mode != TelegramMode::Webhook;
        match &d.replica {
            // One poller among the replicas; in webhook mode every replica takes updates.
            Some(r) if polling => {
                let poller = replica::telegram_poller(r.clone(), ch, sink, state, rx);
                tasks.push(ethan_core::task::spawn(poller));
            }
            _ => tasks.push(ethan_core::task::spawn(async move {
                if let Err(e) = ch.run(sink, state, rx).await {
                    tracing::error!("telegram channel stopped: {e}");
                }
            })),
        }
    }
    if let Some(ch) = d.channels.lark.clone() {
        let (sink, state, rx) = (sink.clone(), state.clone(), shutdown.clone());
        tasks.push(ethan_core::task::spawn(async move {
            if let Err(e) = ch.run(sink, state, rx).await {
                tracing::error!("lark channel stopped: {e}");
            }
        }));
    }
}
