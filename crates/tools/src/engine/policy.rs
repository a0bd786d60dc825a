//! Exposure policy: which tools a turn may use, decided in this order (docs/security.md):
//! 1. per-interface registration (a tool may exist only on some channels);
//! 2. `tools.profile` (minimal ⊂ messaging ⊂ coding ⊂ full), or `tools.allow` which replaces
//!    the profile; then `tools.also_allow` added; `tools.deny` always wins;
//! 3. the sender: on chat platforms (Telegram, Lark) a non-owner gets only `web_search`,
//!    `web_fetch` and `ui_card`;
//! 4. an unattended run (a scheduled job) gets read-only tools plus the side-effect tools in
//!    its `allowed_tools`.
//!
//! Names in `tools.allow`, `also_allow`, `deny` and `fast_path` are exact tool names or
//! patterns ending in `*` (`mcp__<server>__*`: every tool of one MCP server). MCP tools
//! (the daemon's MCP module) are never offered to a non-owner on a chat platform (they are not in
//! [`NON_OWNER`]) and are never sent up front unless `tools.fast_path` names them.
//!
//! `find_tools` is always allowed. The same decision is checked again when a call executes, so
//! this module is where the sender and unattended rules live; consent only applies the same
//! [`Audience`] predicates to the calls that need a yes (the consent rule,
//! docs/ARCHITECTURE.md).

use crate::registry::Registry;
use crate::settings::{Profile, ToolsConfig};
use ethan_core::ChannelKind;
use std::collections::BTreeSet;

/// Tools of the `minimal` profile; each larger profile adds to the one before.
pub const MINIMAL: &[&str] = &[
    "file_read",
    "file_list",
    "rg_search",
    "fd_find",
    "knowledge_search",
    "knowledge_read",
    "find_tools",
    "memory_search",
    "history_search",
    "skill_read",
    "delegate",
];
pub const MESSAGING_ADDS: &[&str] = &[
    "memory_save",
    "memory_forget",
    "web_search",
    "web_fetch",
    "ui_card",
    "lark_calendar_events",
    "lark_chat_messages",
];
pub const CODING_ADDS: &[&str] = &["file_write", "shell", "knowledge_add", "knowledge_edit"];
/// What a non-owner may use on a chat platform. The memory tools only reach the asker's own
/// personal memory (direct chats) or, in a group, the group's memory, whose changes ask the
/// owner (refused for anyone else); `history_search` never returns tool results to them.
pub const NON_OWNER: &[&str] = &[
    "web_search",
    "web_fetch",
    "ui_card",
    "memory_search",
    "memory_save",
    "memory_forget",
    "history_search",
];
/// Always allowed: the way to reach the rest.
pub const FIND_TOOLS: &str = "find_tools";

/// The tool names of a profile, or `None` for `full` (everything).
pub fn profile_tools(p: Profile) -> Option<BTreeSet<&'static str>> {
    let mut set: BTreeSet<&'static str> = MINIMAL.iter().copied().collect();
    match p {
        Profile::Minimal => {}
        Profile::Messaging => set.extend(MESSAGING_ADDS),
        Profile::Coding => {
            set.extend(MESSAGING_ADDS);
            set.extend(CODING_ADDS);
        }
        Profile::Full => return None,
    }
    Some(set)
}

/// Who is asking, as far as the policy cares. Set by the daemon, never from a payload.
#[derive(Debug, Clone)]
pub struct Audience {
    pub channel: ChannelKind,
    pub is_owner: bool,
    pub unattended: bool,
    /// For unattended runs: the side-effect tools the job may use.
    pub allowed_tools: Option<Vec<String>>,
}

impl Audience {
    /// The audience of a tool call, from its context.
    pub fn of(ctx: &crate::ToolContext) -> Self {
        Self {
            channel: ctx.channel,
            is_owner: ctx.is_owner,
            unattended: ctx.unattended,
            allowed_tools: ctx.allowed_tools.clone(),
        }
    }

    /// Someone other than the owner on a chat platform (Telegram, Lark): offered only
    /// [`NON_OWNER`] tools, and never asked for an approval.
    pub fn is_chat_non_owner(&self) -> bool {
        matches!(self.channel, ChannelKind::Telegram | ChannelKind::Lark) && !self.is_owner
    }

    /// Whether an unattended job was authorised to use `tool` when the owner created it (its
    /// `allowed_tools`); `false` for a run that is not unattended.
    pub fn job_authorises(&self, tool: &str) -> bool {
        self.unattended
            && self
                .allowed_tools
                .as_ref()
                .is_some_and(|a| a.iter().any(|x| x == tool))
    }
}

/// Whether `name` is in `set`: by name, or by a pattern `prefix*` whose prefix it starts with.
fn names(set: &BTreeSet<String>, name: &str) -> bool {
    set.contains(name)
        || set.iter().any(|p| {
            p.strip_suffix('*')
                .is_some_and(|prefix| name.starts_with(prefix))
        })
}

