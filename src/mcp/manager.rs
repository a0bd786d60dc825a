//! The lifecycle of the configured servers, and the registry they feed.
//!
//! [`McpManager::start`] starts one task per enabled server, in parallel and in the background
//! (channels do not wait for them). Each task connects ([`super::connect`]), lists the tools
//! (`tools/list`, MCP spec 2025-06-18 "Tools", within the caps of [`super::lifecycle`]), and
//! swaps a new registry into the executor: the built-ins plus the tools of every server
//! ([`McpManager::rebuild`]). A `notifications/tools/list_changed` lists that server again and
//! swaps again, as does any later successful list (a server that listed nothing, or failed to
//! list, at first); a turn keeps the registry it started with. A tool left out (a bad schema, a
//! clashing name) is logged once per server and reason, not at every rebuild.
//!
//! While connected, the server is pinged ([`super::lifecycle::ping`]) every
//! [`super::lifecycle::ping_every`] of its `timeout_secs`; one that does not answer within it is
//! killed and restarted like one whose process exited. When a server's connection ends its
//! known tools stay registered and answer a `dependency` error saying the server is being
//! restarted, and the task reconnects after 1, 2, 4 … seconds (at most 30; back to 1 only after
//! a connection that stayed up 30 s: [`super::lifecycle::Backoff`]). A command that does not
//! exist is logged once at error level, naming server and command; its retries only at debug
//! level. [`McpManager::shutdown`] closes every connection and kills every child's process
//! group.

use super::connect::{connect, kill_group, ConnectError};
pub use super::lifecycle::{list_tools, MAX_RESTART_DELAY};
use super::lifecycle::{ping, ping_every, Backoff};
use super::names::tool_name;
use super::server::{lock, Handler, ServerHandle};
use super::tool::{Hints, McpTool};
use crate::config::{Loaded, McpServerConfig};
use crate::tools::executor::RegistrySlot;
use crate::tools::redact::Redactor;
use crate::tools::registry::Registry;
use rmcp::service::{Peer, RoleClient};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

struct Server {
    handle: Arc<ServerHandle>,
    cfg: McpServerConfig,
    /// The last `tools/list` answer, each tool as JSON.
    tools: Mutex<Vec<Value>>,
    /// Whether a `tools/list` answered once.
    listed: std::sync::atomic::AtomicBool,
}

/// The configured servers, their connections, and the registry they feed.
pub struct McpManager {
    servers: Vec<Arc<Server>>,
    base: Arc<Registry>,
    slot: RegistrySlot,
    redactor: Arc<Redactor>,
    workspace: PathBuf,
    /// `$ETHAN_HOME`, hidden from the children by the sandbox.
    home: PathBuf,
    /// Places hidden besides it (the config file, wherever it lives).
    protected_also: Vec<PathBuf>,
    /// What the daemon's egress guards share (servers over HTTP).
    egress: crate::egress::Egress,
    shutdown: CancellationToken,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Servers whose first start ended (listed, or failed); with `settled_changed`, for
    /// [`McpManager::wait_started`].
    settled: std::sync::atomic::AtomicUsize,
    settled_changed: Notify,
    /// Held while the registry is rebuilt and swapped.
    rebuilding: Mutex<()>,
    /// The skipped tools already logged (`<tool>: <reason>`), so a rebuild logs only new ones.
    logged_skips: Mutex<HashSet<String>>,
}

/// Whether the server's `allow` / `deny` lists let `tool` (the server's own name) through.
pub fn server_allows(cfg: &McpServerConfig, tool: &str) -> bool {
    (cfg.allow.is_empty() || cfg.allow.iter().any(|a| a == tool))
        && !cfg.deny.iter().any(|d| d == tool)
}

