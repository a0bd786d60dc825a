//! How the knowledge tools reach the knowledge base: the daemon hands the hub its home's
//! knowledge folder (`$ETHAN_HOME/knowledge/`) and its store's knowledge index when it builds the tools; the hub
//! opens the [`Knowledge`] on first use, re-indexes the files that changed since the index last
//! saw them, and hands out the shared instance. A hub built without a store (benchmarks, tests
//! of other tools) answers that there is no knowledge base here. The hub is the
//! [`KnowledgeBase`] the tools receive from the daemon's wiring step.

use super::embed::Embedder;
use super::{Knowledge, KnowledgeError};
use crate::config::KnowledgeConfig;
use crate::store::knowledge_index::IndexHandle;
use async_trait::async_trait;
use ethan_core::knowledge::{EditMode, KnowledgeBase, Note, Saved, SearchOutcome};
use ethan_core::tool::ToolError;
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
                let k = ethan_core::task::spawn_blocking(move || {
                    Knowledge::open(root, store, embedder)
                })
                .await
                .map_err(|e| KnowledgeError::Unavailable(format!("opening the index: {e}")))??;
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

/// A knowledge-base error as the tools report it: its kind and its text.
fn tool_error(e: KnowledgeError) -> ToolError {
    ToolError::new(e.kind(), e.to_string())
}

#[async_trait]
impl KnowledgeBase for KnowledgeHub {
    async fn search(&self, query: &str, limit: usize) -> Result<SearchOutcome, ToolError> {
        let k = self.get().await.map_err(tool_error)?;
        k.search(query, limit).await.map_err(tool_error)
    }

    async fn read(&self, source: &str) -> Result<Note, ToolError> {
        let k = self.get().await.map_err(tool_error)?;
        k.read(source).await.map_err(tool_error)
    }

    async fn add(
        &self,
        content: &str,
        title: Option<&str>,
        tags: &[String],
    ) -> Result<Saved, ToolError> {
        let k = self.get().await.map_err(tool_error)?;
        k.add(content, title, tags).await.map_err(tool_error)
    }

    async fn edit(
        &self,
        source: &str,
        content: &str,
        mode: EditMode,
        title: Option<&str>,
        tags: Option<&[String]>,
    ) -> Result<Saved, ToolError> {
        let k = self.get().await.map_err(tool_error)?;
        k.edit(source, content, mode, title, tags)
            .await
            .map_err(tool_error)
    }

    async fn note_count(&self) -> Result<i64, ToolError> {
        let k = self.get().await.map_err(tool_error)?;
        k.counts().await.map(|c| c.0).map_err(tool_error)
    }
}
