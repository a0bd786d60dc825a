//! Where an approval is delivered: in the chat of the turn, or privately to the owner.
//!
//! A group is a public room: every member reads what the bot posts there. Once private data
//! entered a group turn ([`ethan_core::tool::Taint`]: a file read, a command's output, the
//! owner's file sent in the chat, earlier in the conversation too), any question the turn asks
//! may carry it (the URL of a fetch with the data in its query, a command line, a message's
//! text), so the approval goes to the owner's direct chat with the bot instead
//! ([`ethan_channels::Channel::direct_chat`]: Telegram's private chat, Lark's p2p chat by
//! `open_id`), naming the group it was asked in; the group sees one line, [`WAITING`], and the
//! answer comes back to the group's turn, which goes on there. Every other approval is asked
//! where the turn runs, as before.
//!
//! A private request is answered only by the owner it was sent to ([`Private::answerer`]);
//! the chat of the press is not compared (on Lark the press comes from the p2p chat's id, not
//! the `open_id` it was sent to), since only that person has the buttons.
//!
//! A bot cannot open a direct chat: Telegram refuses a message to someone who never pressed
//! Start (403), Lark one to someone the app is not available to or who stopped its messages.
//! Whether the chat exists is therefore learnt by sending: when the platform refuses the send
//! that way ([`ethan_channels::ChannelError::is_recipient_unreachable`]), nothing is shown
//! anywhere, the call is refused ([`Denial::NoDirectChat`]) and the group is told how to start
//! the chat ([`start_a_direct_chat`]). A stored direct session is not trusted instead: the
//! owner may have blocked the bot since, or have been configured without ever writing to it.

use super::{Consent, Denial};
use ethan_channels::{
    ApprovalChoice, ChannelKind, ChatKind, ChatRef, OutboundBody, OutboundMessage,
};
use ethan_core::tool::ToolContext;

/// What the group sees while its turn waits for an approval asked in private.
pub const WAITING: &str =
    "🔐 Waiting for the owner's approval, asked in private (in the owner's direct chat with me).";

/// Where one approval goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// In the chat of the turn (a direct chat, or a group whose turn holds no private data).
    InChat,
    /// To the owner's direct chat: the turn runs in `group` and holds private data.
    Private { group: ChatRef },
}

impl Delivery {
    /// Where the approval for a call of `ctx` goes (see the module docs).
    pub fn of(ctx: &ToolContext) -> Delivery {
        match &ctx.chat {
            Some(chat) if chat.kind == ChatKind::Group && ctx.taint.source().is_some() => {
                Delivery::Private {
                    group: chat.clone(),
                }
            }
            _ => Delivery::InChat,
        }
    }

    /// The description as the owner reads it: a private one first names the group it was
    /// asked in (by the platform's id: a group's title is set by its members, and could
    /// pretend to be anything).
    pub fn framed(&self, channel: ChannelKind, description: String) -> String {
        match self {
            Delivery::InChat => description,
            Delivery::Private { group } => {
                format!("Asked in the {channel} group {}:\n{description}", group.id)
            }
        }
    }
}

/// A request sent in private: the owner who alone may answer it, and the line the group is
/// shown once it is delivered.
pub(super) struct Private {
    pub answerer: String,
    pub waiting: OutboundMessage,
}

/// What the group is told when the owner has no direct chat with the bot yet.
pub fn start_a_direct_chat(channel: ChannelKind) -> String {
    let how = match channel {
        ChannelKind::Telegram => "open a private chat with me and press Start",
        _ => "open a direct chat with me and send me a message",
    };
    format!(
        "🔐 This needs the owner's approval in private, but the owner has no direct chat with \
         me yet, so it did not run. Owner: {how}, then ask again."
    )
}

