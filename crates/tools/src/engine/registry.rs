//! The registry: every tool the daemon knows, by name, with its compiled argument validator.
//!
//! Registration checks the name (`^[A-Za-z0-9_-]{1,64}$`, not an alias, not taken) and the
//! `parameters` schema ([`crate::schema::check_parameters`]: a valid JSON Schema whose arrays all
//! have `items`). A tool that fails is skipped with one logged error, never sent to the model,
//! and listed with its reason by `ethan tools list`.
//!
//! Built-in tools ([`Registry::register_builtin`]) are checked for shape only at start and their
//! argument validators are compiled on their first call: their schemas are fixed and a unit test
//! meta-validates every one, and compiling them all at start cost ~28 MiB of heap and ~35 ms (the
//! `jsonschema` crate's meta-schema state). Tools from anywhere else ([`Registry::register`]) get
//! the full check and their validator at registration. Either way a validator is compiled once.

use crate::engine::setup::ToolsSetup;
use crate::schema::{check_parameters, check_shape, ArgsValidator};
use crate::Tool;
use ethan_core::knowledge::KnowledgeBase;
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
    browser: Option<Arc<crate::builtin::browser::hub::BrowserHub>>,
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

    /// The built-in tools, each given what it needs from `setup` (built by the daemon from its
    /// configuration). The Lark tools are registered only with a Lark client. Every name
    /// registered is one of [`BUILTIN_TOOLS`].
    pub fn builtin(setup: ToolsSetup) -> Self {
        let ToolsSetup {
            tools,
            secrets,
            timezone: tz,
            models,
            max_image_bytes,
            live,
            knowledge,
            lark,
            egress,
            pages,
        } = setup;
        let shell = tools.per_tool.get("shell");
        let shell_timeout = shell
            .and_then(|o| o.timeout_secs)
            .unwrap_or(crate::shell::DEFAULT_TIMEOUT_SECS);
        let git_hooks = shell.and_then(|o| o.git_hooks).unwrap_or(false);
        let mut r = Registry::default();
        r.register_builtin(Arc::new(
            crate::shell::Shell::new(shell_timeout)
                .with_secrets(secrets)
                .with_git_hooks(git_hooks),
        ));
        r.register_builtin(Arc::new(crate::file_read::FileRead));
        r.register_builtin(Arc::new(crate::file_write::FileWrite));
        r.register_builtin(Arc::new(crate::file_list::FileList));
        r.register_builtin(Arc::new(crate::find_tools::FindTools));
        r.register_builtin(Arc::new(crate::ui_card::UiCard));
        let search = match live {
            Some(live) => crate::web_search::WebSearch::watching(live),
            None => crate::web_search::WebSearch::new(tools.web_search.clone()),
        };
        r.register_builtin(Arc::new(search.within(&egress)));
        let guard = || egress.system_guard(&tools.web_fetch.allow_private);
        let fetch = crate::web_fetch::WebFetch::guarded(&tools.web_fetch, guard())
            .reading_with(pages.clone());
        r.register_builtin(Arc::new(fetch));
        // One headless browser per daemon, shared by the three browser tools.
        #[cfg(feature = "browser")]
        r.register_browser(tools.browser.clone(), guard(), max_image_bytes, pages);
        #[cfg(not(feature = "browser"))]
        let _ = (max_image_bytes, pages);
        r.register_builtin(Arc::new(crate::rg_search::RgSearch::new()));
        r.register_builtin(Arc::new(crate::fd_find::FdFind::new()));
        r.register_builtin(Arc::new(
            crate::schedule_create::ScheduleCreate::new(tz.clone()).with_models(models),
        ));
        r.register_builtin(Arc::new(crate::schedule_list::ScheduleList::new(
            tz.clone(),
        )));
        r.register_builtin(Arc::new(crate::schedule_pause::SchedulePause::new(
            tz.clone(),
        )));
        r.register_builtin(Arc::new(crate::schedule_remove::ScheduleRemove::new(
            tz.clone(),
        )));
        r.register_knowledge(knowledge);
        r.register_builtin(Arc::new(crate::memory_save::MemorySave));
        r.register_builtin(Arc::new(crate::memory_search::MemorySearch));
        r.register_builtin(Arc::new(crate::memory_forget::MemoryForget));
        r.register_builtin(Arc::new(crate::history_search::HistorySearch));
        r.register_builtin(Arc::new(crate::delegate::Delegate));
        r.register_builtin(Arc::new(crate::skill_read::SkillRead));
        #[cfg(feature = "test-tools")]
        r.register_builtin(Arc::new(crate::test_panic::TestPanic));
        #[cfg(feature = "test-tools")]
        r.register_builtin(Arc::new(
            crate::builtin::exec::unapproved::TestUnapprovedShell::new(crate::shell::Shell::new(
                shell_timeout,
            )),
        ));
        if let Some(lark) = lark {
            r.register_builtin(Arc::new(crate::lark_calendar::LarkCalendarEvents::new(
                lark.clone(),
                tz.clone(),
            )));
            r.register_builtin(Arc::new(crate::lark_messages::LarkChatMessages::new(
                lark.clone(),
                tz,
            )));
            r.register_builtin(Arc::new(crate::lark_send::LarkMessageSend::new(lark)));
        }
        debug_assert!(
            r.tools.keys().all(|n| builtin_names().contains(n)),
            "a built-in tool missing from BUILTIN_TOOLS"
        );
        r
    }

    /// The browser tools, sharing one headless browser.
    #[cfg(feature = "browser")]
    fn register_browser(
        &mut self,
        config: crate::settings::BrowserConfig,
        guard: ethan_egress::EgressGuard,
        max_image_bytes: u64,
        pages: Arc<dyn crate::page_reader::PageReader>,
    ) {
        use crate::builtin::browser::{hub, page, session, tab};
        let browser = hub::BrowserHub::new(config, guard);
        browser.set_image_limit(max_image_bytes);
        browser.set_page_reader(pages);
        browser.hear_taint(&self.taint_hooks);
        self.register_builtin(Arc::new(session::BrowserSession(browser.clone())));
        self.register_builtin(Arc::new(tab::BrowserTab(browser.clone())));
        self.register_builtin(Arc::new(page::BrowserPage(browser.clone())));
        self.browser = Some(browser);
    }

    /// The four knowledge tools on `knowledge` (none: they answer that there is none here).
    fn register_knowledge(&mut self, knowledge: Option<Arc<dyn KnowledgeBase>>) {
        let knowledge =
            knowledge.unwrap_or_else(|| Arc::new(crate::builtin::knowledge::Unavailable));
        self.register_builtin(Arc::new(crate::knowledge_search::KnowledgeSearch(
            knowledge.clone(),
        )));
        self.register_builtin(Arc::new(crate::knowledge_read::KnowledgeRead(
            knowledge.clone(),
        )));
        self.register_builtin(Arc::new(crate::knowledge_add::KnowledgeAdd(
            knowledge.clone(),
        )));
        self.register_builtin(Arc::new(crate::knowledge_edit::KnowledgeEdit(knowledge)));
    }
}

