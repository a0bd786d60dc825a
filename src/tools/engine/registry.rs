//! The registry: every tool the daemon knows, by name, with its compiled argument validator.
//!
//! Registration checks the name (`^[A-Za-z0-9_-]{1,64}$`, not an alias, not taken) and the
//! `parameters` schema ([`crate::tools::schema::check_parameters`]: a valid JSON Schema whose arrays all
//! have `items`). A tool that fails is skipped with one logged error, never sent to the model,
//! and listed with its reason by `ethan tools list`.
//!
//! Built-in tools ([`Registry::register_builtin`]) are checked for shape only at start and their
//! argument validators are compiled on their first call: their schemas are fixed and a unit test
//! meta-validates every one, and compiling them all at start cost ~28 MiB of heap and ~35 ms (the
//! `jsonschema` crate's meta-schema state). Tools from anywhere else ([`Registry::register`]) get
//! the full check and their validator at registration. Either way a validator is compiled once.

use crate::config::Config;
use crate::tools::schema::{check_parameters, check_shape, ArgsValidator};
use crate::tools::Tool;
use ethan_core::message::ToolSpec;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

/// Alternative names models commonly use, mapped to ours. Alias names cannot be registered.
pub const ALIASES: &[(&str, &str)] = &[
    ("bash", "shell"),
    ("exec", "shell"),
    ("read_file", "file_read"),
    ("write_file", "file_write"),
    ("list_dir", "file_list"),
];

/// A tool that was left out, and why.
#[derive(Debug, Clone)]
pub struct Skipped {
    pub name: String,
    pub reason: String,
}

#[derive(Clone)]
struct Entry {
    tool: Arc<dyn Tool>,
    /// Compiled at registration (outside tools) or on first use (built-in tools); shared by
    /// the clones of a registry.
    validator: Arc<OnceLock<Result<ArgsValidator, String>>>,
    spec: ToolSpec,
}

/// Clones share the tools and their compiled validators (the MCP manager builds each new
/// registry from the built-ins this way).
#[derive(Default, Clone)]
pub struct Registry {
    tools: BTreeMap<String, Entry>,
    skipped: Vec<Skipped>,
    /// The browser the browser tools share, for ending a conversation's browser session.
    #[cfg(feature = "browser")]
    browser: Option<Arc<crate::tools::builtin::browser::hub::BrowserHub>>,
    /// What hears that private data entered a session (the browser), given to each turn.
    taint_hooks: ethan_core::tool::TaintHooks,
}