/// The configured policy.
#[derive(Debug, Clone)]
pub struct Policy {
    base: Option<BTreeSet<String>>,
    also_allow: BTreeSet<String>,
    deny: BTreeSet<String>,
    fast_path: BTreeSet<String>,
}

impl Policy {
    pub fn from_config(cfg: &ToolsConfig) -> Self {
        let base = if !cfg.allow.is_empty() {
            Some(cfg.allow.iter().cloned().collect())
        } else {
            profile_tools(cfg.profile).map(|s| s.into_iter().map(str::to_string).collect())
        };
        Self {
            base,
            also_allow: cfg.also_allow.iter().cloned().collect(),
            deny: cfg.deny.iter().cloned().collect(),
            fast_path: cfg.fast_path.iter().cloned().collect(),
        }
    }

    /// The tools `audience` may use, by name.
    pub fn allowed(&self, registry: &Registry, audience: &Audience) -> BTreeSet<String> {
        registry
            .iter()
            .filter(|t| self.refusal(t.as_ref(), audience).is_none())
            .map(|t| t.decl().name.to_string())
            .collect()
    }

    /// Why `tool` is not allowed for `audience` (text for the model), or `None` when it is.
    pub fn refusal(&self, tool: &dyn crate::Tool, audience: &Audience) -> Option<String> {
        let name = &tool.decl().name;
        if name == FIND_TOOLS {
            return None;
        }
        if !tool.decl().interfaces.contains(&audience.channel) {
            return Some(format!(
                "{name} does not exist in {} chats",
                audience.channel
            ));
        }
        if names(&self.deny, name) {
            return Some(format!(
                "{name} is switched off by the configuration (tools.deny)"
            ));
        }
        let in_profile = self.base.as_ref().is_none_or(|b| names(b, name));
        if !(in_profile || names(&self.also_allow, name)) {
            return Some(format!(
                "{name} is not enabled by the configured tool profile (tools.profile / tools.allow)"
            ));
        }
        if audience.is_chat_non_owner() && !NON_OWNER.contains(&name.as_str()) {
            return Some(format!(
                "only the bot's owner may use {name} in this chat; this user is not the owner \
                 (non-owners get only {})",
                NON_OWNER.join(", ")
            ));
        }
        let side_effects = tool.decl().risk.has_side_effects();
        (audience.unattended && side_effects && !audience.job_authorises(name)).then(|| {
            format!("{name} changes things and is not among the tools this unattended job may use")
        })
    }

