//! Open API calls as a Lark *user* (`user_access_token`), for the tools that read a user's own
//! calendar or chats or send in their name.
//!
//! - The token comes from `channels.lark.user_access_token` (and `user_refresh_token`). A
//!   refreshed pair is stored back in the daemon's kv store under [`USER_TOKEN_KEY`] and is
//!   preferred over the configured one while the configured pair is unchanged.
//! - Refresh: `POST /open-apis/authen/v2/oauth/token`
//!   `{grant_type: refresh_token, client_id, client_secret, refresh_token}` →
//!   `{code: 0, access_token, expires_in, refresh_token}`. It happens [`REFRESH_MARGIN_SECS`]
//!   before the known expiry (user tokens live about 2 h), and once after a user-token error
//!   code ([`USER_TOKEN_CODES`]) from a call, which is then retried once.
//!
//! Tokens never appear in errors or logs.

use crate::api::{ApiError, LarkApi};
use ethan_core::store::KvStore;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;
use tokio::sync::Mutex;

/// State-store key of the current user token pair (JSON [`UserToken`]).
pub const USER_TOKEN_KEY: &str = "lark.user_token";
/// The refresh endpoint (OAuth v2).
pub const REFRESH_PATH: &str = "/open-apis/authen/v2/oauth/token";
/// Refresh this long before a known expiry.
pub const REFRESH_MARGIN_SECS: i64 = 300;
/// Codes meaning the user access token is missing, invalid or expired.
pub const USER_TOKEN_CODES: [i64; 4] = [99991661, 99991668, 99991671, 99991677];

/// A user token pair.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct UserToken {
    pub access_token: String,
    pub refresh_token: String,
    /// Unix seconds; 0 = unknown (a configured token).
    pub expires_at: i64,
    /// Fingerprint of the configured pair this one descends from.
    #[serde(default)]
    pub seed: String,
}

/// Calls with a user access token. Cheap to share behind an `Arc`.
pub struct UserApi {
    api: Arc<LarkApi>,
    configured: UserToken,
    current: Mutex<Option<UserToken>>,
}

impl std::fmt::Debug for UserApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserApi")
            .field("configured", &self.is_configured())
            .finish_non_exhaustive()
    }
}

