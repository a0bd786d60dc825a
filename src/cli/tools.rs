//! `ethan tools list [--channel C]`: every registered tool with its risk, and skipped ones with
//! the reason. The configured MCP servers are started first (each given its `timeout_secs` to
//! list its tools), so their `mcp__<server>__<tool>` tools are listed as the daemon would have
//! them; a server that did not start is named with a pointer to `ethan mcp list`.

use crate::config::Loaded;
use crate::daemon::wiring;
use crate::store::Store;
use ethan_channels::ChannelKind;
use std::process::ExitCode;

pub async fn list(
    loaded: &std::sync::Arc<Loaded>,
    channel: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let channel = match channel {
        None | Some("terminal") => ChannelKind::Terminal,
        Some("telegram") => ChannelKind::Telegram,
        Some("lark") => ChannelKind::Lark,
        Some("web") => ChannelKind::Web,
        Some(other) => anyhow::bail!("unknown channel {other:?} (terminal, telegram, lark, web)"),
    };
    let stores = crate::store::OpenStore::sqlite(Store::open_in_memory()?);
    let agent = wiring::agent(loaded.clone(), &stores, None, Default::default())?;
    let mcp = crate::mcp::McpManager::new(loaded, agent.executor.registry_slot());
    mcp.start();
    let limit = loaded
        .config
        .mcp
        .servers
        .values()
        .filter(|s| s.enabled)
        .map(|s| s.timeout_secs)
        .max()
        .unwrap_or(0);
    mcp.wait_started(std::time::Duration::from_secs(limit))
        .await;
    let not_started = mcp.not_ready();
    mcp.shutdown().await;
    let exposed = agent.allowed_tools(&crate::tools::policy::Audience {
        channel,
        is_owner: true,
        unattended: false,
        allowed_tools: None,
    });
    let registry = agent.executor.registry();
    let tools: Vec<_> = registry.iter().collect();
    // Columns as wide as the longest name, so a long MCP tool name does not shift the rest.
    let w = tools
        .iter()
        .map(|t| t.decl().name.chars().count())
        .chain(std::iter::once(4))
        .max()
        .unwrap_or(4);
    let ch = channel.as_str();
    let cw = ch.len().max(3);
    println!("{:<w$}  {:<9}  {:<cw$}  description", "tool", "risk", ch);
    for t in tools {
        let exposed = if exposed.contains(&t.decl().name) {
            "yes"
        } else {
            "no"
        };
        println!(
            "{:<w$}  {:<9}  {:<cw$}  {}",
            t.decl().name,
            t.decl().risk.as_str(),
            exposed,
            super::shown::shown(&first_sentence(&t.decl().description), 200)
        );
    }
    for s in registry.skipped() {
        println!(
            "{:<w$}  skipped: {}",
            super::shown::shown(&s.name, 128),
            super::shown::shown(&s.reason, 300)
        );
    }
    for name in not_started {
        println!("mcp server {name}: its tools could not be listed (see `ethan mcp list`)");
    }
    Ok(ExitCode::SUCCESS)
}

/// The first sentence of `text` on one line: up to the first ". " that ends a sentence (not one
/// after "e.g", "i.e", "etc" or "vs").
fn first_sentence(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut from = 0;
    while let Some(i) = flat[from..].find(". ") {
        let end = from + i;
        let word = flat[..end]
            .rsplit(' ')
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        if !["e.g", "i.e", "etc", "vs", "cf"].contains(&word.trim_start_matches('(')) {
            return flat[..=end].to_string();
        }
        from = end + 2;
    }
    flat
}

#[cfg(test)]
mod tests {
    use super::first_sentence;

    #[test]
    fn a_sentence_does_not_end_at_an_abbreviation() {
        assert_eq!(
            first_sentence("Run a command (e.g. ls). More here."),
            "Run a command (e.g. ls)."
        );
        assert_eq!(
            first_sentence("One line\n  wrapped. Two."),
            "One line wrapped."
        );
        assert_eq!(first_sentence("No full stop"), "No full stop");
    }
}
