//! Signing in to the web page: the gateway token, entered once, is exchanged for a session.
//!
//! A session is two values that must come together:
//! - the cookie `ethan_session` (`HttpOnly`, `SameSite=Strict`, `Path=/`, `Max-Age` of
//!   [`LIFETIME`]), named `__Host-ethan_session` with `Secure` when the browser came over TLS
//!   (a name only a secure page of this very host can set): `v1.<expiry>.<nonce>.<mac>`;
//! - the header `X-Ethan-Csrf`: a second MAC of the nonce, given to the page when it signs in
//!   and kept in its `localStorage`.
//!
//! The cookie alone is not enough because cookies do not keep ports apart: another server on
//! `localhost` (any port) receives this cookie from the browser. It cannot read this origin's
//! `localStorage`, so it lacks the header. The header alone is not enough either: script that
//! could read it (there should be none: see the CSP) still lacks the `HttpOnly` cookie value.
//!
//! Another server on `localhost` can also *set* cookies of this name (on any path, which the
//! browser then sends first): a request may carry several `ethan_session` values, and it is
//! signed in when any one of them, with the header, is a session ([`cookies_of`]). A stranger's
//! value cannot shadow the owner's.
//!
//! Both MACs are HMAC-SHA-256 under a key derived from the token and a random secret stored in
//! the `kv` table (`gateway.cookie_key`, created at the first sign-in). A session ends when its
//! expiry passes, when it signs out (its nonce is recorded as revoked until its expiry:
//! [`super::revoked`], so a copy of the cookie stops working at once), or for every browser at
//! once when the token or the secret changes (`ethan gateway token --rotate` deletes the
//! secret).

use crate::gateway::auth::{Tokens, COOKIE_KEY};
use crate::store::StoreError;
use hmac::{Hmac, KeyInit, Mac};
use rand::Rng;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The session cookie's name over plain HTTP (loopback).
pub const COOKIE: &str = "ethan_session";
/// The session cookie's name over TLS: the `__Host-` prefix makes the browser refuse it from
/// anything but a secure page of this host, with `Path=/` and no `Domain`.
pub const HOST_COOKIE: &str = "__Host-ethan_session";
/// The header carrying the second half of a session.
pub const CSRF_HEADER: &str = "x-ethan-csrf";
/// How long a sign-in lasts, in seconds: 7 days.
pub const LIFETIME: i64 = 7 * 86_400;

/// Signs and checks sessions under the key of the current token and cookie secret.
pub struct Signer {
    key: [u8; 32],
}

/// A new session: the cookie's value and the page's header value.
pub struct Issued {
    pub cookie: String,
    pub csrf: String,
}

impl Signer {
    /// The signer of now: `None` without a token. `create`: make the cookie secret when there
    /// is none yet (at sign-in; a check without one fails instead).
    pub async fn load(tokens: &Tokens, create: bool) -> Result<Option<Signer>, StoreError> {
        let Some(token) = tokens.current().await? else {
            return Ok(None);
        };
        let store = tokens.store();
        let secret = match store.kv_get(COOKIE_KEY).await? {
            Some(s) if !s.is_empty() => s,
            _ if create => {
                let mut bytes = [0u8; 32];
                rand::rng().fill_bytes(&mut bytes);
                let s = hex::encode(bytes);
                store.kv_set(COOKIE_KEY, &s).await?;
                s
            }
            _ => return Ok(None),
        };
        let mut h = Sha256::new();
        h.update(b"ethan web session\0");
        h.update(secret.as_bytes());
        h.update(b"\0");
        h.update(token.as_bytes());
        Ok(Some(Signer {
            key: h.finalize().into(),
        }))
    }