/// Whether `name` is a valid tool name.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl Registry {
    /// Add a tool from outside the daemon: name, full schema check (meta-validation included)
    /// and its compiled validator now; or record (and log) why it was skipped.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        if let Some((name, reason)) = self.add(tool, false) {
            tracing::error!("tool {name:?} skipped: {reason}");
        }
    }

    /// [`Registry::register`] without the log line: the reason a tool was skipped, for a
    /// caller that logs it once (the MCP manager rebuilds the registry many times).
    pub fn register_quietly(&mut self, tool: Arc<dyn Tool>) -> Option<String> {
        self.add(tool, false).map(|(_, reason)| reason)
    }

    /// Add a built-in tool: the name and shape checks now, the validator on first use (see the
    /// module docs).
    pub fn register_builtin(&mut self, tool: Arc<dyn Tool>) {
        if let Some((name, reason)) = self.add(tool, true) {
            tracing::error!("tool {name:?} skipped: {reason}");
        }
    }

    /// Add `tool`; when it is skipped, its name and the reason.
    fn add(&mut self, tool: Arc<dyn Tool>, builtin: bool) -> Option<(String, String)> {
        let name = tool.decl().name.to_string();
        let parameters = tool.decl().parameters.clone();
        let validator = Arc::new(OnceLock::new());
        let checked = if !valid_name(&name) {
            Err("the name must match ^[A-Za-z0-9_-]{1,64}$".to_string())
        } else if ALIASES.iter().any(|(a, _)| *a == name) {
            Err("the name is reserved as an alias".to_string())
        } else if self.tools.contains_key(&name) {
            Err("a tool with this name is already registered".to_string())
        } else if builtin {
            check_shape(&parameters).map_err(|e| format!("bad parameters schema: {e}"))
        } else {
            check_parameters(&parameters)
                .map_err(|e| format!("bad parameters schema: {e}"))
                .and_then(|()| ArgsValidator::compile(&parameters))
                .map(|v| {
                    let _ = validator.set(Ok(v));
                })
        };
        match checked {
            Err(reason) => {
                self.skipped.push(Skipped {
                    name: name.clone(),
                    reason: reason.clone(),
                });
                Some((name, reason))
            }
            Ok(()) => {
                let spec = ToolSpec {
                    name: name.clone(),
                    description: tool.decl().description.to_string(),
                    parameters,
                };
                self.tools.insert(
                    name,
                    Entry {
                        tool,
                        validator,
                        spec,
                    },
                );
                None
            }
        }
    }

    /// Record a tool left out before registration (e.g. an MCP tool whose name clashes), for
    /// `ethan tools list`.
    pub fn record_skipped(&mut self, name: &str, reason: String) {
        self.skipped.push(Skipped {
            name: name.to_string(),
            reason,
        });
    }

    /// The canonical name for `name` (an alias resolved), if such a tool exists.
    pub fn resolve(&self, name: &str) -> Option<&str> {
        if let Some((k, _)) = self.tools.get_key_value(name) {
            return Some(k.as_str());
        }
        let target = ALIASES.iter().find(|(a, _)| *a == name)?.1;
        self.tools.get_key_value(target).map(|(k, _)| k.as_str())
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name).map(|e| &e.tool)
    }

    /// The compiled validator of a registered tool (compiled now if this is its first use);
    /// `Err` says why its schema does not compile.
    pub fn validator(&self, name: &str) -> Option<Result<&ArgsValidator, &str>> {
        let e = self.tools.get(name)?;
        let compiled = e
            .validator
            .get_or_init(|| ArgsValidator::compile(&e.spec.parameters));
        Some(compiled.as_ref().map_err(String::as_str))
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.values().map(|e| &e.tool)
    }

    pub fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    /// A conversation ended (`/new`, the end of a terminal session): what the tools kept for
    /// `session_key` goes — its browser session's tabs and their contexts (cookies, storage,
    /// cache). Nothing else is kept per conversation by a tool.
    pub async fn end_session(&self, session_key: &str) {
        #[cfg(feature = "browser")]
        if let Some(hub) = &self.browser {
            if hub.close_session(session_key).await {
                tracing::info!("the browser session of {session_key} was closed");
            }
        }
        #[cfg(not(feature = "browser"))]
        let _ = session_key;
    }

    /// What hears that private data entered a session: give it to each turn's
    /// [`ethan_core::tool::Taint::of_session`].
    pub fn taint_hooks(&self) -> &ethan_core::tool::TaintHooks {
        &self.taint_hooks
    }

    /// The `tools[]` entries for the named tools, in the order given (a request keeps the order
    /// of the tools it offered before, for the prompt cache).
    pub fn specs<'a>(&self, names: impl IntoIterator<Item = &'a String>) -> Vec<ToolSpec> {
        names
            .into_iter()
            .filter_map(|n| self.tools.get(n))
            .map(|e| e.spec.clone())
            .collect()
    }

    /// The builtin tools, configured from `config` (web_search settings fixed at start).
    /// No knowledge base (it needs the daemon's store).
    /// Its egress guards have an [`crate::egress::Egress`] of their own.
    pub fn builtin(config: &Config) -> Self {
        Self::builtin_at(config, None, None, &Default::default())
    }

    /// The builtin tools; with `config_path`, `tools.web_search` is re-read from that file when
    /// it changes (no restart needed). `knowledge`: the knowledge base of the `knowledge_*` tools
    /// (none: they answer that there is none here). The web tools' and the browser's egress
    /// guards share `egress` (the daemon's).
    pub fn builtin_at(
        config: &Config,
        config_path: Option<&std::path::Path>,
        knowledge: Option<Arc<dyn ethan_core::knowledge::KnowledgeBase>>,
        egress: &crate::egress::Egress,
    ) -> Self {
        let shell_timeout = config
            .tools
            .per_tool
            .get("shell")
            .and_then(|o| o.timeout_secs)
            .unwrap_or(crate::tools::shell::DEFAULT_TIMEOUT_SECS);
        let git_hooks = config
            .tools
            .per_tool
            .get("shell")
            .and_then(|o| o.git_hooks)
            .unwrap_or(false);
        let mut r = Registry::default();
        r.register_builtin(Arc::new(
            crate::tools::shell::Shell::new(shell_timeout)
                .with_secrets(crate::config::secret_values(config))
                .with_git_hooks(git_hooks),
        ));
        r.register_builtin(Arc::new(crate::tools::file_read::FileRead));
        r.register_builtin(Arc::new(crate::tools::file_write::FileWrite));
        r.register_builtin(Arc::new(crate::tools::file_list::FileList));
        r.register_builtin(Arc::new(crate::tools::find_tools::FindTools));
        r.register_builtin(Arc::new(crate::tools::ui_card::UiCard));
        let search = match config_path {
            Some(p) => crate::tools::web_search::WebSearch::watching(Arc::new(
                crate::config::watch::ConfigWatch::at(p.to_path_buf(), config),
            )),
            None => crate::tools::web_search::WebSearch::new(config.tools.web_search.clone()),
        };
        r.register_builtin(Arc::new(search.within(egress)));
        let fetch = crate::tools::web_fetch::WebFetch::guarded(
            &config.tools.web_fetch,
            egress.system_guard(&config.tools.web_fetch.allow_private),
        );
        r.register_builtin(Arc::new(fetch));
        // One headless browser per daemon, shared by the three browser tools.
        #[cfg(feature = "browser")]
        {
            let browser = crate::tools::builtin::browser::hub::BrowserHub::new(
                config.tools.browser.clone(),
                egress.system_guard(&config.tools.web_fetch.allow_private),
            );
            browser.set_image_limit(config.media.max_image_bytes);
            browser.hear_taint(&r.taint_hooks);
            r.register_builtin(Arc::new(
                crate::tools::builtin::browser::session::BrowserSession(browser.clone()),
            ));
            r.register_builtin(Arc::new(crate::tools::builtin::browser::tab::BrowserTab(
                browser.clone(),
            )));
            r.register_builtin(Arc::new(crate::tools::builtin::browser::page::BrowserPage(
                browser.clone(),
            )));
            r.browser = Some(browser);
        }
        r.register_builtin(Arc::new(crate::tools::rg_search::RgSearch::new()));
        r.register_builtin(Arc::new(crate::tools::fd_find::FdFind::new()));
        let tz = config.timezone.clone();
        r.register_builtin(Arc::new(
            crate::tools::schedule_create::ScheduleCreate::new(tz.clone()).with_models(
                config
                    .model
                    .endpoints()
                    .into_iter()
                    .map(|e| e.name)
                    .collect(),
            ),
        ));
        r.register_builtin(Arc::new(crate::tools::schedule_list::ScheduleList::new(
            tz.clone(),
        )));
        r.register_builtin(Arc::new(crate::tools::schedule_pause::SchedulePause::new(
            tz.clone(),
        )));
        r.register_builtin(Arc::new(
            crate::tools::schedule_remove::ScheduleRemove::new(tz),
        ));
        let knowledge =
            knowledge.unwrap_or_else(|| Arc::new(crate::tools::builtin::knowledge::Unavailable));
        r.register_builtin(Arc::new(crate::tools::knowledge_search::KnowledgeSearch(
            knowledge.clone(),
        )));
        r.register_builtin(Arc::new(crate::tools::knowledge_read::KnowledgeRead(
            knowledge.clone(),
        )));
        r.register_builtin(Arc::new(crate::tools::knowledge_add::KnowledgeAdd(
            knowledge.clone(),
        )));
        r.register_builtin(Arc::new(crate::tools::knowledge_edit::KnowledgeEdit(
            knowledge,
        )));
        r.register_builtin(Arc::new(crate::tools::memory_save::MemorySave));
        r.register_builtin(Arc::new(crate::tools::memory_search::MemorySearch));
        r.register_builtin(Arc::new(crate::tools::memory_forget::MemoryForget));
        r.register_builtin(Arc::new(crate::tools::history_search::HistorySearch));
        r.register_builtin(Arc::new(crate::tools::delegate::Delegate));
        r.register_builtin(Arc::new(crate::tools::skill_read::SkillRead));
        #[cfg(feature = "test-tools")]
        r.register_builtin(Arc::new(crate::tools::test_panic::TestPanic));
        #[cfg(feature = "test-tools")]
        r.register_builtin(Arc::new(
            crate::tools::builtin::exec::unapproved::TestUnapprovedShell::new(
                crate::tools::shell::Shell::new(shell_timeout),
            ),
        ));
        if let Some(lark) = lark_client(config) {
            let tz = config.timezone.clone();
            r.register_builtin(Arc::new(
                crate::tools::lark_calendar::LarkCalendarEvents::new(lark.clone(), tz.clone()),
            ));
            r.register_builtin(Arc::new(
                crate::tools::lark_messages::LarkChatMessages::new(lark.clone(), tz),
            ));
            r.register_builtin(Arc::new(crate::tools::lark_send::LarkMessageSend::new(
                lark,
            )));
        }
        r
    }
}

