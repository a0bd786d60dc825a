//! `test_panic{}`: a tool that panics when it runs, so tests can show that a crashing tool costs
//! its call only (the executor turns it into an `internal` result and the turn goes on).
//!
//! Compiled only with the cargo feature `test-tools`, which the package's own dev-dependency on
//! itself turns on for test builds (`cargo test`); `cargo build` and release builds leave it out.

use crate::{Risk, Tool, ToolContext};
use crate::{ToolDecl, ToolError, ToolOutput};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::sync::LazyLock;

pub struct TestPanic;

#[async_trait]
impl Tool for TestPanic {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "test_panic",
                "Test-only: panics when called.",
                json!({"type": "object", "properties": {}, "additionalProperties": false}),
            )
            .risk(Risk::ReadOnly)
            // It panics; it reads nothing.
            .not_private()
        });
        &DECL
    }
    async fn run(&self, _args: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        panic!("test_panic was called");
    }
}
