//! What the Lark tools share (`lark_calendar_events`, `lark_chat_messages`,
//! `lark_message_send`): the Open API client as the bot and as the user, and API errors turned
//! into text the model can act on (the code, its meaning, what to do).

use crate::{ErrorKind, ToolContext};
use crate::{ToolError, ToolOutput};
use ethan_core::store::KvStore;
use ethan_lark_api::api::{ApiError, LarkApi};
use ethan_lark_api::codes;
use ethan_lark_api::user_api::UserApi;
use serde_json::Value;
use std::sync::Arc;

/// How to configure a user token, for errors.
pub const HOW_TO_USER_TOKEN: &str = "set channels.lark.user_access_token (and \
user_refresh_token, so it can be refreshed) in the config: get them by signing in to the app \
through Lark's OAuth flow (authen/v2/oauth/token), then restart the daemon";

/// The Lark clients of the tools.
#[derive(Debug)]
pub struct LarkClient {
    pub api: Arc<LarkApi>,
    pub user: UserApi,
}

impl LarkClient {
    /// A client for `base_url` (the registry builds it from `channels.lark`; tests point it at
    /// a fake).
    pub fn new(
        base_url: &str,
        app_id: &str,
        app_secret: &str,
        user_access_token: &str,
        user_refresh_token: &str,
    ) -> Option<Arc<Self>> {
        let api = Arc::new(LarkApi::new(base_url, app_id, app_secret).ok()?);
        let user = UserApi::new(api.clone(), user_access_token, user_refresh_token);
        Some(Arc::new(Self { api, user }))
    }

    /// One call as the user (`as_user`) or as the bot. A refreshed user token is kept in the
    /// store the context lends ([`ToolContext::services`]), when there is one.
    pub async fn call(
        &self,
        as_user: bool,
        method: reqwest::Method,
        path: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
        ctx: &ToolContext,
    ) -> Result<Value, ApiError> {
        if as_user {
            let store = ctx.services.store.as_deref().map(|s| s as &dyn KvStore);
            self.user.call(method, path, query, body, store).await
        } else {
            self.api.call(method, path, query, body).await
        }
    }
}

/// The scopes named in a permission error's message (`... [calendar:calendar:readonly, ...]`).
pub fn scopes_in(msg: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = msg;
    while let Some(i) = rest.find('[') {
        let after = &rest[i + 1..];
        let Some(j) = after.find(']') else { break };
        for s in after[..j].split([',', ' ', '，']) {
            let s = s.trim().trim_matches(|c| c == '"' || c == '\'');
            if s.contains(':') && !s.contains(' ') && !out.iter().any(|o| o == s) {
                out.push(s.to_string());
            }
        }
        rest = &after[j..];
    }
    out
}

/// An API failure as a `dependency` error: the Lark code, its meaning and what to do.
/// `scopes` are the scopes this call needs, named when the platform's message names none.
pub fn api_error(
    what: &str,
    e: &ApiError,
    scopes: &[&str],
    as_user: bool,
) -> Result<ToolOutput, ToolError> {
    Err(api_failure(what, e, scopes, as_user))
}

/// [`api_error`]'s error itself, for a step that returns something else than the output.
pub fn api_failure(what: &str, e: &ApiError, scopes: &[&str], as_user: bool) -> ToolError {
    let (code, msg) = match e {
        ApiError::Api { code, msg, .. } | ApiError::Auth { code, msg } => {
            (Some(*code), msg.clone())
        }
        ApiError::Transport { message, .. } => (None, message.clone()),
    };
    let Some(code) = code else {
        return ToolError::new(
            ErrorKind::Dependency,
            format!("{what} failed: Lark could not be reached ({msg}). Retry later."),
        );
    };
    let todo = match code {
        99991672 | 99991679 | 230027 => {
            let named = scopes_in(&msg);
            let list = if named.is_empty() {
                scopes.join(" or ")
            } else {
                named.join(" or ")
            };
            format!(
                "add the scope {list} to the app in the Lark developer console (Permissions & \
                 Scopes){}, publish a new app version, then retry",
                if as_user { " as a user scope" } else { "" }
            )
        }
        99991668 | 99991677 | 20037 | 20064 | 20026 => {
            format!("the user token is invalid or expired; {HOW_TO_USER_TOKEN}")
        }
        99991661 if as_user => HOW_TO_USER_TOKEN.to_string(),
        10003 | 10014 => "check channels.lark.app_id and app_secret".into(),
        230002 | 230035 => "add the bot to the chat first".into(),
        193103 | 193104 => "ask for a shorter time range".into(),
        99991400 | 230020 => "wait a little and retry".into(),
        _ => "check the arguments and the app's permissions".into(),
    };
    let meaning = match code {
        99991668 => "the user access token is invalid",
        99991677 => "the user access token has expired",
        20037 | 20064 | 20026 => "the refresh token is invalid or expired",
        193103 => "the time range is longer than 40 days",
        193104 => "more than 1000 event instances in the range",
        c => codes::meaning(c),
    };
    ToolError::new(
        ErrorKind::Dependency,
        format!("{what} failed: Lark code {code} ({meaning}): {msg}. To fix: {todo}."),
    )
    .with_metadata(serde_json::json!({"lark_code": code}))
}

/// `s` as one path segment (ids never carry `/`, `?` or `#`).
pub fn segment(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '@'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_are_found() {
        let m = "Access denied. One of the following scopes is required: \
                 [calendar:calendar:readonly, calendar:calendar].";
        assert_eq!(
            scopes_in(m),
            ["calendar:calendar:readonly", "calendar:calendar"]
        );
        assert!(scopes_in("nothing here").is_empty());
    }

    #[test]
    fn permission_errors_name_the_scope() {
        let e = ApiError::Api {
            path: "/x".into(),
            code: 99991672,
            msg: "denied".into(),
            http_status: 400,
        };
        let r: crate::ToolResult = api_error("reading", &e, &["im:message:readonly"], false).into();
        let t = r.error.unwrap();
        assert!(
            t.contains("99991672") && t.contains("im:message:readonly"),
            "{t}"
        );
        assert_eq!(r.error_kind, Some(ErrorKind::Dependency));
    }
}
