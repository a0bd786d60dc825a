//! Subcommands other than `run`: `init`, the terminal chat, `doctor`, `status`, `tools list`,
//! `audit`, `jobs`, `usage`, `mcp list`, `store migrate`, `memory list|forget`, `agents list`, `skills list`.

pub mod agents;
pub mod audit;
pub mod chat;
pub mod doctor;
pub mod init;
pub mod jobs;
pub mod live;
pub mod mcp;
pub mod memory;
pub mod owner;
pub mod status;
pub mod store;
pub mod tools;
pub mod usage;

/// `ethan gateway token`: print the gateway's bearer token (the configured one, else the stored
/// one, created now if there is none).
pub async fn gateway_token(
    loaded: &crate::config::Loaded,
) -> anyhow::Result<std::process::ExitCode> {
    let store = crate::daemon::open_store::open(loaded).await?.main;
    println!(
        "{}",
        crate::gateway::auth::ensure_token(loaded, &store).await?
    );
    Ok(std::process::ExitCode::SUCCESS)
}
