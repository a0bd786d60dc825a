//! The replay guard for side-effect tools: a call is identified by
//! `key = first 24 hex chars of sha256("{trace_id}:{tool}:{index}:{canonical_json(args)}")`,
//! where `index` is the call's 0-based position in the assistant message. A key seen before is
//! refused. A key is recorded when its call starts running (after consent allowed it), so a call
//! the owner denied, or that nobody approved in time, may be proposed again and is asked again;
//! [`ReplayGuard::seen`] lets the executor refuse a replay before asking. Recent keys live in an
//! in-memory LRU (500); every key is also stored in SQLite with its turn, so a turn re-run after a
//! crash (same trace id) is recognised.

use ethan_core::store::StorageRef;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

/// Keys remembered in memory.
pub const LRU_CAPACITY: usize = 500;

/// JSON with object keys sorted at every level (RFC 8785-style key order; numbers and strings
/// as serde_json writes them).
pub fn canonical_json(v: &Value) -> String {
    fn write(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                ethan_core::sort::sort(&mut keys);
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String((*k).clone()).to_string());
                    out.push(':');
                    write(&m[*k], out);
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(x, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut s = String::new();
    write(v, &mut s);
    s
}

/// The replay key of one call.
pub fn replay_key(trace_id: &str, tool: &str, index: usize, args: &Value) -> String {
    let digest =
        Sha256::digest(format!("{trace_id}:{tool}:{index}:{}", canonical_json(args)).as_bytes());
    hex::encode(digest)[..24].to_string()
}

struct Lru {
    order: VecDeque<String>,
    set: HashSet<String>,
}

pub struct ReplayGuard {
    lru: Mutex<Lru>,
    store: Option<StorageRef>,
}

impl ReplayGuard {
    /// `store`: where keys persist (`None`: memory only, for tests and benchmarks).
    pub fn new(store: Option<StorageRef>) -> Self {
        Self {
            lru: Mutex::new(Lru {
                order: VecDeque::with_capacity(LRU_CAPACITY),
                set: HashSet::with_capacity(LRU_CAPACITY),
            }),
            store,
        }
    }

    /// Whether `key` was recorded before (without recording it). A database error is logged and
    /// the in-memory answer stands.
    pub async fn seen(&self, key: &str) -> bool {
        {
            let lru = self.lru.lock().unwrap_or_else(|p| p.into_inner());
            if lru.set.contains(key) {
                return true;
            }
        }
        match &self.store {
            Some(s) => s.replay_key_recorded(key).await.unwrap_or_else(|e| {
                tracing::error!("replay guard: {e}");
                false
            }),
            None => false,
        }
    }

    /// Record `key`; `true` when it is new, `false` for a replay. A database error is logged
    /// and the in-memory answer stands.
    pub async fn first_time(&self, key: &str, trace_id: &str, tool: &str) -> bool {
        {
            let mut lru = self.lru.lock().unwrap_or_else(|p| p.into_inner());
            if lru.set.contains(key) {
                return false;
            }
            if lru.order.len() >= LRU_CAPACITY {
                if let Some(old) = lru.order.pop_front() {
                    lru.set.remove(&old);
                }
            }
            lru.order.push_back(key.to_string());
            lru.set.insert(key.to_string());
        }
        match &self.store {
            Some(s) => match s.record_replay_key(key, trace_id, tool).await {
                Ok(new) => new,
                Err(e) => {
                    tracing::error!("replay guard: {e}");
                    true
                }
            },
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_ignores_key_order_but_not_values_or_position() {
        let a = replay_key(
            "t",
            "shell",
            0,
            &json!({"a": 1, "b": {"y": 2, "x": [1, 2]}}),
        );
        let b = replay_key(
            "t",
            "shell",
            0,
            &json!({"b": {"x": [1, 2], "y": 2}, "a": 1}),
        );
        assert_eq!(a, b);
        assert_eq!(a.len(), 24);
        assert_ne!(
            a,
            replay_key(
                "t",
                "shell",
                1,
                &json!({"a": 1, "b": {"y": 2, "x": [1, 2]}})
            )
        );
        assert_ne!(
            a,
            replay_key(
                "u",
                "shell",
                0,
                &json!({"a": 1, "b": {"y": 2, "x": [1, 2]}})
            )
        );
        assert_eq!(
            canonical_json(&json!({"b": 1, "a": "é"})),
            r#"{"a":"é","b":1}"#
        );
    }

    #[tokio::test]
    async fn lru_is_bounded() {
        let g = ReplayGuard::new(None);
        for i in 0..(LRU_CAPACITY + 10) {
            assert!(g.first_time(&format!("k{i}"), "t", "x").await);
        }
        let lru = g.lru.lock().unwrap();
        assert_eq!(lru.order.len(), LRU_CAPACITY);
        assert!(!lru.set.contains("k0"));
    }
}