/// The Lark tools' client: `None` unless `channels.lark.app_id` and `app_secret` are both set.
fn lark_client(config: &Config) -> Option<Arc<crate::tools::lark_common::LarkClient>> {
    let l = &config.channels.lark;
    if l.app_id.trim().is_empty() || l.app_secret.expose().trim().is_empty() {
        return None;
    }
    let lc = crate::config::lark_config(config);
    crate::tools::lark_common::LarkClient::new(
        &lc.base_url,
        &lc.app_id,
        &lc.app_secret,
        l.user_access_token.expose(),
        l.user_refresh_token.expose(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{Risk, ToolContext, ToolDecl, ToolError, ToolOutput};
    use async_trait::async_trait;
    use serde_json::{json, Value};

    struct Fake(ToolDecl);

    fn fake(name: &str, parameters: Value) -> Fake {
        Fake(ToolDecl::new(name, "fake", parameters).risk(Risk::ReadOnly))
    }

    #[async_trait]
    impl Tool for Fake {
        fn decl(&self) -> &ToolDecl {
            &self.0
        }
        async fn run(&self, _: Value, _: &ToolContext) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::new(""))
        }
    }

    #[test]
    fn bad_tools_are_skipped_with_a_reason() {
        let mut r = Registry::default();
        let ok = json!({"type": "object", "properties": {}});
        r.register(Arc::new(fake("good", ok.clone())));
        r.register(Arc::new(fake("bad name!", ok.clone())));
        r.register(Arc::new(fake("bash", ok.clone())));
        r.register(Arc::new(fake("good", ok.clone())));
        r.register(Arc::new(fake(
            "no_items",
            json!({"type": "object", "properties": {"xs": {"type": "array"}}}),
        )));
        r.register(Arc::new(fake("bad_schema", json!({"type": 12}))));
        assert_eq!(r.iter().count(), 1);
        let reasons: Vec<String> = r
            .skipped()
            .iter()
            .map(|s| format!("{}: {}", s.name, s.reason))
            .collect();
        assert_eq!(reasons.len(), 5, "{reasons:?}");
        assert!(reasons[0].contains("must match"));
        assert!(reasons[1].contains("alias"));
        assert!(reasons[2].contains("already registered"));
        assert!(reasons[3].contains("has no `items`"), "{reasons:?}");
        assert!(
            reasons[4].contains("not a valid JSON Schema"),
            "{reasons:?}"
        );
        assert!(r.specs(&["no_items".to_string()]).is_empty());
    }

    /// The built-in tools skip meta-validation at start; this is where it happens instead.
    #[test]
    fn every_builtin_schema_is_valid_and_compiles() {
        let mut config = Config::default();
        config.channels.lark.app_id = "cli_test".into();
        config.channels.lark.app_secret = crate::config::Secret::new("sekret");
        let r = Registry::builtin(&config);
        assert!(r.skipped().is_empty(), "{:?}", r.skipped());
        let names: Vec<String> = r.iter().map(|t| t.decl().name.to_string()).collect();
        // test_panic and test_unapproved_shell.
        let test_tools = 2 * usize::from(cfg!(feature = "test-tools"));
        let browser = 3 * usize::from(cfg!(feature = "browser"));
        assert_eq!(names.len(), 27 + browser + test_tools, "{names:?}");
        assert!(names.iter().any(|n| n == "lark_message_send"), "{names:?}");
        for tool in r.iter() {
            let name = &tool.decl().name;
            check_parameters(&tool.decl().parameters).unwrap_or_else(|e| panic!("{name}: {e}"));
            let v = r.validator(name).unwrap();
            assert!(v.is_ok(), "{name}: {:?}", v.err());
        }
    }

    #[test]
    fn builtin_validators_are_compiled_on_first_use_and_enforced() {
        let r = Registry::builtin(&Config::default());
        let e = &r.tools["file_read"];
        assert!(e.validator.get().is_none(), "compiled before first use");
        let v = r.validator("file_read").unwrap().unwrap();
        assert!(v.validate(&json!({"path": 5})).is_err());
        assert!(e.validator.get().is_some());
    }

    #[test]
    fn builtins_register_cleanly_and_aliases_resolve() {
        let r = Registry::builtin(&Config::default());
        assert!(r.skipped().is_empty(), "{:?}", r.skipped());
        assert_eq!(r.resolve("bash"), Some("shell"));
        assert_eq!(r.resolve("exec"), Some("shell"));
        assert_eq!(r.resolve("read_file"), Some("file_read"));
        assert_eq!(r.resolve("write_file"), Some("file_write"));
        assert_eq!(r.resolve("list_dir"), Some("file_list"));
        assert_eq!(r.resolve("nope"), None);
    }
}
