//! The gateway token: `gateway.token` from the config, or one generated on first start and
//! kept in the database (`kv` key `gateway.token`), printed by `ethan gateway token`. Every
//! `/api/*` request must carry `Authorization: Bearer <token>`, compared in constant time: any
//! local process or web page could otherwise approve its own shell calls.

use crate::config::Loaded;
use crate::store::{DaemonStoreRef, StoreError};
use axum::http::HeaderMap;
use rand::RngCore;
use subtle::ConstantTimeEq;

const KV_KEY: &str = "gateway.token";

/// The configured token, else the stored one, else a new one (32 random bytes, hex) stored now.
pub async fn ensure_token(loaded: &Loaded, store: &DaemonStoreRef) -> Result<String, StoreError> {
    let configured = &loaded.config.gateway.token;
    if !configured.is_empty() {
        return Ok(configured.expose().to_string());
    }
    if let Some(t) = store.kv_get(KV_KEY).await? {
        if !t.is_empty() {
            return Ok(t);
        }
    }
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    let token = hex::encode(bytes);
    store.kv_set(KV_KEY, &token).await?;
    Ok(token)
}

/// Whether `headers` carry `Authorization: Bearer <token>`.
pub fn authorized(headers: &HeaderMap, token: &str) -> bool {
    let Some(value) = headers.get(axum::http::header::AUTHORIZATION) else {
        return false;
    };
    let Some(given) = value.to_str().ok().and_then(|v| v.strip_prefix("Bearer ")) else {
        return false;
    };
    !token.is_empty() && bool::from(given.trim().as_bytes().ct_eq(token.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn bearer_check() {
        let mut h = HeaderMap::new();
        assert!(!authorized(&h, "abc"));
        h.insert("authorization", HeaderValue::from_static("Bearer abc"));
        assert!(authorized(&h, "abc"));
        assert!(!authorized(&h, "abd"));
        assert!(!authorized(&h, ""));
        h.insert("authorization", HeaderValue::from_static("Basic abc"));
        assert!(!authorized(&h, "abc"));
    }
}
