//! The registry: every tool the daemon knows, by name, with its aliases. Registration checks the
//! name (`^[A-Za-z0-9_-]{1,64}$`); a bad tool is skipped with a logged error and never reaches
//! the model.

use super::Tool;
use crate::config::Config;
use crate::provider::types::ToolSpec;
use std::collections::BTreeMap;
use std::sync::Arc;

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

#[derive(Default)]
pub struct Registry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
    skipped: Vec<Skipped>,
}

/// Whether `name` is a valid tool name.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl Registry {
    /// Add a tool, or record why it was skipped.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        let name = tool.name().to_string();
        let reason = if !valid_name(&name) {
            Some("the name must match ^[A-Za-z0-9_-]{1,64}$".to_string())
        } else if ALIASES.iter().any(|(a, _)| *a == name) {
            Some("the name is reserved as an alias".to_string())
        } else if self.tools.contains_key(&name) {
            Some("a tool with this name is already registered".to_string())
        } else {
            None
        };
        match reason {
            Some(reason) => {
                tracing::error!("tool {name:?} skipped: {reason}");
                self.skipped.push(Skipped { name, reason });
            }
            None => {
                self.tools.insert(name, tool);
            }
        }
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
        self.tools.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.values()
    }

    pub fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    /// The `tools[]` entries for the named tools, in name order.
    pub fn specs<'a>(&self, names: impl IntoIterator<Item = &'a String>) -> Vec<ToolSpec> {
        let mut out: Vec<ToolSpec> = names
            .into_iter()
            .filter_map(|n| self.tools.get(n))
            .map(|t| ToolSpec {
                name: t.name().to_string(),
                description: t.description().to_string(),
                parameters: t.parameters(),
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// The builtin tools, configured from `config`.
    pub fn builtin(config: &Config) -> Self {
        let shell_timeout = config
            .tools
            .per_tool
            .get("shell")
            .and_then(|o| o.timeout_secs)
            .unwrap_or(super::shell::DEFAULT_TIMEOUT_SECS);
        let mut r = Registry::default();
        r.register(Arc::new(super::shell::Shell::new(shell_timeout)));
        r.register(Arc::new(super::file_read::FileRead));
        r.register(Arc::new(super::file_write::FileWrite));
        r.register(Arc::new(super::file_list::FileList));
        r
    }
}
