//! The gateway token: `gateway.token` from the config, or one generated on first start and
//! kept in the database (`kv` key `gateway.token`), printed by `ethan gateway token`. Every
//! `/api/*` request must carry `Authorization: Bearer <token>`, compared in constant time: any
//! local process or web page could otherwise approve its own shell calls.
//!
//! The running daemon reads the stored token at each request ([`Tokens`]), so `ethan gateway
//! token --rotate` ([`rotate`]) takes effect at once: the old token stops working, and so does
//! every web page session, whose cookies are signed with a key derived from the token and the
//! stored `gateway.cookie_key`, which rotation deletes.

use crate::config::Loaded;
use crate::store::{DaemonStoreRef, StoreError};
use axum::http::HeaderMap;
use rand::Rng;
use subtle::ConstantTimeEq;

const KV_KEY: &str = "gateway.token";
/// The `kv` key of the secret the web page's session cookies are signed with (with the token).
pub const COOKIE_KEY: &str = "gateway.cookie_key";

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
    rand::rng().fill_bytes(&mut bytes);
    let token = hex::encode(bytes);
    store.kv_set(KV_KEY, &token).await?;
    Ok(token)
}

/// The token in force, read where it lives: the config's, else the stored one (which
/// `ethan gateway token --rotate` replaces while the daemon runs).
#[derive(Clone)]
pub struct Tokens {
    configured: Option<String>,
    store: DaemonStoreRef,
}

impl Tokens {
    /// `configured`: `gateway.token`, when set.
    pub fn new(configured: Option<String>, store: DaemonStoreRef) -> Tokens {
        Tokens { configured, store }
    }

    /// The token now; `None` when there is none (nothing is authorised then).
    pub async fn current(&self) -> Result<Option<String>, StoreError> {
        if let Some(t) = &self.configured {
            return Ok(Some(t.clone()));
        }
        Ok(self.store.kv_get(KV_KEY).await?.filter(|t| !t.is_empty()))
    }

    /// Whether `headers` carry the current token as a bearer (a store failure refuses).
    pub async fn bearer_ok(&self, headers: &HeaderMap) -> bool {
        match self.current().await {
            Ok(Some(t)) => authorized(headers, &t),
            Ok(None) => false,
            Err(e) => {
                tracing::error!("cannot read the gateway token: {e}");
                false
            }
        }
    }

    /// Whether `given` is the current token (constant time).
    pub async fn matches(&self, given: &str) -> Result<bool, StoreError> {
        Ok(match self.current().await? {
            Some(t) => bool::from(given.trim().as_bytes().ct_eq(t.as_bytes())),
            None => false,
        })
    }

    /// The store the token and the cookie key live in.
    pub fn store(&self) -> &DaemonStoreRef {
        &self.store
    }
}

/// What `ethan gateway token --rotate` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rotated {
    /// A new token (stored; the old one no longer works) and every page session signed out.
    Token(String),
    /// `gateway.token` is set in the config, which only its owner can change: every page
    /// session was signed out, the token is unchanged.
    SessionsOnly,
}

/// Replace the stored token with a new random one (unless the config sets it) and delete the
/// cookie key, which signs every web page session out.
pub async fn rotate(loaded: &Loaded, store: &DaemonStoreRef) -> Result<Rotated, StoreError> {
    store.kv_delete(COOKIE_KEY).await?;
    if !loaded.config.gateway.token.is_empty() {
        return Ok(Rotated::SessionsOnly);
    }
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let token = hex::encode(bytes);
    store.kv_set(KV_KEY, &token).await?;
    Ok(Rotated::Token(token))
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
