//! How the knowledge tools reach the knowledge base: the daemon hands the hub its home's
//! knowledge folder (`$ETHAN_HOME/knowledge/`) and its store's knowledge index when it builds the tools; the hub
//! opens the [`Knowledge`] on first use, re-indexes the files that changed since the index last
//! saw them, and hands out the shared instance. A hub built without a store (benchmarks, tests
//! of other tools) answers that there is no knowledge base here.

use super::embed::Embedder;
use super::{Knowledge, KnowledgeError};
use crate::config::KnowledgeConfig;
use crate::store::knowledge_index::IndexHandle;
use std::path::PathBuf;
use std::sync::Arc;

/// The knowledge base of one daemon, opened on first use. One per tool registry.
pub struct KnowledgeHub {
    embedder: Option<Embedder>,
    /// The knowledge folder and the store's knowledge index.
    base: Option<(PathBuf, IndexHandle)>,
    open: tokio::sync::OnceCell<Arc<Knowledge>>,
}

impl KnowledgeHub {
    /// `base`: the knowledge folder (`$ETHAN_HOME/knowledge`) and the store's knowledge index;
    /// `None`: the tools answer that no knowledge base is available.
    pub fn new(config: &KnowledgeConfig, base: Option<(PathBuf, IndexHandle)>) -> KnowledgeHub {
        KnowledgeHub {
            embedder: Embedder::from_config(&config.embeddings),
            base,
            open: tokio::sync::OnceCell::new(),
        }
    }

    /// The knowledge base, opened and synced on first use.
    pub async fn get(&self) -> Result<Arc<Knowledge>, KnowledgeError> {
        let (root, store) = self.base.clone().ok_or_else(|| {
            KnowledgeError::Unavailable("no knowledge base is set up in this interface".into())
        })?;
        let embedder = self.embedder.clone();
        self.open
            .get_or_try_init(|| async move {
                let k = tokio::task::spawn_blocking(move || Knowledge::open(root, store, embedder))
                    .await
                    .map_err(|e| {
                        KnowledgeError::Unavailable(format!("opening the index: {e}"))
                    })??;
                let k = Arc::new(k);
                let report = k.clone().sync_shared().await?;
                for s in &report.skipped {
                    tracing::warn!("knowledge: skipped {s}");
                }
                Ok(k)
            })
            .await
            .cloned()
    }
}