    fn mac(&self, parts: &[&str]) -> String {
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.key).expect("any key length");
        for p in parts {
            m.update(p.as_bytes());
            m.update(b"|");
        }
        hex::encode(m.finalize().into_bytes())
    }

    /// A session expiring [`LIFETIME`] after `now` (Unix seconds).
    pub fn issue(&self, now: i64) -> Issued {
        let mut n = [0u8; 16];
        rand::rng().fill_bytes(&mut n);
        let nonce = hex::encode(n);
        let expiry = (now + LIFETIME).to_string();
        let mac = self.mac(&["session", &expiry, &nonce]);
        Issued {
            cookie: format!("v1.{expiry}.{nonce}.{mac}"),
            csrf: self.mac(&["csrf", &nonce]),
        }
    }

    /// Whether `cookie` and `csrf` are a session of this key that has not expired at `now`.
    pub fn check(&self, cookie: &str, csrf: &str, now: i64) -> bool {
        self.verify(cookie, csrf, now).is_some()
    }

    /// The session `cookie` and `csrf` are, when they are one of this key that has not expired
    /// at `now`.
    pub fn verify(&self, cookie: &str, csrf: &str, now: i64) -> Option<Valid> {
        let mut parts = cookie.split('.');
        let (Some("v1"), Some(expiry), Some(nonce), Some(mac), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return None;
        };
        let Ok(exp) = expiry.parse::<i64>() else {
            return None;
        };
        let want = self.mac(&["session", expiry, nonce]);
        let want_csrf = self.mac(&["csrf", nonce]);
        let mac_ok: bool = want.as_bytes().ct_eq(mac.as_bytes()).into();
        let csrf_ok: bool = want_csrf.as_bytes().ct_eq(csrf.trim().as_bytes()).into();
        (mac_ok && csrf_ok && exp > now).then(|| Valid {
            nonce: nonce.to_string(),
            expiry: exp,
        })
    }
}

/// A session that checked out: its nonce and expiry (Unix seconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Valid {
    pub nonce: String,
    pub expiry: i64,
}

/// The `Set-Cookie` value of a new session: `__Host-ethan_session` with `Secure` over TLS.
pub fn set_cookie(value: &str, secure: bool) -> String {
    if secure {
        format!(
            "{HOST_COOKIE}={value}; Path=/; Max-Age={LIFETIME}; HttpOnly; SameSite=Strict; Secure"
        )
    } else {
        format!("{COOKIE}={value}; Path=/; Max-Age={LIFETIME}; HttpOnly; SameSite=Strict")
    }
}

/// The `Set-Cookie` value that removes the session cookie set by [`set_cookie`].
pub fn clear_cookie(secure: bool) -> String {
    if secure {
        format!("{HOST_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict; Secure")
    } else {
        format!("{COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict")
    }
}

/// Most session cookie values looked at in one request (a browser sends a few at most; the
/// rest of a flood is ignored).
const MAX_VALUES: usize = 16;

/// Every session cookie value in a request's `Cookie` headers (under either name), in order.
pub fn cookies_of(h: &axum::http::HeaderMap) -> Vec<String> {
    h.get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .filter(|(k, _)| *k == COOKIE || *k == HOST_COOKIE)
        .map(|(_, v)| v.trim().to_string())
        .take(MAX_VALUES)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signer(b: u8) -> Signer {
        Signer { key: [b; 32] }
    }

    #[test]
    fn a_session_needs_its_cookie_and_its_header_and_expires() {
        let s = signer(1);
        let i = s.issue(1000);
        assert!(s.check(&i.cookie, &i.csrf, 1000));
        assert!(!s.check(&i.cookie, "", 1000), "the header is required");
        assert!(!s.check(&i.cookie, &i.csrf, 1000 + LIFETIME), "expired");
        assert!(!signer(2).check(&i.cookie, &i.csrf, 1000), "another key");
        let other = s.issue(1000);
        assert!(
            !s.check(&i.cookie, &other.csrf, 1000),
            "another session's header"
        );
        // A cookie whose expiry was pushed out loses its MAC.
        let forged = i.cookie.replacen("v1.", "v1.9", 1);
        assert!(!s.check(&forged, &i.csrf, 1000));
        assert!(!s.check("v1.x.y", &i.csrf, 1000));
    }

    #[test]
    fn cookie_attributes() {
        let c = set_cookie("abc", false);
        assert!(c.contains("HttpOnly") && c.contains("SameSite=Strict") && !c.contains("Secure"));
        let tls = set_cookie("abc", true);
        assert!(
            tls.starts_with("__Host-ethan_session=abc; Path=/;"),
            "{tls}"
        );
        assert!(
            tls.ends_with("; Secure") && !tls.contains("Domain"),
            "{tls}"
        );
        assert!(clear_cookie(true).starts_with("__Host-ethan_session=;"));
        let mut h = axum::http::HeaderMap::new();
        h.insert(
            "cookie",
            "a=1; ethan_session=junk; ethan_session=v1.2.3.4; __Host-ethan_session=v1.5; b=2"
                .parse()
                .unwrap(),
        );
        assert_eq!(cookies_of(&h), ["junk", "v1.2.3.4", "v1.5"]);
    }
}
