//! Telegram's errors as the adapter's: a teloxide [`RequestError`] becomes a [`ChannelError`]
//! (401/404 a rejected token, 5xx worth retrying, 403 a person or chat the bot may not write to,
//! 429 with its wait).

use super::PLATFORM;
use crate::channel::ChannelError;
use teloxide::{ApiError, RequestError};

/// Map a teloxide error to the adapter's error type.
pub(crate) fn map_error(e: RequestError) -> ChannelError {
    match e {
        RequestError::Api(ApiError::InvalidToken) => ChannelError::Unauthorized {
            platform: PLATFORM,
            message: "the bot token was rejected (401/404 from the Bot API)".into(),
        },
        // A server-side failure (5xx) comes back as an "unknown" API error: worth retrying.
        RequestError::Api(ApiError::Unknown(d))
            if [
                "Internal Server Error",
                "Bad Gateway",
                "Service Unavailable",
                "Gateway Timeout",
            ]
            .iter()
            .any(|s| d.contains(s)) =>
        {
            ChannelError::Transport {
                platform: PLATFORM,
                message: format!("Bot API server error: {d}"),
            }
        }
        RequestError::Api(api) => ChannelError::Api {
            platform: PLATFORM,
            code: if forbidden(&api) { 403 } else { 400 },
            description: api.to_string(),
        },
        RequestError::MigrateToChatId(id) => ChannelError::Api {
            platform: PLATFORM,
            code: 400,
            description: format!("group chat was upgraded to supergroup {id}"),
        },
        RequestError::RetryAfter(s) => ChannelError::Api {
            platform: PLATFORM,
            code: 429,
            description: format!("Too Many Requests: retry after {}", s.seconds()),
        },
        other => ChannelError::Transport {
            platform: PLATFORM,
            message: crate::net::describe(&other),
        },
    }
}

/// Whether the Bot API refused with a 403: the bot may not write to that person or chat
/// (`Forbidden: bot can't initiate conversation with a user` — the person never pressed Start
/// —, `bot was blocked by the user`, `user is deactivated`, kicked from the chat). teloxide
/// knows some of these by an older wording and reads the current one as `Unknown`.
fn forbidden(api: &ApiError) -> bool {
    match api {
        ApiError::BotBlocked
        | ApiError::CantInitiateConversation
        | ApiError::UserDeactivated
        | ApiError::BotKicked
        | ApiError::BotKickedFromSupergroup
        | ApiError::BotKickedFromChannel => true,
        ApiError::Unknown(d) => d.starts_with("Forbidden"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bot_apis_403s_stay_403s() {
        let unreachable =
            |api: ApiError| map_error(RequestError::Api(api)).is_recipient_unreachable();
        assert!(unreachable(ApiError::Unknown(
            "Forbidden: bot can't initiate conversation with a user".into()
        )));
        assert!(unreachable(ApiError::BotBlocked));
        assert!(unreachable(ApiError::CantInitiateConversation));
        assert!(!unreachable(ApiError::MessageNotModified));
        assert!(!unreachable(ApiError::Unknown(
            "Bad Request: chat not found".into()
        )));
    }
}
