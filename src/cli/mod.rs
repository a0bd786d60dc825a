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
pub mod shown;
pub mod status;
pub mod store;
pub mod tools;
pub mod usage;

/// `ethan gateway token [--rotate]`: print the gateway's bearer token (the configured one, else
/// the stored one, created now if there is none); with `--rotate`, replace the stored one with a
/// new one (a running daemon refuses the old one at once) and sign every web page out.
pub async fn gateway_token(
    loaded: &crate::config::Loaded,
    rotate: bool,
) -> anyhow::Result<std::process::ExitCode> {
    use crate::gateway::auth::{ensure_token, Rotated};
    let store = crate::daemon::open_store::open(loaded).await?.main;
    if !rotate {
        println!("{}", ensure_token(loaded, &store).await?);
        return Ok(std::process::ExitCode::SUCCESS);
    }
    match crate::gateway::auth::rotate(loaded, &store).await? {
        Rotated::Token(t) => {
            println!("{t}");
            eprintln!(
                "The old token no longer works, and every web page is signed out; sign in again \
                 with this one."
            );
            Ok(std::process::ExitCode::SUCCESS)
        }
        Rotated::SessionsOnly => {
            eprintln!(
                "Every web page is signed out. The token itself is gateway.token in {}: change it \
                 there and restart the daemon to replace it.",
                loaded.path.display()
            );
            Ok(std::process::ExitCode::from(1))
        }
    }
}
