//! What a tool works out about one call before consent ([`crate::tool::Tool::assess`]): work that may
//! block (parsing a command line, looking at the file system) done once per call, off the async
//! runtime's worker threads, then read by the tool's consent hooks and by its `run` through
//! [`crate::tool::ToolContext::assessment`]. Opaque to everyone but the tool that made it.

use std::any::Any;
use std::sync::Arc;

/// One call's assessment; see the module doc. Cheap to clone.
#[derive(Clone)]
pub struct Assessment(Arc<dyn Any + Send + Sync>);

impl Assessment {
    pub fn new<T: Any + Send + Sync>(value: T) -> Self {
        Self(Arc::new(value))
    }

    /// The value, if it is a `T` (a tool reads back its own type only).
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }
}

impl std::fmt::Debug for Assessment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Assessment(..)")
    }
}