/// FNV-1a of the configured pair: tells whether a stored token belongs to this configuration.
fn fingerprint(access: &str, refresh: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in access.bytes().chain([0u8]).chain(refresh.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

impl UserApi {
    /// `access_token` / `refresh_token` from the config (either may be empty).
    pub fn new(api: Arc<LarkApi>, access_token: &str, refresh_token: &str) -> Self {
        let (a, r) = (access_token.trim(), refresh_token.trim());
        Self {
            api,
            configured: UserToken {
                access_token: a.to_string(),
                refresh_token: r.to_string(),
                expires_at: 0,
                seed: fingerprint(a, r),
            },
            current: Mutex::new(None),
        }
    }

    /// Whether a user token (or a refresh token to get one) is configured.
    pub fn is_configured(&self) -> bool {
        !self.configured.access_token.is_empty() || !self.configured.refresh_token.is_empty()
    }

    /// The app-level client these calls share their HTTP client with.
    pub fn api(&self) -> &LarkApi {
        &self.api
    }

    /// A valid user access token: the cached one, the stored one, or the configured one,
    /// refreshed first when it is about to expire.
    pub async fn access_token(&self, store: Option<&dyn KvStore>) -> Result<String, ApiError> {
        self.token(store, false).await
    }

    async fn token(&self, store: Option<&dyn KvStore>, force: bool) -> Result<String, ApiError> {
        let mut slot = self.current.lock().await;
        if slot.is_none() {
            let saved = match store {
                Some(s) => s.kv_get(USER_TOKEN_KEY).await.ok().flatten(),
                None => None,
            };
            let stored = saved
                .and_then(|j| serde_json::from_str::<UserToken>(&j).ok())
                .filter(|t| t.seed == self.configured.seed && !t.access_token.is_empty());
            *slot = Some(stored.unwrap_or_else(|| self.configured.clone()));
        }
        let tok = slot.as_mut().expect("set above");
        let now = chrono::Utc::now().timestamp();
        let due = tok.access_token.is_empty()
            || (tok.expires_at > 0 && now >= tok.expires_at - REFRESH_MARGIN_SECS);
        if (force || due) && !tok.refresh_token.is_empty() {
            let fresh = self.refresh(&tok.refresh_token).await?;
            *tok = fresh;
            if let Some(s) = store {
                if let Ok(j) = serde_json::to_string(&*tok) {
                    if let Err(e) = s.kv_set(USER_TOKEN_KEY, &j).await {
                        tracing::warn!(
                            target: "ethan_channels::lark",
                            "cannot store the refreshed user token: {e}"
                        );
                    }
                }
            }
        }
        if tok.access_token.is_empty() {
            return Err(ApiError::Auth {
                code: 99991661,
                msg: "no user_access_token is configured".into(),
            });
        }
        Ok(tok.access_token.clone())
    }

    async fn refresh(&self, refresh_token: &str) -> Result<UserToken, ApiError> {
        let body = json!({
            "grant_type": "refresh_token",
            "client_id": self.api.app_id(),
            "client_secret": self.api.app_secret(),
            "refresh_token": refresh_token,
        });
        let v = self
            .send(reqwest::Method::POST, REFRESH_PATH, &[], Some(&body), None)
            .await?;
        let code = v.get("code").and_then(Value::as_i64).unwrap_or(0);
        let access = v
            .get("access_token")
            .or_else(|| v.pointer("/data/access_token"))
            .and_then(Value::as_str)
            .unwrap_or("");
        if code != 0 || access.is_empty() {
            let msg = v
                .get("error_description")
                .or_else(|| v.get("msg"))
                .and_then(Value::as_str)
                .unwrap_or("the refresh answer has no access_token")
                .to_string();
            return Err(ApiError::Auth {
                code: if code != 0 { code } else { 20037 },
                msg: format!("refreshing the user_access_token failed: {msg}"),
            });
        }
        let expires_in = v
            .get("expires_in")
            .or_else(|| v.pointer("/data/expires_in"))
            .and_then(Value::as_i64)
            .unwrap_or(7200);
        let new_refresh = v
            .get("refresh_token")
            .or_else(|| v.pointer("/data/refresh_token"))
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
            .unwrap_or(refresh_token);
        tracing::info!(
            target: "ethan_channels::lark",
            "refreshed the Lark user_access_token (valid {expires_in}s)"
        );
        Ok(UserToken {
            access_token: access.to_string(),
            refresh_token: new_refresh.to_string(),
            expires_at: chrono::Utc::now().timestamp() + expires_in,
            seed: self.configured.seed.clone(),
        })
    }

    /// One HTTP request; `bearer` adds the Authorization header. Returns the JSON answer
    /// whatever its code (the caller checks).
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
        bearer: Option<&str>,
    ) -> Result<Value, ApiError> {
        let transport = |message: String| ApiError::Transport {
            path: path.to_string(),
            message,
        };
        let mut req = self
            .api
            .http()
            .request(method, format!("{}{}", self.api.base_url(), path));
        if let Some(t) = bearer {
            req = req.bearer_auth(t);
        }
        if !query.is_empty() {
            req = req.query(query);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| transport(format!("request failed: {}", ethan_core::net::describe(&e))))?;
        let status = resp.status().as_u16();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| transport(format!("reading the answer failed: {e}")))?;
        serde_json::from_slice::<Value>(&bytes).map_err(|_| {
            transport(format!(
                "unreadable answer (HTTP {status}, {} bytes)",
                bytes.len()
            ))
        })
    }

    /// One Open API call with the user token; on a user-token error the token is refreshed
    /// (when a refresh token is known) and the call retried once. Returns the whole answer
    /// (`code` 0).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
        store: Option<&dyn KvStore>,
    ) -> Result<Value, ApiError> {
        let mut retried = false;
        let mut token = self.token(store, false).await?;
        loop {
            let v = self
                .send(method.clone(), path, query, body, Some(&token))
                .await?;
            let code = v.get("code").and_then(Value::as_i64).unwrap_or(-1);
            if code == 0 {
                return Ok(v);
            }
            let msg = v
                .get("msg")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if USER_TOKEN_CODES.contains(&code)
                && !retried
                && !self.configured.refresh_token.is_empty()
            {
                retried = true;
                token = self.token(store, true).await?;
                continue;
            }
            return Err(ApiError::Api {
                path: path.to_string(),
                code,
                msg,
                http_status: 0,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_tells_pairs_apart() {
        assert_eq!(fingerprint("a", "b"), fingerprint("a", "b"));
        assert_ne!(fingerprint("a", "b"), fingerprint("ab", ""));
    }

    #[test]
    fn configured_needs_a_token() {
        let api = Arc::new(LarkApi::new("http://127.0.0.1:9", "cli_1", "s").unwrap());
        assert!(!UserApi::new(api.clone(), " ", "").is_configured());
        assert!(UserApi::new(api.clone(), "", "r").is_configured());
        assert!(!format!("{:?}", UserApi::new(api, "u-secret", "")).contains("u-secret"));
    }
}
