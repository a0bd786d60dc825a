//! `ethan owner claim|list|add|remove`: who owns the bot. `claim` prints a one-time code (valid
//! 10 minutes) that the owner sends to the bot in a direct message as `/claim <code>`.

use crate::config::Loaded;
use crate::consent::owners::{Owners, CLAIM_TTL_SECS};
use crate::store::SharedStorage;
use anyhow::bail;
use std::process::ExitCode;

/// The subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum OwnerCommand {
    /// Print a one-time code to send to the bot as `/claim <code>` in a DM
    Claim,
    /// List the owners (from the config and claimed)
    List,
    /// Add an owner, e.g. `telegram:123456789` or `lark:ou_xxx`
    Add { owner: String },
    /// Remove a claimed or added owner
    Remove { owner: String },
}

fn split(owner: &str) -> anyhow::Result<(&str, &str)> {
    match owner.split_once(':') {
        Some(("telegram", id)) if id.trim().parse::<i64>().is_ok() => Ok(("telegram", id.trim())),
        Some(("lark", id)) if !id.trim().is_empty() => Ok(("lark", id.trim())),
        _ => bail!("{owner:?} must look like telegram:<numeric user id> or lark:<open_id>"),
    }
}

pub async fn run(loaded: &Loaded, cmd: OwnerCommand) -> anyhow::Result<ExitCode> {
    let store = crate::daemon::open_store::open(loaded).await?.main;
    match cmd {
        OwnerCommand::Claim => {
            let code = Owners::new(&loaded.config, store.shared())
                .new_claim_code()
                .await?;
            println!("{code}");
            eprintln!(
                "Send `/claim {code}` to the bot in a direct message within {} minutes (works once).",
                CLAIM_TTL_SECS / 60
            );
        }
        OwnerCommand::List => {
            let stored = store.list_owners().await?;
            if loaded.config.owners.is_empty() && stored.is_empty() {
                println!("no owners yet: run `ethan owner claim`, or add owners: in the config");
            }
            for o in &loaded.config.owners {
                println!("{o}  (config)");
            }
            for (channel, id, source, added) in stored {
                let when = chrono::DateTime::from_timestamp(added, 0)
                    .map(|t| t.format("%Y-%m-%d %H:%M").to_string())
                    .unwrap_or_default();
                println!("{channel}:{id}  ({source}, {when})");
            }
        }
        OwnerCommand::Add { owner } => {
            let (c, id) = split(&owner)?;
            if store.add_owner(c, id, "cli").await? {
                println!("added {c}:{id}");
            } else {
                println!("{c}:{id} is already an owner");
            }
        }
        OwnerCommand::Remove { owner } => {
            let (c, id) = split(&owner)?;
            if store.remove_owner(c, id).await? {
                println!("removed {c}:{id}");
            } else if loaded.config.owners.iter().any(|o| o == &owner) {
                bail!("{owner} is an owner in the config file; remove it there");
            } else {
                bail!("{owner} is not an owner");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
