//! Agents and bindings: which agent answers a turn ([`Agents::resolve`]) and what that agent
//! changes (prompt, model, tools, memory, iteration cap). The top-level `model` and `tools` are
//! the implicit `default` agent. A binding names an agent for a channel, and optionally a chat, a
//! thread and a sender; of the bindings that match, the most specific wins (sender > thread >
//! chat > channel; among equals, the first listed), else `default`.
//!
//! An agent's tools only narrow: a tool is offered when the top-level policy allows it for this
//! sender *and* the agent's own profile/allow/deny does, so a binding can never give anyone a tool
//! the sender could not have had (a non-owner still gets no side-effect tool).

use crate::config::{AgentConfig, AgentMemory, Binding, Config, ToolsConfig};
use crate::tools::policy::Policy;
use std::collections::{BTreeMap, BTreeSet};

/// The implicit agent of the top-level settings.
pub const DEFAULT: &str = "default";

/// What is known of a turn for choosing its agent.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    pub channel: &'a str,
    pub chat_id: &'a str,
    pub thread: Option<&'a str>,
    pub sender: &'a str,
}

/// The agent chosen for a turn, and why.
#[derive(Debug, Clone)]
pub struct Chosen<'a> {
    pub name: &'a str,
    /// `None` for `default`.
    pub config: Option<&'a AgentConfig>,
    /// The agent's own tool policy (`None`: no narrowing).
    pub policy: Option<&'a Policy>,
    /// The binding that chose it (index in `bindings`), `None` when none matched.
    pub binding: Option<usize>,
}

impl Chosen<'_> {
    /// One sentence for `/agent` and `ethan agents list`.
    pub fn explain(&self, bindings: &[Binding]) -> String {
        match self.binding {
            Some(i) => format!(
                "agent {:?} answers here: bindings[{i}] ({}) matches",
                self.name,
                describe(&bindings[i])
            ),
            None => format!("agent {:?} answers here: no binding matches", self.name),
        }
    }

    /// Whether the turn uses memory, in a group (`group`) or not.
    pub fn memory_on(&self, group: bool) -> bool {
        match self.config.and_then(|c| c.memory) {
            None => true,
            Some(AgentMemory::Personal) => !group,
            Some(AgentMemory::Chat) => group,
            Some(AgentMemory::None) => false,
        }
    }
}

/// What `/agent` says about the agent answering at `place`: which, why, and what it changes.
pub fn answer_for(agents: &Agents, place: Place<'_>) -> String {
    let chosen = agents.resolve(place);
    let mut out = chosen.explain(agents.bindings());
    out.push('.');
    if let Some(c) = chosen.config {
        out.push_str(&format!("\n{}", summary(c)));
    } else {
        out.push_str("\nIt uses the top-level model and tools settings.");
    }
    out
}

/// One line on what an agent changes: model, tools, memory, iteration cap.
pub fn summary(c: &AgentConfig) -> String {
    let model = if c.model.trim().is_empty() {
        "the main model".to_string()
    } else {
        format!("model {}", c.model)
    };
    let t = &c.tools;
    let mut tools = Vec::new();
    if !t.allow.is_empty() {
        tools.push(format!("only {}", t.allow.join(", ")));
    } else if let Some(p) = t.profile {
        tools.push(format!("profile {}", format!("{p:?}").to_lowercase()));
    }
    if !t.also_allow.is_empty() {
        tools.push(format!("also {}", t.also_allow.join(", ")));
    }
    if !t.deny.is_empty() {
        tools.push(format!("never {}", t.deny.join(", ")));
    }
    let tools = if tools.is_empty() {
        "every tool the sender may use".to_string()
    } else {
        format!(
            "tools: {} (within what the sender may use)",
            tools.join("; ")
        )
    };
    let memory = match c.memory {
        None => "the chat's memory",
        Some(AgentMemory::Personal) => "personal memory (direct chats only)",
        Some(AgentMemory::Chat) => "the group's memory (groups only)",
        Some(AgentMemory::None) => "no memory",
    };
    let cap = c
        .max_tool_iterations
        .map(|n| format!(", at most {n} model calls a turn"))
        .unwrap_or_default();
    format!("{model}; {tools}; {memory}{cap}")
}