/// The built-in tools of every build, by name: the catalog `ethan tools list`, the check of
/// the tool names the configuration writes ([`crate::engine::config_names`]) and the
/// registry agree on. The Lark tools are in it whether or not a Lark app is configured.
pub const BUILTIN_TOOLS: &[&str] = &[
    "shell",
    "file_read",
    "file_write",
    "file_list",
    "find_tools",
    "ui_card",
    "web_search",
    "web_fetch",
    "rg_search",
    "fd_find",
    "schedule_create",
    "schedule_list",
    "schedule_pause",
    "schedule_remove",
    "knowledge_search",
    "knowledge_read",
    "knowledge_add",
    "knowledge_edit",
    "memory_save",
    "memory_search",
    "memory_forget",
    "history_search",
    "delegate",
    "skill_read",
    "lark_calendar_events",
    "lark_chat_messages",
    "lark_message_send",
];

/// The tools of the cargo feature `browser`.
pub const BROWSER_TOOLS: [&str; 3] = ["browser_session", "browser_tab", "browser_page"];

/// The tools of the cargo feature `test-tools` (the daemon's tests only).
pub const TEST_TOOLS: [&str; 2] = ["test_panic", "test_unapproved_shell"];

/// The names of every built-in tool of this binary (its features counted), sorted, whether or
/// not the configuration enables it.
pub fn builtin_names() -> Vec<String> {
    let mut names: Vec<String> = BUILTIN_TOOLS.iter().map(|n| n.to_string()).collect();
    if cfg!(feature = "browser") {
        names.extend(BROWSER_TOOLS.iter().map(|n| n.to_string()));
    }
    if cfg!(feature = "test-tools") {
        names.extend(TEST_TOOLS.iter().map(|n| n.to_string()));
    }
    ethan_core::sort::sort(&mut names);
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Risk, ToolContext, ToolDecl, ToolError, ToolOutput};
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

    /// The registry as the daemon builds it from the default configuration. (What it builds
    /// with every tool enabled is checked against the catalog in `daemon::tool_setup`.)
    fn builtin() -> Registry {
        crate::setup::default_registry()
    }

    #[test]
    fn builtin_validators_are_compiled_on_first_use_and_enforced() {
        let r = builtin();
        let e = &r.tools["file_read"];
        assert!(e.validator.get().is_none(), "compiled before first use");
        let v = r.validator("file_read").unwrap().unwrap();
        assert!(v.validate(&json!({"path": 5})).is_err());
        assert!(e.validator.get().is_some());
    }

    #[test]
    fn builtins_register_cleanly_and_aliases_resolve() {
        let r = builtin();
        assert!(r.skipped().is_empty(), "{:?}", r.skipped());
        assert_eq!(r.resolve("bash"), Some("shell"));
        assert_eq!(r.resolve("exec"), Some("shell"));
        assert_eq!(r.resolve("read_file"), Some("file_read"));
        assert_eq!(r.resolve("write_file"), Some("file_write"));
        assert_eq!(r.resolve("list_dir"), Some("file_list"));
        assert_eq!(r.resolve("nope"), None);
    }
}