    /// The allowed tools sent to the model up front: those marked fast-path, those in
    /// `tools.fast_path`, and `find_tools`.
    pub fn initial(&self, registry: &Registry, allowed: &BTreeSet<String>) -> BTreeSet<String> {
        allowed
            .iter()
            .filter(|n| {
                n.as_str() == FIND_TOOLS
                    || names(&self.fast_path, n)
                    || registry.get(n).is_some_and(|t| t.decl().fast_path)
            })
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> Registry {
        crate::setup::default_registry()
    }

    fn aud(channel: ChannelKind, is_owner: bool) -> Audience {
        Audience {
            channel,
            is_owner,
            unattended: false,
            allowed_tools: None,
        }
    }

    #[test]
    fn mcp_patterns_and_non_owners() {
        use crate::{Risk, Tool, ToolContext, ToolDecl, ToolError, ToolOutput};
        struct T(ToolDecl);
        #[async_trait::async_trait]
        impl Tool for T {
            fn decl(&self) -> &ToolDecl {
                &self.0
            }
            async fn run(
                &self,
                _: serde_json::Value,
                _: &ToolContext,
            ) -> Result<ToolOutput, ToolError> {
                Ok(ToolOutput::new(""))
            }
        }
        let t = |n: &str| {
            T(ToolDecl::new(n, "t", serde_json::json!({"type": "object"})).risk(Risk::ReadOnly))
        };
        let mut r = Registry::default();
        for n in ["mcp__a__x", "mcp__a__y", "mcp__b__x", "find_tools"] {
            r.register(std::sync::Arc::new(t(n)));
        }
        let cfg = ToolsConfig {
            deny: vec!["mcp__a__*".into()],
            ..Default::default()
        };
        let p = Policy::from_config(&cfg);
        let owner = p.allowed(&r, &aud(ChannelKind::Telegram, true));
        assert_eq!(names(&owner), ["find_tools", "mcp__b__x"]);
        assert_eq!(names(&p.initial(&r, &owner)), ["find_tools"]);
        let stranger = p.allowed(&r, &aud(ChannelKind::Telegram, false));
        assert_eq!(names(&stranger), ["find_tools"]);
        let cfg = ToolsConfig {
            profile: Profile::Minimal,
            also_allow: vec!["mcp__a__*".into()],
            fast_path: vec!["mcp__a__x".into()],
            ..Default::default()
        };
        let p = Policy::from_config(&cfg);
        let owner = p.allowed(&r, &aud(ChannelKind::Terminal, true));
        assert_eq!(names(&owner), ["find_tools", "mcp__a__x", "mcp__a__y"]);
        assert_eq!(names(&p.initial(&r, &owner)), ["find_tools", "mcp__a__x"]);
    }

    fn names(s: &BTreeSet<String>) -> Vec<&str> {
        s.iter().map(String::as_str).collect()
    }

    #[test]
    fn profiles_are_cumulative() {
        let m = profile_tools(Profile::Minimal).unwrap();
        let g = profile_tools(Profile::Messaging).unwrap();
        let c = profile_tools(Profile::Coding).unwrap();
        assert!(m.is_subset(&g) && g.is_subset(&c));
        assert!(c.contains("shell") && !g.contains("shell"));
        assert!(profile_tools(Profile::Full).is_none());
    }

    #[test]
    fn allow_replaces_also_allow_adds_deny_wins() {
        let r = registry();
        let mut cfg = ToolsConfig {
            profile: Profile::Minimal,
            ..Default::default()
        };
        let p = Policy::from_config(&cfg);
        assert_eq!(
            names(&p.allowed(&r, &aud(ChannelKind::Terminal, true))),
            [
                "delegate",
                "fd_find",
                "file_list",
                "file_read",
                "find_tools",
                "history_search",
                "knowledge_read",
                "knowledge_search",
                "memory_search",
                "rg_search",
                "skill_read"
            ]
        );
        cfg.also_allow = vec!["shell".into()];
        let p = Policy::from_config(&cfg);
        assert!(p
            .allowed(&r, &aud(ChannelKind::Terminal, true))
            .contains("shell"));
        cfg.allow = vec!["file_write".into()];
        cfg.deny = vec!["shell".into()];
        let p = Policy::from_config(&cfg);
        assert_eq!(
            names(&p.allowed(&r, &aud(ChannelKind::Terminal, true))),
            ["file_write", "find_tools"]
        );
        let t = r.get("shell").unwrap();
        assert!(p
            .refusal(t.as_ref(), &aud(ChannelKind::Terminal, true))
            .unwrap()
            .contains("tools.deny"));
    }

    #[test]
    fn non_owners_on_chat_platforms_get_only_the_safe_set() {
        let r = registry();
        let p = Policy::from_config(&ToolsConfig::default());
        let owner = p.allowed(&r, &aud(ChannelKind::Telegram, true));
        assert!(owner.contains("shell") && owner.contains("file_write"));
        let stranger = p.allowed(&r, &aud(ChannelKind::Telegram, false));
        assert_eq!(
            names(&stranger),
            [
                "find_tools",
                "history_search",
                "memory_forget",
                "memory_save",
                "memory_search",
                "ui_card",
                "web_fetch",
                "web_search"
            ]
        );
        let why = p
            .refusal(
                r.get("shell").unwrap().as_ref(),
                &aud(ChannelKind::Lark, false),
            )
            .unwrap();
        assert!(why.contains("not the owner"), "{why}");
        // The terminal user is always the owner.
        assert!(p
            .allowed(&r, &aud(ChannelKind::Terminal, true))
            .contains("shell"));
    }

    #[test]
    fn the_owner_gets_side_effect_tools_on_every_channel() {
        let r = registry();
        let p = Policy::from_config(&ToolsConfig::default());
        for channel in [
            ChannelKind::Telegram,
            ChannelKind::Lark,
            ChannelKind::Terminal,
            ChannelKind::Web,
        ] {
            let allowed = p.allowed(&r, &aud(channel, true));
            for t in r.iter().filter(|t| t.decl().risk.has_side_effects()) {
                assert_eq!(
                    allowed.contains(&t.decl().name),
                    t.decl().interfaces.contains(&channel),
                    "{} in {channel}",
                    t.decl().name
                );
            }
        }
    }

    #[test]
    fn unattended_runs_get_read_only_plus_authorised() {
        let r = registry();
        let p = Policy::from_config(&ToolsConfig::default());
        let mut a = aud(ChannelKind::Telegram, true);
        a.unattended = true;
        assert!(!p.allowed(&r, &a).contains("shell"));
        assert!(p.allowed(&r, &a).contains("file_read"));
        a.allowed_tools = Some(vec!["shell".into()]);
        assert!(p.allowed(&r, &a).contains("shell"));
        assert!(!p.allowed(&r, &a).contains("file_write"));
        let why = p
            .refusal(r.get("file_write").unwrap().as_ref(), &a)
            .unwrap();
        assert!(why.contains("unattended job"), "{why}");
        assert!(a.job_authorises("shell") && !a.job_authorises("file_write"));
        // The same list means nothing outside an unattended run.
        a.unattended = false;
        assert!(!a.job_authorises("shell"));
    }

    #[test]
    fn fast_path_and_configured_extras_go_up_front() {
        let r = registry();
        let cfg = ToolsConfig {
            fast_path: vec!["file_list".into()],
            ..Default::default()
        };
        let p = Policy::from_config(&cfg);
        let allowed = p.allowed(&r, &aud(ChannelKind::Terminal, true));
        assert_eq!(
            names(&p.initial(&r, &allowed)),
            ["file_list", "file_read", "find_tools", "shell"]
        );
    }
}
