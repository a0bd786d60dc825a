//! Lark/Feishu Open API error codes the adapter meets, with what they mean and what to do.
//!
//! Sources: the IM "send message" error table (open.feishu.cn `im-v1/message/create`), the
//! token codes of the Go SDK (`core/tokenmanager.go`, `core/httptransport.go`), the rate-limit
//! doc ("频控策略"), and the long-connection codes of `ws/const.go`. Every API failure is logged
//! with [`meaning`], so a user reading the log knows what to fix.

/// The tenant/app/access token is invalid or expired: refresh it and retry once
/// (99991661 missing or malformed token, 99991663 tenant token invalid, 99991664 app token
/// invalid, 99991671 access token invalid).
pub const TOKEN_CODES: [i64; 4] = [99991661, 99991663, 99991664, 99991671];

/// Request frequency limit (usually with HTTP 429 and `x-ogw-ratelimit-reset`).
pub const RATE_LIMITED: i64 = 99991400;
/// IM: the same message is updated too frequently ("230020 frequency limit").
pub const MESSAGE_RATE_LIMITED: i64 = 230020;

/// Card content the platform refuses; the same content is then sent as a `post`/text message.
/// 230099 "failed to create card content", 11310 card content could not be parsed, 200621
/// unknown property (JSON 2.0 is strict).
pub const CARD_REJECTED: [i64; 3] = [230099, 11310, 200621];

/// The app lacks an API scope (99991672 for the tenant token, 99991679 for a user token); for
/// CardKit the scope is `cardkit:card:write`.
pub const SCOPE_MISSING: [i64; 2] = [99991672, 99991679];
/// CardKit: the card's streaming mode is closed (it closes by itself after about 10 minutes).
pub const CARDKIT_STREAMING_CLOSED: i64 = 300309;
/// CardKit: the `sequence` was not greater than the card's last one.
pub const CARDKIT_SEQUENCE_FAILED: i64 = 300317;

/// Whether `code` means a missing API scope.
pub fn is_scope_missing(code: i64) -> bool {
    SCOPE_MISSING.contains(&code)
}

/// Long-connection endpoint: retryable "system busy".
pub const WS_SYSTEM_BUSY: i64 = 1;
/// Long-connection endpoint: retryable internal error.
pub const WS_INTERNAL_ERROR: i64 = 1000040343;
/// Long-connection handshake: too many connections for this app (fatal).
pub const WS_EXCEED_CONN_LIMIT: i64 = 1000040350;

/// Whether `code` means "refresh the token and retry once".
pub fn is_token_error(code: i64) -> bool {
    TOKEN_CODES.contains(&code)
}

/// Whether `code` means the card itself was refused (fall back to post/text).
pub fn is_card_rejected(code: i64) -> bool {
    CARD_REJECTED.contains(&code)
}

/// A short explanation of an Open API code, for logs and `ethan doctor`.
pub fn meaning(code: i64) -> &'static str {
    match code {
        0 => "success",
        99991661 => "the access token is missing or malformed",
        99991663 => "the tenant_access_token is invalid or expired",
        99991664 => "the app_access_token is invalid or expired",
        99991671 => "the access token is invalid",
        99991400 => "request frequency limit; wait for x-ogw-ratelimit-reset",
        99991672 | 99991679 => {
            "the app lacks an API scope; add it under Permissions & Scopes and publish a new version"
        }
        10003 => "invalid app_id (check channels.lark.app_id)",
        10014 => "invalid app_secret (check channels.lark.app_secret)",
        230001 => "invalid parameter",
        230002 => "the bot is not in this chat",
        230006 => "the bot capability is not enabled for the app (Features → Bot)",
        230013 => "the bot is not available to this user (app availability range)",
        230017 => "the bot is not the owner of this resource",
        230018 => "forbidden by the group's settings",
        230019 => "the topic does not exist",
        230020 => "sending too fast to this chat (frequency limit)",
        230022 => "the content was flagged as sensitive",
        230025 => "the message is too long (text 150 KB, card and post 30 KB)",
        230027 => "missing scope (im:message:send_as_bot)",
        230028 => "the message failed the DLP audit",
        230029 => "the user has resigned",
        230034 => "invalid receive_id",
        230035 => "the bot may not speak in this chat (muted or not a member)",
        230038 => "cross-tenant direct messages are not allowed",
        230049 => "the message is being sent",
        230053 => "the user stopped the bot's messages",
        230099 => "the card content could not be created (see the message for the element at fault)",
        11310 => "the card content could not be parsed",
        200621 => "the card has an unknown property (card JSON 2.0 is strict)",
        300309 => "the card's streaming mode is closed (it closes by itself after about 10 minutes)",
        300317 => "the card update's sequence is not greater than the last one",
        1 => "the long-connection service is busy; retrying",
        1000040343 => "long-connection internal error; retrying",
        1000040344 => "no credential for the long connection (check app_id and app_secret)",
        1000040350 => "too many long connections for this app (at most 50); stop other instances",
        _ => "unknown code (see the Lark/Feishu Open API error code list)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_codes() {
        for c in [99991661, 99991663, 99991664, 99991671] {
            assert!(is_token_error(c));
        }
        assert!(!is_token_error(99991400));
        assert!(is_card_rejected(230099));
        assert!(is_card_rejected(11310));
        assert!(!is_card_rejected(230025));
        assert!(meaning(230002).contains("not in this chat"));
        assert!(meaning(424242).contains("unknown"));
    }
}
