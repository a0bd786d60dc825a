//! `test_panic{}`: a tool that panics when it runs, so tests can show that a crashing tool costs
//! its call only (the executor turns it into an `internal` result and the turn goes on).
//!
//! Compiled only with the cargo feature `test-tools`, which the package's own dev-dependency on
//! itself turns on for test builds (`cargo test`); `cargo build` and release builds leave it out.

use crate::tools::{Risk, Tool, ToolContext, ToolResult};
use async_trait::async_trait;
use serde_json::{json, Value};

pub struct TestPanic;

#[async_trait]
impl Tool for TestPanic {
    fn name(&self) -> &str {
        "test_panic"
    }
    fn description(&self) -> &str {
        "Test-only: panics when called."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}, "additionalProperties": false})
    }
    fn risk(&self) -> Risk {
        Risk::ReadOnly
    }
    /// It panics; it reads nothing.
    fn reads_private(&self) -> bool {
        false
    }
    async fn run(&self, _args: Value, _ctx: &ToolContext) -> ToolResult {
        panic!("test_panic was called");
    }
}
