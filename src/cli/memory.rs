//! `ethan memory list [--all] | forget <id>`: the owner's view of everything Ethan remembers,
//! across every person and group (each fact with its id, scope, subject, how it came to be and
//! dates), and a way to delete any of it. `forget` removes the fact with the older versions it replaced.

use crate::config::Loaded;
use crate::store::SharedStorage;
use std::process::ExitCode;

/// The subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum MemoryCommand {
    /// List the remembered facts, by whom they are about
    List {
        /// Also the facts that were replaced by newer ones
        #[arg(long)]
        all: bool,
    },
    /// Forget a fact by its id (and the versions it replaced)
    Forget { id: i64 },
}

fn day(t: i64) -> String {
    chrono::DateTime::from_timestamp(t, 0)
        .map(|t| t.format("%Y-%m-%d").to_string())
        .unwrap_or_default()
}

/// How a fact came to be, from its stored `source`: saved by the model in a conversation
/// (`tool`), extracted from the person's messages at compaction (`extracted`: nobody confirmed
/// it), or confirmed by the owner, who was shown it and said yes (`confirmed`).
fn how_it_came(source: &str) -> String {
    match source {
        "tool" => "saved by the model in a conversation on".into(),
        "extracted" => "extracted from the person's messages at compaction on".into(),
        "confirmed" => "confirmed by the owner on".into(),
        other => format!("saved ({other}) on"),
    }
}

pub async fn run(loaded: &Loaded, cmd: MemoryCommand) -> anyhow::Result<ExitCode> {
    let store = crate::daemon::open_store::open(loaded).await?.main.shared();
    match cmd {
        MemoryCommand::List { all } => {
            let facts = store.all_facts().await?;
            let shown: Vec<_> = facts
                .iter()
                .filter(|f| all || f.superseded_by.is_none())
                .collect();
            if shown.is_empty() {
                println!("nothing remembered");
            }
            let mut subject = "";
            for f in shown {
                if f.subject != subject {
                    subject = &f.subject;
                    println!("{} ({}):", f.subject, f.scope.as_str());
                }
                let replaced = f
                    .superseded_by
                    .map(|n| format!(" [replaced by #{n}]"))
                    .unwrap_or_default();
                println!(
                    "  #{:<5} {}  ({} {}; last recalled {}){replaced}",
                    f.id,
                    f.content,
                    how_it_came(&f.source),
                    day(f.created_at),
                    day(f.confirmed_at)
                );
            }
        }
        MemoryCommand::Forget { id } => {
            if store.forget_fact(id, None).await? {
                println!("forgot #{id}");
            } else {
                eprintln!("there is no fact #{id} (ethan memory list shows the ids)");
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_a_fact_the_owner_said_yes_to_is_called_confirmed() {
        let line = super::how_it_came;
        assert!(line("confirmed").contains("confirmed by the owner"));
        for source in ["tool", "extracted", "other"] {
            assert!(
                !line(source).contains("confirmed"),
                "{source}: {}",
                line(source)
            );
        }
        assert!(line("extracted").contains("compaction"));
        assert!(line("tool").contains("by the model"));
    }
}
