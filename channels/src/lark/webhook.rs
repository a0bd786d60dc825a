//! Webhook mode: Lark posts events and card callbacks to `POST /lark/events` on the gateway.
//!
//! Protocol (PROTOCOLS §2; Go SDK `event/event.go` `EventDecrypt`/`Signature`,
//! `event/dispatcher/dispatcher.go`; Python `lark_oapi/event/dispatcher_handler.py`; docs
//! "将事件发送至开发者服务器", "步骤三：接收事件"):
//!
//! - With an Encrypt Key the body is `{"encrypt":"<base64>"}`: `key = SHA-256(encrypt_key)`,
//!   `raw = base64(encrypt)`, `iv = raw[..16]`, AES-256-CBC, PKCS#7 padding.
//! - With an Encrypt Key every event must carry `X-Lark-Request-Timestamp`,
//!   `X-Lark-Request-Nonce` and `X-Lark-Signature = hex(SHA-256(timestamp + nonce + encrypt_key
//!   \+ raw body))`, compared in constant time. A signed request whose timestamp is more than
//!   [`MAX_CLOCK_SKEW`] away from the daemon's clock (either direction) is refused like a bad
//!   signature, so a captured request cannot be replayed later. Like the Go SDK, an encrypted
//!   `url_verification` without the headers is accepted: decrypting it already needs the key,
//!   and answering it reveals nothing.
//! - With a Verification Token, `header.token` (schema 2.0) or `token` (schema 1.0,
//!   url_verification) must match it, in constant time. Without an Encrypt Key the token is
//!   the only proof of origin, so the daemon refuses webhook mode when both are empty.
//! - `url_verification` is answered with `{"challenge": …}`; events get HTTP 200
//!   `{"msg":"success"}` within 3 s (the work goes on afterwards, see [`Inbound`]); a
//!   `card.action.trigger` gets its callback answer (toast, updated card) as the body.
//! - A forged or unreadable request gets 400/401 and a warning in the log, and nothing else
//!   happens.

use super::inbound::{Inbound, Reply};
use super::normalize::Envelope;
use super::LarkConfig;
use aes::cipher::{block_padding::NoPadding, BlockModeDecrypt, BlockModeEncrypt, KeyIvInit};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine as _;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::Duration;
use subtle::ConstantTimeEq;

/// The route path.
pub const EVENTS_PATH: &str = "/lark/events";
/// Header: request timestamp (seconds, as sent).
pub const TIMESTAMP_HEADER: &str = "X-Lark-Request-Timestamp";
/// Header: request nonce.
pub const NONCE_HEADER: &str = "X-Lark-Request-Nonce";
/// Header: request signature (lowercase hex SHA-256).
pub const SIGNATURE_HEADER: &str = "X-Lark-Signature";
/// Longest time spent before answering (Lark wants an answer within 3 s).
const ANSWER_DEADLINE: Duration = Duration::from_millis(2500);
/// How far a signed request's `X-Lark-Request-Timestamp` may be from the daemon's clock.
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(300);
/// Largest accepted body.
const MAX_BODY: usize = 1024 * 1024;

const TARGET: &str = "ethan_channels::lark";

type Aes256CbcDec = cbc::Decryptor<aes::Aes256>;
type Aes256CbcEnc = cbc::Encryptor<aes::Aes256>;

/// Why a body could not be decrypted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecryptError {
    #[error("`encrypt` is not base64")]
    NotBase64,
    #[error("the ciphertext has a bad length ({0} bytes)")]
    BadLength(usize),
    #[error("the plaintext is not UTF-8 JSON")]
    NotJson,
}

/// Decrypt an `encrypt` field with the app's Encrypt Key. PKCS#7 padding is removed; when it is
/// invalid the plaintext is cut to the span from the first `{` to the last `}` (as the Go SDK
/// does).
pub fn decrypt(encrypt_key: &str, encrypt: &str) -> Result<String, DecryptError> {
    let raw = base64::engine::general_purpose::STANDARD
        .decode(encrypt.trim())
        .map_err(|_| DecryptError::NotBase64)?;
    if raw.len() < 32 || raw.len() % 16 != 0 {
        return Err(DecryptError::BadLength(raw.len()));
    }
    let key = Sha256::digest(encrypt_key.as_bytes());
    let (iv, data) = raw.split_at(16);
    let mut buf = data.to_vec();
    let plain = Aes256CbcDec::new_from_slices(&key, iv)
        .map_err(|_| DecryptError::BadLength(raw.len()))?
        .decrypt_padded::<NoPadding>(&mut buf)
        .map_err(|_| DecryptError::BadLength(raw.len()))?;
    let pad = plain.last().copied().unwrap_or(0) as usize;
    let unpadded = if (1..=16).contains(&pad)
        && pad <= plain.len()
        && plain[plain.len() - pad..]
            .iter()
            .all(|b| *b as usize == pad)
    {
        &plain[..plain.len() - pad]
    } else {
        let start = plain.iter().position(|b| *b == b'{');
        let end = plain.iter().rposition(|b| *b == b'}');
        match (start, end) {
            (Some(s), Some(e)) if s <= e => &plain[s..=e],
            _ => return Err(DecryptError::NotJson),
        }
    };
    String::from_utf8(unpadded.to_vec()).map_err(|_| DecryptError::NotJson)
}