/// `channel telegram, chat -100, thread 7, sender 42`.
pub fn describe(b: &Binding) -> String {
    let mut parts = vec![format!("channel {}", b.channel)];
    if let Some(c) = &b.chat_id {
        parts.push(format!("chat {c}"));
    }
    if let Some(t) = &b.thread {
        parts.push(format!("thread {t}"));
    }
    if let Some(s) = &b.sender {
        parts.push(format!("sender {s}"));
    }
    parts.join(", ")
}

/// The configured agents and bindings.
#[derive(Debug, Clone, Default)]
pub struct Agents {
    agents: BTreeMap<String, (AgentConfig, Option<Policy>)>,
    bindings: Vec<Binding>,
}

impl Agents {
    pub fn from_config(c: &Config) -> Self {
        // Inserted one by one: `collect` into a `BTreeMap` sorts first, and its sort would be
        // one more copy of the standard library's (`ethan_core::sort`).
        let mut agents = BTreeMap::new();
        for (name, a) in &c.agents {
            agents.insert(name.clone(), (a.clone(), agent_policy(a)));
        }
        Self {
            agents,
            bindings: c.bindings.clone(),
        }
    }

    pub fn bindings(&self) -> &[Binding] {
        &self.bindings
    }

    /// The names of the configured agents (without `default`).
    pub fn names(&self) -> Vec<&str> {
        self.agents.keys().map(String::as_str).collect()
    }

    /// The agent called `name` (`default` included); `None` when there is none.
    pub fn named(&self, name: &str) -> Option<Chosen<'_>> {
        if name == DEFAULT {
            return Some(Chosen {
                name: DEFAULT,
                config: None,
                policy: None,
                binding: None,
            });
        }
        self.agents.get_key_value(name).map(|(n, (c, p))| Chosen {
            name: n,
            config: Some(c),
            policy: p.as_ref(),
            binding: None,
        })
    }

    /// The agent for a turn at `place` (see the module docs).
    pub fn resolve(&self, place: Place<'_>) -> Chosen<'_> {
        let best = self
            .bindings
            .iter()
            .enumerate()
            .filter(|(_, b)| matches(b, place))
            .max_by_key(|(i, b)| (specificity(b), std::cmp::Reverse(*i)));
        match best {
            Some((i, b)) => {
                let mut chosen = self.named(&b.agent).unwrap_or(Chosen {
                    name: DEFAULT,
                    config: None,
                    policy: None,
                    binding: None,
                });
                chosen.binding = Some(i);
                chosen
            }
            None => self.named(DEFAULT).expect("default exists"),
        }
    }
}

/// How specific a binding is: a sender counts most, then a thread, then a chat.
fn specificity(b: &Binding) -> u8 {
    (u8::from(b.sender.is_some()) << 2)
        | (u8::from(b.thread.is_some()) << 1)
        | u8::from(b.chat_id.is_some())
}

fn matches(b: &Binding, p: Place<'_>) -> bool {
    b.channel == p.channel
        && b.chat_id.as_deref().is_none_or(|c| c == p.chat_id)
        && b.thread.as_deref().is_none_or(|t| Some(t) == p.thread)
        && b.sender.as_deref().is_none_or(|s| s == p.sender)
}

/// The agent's own policy, or `None` when it narrows nothing.
fn agent_policy(a: &AgentConfig) -> Option<Policy> {
    let t = &a.tools;
    if t.profile.is_none() && t.allow.is_empty() && t.also_allow.is_empty() && t.deny.is_empty() {
        return None;
    }
    Some(Policy::from_config(&ToolsConfig {
        profile: t.profile.unwrap_or_default(),
        allow: t.allow.clone(),
        also_allow: t.also_allow.clone(),
        deny: t.deny.clone(),
        ..ToolsConfig::default()
    }))
}

