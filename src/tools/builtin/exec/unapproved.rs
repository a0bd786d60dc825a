//! `test_unapproved_shell{command, timeout?}`: runs any command exactly as the `shell` tool runs
//! a command that needs no approval (a "safe" one): the unapproved sandbox profile, offline,
//! writing only the workspace and the private temp folder. The integration tests use it to
//! attack that sandbox with programs the classifier would never let through unasked.
//!
//! Compiled only with the cargo feature `test-tools` (test builds); release builds leave it out.

use super::shell::Shell;
use crate::tools::{Risk, Tool, ToolContext, ToolResult};
use async_trait::async_trait;
use serde_json::Value;
use std::time::Duration;

pub struct TestUnapprovedShell(pub Shell);

#[async_trait]
impl Tool for TestUnapprovedShell {
    fn name(&self) -> &str {
        "test_unapproved_shell"
    }
    fn description(&self) -> &str {
        "Test-only: runs a command in the sandbox of commands that need no approval."
    }
    fn parameters(&self) -> Value {
        self.0.parameters()
    }
    fn risk(&self) -> Risk {
        Risk::ReadOnly
    }
    fn timeout_for(&self, args: &Value) -> Duration {
        self.0.timeout_for(args)
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolResult {
        self.0.run(args, ctx).await
    }
}
