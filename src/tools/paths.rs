//! Path resolution for file tools: relative paths resolve against `tools.workspace`; `~/` is the
//! user's home.

use super::ToolContext;
use std::path::PathBuf;

/// Resolve a path argument for `ctx`.
pub fn resolve(ctx: &ToolContext, path: &str) -> PathBuf {
    let p = path.trim();
    if let Some(rest) = p.strip_prefix("~/") {
        if let Some(home) = std::env::var_os("HOME") {
            return PathBuf::from(home).join(rest);
        }
    }
    let pb = PathBuf::from(p);
    if pb.is_absolute() {
        pb
    } else {
        ctx.workspace.join(pb)
    }
}
