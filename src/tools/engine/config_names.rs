//! The check that every tool the configuration names exists: `tools.allow`, `tools.also_allow`,
//! `tools.deny`, `tools.fast_path` and the per-tool sections (`tools.<name>`). A misspelt name
//! there would silently weaken the policy (a `deny` that denies nothing), so it stops the start
//! and fails `ethan doctor`, with the closest real name as a suggestion.
//!
//! Known names are those of every built-in tool of this binary, enabled or not (the Lark tools
//! exist only with a Lark app configured, but naming them is not a typo). An alias (`bash`) is
//! refused too: the policy matches tools by their own names. Names of MCP tools
//! (`mcp__<server>__…`) are not checked: a server's tools are known only once it runs.

use crate::config::{Config, ConfigError, Secret, ToolsConfig};
use crate::tools::registry::{Registry, ALIASES};

/// How every MCP tool's name starts (`mcp__<server>__<tool>`); such names come and go with
/// the servers, so the config may name them before they are registered.
pub const MCP_TOOL_PREFIX: &str = "mcp__";

/// The tools of the cargo feature `browser`: a configuration may name them in a build without
/// it, and is told why they are missing rather than that they are typos.
const BROWSER_TOOLS: [&str; 3] = ["browser_session", "browser_tab", "browser_page"];

/// The names of every built-in tool of this binary, sorted, whether or not the configuration
/// enables it.
pub fn builtin_names() -> Vec<String> {
    let mut config = Config::default();
    // With a Lark app the Lark tools are registered too; nothing is contacted.
    config.channels.lark.app_id = "cli_tool_names".into();
    config.channels.lark.app_secret = Secret::new("tool-names");
    let mut names: Vec<String> = Registry::builtin(&config)
        .iter()
        .map(|t| t.name().to_string())
        .collect();
    names.sort();
    names
}

/// Check every tool name in `tools`. Errors: [`ConfigError::Key`] naming the first key at
/// fault, e.g. ``config key `tools.deny`: no tool named "shel" (did you mean "shell"?)``.
pub fn check_tool_names(tools: &ToolsConfig) -> Result<(), ConfigError> {
    let known = builtin_names();
    let lists = [
        ("tools.allow", &tools.allow),
        ("tools.also_allow", &tools.also_allow),
        ("tools.deny", &tools.deny),
        ("tools.fast_path", &tools.fast_path),
    ];
    for (key, names) in lists {
        for name in names {
            check_one(&known, key, name)?;
        }
    }
    for name in tools.per_tool.keys() {
        check_one(&known, &format!("tools.{name}"), name)?;
    }
    Ok(())
}

/// Check the tool names of every agent's `tools` (`agents.<name>.tools.allow`, …) as
/// [`check_tool_names`] does the top-level ones.
pub fn check_agent_tool_names(config: &Config) -> Result<(), ConfigError> {
    let known = builtin_names();
    for (agent, a) in &config.agents {
        let lists = [
            ("allow", &a.tools.allow),
            ("also_allow", &a.tools.also_allow),
            ("deny", &a.tools.deny),
        ];
        for (key, names) in lists {
            for name in names {
                check_one(&known, &format!("agents.{agent}.tools.{key}"), name)?;
            }
        }
    }
    Ok(())
}

fn check_one(known: &[String], key: &str, name: &str) -> Result<(), ConfigError> {
    // MCP tools are known only once their server lists them: `mcp__<server>__<tool>` and
    // `mcp__<server>__*` are accepted here.
    if known.iter().any(|k| k == name) || name.starts_with(MCP_TOOL_PREFIX) {
        return Ok(());
    }
    let message = if BROWSER_TOOLS.contains(&name) {
        format!(
            "{name:?} is a browser tool, and this build of Ethan has none: install it with \
             `--features browser` (README, Building)"
        )
    } else if let Some((_, tool)) = ALIASES.iter().find(|(a, _)| *a == name) {
        format!("{name:?} is another name for the tool {tool:?}; write {tool:?} here")
    } else {
        match closest(known, name) {
            Some(near) => format!("no tool named {name:?} (did you mean {near:?}?)"),
            None => format!(
                "no tool named {name:?} (the tools are: {})",
                known.join(", ")
            ),
        }
    };
    Err(ConfigError::Key {
        key: key.to_string(),
        message,
    })
}

/// The known name nearest to `name` by edit distance, if it is near enough to be a typo (at
/// most 2 edits, or a third of the name's length when longer).
fn closest<'a>(known: &'a [String], name: &str) -> Option<&'a str> {
    let lower = name.to_lowercase();
    let limit = (name.chars().count() / 3).max(2);
    known
        .iter()
        .map(|k| (edit_distance(&lower, k), k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.as_str())
}

/// Levenshtein distance between `a` and `b`, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = Vec::with_capacity(b.len() + 1);
        cur.push(i + 1);
        for (j, cb) in b.iter().enumerate() {
            let substitution = prev[j] + usize::from(ca != *cb);
            cur.push(substitution.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools(yaml_deny: &[&str]) -> ToolsConfig {
        ToolsConfig {
            deny: yaml_deny.iter().map(|s| s.to_string()).collect(),
            ..ToolsConfig::default()
        }
    }

    #[test]
    fn a_misspelt_tool_name_is_refused_with_the_nearest_name() {
        let e = check_tool_names(&tools(&["shel"])).unwrap_err().to_string();
        assert_eq!(
            e,
            "config key `tools.deny`: no tool named \"shel\" (did you mean \"shell\"?)"
        );
        let e = check_tool_names(&tools(&["zzzzzzzz"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("the tools are: "), "{e}");
        let e = check_tool_names(&tools(&["bash"])).unwrap_err().to_string();
        assert!(e.contains("write \"shell\""), "{e}");
    }

    #[test]
    fn real_tools_pass_even_when_not_enabled() {
        // No Lark app is configured, yet naming a Lark tool is not a typo.
        check_tool_names(&tools(&["shell", "lark_message_send", "find_tools"])).unwrap();
        let mut t = ToolsConfig::default();
        t.per_tool.insert("shell".into(), Default::default());
        t.fast_path.push("web_fetch".into());
        check_tool_names(&t).unwrap();
        t.per_tool.insert("shelll".into(), Default::default());
        let e = check_tool_names(&t).unwrap_err().to_string();
        assert!(e.starts_with("config key `tools.shelll`"), "{e}");
    }

    #[test]
    fn edit_distance_counts_characters() {
        assert_eq!(edit_distance("shel", "shell"), 1);
        assert_eq!(edit_distance("", "ab"), 2);
        assert_eq!(edit_distance("飞书", "飞"), 1);
        assert_eq!(edit_distance("file_raed", "file_read"), 2);
    }
}