/// Build the adapters of one server's listed tools (`tools`: JSON of `tools/list` entries).
/// Entries without a string `name` are skipped with a log line.
pub fn adapters(
    handle: &Arc<ServerHandle>,
    cfg: &McpServerConfig,
    tools: &[Value],
    redactor: &Arc<Redactor>,
) -> Vec<McpTool> {
    let mut out = Vec::new();
    for t in tools {
        let Some(remote) = t.get("name").and_then(Value::as_str) else {
            tracing::error!(
                "the MCP server {} listed a tool without a name; skipped",
                handle.name
            );
            continue;
        };
        if !server_allows(cfg, remote) {
            continue;
        }
        let mut parameters = t.get("inputSchema").cloned().unwrap_or(Value::Null);
        if let Value::Object(m) = &mut parameters {
            m.remove("$schema");
        }
        let description = t
            .get("description")
            .and_then(Value::as_str)
            .or_else(|| t.get("title").and_then(Value::as_str))
            .unwrap_or("")
            .to_string();
        let hints = Hints::from_annotations(t.get("annotations"));
        let decl = McpTool::declare(
            tool_name(&handle.name, remote),
            format!("[MCP server {}] {description}", handle.name),
            parameters,
            hints,
            Duration::from_secs(cfg.timeout_secs.max(1)),
        );
        out.push(McpTool {
            decl,
            remote: remote.to_string(),
            hints,
            handle: handle.clone(),
            redactor: redactor.clone(),
        });
    }
    out
}

/// `base` plus the adapters, in order; a name taken by an earlier MCP tool is an error naming
/// both (server and tool), the later one skipped. Schemas go through the registry's full check.
/// A skipped tool is logged when `logged` does not hold it yet (then it does).
pub fn registry_with(
    base: &Registry,
    tools: Vec<McpTool>,
    logged: &Mutex<HashSet<String>>,
) -> Registry {
    let mut r = base.clone();
    let mut seen: HashMap<String, (String, String)> = HashMap::new();
    let log_once = |name: &str, reason: &str| {
        if lock(logged).insert(format!("{name}: {reason}")) {
            tracing::error!("tool {name:?} skipped: {reason}");
        }
    };
    for t in tools {
        if let Some((server, remote)) = seen.get(&t.decl.name) {
            let reason = format!(
                "the tool {:?} of the MCP server {} has the same name as the tool {:?} of the MCP \
                 server {}",
                t.remote, t.handle.name, remote, server
            );
            log_once(&t.decl.name, &reason);
            r.record_skipped(&t.decl.name, reason);
            continue;
        }
        seen.insert(
            t.decl.name.clone(),
            (t.handle.name.clone(), t.remote.clone()),
        );
        let name = t.decl.name.clone();
        if let Some(reason) = r.register_quietly(Arc::new(t)) {
            log_once(&name, &reason);
        }
    }
    r
}

impl McpManager {
    /// The manager of `loaded`'s enabled servers; `slot` is the executor's registry, whose
    /// current content is taken as the built-ins.
    pub fn new(loaded: &Loaded, slot: RegistrySlot) -> Arc<Self> {
        Self::within(loaded, slot, &Default::default())
    }

    /// [`McpManager::new`], servers over HTTP reached through guards of `egress` (the
    /// daemon's).
    pub fn within(
        loaded: &Loaded,
        slot: RegistrySlot,
        egress: &crate::egress::Egress,
    ) -> Arc<Self> {
        let base = slot.read().unwrap_or_else(|e| e.into_inner()).clone();
        let servers = loaded
            .config
            .mcp
            .servers
            .iter()
            .filter(|(_, c)| c.enabled)
            .map(|(name, cfg)| {
                Arc::new(Server {
                    handle: Arc::new(ServerHandle::new(name)),
                    cfg: cfg.clone(),
                    tools: Mutex::new(Vec::new()),
                    listed: Default::default(),
                })
            })
            .collect();
        Arc::new(Self {
            servers,
            base,
            slot,
            redactor: Arc::new(Redactor::new(loaded.secret_values())),
            workspace: loaded.workspace(),
            home: loaded.home.clone(),
            protected_also: config_file_of(loaded),
            egress: egress.clone(),
            shutdown: CancellationToken::new(),
            tasks: Mutex::new(Vec::new()),
            settled: Default::default(),
            settled_changed: Notify::new(),
            rebuilding: Mutex::new(()),
            logged_skips: Mutex::new(HashSet::new()),
        })
    }

