//! `test_unapproved_shell{command, timeout?}`: runs any command exactly as the `shell` tool runs
//! a command that needs no approval (a "safe" one): the unapproved sandbox profile, offline,
//! writing only the workspace and the private temp folder. The integration tests use it to
//! attack that sandbox with programs the classifier would never let through unasked.
//!
//! Compiled only with the cargo feature `test-tools` (test builds); release builds leave it out.

use super::shell::Shell;
use crate::{CallPlan, Risk, Tool, ToolContext, ToolDecl, ToolError, ToolOutput};
use async_trait::async_trait;
use serde_json::Value;

pub struct TestUnapprovedShell(Shell, ToolDecl);

impl TestUnapprovedShell {
    pub fn new(shell: Shell) -> Self {
        let decl = ToolDecl::new(
            "test_unapproved_shell",
            "Test-only: runs a command in the sandbox of commands that need no approval.",
            shell.decl().parameters.clone(),
        );
        Self(shell, decl.risk(Risk::ReadOnly))
    }
}

#[async_trait]
impl Tool for TestUnapprovedShell {
    fn decl(&self) -> &ToolDecl {
        &self.1
    }
    fn describe(&self, args: &Value, _: &ToolContext) -> CallPlan {
        CallPlan {
            timeout: self.0.timeout_for(args),
            ..CallPlan::of(self.decl(), args)
        }
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.0.run(args, ctx).await
    }
}