/// Encrypt `plaintext` the way Lark does (`base64(iv || AES-256-CBC(PKCS#7(plaintext)))`). For
/// tests and fakes; the daemon itself only decrypts.
pub fn encrypt(encrypt_key: &str, plaintext: &[u8], iv: [u8; 16]) -> String {
    let key = Sha256::digest(encrypt_key.as_bytes());
    let pad = 16 - plaintext.len() % 16;
    let mut buf = plaintext.to_vec();
    buf.extend(std::iter::repeat_n(pad as u8, pad));
    let len = buf.len();
    let ct = Aes256CbcEnc::new_from_slices(&key, &iv)
        .ok()
        .and_then(|c| c.encrypt_padded::<NoPadding>(&mut buf, len).ok())
        .map(<[u8]>::to_vec)
        .unwrap_or_default();
    let mut out = iv.to_vec();
    out.extend_from_slice(&ct);
    base64::engine::general_purpose::STANDARD.encode(out)
}

/// `hex(SHA-256(timestamp + nonce + encrypt_key + body))`, the `X-Lark-Signature` of a request.
pub fn signature(timestamp: &str, nonce: &str, encrypt_key: &str, body: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(timestamp.as_bytes());
    h.update(nonce.as_bytes());
    h.update(encrypt_key.as_bytes());
    h.update(body);
    hex::encode(h.finalize())
}

/// Constant-time equality of two strings (length may leak, content does not).
pub fn ct_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// Whether `headers` carry a valid signature for `body` under `encrypt_key`.
pub fn signature_valid(headers: &HeaderMap, encrypt_key: &str, body: &[u8]) -> bool {
    let get = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
    let (Some(ts), Some(nonce), Some(sig)) = (
        get(TIMESTAMP_HEADER),
        get(NONCE_HEADER),
        get(SIGNATURE_HEADER),
    ) else {
        return false;
    };
    let expected = signature(ts, nonce, encrypt_key, body);
    ct_eq(&expected, &sig.trim().to_ascii_lowercase())
}

/// The secrets the route checks requests against.
#[derive(Clone, Default)]
pub struct WebhookSecrets {
    /// Encrypt Key; empty = plaintext bodies, no signature.
    pub encrypt_key: String,
    /// Verification Token; empty = not checked.
    pub verification_token: String,
}

impl WebhookSecrets {
    /// The secrets of `channels.lark`.
    pub fn from_config(c: &LarkConfig) -> Self {
        Self {
            encrypt_key: c.encrypt_key.clone(),
            verification_token: c.verification_token.clone(),
        }
    }
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the body is not a JSON object")]
    BadJson,
    #[error("the body is encrypted but no channels.lark.encrypt_key is configured")]
    UnexpectedEncryption,
    #[error("the body is not encrypted but channels.lark.encrypt_key is set")]
    NotEncrypted,
    #[error("cannot decrypt the body: {0}")]
    Decrypt(DecryptError),
    #[error("missing or wrong X-Lark-Signature")]
    BadSignature,
    /// A validly signed request whose timestamp is unreadable or too far from the clock (the
    /// text says which, and by how much).
    #[error("X-Lark-Request-Timestamp {0}")]
    StaleTimestamp(String),
    #[error("missing or wrong verification token")]
    BadToken,
    #[error("no encrypt_key and no verification_token are configured")]
    Unprotected,
}

impl Refusal {
    fn status(&self) -> StatusCode {
        match self {
            Refusal::BadSignature | Refusal::BadToken | Refusal::StaleTimestamp(_) => {
                StatusCode::UNAUTHORIZED
            }
            Refusal::Unprotected => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::BAD_REQUEST,
        }
    }
}

