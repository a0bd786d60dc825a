//! Who may talk to the bot (model calls cost money): `channels.<ch>.dm_policy` for direct chats
//! (`allowlist` = owners plus `allow_from`, `owner_only`, `open`) and `channels.<ch>.groups` /
//! `group_mode` for groups. Ownership comes from `owners:` in the config.

use crate::config::{Config, DmPolicy, GroupMode};
use ethan_channels::{ChannelKind, ChatKind, InboundEvent};

/// The decision for one inbound event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    Allowed {
        is_owner: bool,
    },
    /// Not allowed: answer once with this note (only when the bot was addressed).
    Refused(&'static str),
    /// Not for the bot at all (a group message not addressed to it, a group not listed).
    Ignore,
}

pub const NOT_ALLOWED: &str = "Sorry, I only answer people on my allow list. Ask my owner to add your \
user id — or, if you own this bot, run `ethan owner claim` on its machine and send me /claim <code> here.";

/// Decide for `ev`; `is_owner` comes from the daemon's owner records.
pub fn check(config: &Config, ev: &InboundEvent, is_owner: bool) -> Access {
    let (policy, allow_from, groups, group_mode) = match ev.channel {
        ChannelKind::Telegram => {
            let t = &config.channels.telegram;
            (t.dm_policy, &t.allow_from, &t.groups, t.group_mode)
        }
        ChannelKind::Lark => {
            let l = &config.channels.lark;
            (l.dm_policy, &l.allow_from, &l.groups, l.group_mode)
        }
        ChannelKind::Terminal | ChannelKind::Web => return Access::Allowed { is_owner: true },
    };
    if ev.sender.is_bot {
        return Access::Ignore;
    }
    let owner = is_owner;
    match ev.chat.kind {
        ChatKind::Group => {
            if !groups.is_empty() && !groups.contains(&ev.chat.id) {
                return Access::Ignore;
            }
            if group_mode == GroupMode::MentionOnly && !ev.addressed {
                return Access::Ignore;
            }
            Access::Allowed { is_owner: owner }
        }
        ChatKind::Direct => {
            let allowed = match policy {
                DmPolicy::Open => true,
                DmPolicy::OwnerOnly => owner,
                DmPolicy::Allowlist => owner || allow_from.contains(&ev.sender.id),
            };
            if allowed {
                Access::Allowed { is_owner: owner }
            } else {
                Access::Refused(NOT_ALLOWED)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ethan_channels::{ChatRef, Sender};
    use serde_json::json;

    fn ev(kind: ChatKind, user: &str, addressed: bool) -> InboundEvent {
        InboundEvent {
            channel: ChannelKind::Telegram,
            event_id: "1".into(),
            message_id: None,
            chat: ChatRef {
                id: "-5".into(),
                kind,
                thread: None,
            },
            sender: Sender {
                id: user.into(),
                display_name: "u".into(),
                is_bot: false,
            },
            text: "hi".into(),
            relayed: None,
            unfetched: None,
            addressed,
            reply_to: None,
            sent_at: 0,
            seq: 0,
            attachments: Vec::new(),
        }
    }

    fn cfg(v: serde_json::Value) -> Config {
        crate::config::from_value(v).unwrap()
    }

    /// The owner is user "1" in these tests.
    fn check(c: &Config, ev: &InboundEvent) -> Access {
        super::check(c, ev, ev.sender.id == "1")
    }

    #[test]
    fn dm_policies() {
        let c =
            cfg(json!({"owners": ["telegram:1"], "channels": {"telegram": {"allow_from": [2]}}}));
        assert_eq!(
            check(&c, &ev(ChatKind::Direct, "1", true)),
            Access::Allowed { is_owner: true }
        );
        assert_eq!(
            check(&c, &ev(ChatKind::Direct, "2", true)),
            Access::Allowed { is_owner: false }
        );
        assert_eq!(
            check(&c, &ev(ChatKind::Direct, "3", true)),
            Access::Refused(NOT_ALLOWED)
        );
        let c = cfg(
            json!({"owners": ["telegram:1"], "channels": {"telegram": {"allow_from": [2], "dm_policy": "owner_only"}}}),
        );
        assert_eq!(
            check(&c, &ev(ChatKind::Direct, "2", true)),
            Access::Refused(NOT_ALLOWED)
        );
        let c = cfg(json!({"channels": {"telegram": {"dm_policy": "open"}}}));
        assert_eq!(
            check(&c, &ev(ChatKind::Direct, "9", true)),
            Access::Allowed { is_owner: false }
        );
    }

    #[test]
    fn groups_need_a_mention_and_a_listed_group() {
        let c = cfg(json!({}));
        assert_eq!(check(&c, &ev(ChatKind::Group, "9", false)), Access::Ignore);
        assert_eq!(
            check(&c, &ev(ChatKind::Group, "9", true)),
            Access::Allowed { is_owner: false }
        );
        let c = cfg(json!({"channels": {"telegram": {"groups": ["-7"]}}}));
        assert_eq!(check(&c, &ev(ChatKind::Group, "9", true)), Access::Ignore);
        let c = cfg(json!({"channels": {"telegram": {"group_mode": "always"}}}));
        assert_eq!(
            check(&c, &ev(ChatKind::Group, "9", false)),
            Access::Allowed { is_owner: false }
        );
    }
}
