//! Knowledge-base tools: `knowledge_search`, `knowledge_read`, `knowledge_add`, `knowledge_edit`.

pub mod knowledge_add;
pub mod knowledge_edit;
pub mod knowledge_read;
pub mod knowledge_search;
