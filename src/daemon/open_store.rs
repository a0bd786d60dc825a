//! Opening the configured store for a process (`ethan run`, `chat`, the CLI commands): the
//! SQLite file `$ETHAN_HOME/ethan.db` by default, or the PostgreSQL database of `store.url`
//! (then no SQLite file is created; the knowledge index is in the same database, shared by the
//! replicas).

use crate::config::Loaded;
use crate::store::{OpenStore, Store, StoreError};

/// Open (and migrate) the configured store. Errors name the file or the server and say why.
pub async fn open(loaded: &Loaded) -> anyhow::Result<OpenStore> {
    if loaded.config.store.is_postgres() {
        return open_postgres(loaded).await;
    }
    let store = open_sqlite(loaded)?;
    Ok(OpenStore::sqlite(store))
}

/// The SQLite store of `$ETHAN_HOME/ethan.db` (creating it), whatever `store.url` says: for
/// `ethan store migrate`, which reads it.
pub fn open_sqlite(loaded: &Loaded) -> anyhow::Result<Store> {
    Store::open(&loaded.db_path()).map_err(|e| match e {
        // These already name the file.
        e @ (StoreError::ReadOnly { .. } | StoreError::Io { .. }) => anyhow::Error::new(e),
        e => anyhow::Error::new(e).context(format!(
            "opening the database {}",
            loaded.db_path().display()
        )),
    })
}

#[cfg(feature = "postgres")]
async fn open_postgres(loaded: &Loaded) -> anyhow::Result<OpenStore> {
    use anyhow::Context;
    let pg = crate::store::pg::PgStore::connect(loaded.config.store.url.expose().trim())
        .await
        .with_context(|| format!("opening the store {}", describe(loaded)))?;
    let origin = crate::store::knowledge_index::folder_origin(&loaded.home.join("knowledge"));
    let index = crate::store::pg::knowledge::PgKnowledge::new(pg.clone(), origin);
    Ok(OpenStore {
        main: std::sync::Arc::new(pg),
        index: crate::store::knowledge_index::IndexHandle::new(std::sync::Arc::new(index)),
        sqlite: None,
    })
}

#[cfg(not(feature = "postgres"))]
async fn open_postgres(loaded: &Loaded) -> anyhow::Result<OpenStore> {
    anyhow::bail!(
        "store.url names PostgreSQL ({}), but this ethan was built without the `postgres` \
         feature: install it with `cargo install --path . --locked --features postgres` \
         (README, Building)",
        describe(loaded)
    )
}

/// Where the store is, for logs and errors: the SQLite file's path, or
/// `postgresql://host:port/database` (never the user or password).
pub fn describe(loaded: &Loaded) -> String {
    if !loaded.config.store.is_postgres() {
        return loaded.db_path().display().to_string();
    }
    match reqwest::Url::parse(loaded.config.store.url.expose().trim()) {
        Ok(u) => format!(
            "postgresql://{}:{}{}",
            u.host_str().unwrap_or("localhost"),
            u.port().unwrap_or(5432),
            u.path()
        ),
        Err(_) => "postgresql (store.url)".into(),
    }
}
