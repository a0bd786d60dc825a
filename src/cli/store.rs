//! `ethan store migrate --to postgres://…`: copy this home's SQLite store (`$ETHAN_HOME/ethan.db`)
//! (the knowledge index included) into an empty PostgreSQL database in one transaction, and
//! print the rows copied per table.
//! The SQLite file is only read. Afterwards set `store.url` to the same URL.

use crate::config::Loaded;
use std::process::ExitCode;

/// The subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum StoreCommand {
    /// Copy the SQLite store into an empty PostgreSQL database (then set store.url to it)
    Migrate {
        /// The target, `postgres://user:password@host:port/database` (`?sslmode=require` for
        /// TLS); default: `store.url` of the config (which keeps the password out of the
        /// process list and the shell's history)
        #[arg(long, value_name = "URL")]
        to: Option<String>,
    },
}

pub async fn run(loaded: &Loaded, cmd: StoreCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        StoreCommand::Migrate { to } => {
            let to = match to {
                Some(to) => to,
                None if loaded.config.store.is_postgres() => {
                    loaded.config.store.url.expose().trim().to_string()
                }
                None => anyhow::bail!(
                    "name the PostgreSQL database: --to postgres://… or store.url in {}",
                    loaded.path.display()
                ),
            };
            if let Some(r) = crate::daemon::running::read(&loaded.home).await {
                if crate::daemon::running::is_alive(r.pid) {
                    anyhow::bail!(
                        "ethan run (pid {}) is using {}: stop it first, so the copy is whole",
                        r.pid,
                        loaded.db_path().display()
                    );
                }
            }
            migrate(loaded, &to).await
        }
    }
}

#[cfg(feature = "postgres")]
async fn migrate(loaded: &Loaded, to: &str) -> anyhow::Result<ExitCode> {
    use anyhow::Context;
    let path = loaded.db_path();
    if !path.is_file() {
        anyhow::bail!(
            "there is no SQLite store to copy: {} does not exist",
            path.display()
        );
    }
    let from = crate::store::Store::open(&path)
        .with_context(|| format!("opening the database {}", path.display()))?;
    let origin = crate::store::knowledge_index::folder_origin(&loaded.home.join("knowledge"));
    let counts = crate::store::pg::import::import_sqlite(&from, to.trim(), &origin)
        .await
        .context("copying the SQLite store into PostgreSQL")?;
    let total: u64 = counts.iter().map(|(_, n)| n).sum();
    println!("copied {} into PostgreSQL:", path.display());
    for (table, n) in &counts {
        println!("  {table:<17} {n:>9}");
    }
    println!("  {:<17} {total:>9}", "total rows");
    println!("now set store.url to this database (the SQLite file was not changed)");
    Ok(ExitCode::SUCCESS)
}

#[cfg(not(feature = "postgres"))]
async fn migrate(_loaded: &Loaded, _to: &str) -> anyhow::Result<ExitCode> {
    anyhow::bail!(
        "this build has no PostgreSQL store (built without the `postgres` feature): install it \
         with `cargo install --path . --locked --features postgres` (README, Building)"
    )
}