impl Consent {
    /// Ask on a chat platform, as [`Delivery`] says (the description already framed by
    /// [`Delivery::framed`] and made visible).
    pub(super) async fn ask_on_platform(
        &self,
        ctx: &ToolContext,
        delivery: &Delivery,
        tool: &str,
        description: &str,
        always: bool,
    ) -> Result<ApprovalChoice, Denial> {
        let channel = self
            .channels
            .get(&ctx.channel)
            .cloned()
            .ok_or(Denial::NoProvider)?;
        let group = match delivery {
            Delivery::InChat => {
                let chat = ctx.chat.clone().ok_or(Denial::NoProvider)?;
                return self
                    .ask_in_chat(ctx, channel, chat, None, tool, description, always)
                    .await;
            }
            Delivery::Private { group } => group,
        };
        let tell_group = |text: String| OutboundMessage {
            chat: group.clone(),
            reply_to: None,
            body: OutboundBody::Text(text),
            idempotency_key: None,
        };
        let asked = match channel.direct_chat(&ctx.user_id) {
            Some(dm) => {
                let private = Private {
                    answerer: ctx.user_id.clone(),
                    waiting: tell_group(WAITING.to_string()),
                };
                self.ask_in_chat(
                    ctx,
                    channel.clone(),
                    dm,
                    Some(private),
                    tool,
                    description,
                    always,
                )
                .await
            }
            None => Err(Denial::NoDirectChat),
        };
        if asked == Err(Denial::NoDirectChat) {
            tracing::info!(
                "{} user {} has no direct chat with the bot; an approval asked in group {} \
                 was refused",
                ctx.channel,
                ctx.user_id,
                group.id
            );
            if let Err(e) = channel
                .send(&tell_group(start_a_direct_chat(ctx.channel)))
                .await
            {
                tracing::warn!("cannot tell group {} to start a direct chat: {e}", group.id);
            }
        }
        asked
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consent::{owners::Owners, Pending};
    use ethan_channels::ApprovalDecision;
    use std::time::Duration;

    #[tokio::test]
    async fn a_private_request_is_answered_by_the_owner_it_was_sent_to_only() {
        let store = crate::store::Store::open_in_memory().unwrap().shared();
        let cfg = crate::config::from_value(
            serde_json::json!({"owners": ["lark:ou_owner", "lark:ou_second"]}),
        )
        .unwrap();
        let c = Consent::new(Owners::new(&cfg, store), Duration::from_secs(60), None);
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        c.pending().insert(
            "p1".into(),
            Pending {
                channel: ChannelKind::Lark,
                chat_id: "ou_owner".into(),
                answerer: Some("ou_owner".into()),
                tool: "web_fetch".into(),
                tx,
            },
        );
        let press = |user: &str, chat: &str| ApprovalDecision {
            channel: ChannelKind::Lark,
            request_id: "p1".into(),
            choice: ApprovalChoice::Once,
            user_id: user.into(),
            chat_id: chat.into(),
        };
        // `/approve` without an id finds it in the owner's direct chat, not in the group.
        assert_eq!(
            c.pending_for(ChannelKind::Lark, "oc_p2p_ou_owner", Some("ou_owner")),
            ["p1"]
        );
        assert!(c.pending_in_chat(ChannelKind::Lark, "oc_group").is_empty());
        // Another owner, wherever: not counted.
        for chat in ["ou_owner", "oc_p2p_ou_owner", "oc_group"] {
            let ack = c.decide(&press("ou_second", chat)).await;
            assert!(!ack.accepted && ack.toast.contains("sent to"), "{ack:?}");
        }
        assert!(rx.try_recv().is_err());
        // The owner it was sent to, pressing in the p2p chat (whose id is not the open_id).
        let ack = c.decide(&press("ou_owner", "oc_p2p_ou_owner")).await;
        assert!(ack.accepted, "{ack:?}");
        assert_eq!(rx.try_recv().unwrap(), ApprovalChoice::Once);
    }

    fn ctx(kind: ChatKind) -> ToolContext {
        let mut ctx = ToolContext::local(std::env::temp_dir());
        ctx.channel = ChannelKind::Telegram;
        ctx.user_id = "42".into();
        ctx.chat = Some(ChatRef {
            id: "-100777".into(),
            kind,
            thread: None,
        });
        ctx
    }

    #[test]
    fn a_group_turn_holding_private_data_asks_in_private() {
        let group = ctx(ChatKind::Group);
        assert_eq!(Delivery::of(&group), Delivery::InChat);
        group.taint.mark("file_read");
        let private = Delivery::of(&group);
        assert!(matches!(&private, Delivery::Private { group } if group.id == "-100777"));
        assert_eq!(
            private.framed(ChannelKind::Telegram, "web_fetch https://x".into()),
            "Asked in the telegram group -100777:\nweb_fetch https://x"
        );
        // A direct chat is private already; the terminal and the web have no group.
        let dm = ctx(ChatKind::Direct);
        dm.taint.mark("file_read");
        assert_eq!(Delivery::of(&dm), Delivery::InChat);
        let terminal = ToolContext::local(std::env::temp_dir());
        terminal.taint.mark("file_read");
        assert_eq!(Delivery::of(&terminal), Delivery::InChat);
        assert_eq!(Delivery::InChat.framed(ChannelKind::Lark, "x".into()), "x");
    }
}
