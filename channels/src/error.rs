//! [`ChannelError`]: what an adapter reports when the platform, the network or the daemon's
//! services fail, including a message that was only partly delivered.

use crate::model::SentRef;

/// Lark codes of a send to a person the bot may not write to (see
/// [`ChannelError::is_recipient_unreachable`]).
const LARK_UNREACHABLE: [i64; 4] = [230013, 230034, 230038, 230053];

/// Errors an adapter reports. The text is for logs and, shortened, for people.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// The platform refused the request (its error code and description).
    #[error("{platform} API error {code}: {description}")]
    Api {
        platform: &'static str,
        code: i64,
        description: String,
    },
    /// The platform could not be reached or answered with something unreadable.
    #[error("{platform} transport error: {message}")]
    Transport {
        platform: &'static str,
        message: String,
    },
    /// The credentials are missing or rejected; retrying will not help.
    #[error("{platform} credentials rejected: {message}")]
    Unauthorized {
        platform: &'static str,
        message: String,
    },
    /// The daemon's sink or state store failed (e.g. the database is unavailable).
    #[error("daemon storage error: {0}")]
    Storage(String),
    /// A message split into `total` parts stopped at part `delivered` (0-based): parts
    /// `..delivered` are shown (`sent` holds the ids of those this send delivered), and `cause`
    /// is why part `delivered` failed. Send the rest with [`Channel::send_from`]`(msg,
    /// delivered)`; sending the whole message again would show the first parts twice.
    #[error("{cause} (the first {delivered} of {total} parts were delivered)")]
    Partial {
        delivered: usize,
        total: usize,
        sent: SentRef,
        cause: Box<ChannelError>,
    },
}

impl ChannelError {
    /// The error behind a [`ChannelError::Partial`]; any other error itself.
    pub fn cause(&self) -> &ChannelError {
        match self {
            ChannelError::Partial { cause, .. } => cause.cause(),
            other => other,
        }
    }

    /// Whether the platform refused the send because the bot may not write to that person at
    /// all: on Telegram a 403 (`Forbidden: bot can't initiate conversation with a user`, the
    /// person never pressed Start, or `bot was blocked by the user`); on Lark 230013 (the bot
    /// is not available to the user), 230034 (invalid `receive_id`), 230038 (cross-tenant
    /// direct messages) or 230053 (the user stopped the bot's messages). Retrying does not help.
    pub fn is_recipient_unreachable(&self) -> bool {
        match self.cause() {
            ChannelError::Api {
                platform: "telegram",
                code,
                ..
            } => *code == 403,
            ChannelError::Api {
                platform: "lark",
                code,
                ..
            } => LARK_UNREACHABLE.contains(code),
            _ => false,
        }
    }

    /// What an adapter returns when part `failed` (0-based) of a message split into `total`
    /// parts could not be sent, in a send that started at part `first`: [`ChannelError::Partial`]
    /// when this send delivered at least one part (their ids in `sent`), else `cause` alone.
    pub fn stopped_at(
        first: usize,
        failed: usize,
        total: usize,
        sent: SentRef,
        cause: ChannelError,
    ) -> ChannelError {
        if failed <= first {
            return cause;
        }
        ChannelError::Partial {
            delivered: failed,
            total,
            sent,
            cause: Box::new(cause),
        }
    }
}
