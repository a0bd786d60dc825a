//! How the knowledge tools reach the knowledge base: a tool knows only its [`ToolContext`], so
//! the hub opens (once per `$ETHAN_HOME`) the index in `$ETHAN_HOME/ethan.db` and the notes in
//! `$ETHAN_HOME/knowledge/`, re-indexes the files that changed since the index last saw them,
//! and hands out the shared [`Knowledge`].

use super::embed::Embedder;
use super::{Knowledge, KnowledgeError};
use crate::config::KnowledgeConfig;
use crate::store::Store;
use ethan_core::tool::ToolContext;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// The knowledge bases opened so far, by `$ETHAN_HOME`. One per tool registry.
pub struct KnowledgeHub {
    embedder: Option<Embedder>,
    open: tokio::sync::Mutex<HashMap<PathBuf, Arc<Knowledge>>>,
}

impl KnowledgeHub {
    pub fn new(config: &KnowledgeConfig) -> KnowledgeHub {
        KnowledgeHub {
            embedder: Embedder::from_config(&config.embeddings),
            open: tokio::sync::Mutex::new(HashMap::new()),
        }
    }

    /// The knowledge base of the call's `$ETHAN_HOME`, opened and synced on first use.
    pub async fn get(&self, ctx: &ToolContext) -> Result<Arc<Knowledge>, KnowledgeError> {
        let home = ctx
            .ethan_home
            .clone()
            .ok_or_else(|| KnowledgeError::Unavailable("this session has no ETHAN_HOME".into()))?;
        let mut open = self.open.lock().await;
        if let Some(k) = open.get(&home) {
            return Ok(k.clone());
        }
        let embedder = self.embedder.clone();
        let h = home.clone();
        let k = tokio::task::spawn_blocking(move || {
            let store = Store::open(&h.join("ethan.db"))?;
            Knowledge::open(h.join("knowledge"), store, embedder)
        })
        .await
        .map_err(|e| KnowledgeError::Unavailable(format!("opening the index: {e}")))??;
        let k = Arc::new(k);
        let report = k.clone().sync_shared().await?;
        for s in &report.skipped {
            tracing::warn!("knowledge: skipped {s}");
        }
        open.insert(home, k.clone());
        Ok(k)
    }
}