    /// Start every server in the background.
    pub fn start(self: &Arc<Self>) {
        let mut tasks = lock(&self.tasks);
        for s in &self.servers {
            let (me, s) = (self.clone(), s.clone());
            tasks.push(ethan_core::task::spawn(
                async move { me.supervise(s).await },
            ));
        }
    }

    /// Wait until every server's first start has ended (its tools listed, or failed), at most
    /// `limit` (for `ethan chat -m`, whose one turn should see the tools).
    pub async fn wait_started(&self, limit: Duration) {
        use std::sync::atomic::Ordering;
        let _ = tokio::time::timeout(limit, async {
            loop {
                let notified = self.settled_changed.notified();
                if self.settled.load(Ordering::SeqCst) >= self.servers.len() {
                    return;
                }
                notified.await;
            }
        })
        .await;
    }

    /// The servers whose tools were never listed (not started yet, or failing).
    pub fn not_ready(&self) -> Vec<String> {
        self.servers
            .iter()
            .filter(|s| !s.listed.load(std::sync::atomic::Ordering::SeqCst))
            .map(|s| s.handle.name.clone())
            .collect()
    }

    fn settle_once(&self, first: &mut bool) {
        if std::mem::replace(first, false) {
            self.settled
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            self.settled_changed.notify_waiters();
        }
    }

