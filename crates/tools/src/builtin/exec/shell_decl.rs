//! What the `shell` tool declares ([`decl`]): its name, description, schema, risk and limits.

use crate::{Risk, ToolDecl};
use serde_json::json;
use std::time::Duration;

/// What the shell tool declares: a command-running tool whose output is private, sent to the
/// model up front, with the default command limit plus time to kill it and collect its output.
pub(super) fn decl(default_timeout: u64, max_timeout: u64) -> ToolDecl {
    ToolDecl::new(
        "shell",
        "Run a shell command (bash -c) in the workspace directory. Returns the exit code, stdout and stderr. \
         `timeout` is in seconds (default 30, at most 600); the whole process group is killed when it expires.",
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command line, run with bash -c"},
                "timeout": {"type": "integer", "minimum": 1, "maximum": max_timeout, "description": "Seconds before the command is killed"}
            },
            "required": ["command"],
            "additionalProperties": false
        }),
    )
    .risk(Risk::Exec)
    .fast_path()
    .timeout(Duration::from_secs(default_timeout + 5))
}
