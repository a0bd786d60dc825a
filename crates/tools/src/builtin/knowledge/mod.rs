//! Knowledge-base tools: `knowledge_search`, `knowledge_read`, `knowledge_add`, `knowledge_edit`.
//! They reach the knowledge base through [`KnowledgeBase`], which the daemon's wiring step
//! builds and hands the registry; a registry built without one gets [`Unavailable`].

pub mod knowledge_add;
pub mod knowledge_edit;
pub mod knowledge_read;
pub mod knowledge_search;

use async_trait::async_trait;
use ethan_core::knowledge::{EditMode, KnowledgeBase, Note, Saved, SearchOutcome};
use ethan_core::tool::{ErrorKind, ToolError};

/// The knowledge base of a registry built without one (benchmarks, previews, tests of other
/// tools): every call answers that there is none here.
pub struct Unavailable;

fn unavailable<T>() -> Result<T, ToolError> {
    Err(ToolError::new(
        ErrorKind::Dependency,
        "the knowledge base is not available: no knowledge base is set up in this interface",
    ))
}

#[async_trait]
impl KnowledgeBase for Unavailable {
    async fn search(&self, _: &str, _: usize) -> Result<SearchOutcome, ToolError> {
        unavailable()
    }
    async fn read(&self, _: &str) -> Result<Note, ToolError> {
        unavailable()
    }
    async fn add(&self, _: &str, _: Option<&str>, _: &[String]) -> Result<Saved, ToolError> {
        unavailable()
    }
    async fn edit(
        &self,
        _: &str,
        _: &str,
        _: EditMode,
        _: Option<&str>,
        _: Option<&[String]>,
    ) -> Result<Saved, ToolError> {
        unavailable()
    }
    async fn note_count(&self) -> Result<i64, ToolError> {
        unavailable()
    }
}