/// `allowed` narrowed by the agent's policy (its profile, allow, deny), for `audience`.
pub fn narrow(
    allowed: BTreeSet<String>,
    policy: Option<&Policy>,
    registry: &crate::tools::registry::Registry,
    audience: &crate::tools::policy::Audience,
) -> BTreeSet<String> {
    match policy {
        Some(p) => {
            let mine = p.allowed(registry, audience);
            allowed.into_iter().filter(|n| mine.contains(n)).collect()
        }
        None => allowed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(
        agent: &str,
        channel: &str,
        chat: Option<&str>,
        thread: Option<&str>,
        sender: Option<&str>,
    ) -> Binding {
        Binding {
            agent: agent.into(),
            channel: channel.into(),
            chat_id: chat.map(Into::into),
            thread: thread.map(Into::into),
            sender: sender.map(Into::into),
        }
    }

    fn agents(bindings: Vec<Binding>) -> Agents {
        let mut c = Config::default();
        for n in [
            "by_channel",
            "by_chat",
            "by_thread",
            "by_sender",
            "first",
            "second",
        ] {
            c.agents.insert(n.into(), AgentConfig::default());
        }
        c.bindings = bindings;
        Agents::from_config(&c)
    }

    #[test]
    fn the_most_specific_binding_wins() {
        let a = agents(vec![
            binding("by_sender", "lark", None, None, Some("ou_boss")),
            binding("by_channel", "lark", None, None, None),
            binding("by_thread", "lark", Some("oc_team"), Some("t1"), None),
            binding("by_chat", "lark", Some("oc_team"), None, None),
        ]);
        let at = |chat, thread, sender| {
            a.resolve(Place {
                channel: "lark",
                chat_id: chat,
                thread,
                sender,
            })
            .name
            .to_string()
        };
        // (chat, thread, sender) → agent
        let table = [
            (("oc_other", None, "ou_x"), "by_channel"),
            (("oc_team", None, "ou_x"), "by_chat"),
            (("oc_team", Some("t1"), "ou_x"), "by_thread"),
            (("oc_team", Some("t2"), "ou_x"), "by_chat"),
            (("oc_team", Some("t1"), "ou_boss"), "by_sender"),
            (("oc_other", None, "ou_boss"), "by_sender"),
        ];
        for ((chat, thread, sender), want) in table {
            assert_eq!(at(chat, thread, sender), want, "{chat} {thread:?} {sender}");
        }
        // Another channel: no binding, the default agent.
        let tg = a.resolve(Place {
            channel: "telegram",
            chat_id: "oc_team",
            thread: None,
            sender: "ou_boss",
        });
        assert_eq!(tg.name, DEFAULT);
        assert!(tg.explain(a.bindings()).contains("no binding matches"));
        let chosen = a.resolve(Place {
            channel: "lark",
            chat_id: "oc_team",
            thread: None,
            sender: "ou_x",
        });
        assert_eq!(
            chosen.explain(a.bindings()),
            "agent \"by_chat\" answers here: bindings[3] (channel lark, chat oc_team) matches"
        );
    }

    #[test]
    fn among_equals_the_first_listed_wins() {
        let a = agents(vec![
            binding("first", "telegram", Some("1"), None, None),
            binding("second", "telegram", Some("1"), None, None),
        ]);
        let p = Place {
            channel: "telegram",
            chat_id: "1",
            thread: None,
            sender: "9",
        };
        assert_eq!(a.resolve(p).name, "first");
    }

    #[test]
    fn an_agent_never_gives_a_non_owner_a_side_effect_tool() {
        use crate::tools::policy::Audience;
        let mut c = Config::default();
        c.agents.insert(
            "generous".into(),
            AgentConfig {
                tools: crate::config::AgentTools {
                    allow: vec!["shell".into(), "file_write".into(), "web_search".into()],
                    ..Default::default()
                },
                ..Default::default()
            },
        );
        let agents = Agents::from_config(&c);
        let registry = crate::daemon::tool_setup::registry(&c);
        let global = Policy::from_config(&c.tools);
        let stranger = Audience {
            channel: ethan_channels::ChannelKind::Telegram,
            is_owner: false,
            unattended: false,
            allowed_tools: None,
        };
        let chosen = agents.named("generous").unwrap();
        let tools = narrow(
            global.allowed(&registry, &stranger),
            chosen.policy,
            &registry,
            &stranger,
        );
        let names: Vec<&str> = tools.iter().map(String::as_str).collect();
        assert_eq!(names, ["find_tools", "web_search"]);
    }

    #[test]
    fn memory_follows_the_agent_and_never_crosses_into_a_group() {
        let mut c = AgentConfig::default();
        let chosen = |c: &AgentConfig| {
            Chosen {
                name: "x",
                config: Some(c),
                policy: None,
                binding: None,
            }
            .memory_on(true)
        };
        assert!(chosen(&c));
        c.memory = Some(AgentMemory::Personal);
        assert!(!chosen(&c), "personal memory is never used in a group");
        c.memory = Some(AgentMemory::None);
        assert!(!chosen(&c));
    }
}
