//! `ethan tools list [--channel C]`: every registered tool with its risk, and skipped ones with
//! the reason.

use crate::config::Loaded;
use crate::daemon::build_agent;
use crate::store::Store;
use ethan_channels::ChannelKind;
use std::process::ExitCode;

pub fn list(loaded: &std::sync::Arc<Loaded>, channel: Option<&str>) -> anyhow::Result<ExitCode> {
    let channel = match channel {
        None | Some("terminal") => ChannelKind::Terminal,
        Some("telegram") => ChannelKind::Telegram,
        Some("lark") => ChannelKind::Lark,
        Some("web") => ChannelKind::Web,
        Some(other) => anyhow::bail!("unknown channel {other:?} (terminal, telegram, lark, web)"),
    };
    let stores = crate::store::OpenStore::sqlite(Store::open_in_memory()?);
    let agent = build_agent(loaded.clone(), &stores, None)?;
    let exposed = agent.allowed_tools(&crate::tools::policy::Audience {
        channel,
        is_owner: true,
        unattended: false,
        allowed_tools: None,
    });
    println!(
        "{:<12} {:<10} {:<8} description",
        "tool",
        "risk",
        channel.as_str()
    );
    for t in agent.executor.registry().iter() {
        let first = t.description().split(". ").next().unwrap_or("");
        println!(
            "{:<12} {:<10} {:<8} {first}",
            t.name(),
            t.risk().as_str(),
            if exposed.contains(t.name()) {
                "yes"
            } else {
                "no"
            }
        );
    }
    for s in agent.executor.registry().skipped() {
        println!("{:<12} skipped: {}", s.name, s.reason);
    }
    Ok(ExitCode::SUCCESS)
}
