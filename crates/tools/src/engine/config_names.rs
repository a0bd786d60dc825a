//! The check that every tool the configuration names exists: `tools.allow`, `tools.also_allow`,
//! `tools.deny`, `tools.fast_path` and the per-tool sections (`tools.<name>`). A misspelt name
//! there would silently weaken the policy (a `deny` that denies nothing), so it stops the start
//! and fails `ethan doctor`, with the closest real name as a suggestion. The check runs inside
//! the configuration's own (the config's `load_checked`), so every misspelt name is reported
//! in the same run as the file's other problems, each with its line.
//!
//! Known names are those of the fixed catalog of built-in tools of this binary
//! ([`crate::registry::builtin_names`]), enabled or not (the Lark tools
//! exist only with a Lark app configured, but naming them is not a typo). An alias (`bash`) is
//! refused too: the policy matches tools by their own names. Names of MCP tools
//! (`mcp__<server>__…`) are not checked: a server's tools are known only once it runs.

use crate::registry::{builtin_names, ALIASES, BROWSER_TOOLS};
use crate::settings::{AgentTools, ToolsConfig};

/// How every MCP tool's name starts (`mcp__<server>__<tool>`); such names come and go with
/// the servers, so the config may name them before they are registered.
pub const MCP_TOOL_PREFIX: &str = "mcp__";

/// Every tool name the configuration gets wrong, as `(key path, message)`, each list entry
/// with its index so its line can be shown: `("tools.deny[1]", "no tool named \"shel\" (did you
/// mean \"shell\"?)")`. Checked: `tools.allow`, `tools.also_allow`, `tools.deny`,
/// `tools.fast_path`, the per-tool sections (`tools.<name>`), and the `tools` lists of each
/// agent in `agents` (its name and its `agents.<name>.tools`).
pub fn name_problems<'a>(
    tools: &ToolsConfig,
    agents: impl IntoIterator<Item = (&'a str, &'a AgentTools)>,
) -> Vec<(String, String)> {
    let known = builtin_names();
    let mut out = Vec::new();
    let mut list = |key: &str, names: &[String]| {
        for (i, name) in names.iter().enumerate() {
            if let Some(message) = problem(&known, name) {
                out.push((format!("{key}[{i}]"), message));
            }
        }
    };
    list("tools.allow", &tools.allow);
    list("tools.also_allow", &tools.also_allow);
    list("tools.deny", &tools.deny);
    list("tools.fast_path", &tools.fast_path);
    for (agent, a) in agents {
        list(&format!("agents.{agent}.tools.allow"), &a.allow);
        list(&format!("agents.{agent}.tools.also_allow"), &a.also_allow);
        list(&format!("agents.{agent}.tools.deny"), &a.deny);
    }
    for name in tools.per_tool.keys() {
        if let Some(message) = problem(&known, name) {
            out.push((format!("tools.{name}"), message));
        }
    }
    out
}

/// What is wrong with the tool name `name`, if anything.
fn problem(known: &[String], name: &str) -> Option<String> {
    // MCP tools are known only once their server lists them: `mcp__<server>__<tool>` and
    // `mcp__<server>__*` are accepted here.
    if known.iter().any(|k| k == name) || name.starts_with(MCP_TOOL_PREFIX) {
        return None;
    }
    Some(if BROWSER_TOOLS.contains(&name) {
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

    fn with_deny(deny: &[&str]) -> ToolsConfig {
        ToolsConfig {
            deny: deny.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn name_problems(tools: &ToolsConfig) -> Vec<(String, String)> {
        super::name_problems(tools, [])
    }

    #[test]
    fn an_agent_list_is_checked_with_its_key() {
        let agent = AgentTools {
            allow: vec!["shell".into(), "web_serch".into()],
            ..Default::default()
        };
        let p = super::name_problems(&ToolsConfig::default(), [("coder", &agent)]);
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].0, "agents.coder.tools.allow[1]");
        assert!(p[0].1.contains("did you mean \"web_search\""), "{p:?}");
    }

    #[test]
    fn a_misspelt_tool_name_is_refused_with_the_nearest_name() {
        let p = name_problems(&with_deny(&["shell", "shel", "zzzzzzzz", "bash"]));
        assert_eq!(p.len(), 3, "{p:?}");
        assert_eq!(
            p[0],
            (
                "tools.deny[1]".to_string(),
                "no tool named \"shel\" (did you mean \"shell\"?)".to_string()
            )
        );
        assert!(p[1].1.contains("the tools are: "), "{p:?}");
        assert!(p[2].1.contains("write \"shell\""), "{p:?}");
    }

    #[test]
    fn real_tools_pass_even_when_not_enabled() {
        // No Lark app is configured, yet naming a Lark tool is not a typo.
        let mut c = with_deny(&["shell", "lark_message_send", "find_tools"]);
        assert!(name_problems(&c).is_empty());
        c.per_tool.insert("shell".into(), Default::default());
        c.fast_path.push("web_fetch".into());
        assert!(name_problems(&c).is_empty());
        c.per_tool.insert("shelll".into(), Default::default());
        let p = name_problems(&c);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].0, "tools.shelll");
    }

    #[test]
    fn edit_distance_counts_characters() {
        assert_eq!(edit_distance("shel", "shell"), 1);
        assert_eq!(edit_distance("", "ab"), 2);
        assert_eq!(edit_distance("飞书", "飞"), 1);
        assert_eq!(edit_distance("file_raed", "file_read"), 2);
    }
}
