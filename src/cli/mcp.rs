//! `ethan mcp list`: no daemon needed. Starts each enabled MCP server, lists its tools, stops
//! it; prints each server with its state (`ok` or `failed: <why>`) and its tools with the risk
//! words of `ethan tools list` (`read_only`, `write`, `dangerous`), then the prompts and
//! resources it offers (resources are read by the model with `mcp_resource_read`). Disabled
//! servers are named as such. Exit status 1 when a server failed. What a server wrote is printed
//! through [`super::shown`]: it cannot move the cursor or forge a line.

use super::shown::shown;
use crate::config::Loaded;
use crate::mcp::manager::probe;
use crate::tools::Tool;
use std::process::ExitCode;

pub async fn list(loaded: &Loaded) -> anyhow::Result<ExitCode> {
    let servers = &loaded.config.mcp.servers;
    if servers.is_empty() {
        println!(
            "no MCP server is configured (mcp.servers in {})",
            loaded.path.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let mut failed = false;
    let probes = futures::future::join_all(
        servers
            .iter()
            .filter(|(_, c)| c.enabled)
            .map(|(name, c)| async move { (name, probe(loaded, name, c).await) }),
    )
    .await;
    for (name, c) in servers.iter().filter(|(_, c)| !c.enabled) {
        let _ = c;
        println!("{name}: disabled (mcp.servers.{name}.enabled: false)");
    }
    for (name, result) in probes {
        match result {
            Ok(probed) => {
                let tools = &probed.tools;
                println!("{name}: ok, {} tools", tools.len());
                for t in tools {
                    let egress = if t.hints.open_world() {
                        "  (can reach outside this machine)"
                    } else {
                        ""
                    };
                    let name = shown(&t.decl().name, 128);
                    println!("  {name:<48} {:<10}{egress}", t.decl().risk.as_str());
                }
                for p in &probed.prompts {
                    println!("  prompt {}", shown(p, 300));
                }
                for r in &probed.resources {
                    println!("  resource {}", shown(r, 300));
                }
            }
            Err(why) => {
                failed = true;
                println!("{name}: failed: {}", shown(&why, 500));
            }
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `ethan doctor`'s lines: `(server, Ok(tool count) | Err(why))` per enabled server.
pub async fn check(loaded: &Loaded) -> Vec<(String, Result<usize, String>)> {
    futures::future::join_all(
        loaded
            .config
            .mcp
            .servers
            .iter()
            .filter(|(_, c)| c.enabled)
            .map(|(name, c)| async move {
                (
                    name.clone(),
                    probe(loaded, name, c).await.map(|p| p.tools.len()),
                )
            }),
    )
    .await
}
