//! What a group is shown of a turn while it runs. Every member reads a group's messages as they
//! change, so the streamed view there ([`super::stream::Presenter`]) is narrower than in a
//! direct chat:
//! - **no text before the final answer.** Text the model writes in a step that then calls
//!   tools is a preamble, and may quote what a tool read ("The file said …"); it is only known
//!   to be a preamble when the step ends, so in a group no step's text is shown while it is
//!   written: the answer appears once, when the turn ends ([`ethan_channels::Draft::finish`]);
//! - **tool lines name real tools only.** A line shows a registered tool's own name and its
//!   state, never its arguments; a name the model made up (which could spell out data) shows
//!   as `tool`;
//! - **no bookkeeping lines.** `find_tools` (looking up which tools exist) is not shown.
//!
//! Direct chats see every event, as before.

use crate::tools::policy::FIND_TOOLS;
use crate::tools::registry::Registry;
use ethan_channels::ChatKind;
use ethan_core::event::TurnEvent;
use std::sync::Arc;

/// Which of a turn's events a streamed view shows.
#[derive(Clone)]
pub enum Shown {
    /// A direct chat: everything.
    All,
    /// A group: see the module docs; the registry names the real tools.
    Group(Arc<Registry>),
}

impl Shown {
    /// What a chat of kind `kind` is shown; `registry` knows the tools.
    pub fn for_chat(kind: ChatKind, registry: Arc<Registry>) -> Shown {
        match kind {
            ChatKind::Direct => Shown::All,
            ChatKind::Group => Shown::Group(registry),
        }
    }

    /// `e` as this view shows it, or `None` when it is not shown.
    pub fn admit(&self, e: TurnEvent) -> Option<TurnEvent> {
        let Shown::Group(registry) = self else {
            return Some(e);
        };
        match e {
            TurnEvent::Delta(_) | TurnEvent::DeltaReset => None,
            TurnEvent::ToolStart { id, name, .. } => {
                let name = registry.resolve(&name).unwrap_or("tool");
                (name != FIND_TOOLS).then(|| TurnEvent::ToolStart {
                    id,
                    name: name.to_string(),
                    summary: String::new(),
                })
            }
            other => Some(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> Arc<Registry> {
        let cfg = crate::config::from_value(serde_json::json!({})).unwrap();
        Arc::new(crate::daemon::tool_setup::registry(&cfg))
    }

    fn start(name: &str) -> TurnEvent {
        TurnEvent::ToolStart {
            id: "c1".into(),
            name: name.into(),
            summary: "cat secret.txt".into(),
        }
    }

    #[test]
    fn a_group_sees_no_text_before_the_answer_and_only_real_tool_names() {
        let group = Shown::for_chat(ChatKind::Group, registry());
        assert_eq!(
            group.admit(TurnEvent::Delta("The file said X".into())),
            None
        );
        assert_eq!(group.admit(TurnEvent::DeltaReset), None);
        assert_eq!(group.admit(start("find_tools")), None);
        let shown = |e: Option<TurnEvent>| match e {
            Some(TurnEvent::ToolStart { name, summary, .. }) => (name, summary),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            shown(group.admit(start("shell"))),
            ("shell".to_string(), String::new())
        );
        // A made-up name could spell out what the model read.
        assert_eq!(shown(group.admit(start("SECRETNOTE-778"))).0, "tool");
        let end = TurnEvent::ToolEnd {
            id: "c1".into(),
            name: "shell".into(),
            ms: 1,
            ok: true,
            denied: false,
        };
        assert_eq!(group.admit(end.clone()), Some(end));
    }

    #[test]
    fn a_direct_chat_sees_everything() {
        let dm = Shown::for_chat(ChatKind::Direct, registry());
        let delta = TurnEvent::Delta("Let me look.".into());
        assert_eq!(dm.admit(delta.clone()), Some(delta));
        assert_eq!(dm.admit(start("find_tools")), Some(start("find_tools")));
    }
}