    /// Close every connection (children and their process groups killed); waits up to 5 s.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        let tasks: Vec<_> = lock(&self.tasks).drain(..).collect();
        for t in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
    }

    /// Swap in the built-ins plus every server's known tools. One rebuild at a time, so two
    /// servers listing at once cannot swap in each other's older view.
    pub fn rebuild(&self) {
        let _one = lock(&self.rebuilding);
        let mut all = Vec::new();
        for s in &self.servers {
            let tools = lock(&s.tools).clone();
            all.extend(adapters(&s.handle, &s.cfg, &tools, &self.redactor));
        }
        let mut r = registry_with(&self.base, all, &self.logged_skips);
        // Only the servers whose resources the owner opened (`resources: true`).
        // Inserted one by one rather than collected, which would sort with a copy of the
        // standard library's sort of its own (`ethan_core::sort`).
        let mut readable = std::collections::BTreeMap::new();
        for s in self.servers.iter().filter(|s| s.cfg.resources) {
            let limit = Duration::from_secs(s.cfg.timeout_secs.max(1));
            readable.insert(s.handle.name.clone(), (s.handle.clone(), limit));
        }
        if !readable.is_empty() {
            r.register(Arc::new(super::resources::ResourceRead::new(
                readable,
                self.redactor.clone(),
            )));
        }
        let r = Arc::new(r);
        *self.slot.write().unwrap_or_else(|e| e.into_inner()) = r;
    }

    /// Lists a server's tools again (within its `timeout_secs`) and rebuilds the registry.
    async fn relist(&self, s: &Server, peer: &Peer<RoleClient>) -> Result<usize, String> {
        let limit = Duration::from_secs(s.cfg.timeout_secs.max(1));
        let (tools, cut) = tokio::time::timeout(limit, list_tools(peer))
            .await
            .map_err(|_| format!("no answer to tools/list within {} s", limit.as_secs()))??;
        if let Some(cut) = cut {
            if lock(&self.logged_skips).insert(format!("{}: {cut}", s.handle.name)) {
                tracing::warn!("mcp server {} lists too many tools: {cut}", s.handle.name);
            }
        }
        let n = tools.len();
        *lock(&s.tools) = tools;
        s.listed.store(true, std::sync::atomic::Ordering::SeqCst);
        self.rebuild();
        Ok(n)
    }

    async fn supervise(self: Arc<Self>, s: Arc<Server>) {
        let name = s.handle.name.clone();
        let what = s
            .cfg
            .command
            .clone()
            .or_else(|| s.cfg.url.clone())
            .unwrap_or_default();
        let timeout = Duration::from_secs(s.cfg.timeout_secs.max(1));
        let mut backoff = Backoff::default();
        let mut missing_logged = false;
        let mut failures = 0u32;
        let mut first = true;
        loop {
            let handler = Handler::default();
            let changed = handler.changed.clone();
            let connected = tokio::select! {
                _ = self.shutdown.cancelled() => return,
                c = connect(&name, &s.cfg, &self.workspace, Some(&self.home), &self.protected_also, handler, self.redactor.clone(), &self.egress) => c,
            };
            let mut up_since = None;
            match connected {
                Ok((running, pgid)) => {
                    up_since = Some(std::time::Instant::now());
                    *lock(&s.handle.pgid) = pgid;
                    let peer = running.peer().clone();
                    // Calls go through from now on, whether or not the first list worked: a
                    // later list (list_changed) brings the tools.
                    s.handle.set_peer(Some(peer.clone()));
                    match self.relist(&s, &peer).await {
                        Ok(n) => {
                            tracing::info!("mcp server {name} ready: {n} tools");
                            failures = 0;
                            missing_logged = false;
                        }
                        Err(e) => {
                            tracing::warn!("mcp server {name}: tools/list failed: {e}");
                        }
                    }
                    self.settle_once(&mut first);
                    let ct = running.cancellation_token();
                    let mut wait = Box::pin(running.waiting());
                    let mut pings = tokio::time::interval(ping_every(timeout));
                    pings.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    pings.reset();
                    let stopped = loop {
                        tokio::select! {
                            _ = self.shutdown.cancelled() => break true,
                            _ = changed.notified() => match self.relist(&s, &peer).await {
                                Ok(n) => tracing::info!("mcp server {name} changed its tools: {n} tools"),
                                Err(e) => tracing::warn!("mcp server {name}: tools/list failed: {e}"),
                            },
                            _ = pings.tick() => {
                                if let Err(e) = ping(&peer, timeout).await {
                                    tracing::warn!("mcp server {name}: {e}; it is restarted");
                                    break false;
                                }
                            }
                            r = &mut wait => {
                                tracing::debug!("mcp server {name}: the connection ended: {r:?}");
                                break false;
                            }
                        }
                    };
                    s.handle.set_peer(None);
                    *lock(&s.handle.pgid) = None;
                    if stopped {
                        ct.cancel();
                        let _ = tokio::time::timeout(Duration::from_secs(3), wait).await;
                        kill_group(pgid);
                        tracing::debug!("mcp server {name} closed");
                        return;
                    }
                    ct.cancel();
                    kill_group(pgid);
                }
                Err(ConnectError::NotFound(cmd)) => {
                    if missing_logged {
                        tracing::debug!("mcp server {name}: the command {cmd:?} is still missing");
                    } else {
                        tracing::error!(
                            "mcp server {name} cannot start: the command {cmd:?} was not found \
                             (mcp.servers.{name}.command); retrying quietly"
                        );
                        missing_logged = true;
                    }
                }
                Err(e) => {
                    if failures == 0 {
                        tracing::warn!("mcp server {name} ({what}) cannot start: {e}; retrying");
                    } else {
                        tracing::debug!("mcp server {name} ({what}) cannot start: {e}");
                    }
                }
            }
            self.settle_once(&mut first);
            failures += 1;
            let delay = backoff.after(up_since);
            if up_since.is_some() {
                tracing::warn!(
                    "mcp server {name} stopped; its tools answer an error until it is back \
                     (restart in {} s)",
                    delay.as_secs()
                );
            }
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }
}

