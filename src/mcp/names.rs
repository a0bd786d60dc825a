//! Tool names: an MCP server's tool `t` of the server `s` is registered as `mcp__s__t`.
//!
//! Shape: the whole name matches `^[A-Za-z0-9_-]{1,64}$` (the registry's rule, and what model
//! providers accept). Characters outside `[A-Za-z0-9_-]` become `_`; a name longer than 64
//! characters keeps its first 55 and ends with `_` and 8 hex digits of a SHA-256 of the server
//! and tool names, so two long names stay apart. Tool names come from the server's
//! `tools/list` answer (MCP spec 2025-06-18, "Tools › Listing Tools") and are not trusted.

use sha2::{Digest, Sha256};

/// Every registered MCP tool name starts with this.
pub const PREFIX: &str = crate::tools::engine::config_names::MCP_TOOL_PREFIX;
/// The longest tool name the registry accepts.
pub const MAX_LEN: usize = 64;

fn clean(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `mcp__<server>__<tool>`, cleaned and cut to [`MAX_LEN`] as the module docs say.
pub fn tool_name(server: &str, tool: &str) -> String {
    let full = format!("{PREFIX}{}__{}", clean(server), clean(tool));
    if full.len() <= MAX_LEN {
        return full;
    }
    let mut h = Sha256::new();
    h.update(server.as_bytes());
    h.update([0]);
    h.update(tool.as_bytes());
    let digest = hex::encode(h.finalize());
    // `full` is ASCII after cleaning, so any byte index is a character boundary.
    format!("{}_{}", &full[..MAX_LEN - 9], &digest[..8])
}

/// The prefix every tool of `server` has (`mcp__<server>__`), for `tools.allow` / `tools.deny`
/// patterns such as `mcp__<server>__*`.
pub fn server_prefix(server: &str) -> String {
    format!("{PREFIX}{}__", clean(server))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::registry::valid_name;

    #[test]
    fn names_are_prefixed_and_cleaned() {
        assert_eq!(tool_name("everything", "echo"), "mcp__everything__echo");
        assert_eq!(
            tool_name("everything", "gzip-file-as-resource"),
            "mcp__everything__gzip-file-as-resource"
        );
        assert_eq!(
            tool_name("time", "get.time now/é"),
            "mcp__time__get_time_now__"
        );
        assert!(valid_name(&tool_name("time", "get.time now/é")));
        assert_eq!(server_prefix("x"), "mcp__x__");
    }

    #[test]
    fn long_names_are_cut_with_a_hash_and_stay_distinct() {
        let a = tool_name("server", &"a".repeat(100));
        let b = tool_name("server", &format!("{}b", "a".repeat(99)));
        assert_eq!(a.len(), MAX_LEN);
        assert_eq!(b.len(), MAX_LEN);
        assert_ne!(a, b);
        assert!(valid_name(&a) && valid_name(&b));
        assert!(a.starts_with("mcp__server__aaa"));
        assert_eq!(tool_name("server", &"a".repeat(100)), a, "stable");
    }
}