/// Whether a signed request's timestamp (seconds since the epoch, as sent) is within
/// [`MAX_CLOCK_SKEW`] of `now` (seconds since the epoch); the refusal says why not.
fn check_timestamp(headers: &HeaderMap, now: i64) -> Result<(), Refusal> {
    let raw = headers
        .get(TIMESTAMP_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let Ok(ts) = raw.trim().parse::<i64>() else {
        return Err(Refusal::StaleTimestamp(format!(
            "{raw:?} is not a number of seconds"
        )));
    };
    let skew = now.saturating_sub(ts);
    let max = MAX_CLOCK_SKEW.as_secs() as i64;
    if skew > max {
        return Err(Refusal::StaleTimestamp(format!(
            "is {skew} s old (more than {max} s): a stale or replayed request"
        )));
    }
    if skew < -max {
        return Err(Refusal::StaleTimestamp(format!(
            "is {} s in the future (more than {max} s)",
            skew.saturating_neg()
        )));
    }
    Ok(())
}

/// Check and open one request, with `now` the current time in seconds since the epoch (the
/// signature's timestamp is judged against it): returns the envelope, or why it is refused.
pub fn open_request(
    secrets: &WebhookSecrets,
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
) -> Result<Envelope, Refusal> {
    if secrets.encrypt_key.is_empty() && secrets.verification_token.is_empty() {
        return Err(Refusal::Unprotected);
    }
    let outer: Value = serde_json::from_slice(body).map_err(|_| Refusal::BadJson)?;
    if !outer.is_object() {
        return Err(Refusal::BadJson);
    }
    let encrypted = outer.get("encrypt").and_then(Value::as_str);
    let (env, signed) = match (encrypted, secrets.encrypt_key.is_empty()) {
        (Some(_), true) => return Err(Refusal::UnexpectedEncryption),
        (None, false) => return Err(Refusal::NotEncrypted),
        (None, true) => (
            serde_json::from_value::<Envelope>(outer).map_err(|_| Refusal::BadJson)?,
            false,
        ),
        (Some(enc), false) => {
            let has_sig = headers.contains_key(SIGNATURE_HEADER);
            let signed = has_sig && signature_valid(headers, &secrets.encrypt_key, body);
            if has_sig && !signed {
                return Err(Refusal::BadSignature);
            }
            if signed {
                check_timestamp(headers, now)?;
            }
            let plain = decrypt(&secrets.encrypt_key, enc).map_err(Refusal::Decrypt)?;
            let env = Envelope::parse(plain.as_bytes()).ok_or(Refusal::BadJson)?;
            (env, signed)
        }
    };
    let is_verification = env.kind == "url_verification";
    if !secrets.encrypt_key.is_empty() && !signed && !is_verification {
        return Err(Refusal::BadSignature);
    }
    if !secrets.verification_token.is_empty()
        && !ct_eq(env.verification_token(), &secrets.verification_token)
    {
        return Err(Refusal::BadToken);
    }
    Ok(env)
}

#[derive(Clone)]
struct RouteState {
    secrets: Arc<WebhookSecrets>,
    inbound: Arc<Inbound>,
}

/// The axum router serving [`EVENTS_PATH`].
pub fn router(secrets: WebhookSecrets, inbound: Arc<Inbound>) -> axum::Router {
    axum::Router::new()
        .route(EVENTS_PATH, post(handle))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .with_state(RouteState {
            secrets: Arc::new(secrets),
            inbound,
        })
}

async fn handle(State(st): State<RouteState>, headers: HeaderMap, body: Bytes) -> Response {
    let now = chrono::Utc::now().timestamp();
    let env = match open_request(&st.secrets, &headers, &body, now) {
        Ok(env) => env,
        Err(why) => {
            let from = headers
                .get("x-forwarded-for")
                .or_else(|| headers.get("x-real-ip"))
                .and_then(|v| v.to_str().ok())
                .unwrap_or("a direct client");
            tracing::warn!(
                target: TARGET,
                "refused a request to {EVENTS_PATH} from {from} ({} bytes): {why}",
                body.len()
            );
            return (why.status(), axum::Json(json!({"msg": why.to_string()}))).into_response();
        }
    };
    if env.kind == "url_verification" {
        tracing::info!(target: TARGET, "answered Lark's url_verification");
        return axum::Json(json!({ "challenge": env.challenge })).into_response();
    }
    match tokio::time::timeout(ANSWER_DEADLINE, st.inbound.handle(env)).await {
        Ok(Reply::Callback(r)) => (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            r.to_bytes(),
        )
            .into_response(),
        Ok(Reply::Failed) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(json!({"msg": "not recorded; please retry"})),
        )
            .into_response(),
        Ok(Reply::Ack) | Err(_) => axum::Json(json!({"msg": "success"})).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vectors() -> Value {
        let path = format!(
            "{}/../tests/fixtures/lark/webhook_crypto_vectors.json",
            env!("CARGO_MANIFEST_DIR")
        );
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn headers_of(v: &Value) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, val) in v["headers"].as_object().unwrap() {
            h.insert(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                val.as_str().unwrap().parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn official_decrypt_vector() {
        let v = vectors();
        let o = &v["official_decrypt_vector"];
        assert_eq!(
            decrypt(
                o["encrypt_key"].as_str().unwrap(),
                o["encrypt"].as_str().unwrap()
            ),
            Ok("hello world".to_string())
        );
    }

    #[test]
    fn generated_vectors_decrypt_sign_and_roundtrip() {
        let v = vectors();
        for name in ["url_verification", "im_message_receive_v1"] {
            let t = &v[name];
            let key = t["encrypt_key"].as_str().unwrap();
            let body = t["raw_body"].as_str().unwrap();
            let outer: Value = serde_json::from_str(body).unwrap();
            let plain = decrypt(key, outer["encrypt"].as_str().unwrap()).unwrap();
            assert_eq!(plain, t["decrypted_plaintext"].as_str().unwrap(), "{name}");
            let h = &t["headers"];
            assert_eq!(
                signature(
                    h["X-Lark-Request-Timestamp"].as_str().unwrap(),
                    h["X-Lark-Request-Nonce"].as_str().unwrap(),
                    key,
                    body.as_bytes()
                ),
                h["X-Lark-Signature"].as_str().unwrap(),
                "{name}"
            );
            assert!(signature_valid(&headers_of(t), key, body.as_bytes()));
            // Our encryption with the same IV gives the same ciphertext.
            let iv: [u8; 16] = hex::decode(t["iv_hex"].as_str().unwrap())
                .unwrap()
                .try_into()
                .unwrap();
            assert_eq!(
                encrypt(key, plain.as_bytes(), iv),
                outer["encrypt"].as_str().unwrap()
            );
        }
    }

    #[test]
    fn decrypt_refuses_garbage() {
        assert_eq!(decrypt("k", "%%%"), Err(DecryptError::NotBase64));
        assert_eq!(decrypt("k", "AAAA"), Err(DecryptError::BadLength(3)));
        // Wrong key: padding is wrong and there is (almost surely) no JSON inside.
        let v = vectors();
        let enc = v["official_decrypt_vector"]["encrypt"].as_str().unwrap();
        assert!(decrypt("another key", enc).is_err());
    }

    /// A clock reading for requests without a timestamp.
    const NOW: i64 = 1_800_000_000;

    /// The clock reading at which a vector's request was sent (its timestamp header).
    fn vector_now(t: &Value) -> i64 {
        t["headers"][TIMESTAMP_HEADER]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    }

    #[test]
    fn signed_requests_are_judged_by_their_timestamp() {
        let v = vectors();
        let t = &v["im_message_receive_v1"];
        let body = t["raw_body"].as_str().unwrap().as_bytes();
        let s = secrets("test key", "");
        let sent = vector_now(t);
        // Within five minutes either way: accepted.
        for now in [sent, sent + 300, sent - 300, sent + 60] {
            assert!(open_request(&s, &headers_of(t), body, now).is_ok(), "{now}");
        }
        // A validly signed request replayed later, or dated too far ahead: refused like a bad
        // signature.
        for now in [sent + 301, sent + 86_400, sent - 301] {
            let err = open_request(&s, &headers_of(t), body, now).unwrap_err();
            assert!(matches!(err, Refusal::StaleTimestamp(_)), "{now}: {err}");
            assert_eq!(err.status(), StatusCode::UNAUTHORIZED);
        }
        let err = open_request(&s, &headers_of(t), body, sent + 3600).unwrap_err();
        assert!(err.to_string().contains("3600 s old"), "{err}");
        // A fresh request signed now is accepted; the same one an hour later is not.
        let plain = t["decrypted_plaintext"].as_str().unwrap();
        let fresh_body =
            json!({ "encrypt": encrypt("test key", plain.as_bytes(), [3u8; 16]) }).to_string();
        let now = 1_900_000_000i64;
        let mut h = HeaderMap::new();
        h.insert(TIMESTAMP_HEADER, now.to_string().parse().unwrap());
        h.insert(NONCE_HEADER, "n-1".parse().unwrap());
        let sig = signature(&now.to_string(), "n-1", "test key", fresh_body.as_bytes());
        h.insert(SIGNATURE_HEADER, sig.parse().unwrap());
        assert!(open_request(&s, &h, fresh_body.as_bytes(), now + 2).is_ok());
        assert!(matches!(
            open_request(&s, &h, fresh_body.as_bytes(), now + 3600),
            Err(Refusal::StaleTimestamp(_))
        ));
        // A signed timestamp that is not a number.
        let mut h = HeaderMap::new();
        h.insert(TIMESTAMP_HEADER, "soon".parse().unwrap());
        h.insert(NONCE_HEADER, "n-1".parse().unwrap());
        let sig = signature("soon", "n-1", "test key", fresh_body.as_bytes());
        h.insert(SIGNATURE_HEADER, sig.parse().unwrap());
        assert!(matches!(
            open_request(&s, &h, fresh_body.as_bytes(), now),
            Err(Refusal::StaleTimestamp(_))
        ));
    }

    fn secrets(ek: &str, vt: &str) -> WebhookSecrets {
        WebhookSecrets {
            encrypt_key: ek.into(),
            verification_token: vt.into(),
        }
    }

    #[test]
    fn signed_event_opens_and_forgeries_are_refused() {
        let v = vectors();
        let t = &v["im_message_receive_v1"];
        let body = t["raw_body"].as_str().unwrap().as_bytes();
        let s = secrets("test key", "");
        let env = open_request(&s, &headers_of(t), body, vector_now(t)).unwrap();
        assert_eq!(env.event_type(), "im.message.receive_v1");
        // The right token passes, a wrong one does not.
        let s_tok = secrets("test key", "rvaYgkND1GOiu5MM0E1rncYC6PLtF7JV");
        assert!(open_request(&s_tok, &headers_of(t), body, vector_now(t)).is_ok());
        assert_eq!(
            open_request(
                &secrets("test key", "nope"),
                &headers_of(t),
                body,
                vector_now(t)
            )
            .unwrap_err(),
            Refusal::BadToken
        );
        // A changed signature, a missing one, a changed body.
        let mut h = headers_of(t);
        h.insert(SIGNATURE_HEADER, "00".repeat(32).parse().unwrap());
        assert_eq!(
            open_request(&s, &h, body, vector_now(t)).unwrap_err(),
            Refusal::BadSignature
        );
        let mut h = headers_of(t);
        h.remove(SIGNATURE_HEADER);
        assert_eq!(
            open_request(&s, &h, body, vector_now(t)).unwrap_err(),
            Refusal::BadSignature
        );
        let mut tampered = body.to_vec();
        tampered.insert(1, b' ');
        assert_eq!(
            open_request(&s, &headers_of(t), &tampered, vector_now(t)).unwrap_err(),
            Refusal::BadSignature
        );
        // Plaintext while a key is configured.
        let plain = t["decrypted_plaintext"].as_str().unwrap().as_bytes();
        assert_eq!(
            open_request(&s, &HeaderMap::new(), plain, vector_now(t)).unwrap_err(),
            Refusal::NotEncrypted
        );
    }

    #[test]
    fn url_verification_without_signature_headers_is_answered() {
        let v = vectors();
        let t = &v["url_verification"];
        let body = t["raw_body"].as_str().unwrap().as_bytes();
        let env =
            open_request(&secrets("test key", "xxxxxx"), &HeaderMap::new(), body, NOW).unwrap();
        assert_eq!(env.kind, "url_verification");
        assert_eq!(env.challenge, "ajls384kdjx98XX");
        assert!(
            open_request(&secrets("test key", "yyyyyy"), &HeaderMap::new(), body, NOW).is_err()
        );
    }

    #[test]
    fn plaintext_mode_checks_the_token() {
        let plain = std::fs::read(format!(
            "{}/../tests/fixtures/lark/im_message_receive_v1_text_p2p.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        let ok = secrets("", "rvaYgkND1GOiu5MM0E1rncYC6PLtF7JV");
        assert!(open_request(&ok, &HeaderMap::new(), &plain, NOW).is_ok());
        assert_eq!(
            open_request(&secrets("", "other"), &HeaderMap::new(), &plain, NOW).unwrap_err(),
            Refusal::BadToken
        );
        assert_eq!(
            open_request(&secrets("", ""), &HeaderMap::new(), &plain, NOW).unwrap_err(),
            Refusal::Unprotected
        );
        assert_eq!(
            open_request(&ok, &HeaderMap::new(), b"[1]", NOW).unwrap_err(),
            Refusal::BadJson
        );
        assert_eq!(
            open_request(&ok, &HeaderMap::new(), br#"{"encrypt":"abc"}"#, NOW).unwrap_err(),
            Refusal::UnexpectedEncryption
        );
    }

    #[test]
    fn constant_time_compare() {
        assert!(ct_eq("abc", "abc"));
        assert!(!ct_eq("abc", "abd"));
        assert!(!ct_eq("abc", "ab"));
    }
}