/// What [`probe`] found: the tools as adapters, and the prompt and resource lines of
/// [`super::resources::catalogue`].
pub struct Probed {
    pub tools: Vec<McpTool>,
    pub prompts: Vec<String>,
    pub resources: Vec<String>,
}

/// The places protected besides `$ETHAN_HOME` ([`crate::sandbox::settings::protected_also`]).
fn config_file_of(loaded: &Loaded) -> Vec<PathBuf> {
    crate::sandbox::settings::protected_also(loaded.file_found.then_some(loaded.path.as_path()))
}

/// One server started, listed and stopped (for `ethan mcp list` and `ethan doctor`): its tools
/// as adapters (and its prompts and resources), or why it failed.
pub async fn probe(loaded: &Loaded, name: &str, cfg: &McpServerConfig) -> Result<Probed, String> {
    let redactor = Arc::new(Redactor::new(loaded.secret_values()));
    let (running, pgid) = connect(
        name,
        cfg,
        &loaded.workspace(),
        Some(&loaded.home),
        &config_file_of(loaded),
        Handler::default(),
        redactor.clone(),
        &Default::default(),
    )
    .await
    .map_err(|e| e.to_string())?;
    let limit = Duration::from_secs(cfg.timeout_secs.max(1));
    let listed = tokio::time::timeout(limit, list_tools(running.peer()))
        .await
        .unwrap_or_else(|_| Err("no answer to tools/list in time".into()));
    let (prompts, resources) = match &listed {
        Ok(_) => super::resources::catalogue(running.peer(), limit).await,
        Err(_) => Default::default(),
    };
    let _ = tokio::time::timeout(Duration::from_secs(3), running.cancel()).await;
    kill_group(pgid);
    let (tools, _) = listed?;
    Ok(Probed {
        tools: adapters(&Arc::new(ServerHandle::new(name)), cfg, &tools, &redactor),
        prompts,
        resources,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ErrorKind;
    use serde_json::json;
    use std::sync::RwLock;

    fn cfg() -> McpServerConfig {
        McpServerConfig {
            command: Some("x".into()),
            ..Default::default()
        }
    }

    #[test]
    fn tools_are_adapted_filtered_and_checked() {
        let h = Arc::new(ServerHandle::new("srv"));
        let red = Arc::new(Redactor::new(vec![]));
        let listed = vec![
            json!({"name": "echo", "description": "Echo", "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"message": {"type": "string"}}}, "annotations": {"readOnlyHint": true}}),
            json!({"name": "bad", "inputSchema": {"type": "object", "properties": {"xs": {"type": "array"}}}}),
            json!({"name": "hidden", "inputSchema": {"type": "object"}}),
            json!({"noname": true}),
        ];
        let mut c = cfg();
        c.deny = vec!["hidden".into()];
        let tools = adapters(&h, &c, &listed, &red);
        assert_eq!(tools.len(), 2);
        assert!(tools[0].decl.parameters.get("$schema").is_none());
        let r = registry_with(&Registry::default(), tools, &Mutex::default());
        let names: Vec<&str> = r.iter().map(|t| t.decl().name.as_str()).collect();
        assert_eq!(names, ["mcp__srv__echo"]);
        assert!(r.skipped()[0].name == "mcp__srv__bad", "{:?}", r.skipped());
        assert_eq!(
            r.get("mcp__srv__echo").unwrap().decl().risk.as_str(),
            "read_only"
        );
        let mut c = cfg();
        c.allow = vec!["bad".into()];
        assert_eq!(adapters(&h, &c, &listed, &red).len(), 1);
    }

    #[test]
    fn a_clash_names_both_and_keeps_the_first() {
        let red = Arc::new(Redactor::new(vec![]));
        let a = Arc::new(ServerHandle::new("s"));
        let listed = vec![
            json!({"name": "get.x", "inputSchema": {"type": "object"}}),
            json!({"name": "get/x", "inputSchema": {"type": "object"}}),
        ];
        let r = registry_with(
            &Registry::default(),
            adapters(&a, &cfg(), &listed, &red),
            &Mutex::default(),
        );
        assert_eq!(r.iter().count(), 1);
        let why = &r.skipped()[0].reason;
        assert!(why.contains("get/x") && why.contains("get.x"), "{why}");
    }

    #[tokio::test]
    async fn a_server_that_is_not_running_gives_a_dependency_error() {
        let h = ServerHandle::new("gone");
        let r: crate::tools::ToolResult = h.call("echo", None).await.into();
        assert_eq!(r.error_kind, Some(ErrorKind::Dependency));
        assert!(r
            .model_text()
            .contains("not running; it is being restarted"));
    }

    #[tokio::test]
    async fn a_missing_command_fails_the_probe_naming_it() {
        let loaded = Loaded {
            config: crate::config::Config::default(),
            home: std::env::temp_dir(),
            path: PathBuf::from("/nonexistent/config.yaml"),
            file_found: false,
            notices: Vec::new(),
        };
        let mut c = cfg();
        c.command = Some("/nonexistent/mcp-server-xyz".into());
        let Err(e) = probe(&loaded, "nope", &c).await.map(|p| p.tools.len()) else {
            panic!("started")
        };
        assert!(
            e.contains("/nonexistent/mcp-server-xyz") && e.contains("not found"),
            "{e}"
        );
    }

    /// End to end against the real `server-everything` installed by `tests/tools/install.sh`
    /// (`ETHAN_TEST_TOOLS`, else `target/test-tools`); fails, saying so, when it is missing.
    #[tokio::test]
    async fn the_manager_registers_calls_and_restarts_a_real_server() {
        let dir = std::env::var_os("ETHAN_TEST_TOOLS")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/test-tools"));
        let bin = dir.join("npm/node_modules/.bin/mcp-server-everything");
        assert!(
            bin.exists(),
            "{} is not installed: run tests/tools/install.sh",
            bin.display()
        );
        let home = tempfile::tempdir().unwrap();
        let mut config = crate::config::Config::default();
        config.mcp.servers.insert(
            "everything".into(),
            McpServerConfig {
                command: Some(bin.display().to_string()),
                ..Default::default()
            },
        );
        let loaded = Loaded {
            config,
            home: home.path().to_path_buf(),
            path: home.path().join("config.yaml"),
            file_found: false,
            notices: Vec::new(),
        };
        let slot: RegistrySlot = Arc::new(RwLock::new(Arc::new(Registry::default())));
        let m = McpManager::new(&loaded, slot.clone());
        m.start();
        let echo = |slot: &RegistrySlot| slot.read().unwrap().get("mcp__everything__echo").cloned();
        let ctx = crate::tools::ToolContext::local(home.path().to_path_buf());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let mut first = None;
        while tokio::time::Instant::now() < deadline {
            if let Some(t) = echo(&slot) {
                let r: crate::tools::ToolResult =
                    t.run(json!({"message": "hi"}), &ctx).await.into();
                if r.ok {
                    first = Some(r.output);
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert_eq!(first.as_deref(), Some("Echo: hi"));
        // Kill the process group: the tool stays and answers a dependency error, then the
        // restarted server serves again.
        // Only the group this manager started.
        let pgid = m.servers[0].handle.pgid();
        assert!(pgid.is_some());
        kill_group(pgid);
        let mut saw_dependency = false;
        let mut back = false;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while tokio::time::Instant::now() < deadline {
            let t = echo(&slot).expect("still registered");
            let r: crate::tools::ToolResult = t.run(json!({"message": "again"}), &ctx).await.into();
            if r.ok {
                back = saw_dependency;
                if back {
                    break;
                }
            } else {
                assert_eq!(r.error_kind, Some(ErrorKind::Dependency), "{r:?}");
                saw_dependency = true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            saw_dependency && back,
            "dependency {saw_dependency}, back {back}"
        );
        m.shutdown().await;
    }
}
