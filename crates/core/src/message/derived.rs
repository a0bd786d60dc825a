//! What the requests of a conversation derive from one of its messages, worked out once and
//! carried with the message ([`super::ChatMessage::derived`]) for every later request that
//! sends it: its character count for the token budgets, the time stamp shown in front of a
//! person's text (and the stamped copy a request borrows), and its Chat Completions JSON as the
//! model is shown it.
//!
//! A message has two forms: as stored (its text) and as shown (the stamp in front of the
//! text, [`Memo::stamp`]; the same message when it has no stamp). A memo answers only for a
//! message whose text has the length of the form it describes, so a message whose text was
//! changed after the memo was made is worked out afresh ([`Memo::chars`],
//! [`Memo::chat_json`]). Only the session's kept window gives its messages a memo, and it
//! changes none of them afterwards; every other message has none ([`Derived::default`]).

use std::sync::Arc;

/// A message's memo, or none; shared by the message's clones. Never serialised, never
/// compared (two messages equal with or without one).
#[derive(Clone, Default)]
pub struct Derived(Option<Arc<Memo>>);

impl Derived {
    /// `memo`, to carry with a message.
    pub fn new(memo: Memo) -> Self {
        Self(Some(Arc::new(memo)))
    }

    /// The memo, when one was made.
    pub fn get(&self) -> Option<&Memo> {
        self.0.as_deref()
    }
}

impl PartialEq for Derived {
    /// Always: the memo is worked out from the message, not part of it.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for Derived {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.get() {
            Some(m) => write!(f, "Derived({} chars)", m.chars),
            None => f.write_str("Derived(none)"),
        }
    }
}

/// What was worked out from a message (see the module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct Memo {
    /// The byte length of the message's text as stored (0 for none).
    pub text_len: usize,
    /// Its characters as the token budgets count them, as stored.
    pub chars: usize,
    /// The time zone the stamp is written in (its IANA name).
    pub zone: &'static str,
    /// Written in front of the text as shown (`[Sat 2026-12-05 09:14 CST] `); empty for none.
    pub stamp: Box<str>,
    /// The stamp's characters as the token budgets count them.
    pub stamp_chars: usize,
    /// The message as shown, in the Chat Completions wire shape; `None` when no request of
    /// the session uses that shape.
    pub chat_json: Option<Arc<[u8]>>,
    /// The message as shown, when that differs from the message (a person's message with a
    /// stamp): a copy with the stamped text, whose own memo is this one without this copy.
    pub shown: Option<Box<super::ChatMessage>>,
}

/// Which form of its message a memo is asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Stored,
    Shown,
}

impl Memo {
    /// The form of a message whose text is `text_len` bytes long; `None` when the memo does
    /// not answer for it.
    fn form(&self, text_len: usize) -> Option<Form> {
        if text_len == self.text_len {
            Some(Form::Stored)
        } else if !self.stamp.is_empty() && text_len == self.text_len + self.stamp.len() {
            Some(Form::Shown)
        } else {
            None
        }
    }

    /// The characters of a message with `text_len` bytes of text, in either form.
    pub fn chars(&self, text_len: usize) -> Option<usize> {
        Some(match self.form(text_len)? {
            Form::Stored => self.chars,
            Form::Shown => self.chars + self.stamp_chars,
        })
    }

    /// The stamp to write in front of a stored text of `text_len` bytes.
    pub fn stamp(&self, text_len: usize) -> Option<&str> {
        (self.form(text_len)? == Form::Stored).then_some(&*self.stamp)
    }

    /// The message as shown, for a stored message with `text_len` bytes of text; `None` when it
    /// is shown as it is stored, or the memo does not answer for it.
    pub fn shown(&self, text_len: usize) -> Option<&super::ChatMessage> {
        (self.form(text_len)? == Form::Stored)
            .then_some(self.shown.as_deref())
            .flatten()
    }

    /// The Chat Completions JSON of a shown message with `text_len` bytes of text.
    pub fn chat_json(&self, text_len: usize) -> Option<&[u8]> {
        let shown = match self.form(text_len)? {
            Form::Shown => true,
            // Without a stamp both forms are one.
            Form::Stored => self.stamp.is_empty(),
        };
        shown.then_some(self.chat_json.as_deref()).flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memo(stamp: &str) -> Memo {
        Memo {
            text_len: 5,
            chars: 5,
            zone: "UTC",
            stamp: stamp.into(),
            stamp_chars: stamp.len(),
            chat_json: Some(b"{}".to_vec().into()),
            shown: None,
        }
    }

    #[test]
    fn a_memo_answers_only_for_the_lengths_of_its_forms() {
        let stamped = memo("[x] ");
        assert_eq!(stamped.chars(5), Some(5));
        assert_eq!(stamped.chars(9), Some(9));
        assert_eq!(stamped.chars(6), None, "a changed text");
        assert_eq!(stamped.stamp(5), Some("[x] "));
        assert_eq!(stamped.stamp(9), None, "already shown");
        assert_eq!(stamped.chat_json(9), Some(&b"{}"[..]));
        assert_eq!(stamped.chat_json(5), None, "the JSON is of the shown form");
        let plain = memo("");
        assert_eq!(plain.chars(5), Some(5));
        assert_eq!(plain.stamp(5), Some(""));
        assert_eq!(plain.chat_json(5), Some(&b"{}"[..]));
        assert_eq!(plain.chat_json(4), None);
        assert_eq!(Derived::new(plain), Derived::default(), "never compared");
    }
}
