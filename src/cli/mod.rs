//! Subcommands other than `run`: `init`, the terminal chat, `doctor`, `status`, `tools list`, `audit`, `jobs`,
//! `usage`, `mcp list`.

pub mod audit;
pub mod chat;
pub mod doctor;
pub mod init;
pub mod jobs;
pub mod live;
pub mod mcp;
pub mod owner;
pub mod status;
pub mod tools;
pub mod usage;

/// `ethan gateway token`: print the gateway's bearer token (the configured one, else the stored
/// one, created now if there is none).
pub async fn gateway_token(
    loaded: &crate::config::Loaded,
) -> anyhow::Result<std::process::ExitCode> {
    use anyhow::Context;
    let store = crate::store::Store::open(&loaded.db_path())
        .with_context(|| format!("opening the database {}", loaded.db_path().display()))?;
    println!(
        "{}",
        crate::gateway::auth::ensure_token(loaded, &store).await?
    );
    Ok(std::process::ExitCode::SUCCESS)
}
