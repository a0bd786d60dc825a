//! The memo of each message of a turn's window ([`ethan_core::message::Memo`]): its character
//! count, the time stamp shown in front of a person's text and, when a model of the chain
//! speaks Chat Completions, its JSON as shown; and a person's stamped message, the copy each
//! request borrows. Made once, when the message enters the window
//! (a whole load, or the delta that brings a kept window up to date), and carried with the
//! message while the session's worker keeps the window; so each request counts, stamps and
//! writes only the turn's own messages, and copies the bytes of the rest.
//!
//! The memo is of the message as stored: only this module makes one, and nothing changes a
//! message of the window afterwards (compaction moves messages out of it whole). The window
//! is dropped with its memos when the kept window is ([`super::KeptWindow`]).

use crate::agent::prompt;
use crate::tokens;
use ethan_core::message::{ChatMessage, Derived, Memo};

/// What the memos of a session's requests hold.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wanted {
    /// The zone the stamps are written in.
    pub zone: chrono_tz::Tz,
    /// Whether a model of the chain speaks Chat Completions (the JSON is kept).
    pub chat_json: bool,
}

impl Wanted {
    /// What the requests under `config` want.
    pub(crate) fn of(config: &crate::config::Config) -> Self {
        use crate::config::ProviderKind;
        let model = &config.model;
        let chat_json = std::iter::once(model.provider)
            .chain(model.fallback.iter().map(|e| e.provider))
            .any(|p| p == ProviderKind::Openai);
        Self {
            zone: crate::usage::zone(config),
            chat_json,
        }
    }
}

/// Gives each message of `history` a memo as `wanted` says, unless it has one already.
pub(crate) fn derive(history: &mut [(i64, ChatMessage)], wanted: Wanted) {
    for (_, m) in history {
        let fits = m.derived.get().is_some_and(|d| {
            d.zone == wanted.zone.name() && (d.chat_json.is_some() || !wanted.chat_json)
        });
        if !fits {
            m.derived = Derived::new(memo(m, wanted));
        }
    }
}

/// The memo of `m` (its own, if any, not looked at).
fn memo(m: &ChatMessage, wanted: Wanted) -> Memo {
    let stamp = prompt::stamp_of(m, wanted.zone);
    // A message without a stamp is shown as it is: no copy.
    let shown = (!stamp.is_empty()).then(|| {
        let mut shown = m.clone();
        shown.derived = Derived::default();
        prompt::stamped(shown, wanted.zone)
    });
    // Pictures are never stored: a message with some is the turn's own, sent as it is.
    let chat_json = (wanted.chat_json && m.images.is_empty())
        .then(|| crate::provider::openai::message_json(shown.as_ref().unwrap_or(m)).into());
    let mut memo = Memo {
        text_len: m.content.as_ref().map_or(0, String::len),
        chars: tokens::counted_chars(m),
        zone: wanted.zone.name(),
        stamp_chars: tokens::weighted_chars(&stamp),
        stamp: stamp.into_boxed_str(),
        chat_json,
        shown: None,
    };
    if let Some(mut shown) = shown {
        // The shown copy carries this memo without itself (no cycle), the JSON shared.
        shown.derived = Derived::new(memo.clone());
        memo.shown = Some(Box::new(shown));
    }
    memo
}
