//! Consent grants ("approve for this session"), per session. A grant is keyed by what it
//! approved ([`Grant`]): its kind — the call's own question, or data leaving the machine — the
//! tool, and the tool's scope (an action and a site, a directory, a recipient, a job's target,
//! prompt and tools…). It covers a later call only of the same kind and the same tool, whose
//! scope it covers: equal, or, for a directory, a path inside it (a grant on `/a/b` covers
//! `/a/b/c/d` but not `/a/other`; path components, not string prefixes). So an approval of data
//! leaving never stands in for a tool's own question, nor one tool's approval for another's.
//! `consent_always` calls are never granted. A session's grants are cleared with the session
//! (`/new`).
//!
//! Kept in memory (gone with the process); with a store shared by several replicas
//! ([`Grants::share`]) in the store's kv table instead (`consent.grants:<session key>`, a JSON
//! list of `{kind, tool, scope, at}`), so a replica that takes a session over keeps them. A
//! stored grant lasts [`SHARED_GRANT_SECS`] (it would otherwise outlive every restart until
//! `/new`); one stored without a kind or tool (an older version's) covers nothing.

use ethan_core::store::StorageRef;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

/// Which question a grant answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantKind {
    /// The call's own question: a side effect, a per-site action.
    Own,
    /// Data leaving the machine after private data entered the session.
    Egress,
    /// A grant of an older version: covers nothing.
    #[default]
    Unknown,
}

/// What an "approve for this session" covers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Grant {
    #[serde(default)]
    pub kind: GrantKind,
    #[serde(default)]
    pub tool: String,
    pub scope: String,
}

impl Grant {
    pub fn own(tool: &str, scope: &str) -> Self {
        Self {
            kind: GrantKind::Own,
            tool: tool.to_string(),
            scope: scope.to_string(),
        }
    }

    pub fn egress(tool: &str, scope: &str) -> Self {
        Self {
            kind: GrantKind::Egress,
            tool: tool.to_string(),
            scope: scope.to_string(),
        }
    }

    /// Whether this grant covers a call asking `other`: same kind, same tool, and a scope
    /// [`covers`] takes in.
    pub fn covers(&self, other: &Grant) -> bool {
        self.kind != GrantKind::Unknown
            && self.kind == other.kind
            && !self.tool.is_empty()
            && self.tool == other.tool
            && covers(&self.scope, &other.scope)
    }
}

#[derive(Default)]
pub struct Grants {
    by_session: Mutex<HashMap<String, Vec<Grant>>>,
    shared: Option<StorageRef>,
}

/// How long a grant kept in a shared store lasts, in seconds: 12 hours.
pub const SHARED_GRANT_SECS: i64 = 12 * 3600;

/// A grant as the shared store keeps it.
#[derive(serde::Serialize, serde::Deserialize)]
struct Stored {
    #[serde(flatten)]
    grant: Grant,
    /// Unix seconds of the approval.
    at: i64,
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn kv_key(session_key: &str) -> String {
    format!("consent.grants:{session_key}")
}

/// Whether a grant on `granted` covers `scope`: equal, or `scope` is a path inside the granted
/// directory.
pub fn covers(granted: &str, scope: &str) -> bool {
    if granted == scope {
        return true;
    }
    let (g, s) = (Path::new(granted), Path::new(scope));
    g.is_absolute() && s.is_absolute() && s.starts_with(g)
}

impl Grants {
    /// Grants kept in `store` too (replicas), besides memory.
    pub fn shared_through(store: StorageRef) -> Self {
        Self {
            by_session: Mutex::default(),
            shared: Some(store),
        }
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Grant>>> {
        self.by_session.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The session's grants in the shared store that have not expired (none when unreadable; a
    /// store error is logged).
    async fn stored(&self, store: &StorageRef, session_key: &str) -> Vec<Stored> {
        match store.kv_get(&kv_key(session_key)).await {
            Ok(Some(v)) => serde_json::from_str::<Vec<Stored>>(&v)
                .unwrap_or_default()
                .into_iter()
                .filter(|g| now() - g.at < SHARED_GRANT_SECS)
                .collect(),
            Ok(None) => Vec::new(),
            Err(e) => {
                tracing::warn!("cannot read the grants of {session_key}: {e}");
                Vec::new()
            }
        }
    }

    pub async fn grant(&self, session_key: &str, grant: &Grant) {
        let Some(store) = self.shared.as_ref() else {
            let mut m = self.memory();
            let list = m.entry(session_key.to_string()).or_default();
            if !list.iter().any(|g| g == grant) {
                list.push(grant.clone());
            }
            return;
        };
        let mut all = self.stored(store, session_key).await;
        all.retain(|g| &g.grant != grant);
        all.push(Stored {
            grant: grant.clone(),
            at: now(),
        });
        let json = serde_json::to_string(&all).unwrap_or_else(|_| "[]".into());
        if let Err(e) = store.kv_set(&kv_key(session_key), &json).await {
            tracing::warn!(
                "cannot store the grant of {} in {session_key}: {e}",
                grant.tool
            );
        }
    }

    /// Whether a grant of the session covers `asked`. With a shared store the store is asked
    /// every time (another replica may have cleared the session).
    pub async fn is_granted(&self, session_key: &str, asked: &Grant) -> bool {
        match self.shared.as_ref() {
            Some(store) => self
                .stored(store, session_key)
                .await
                .iter()
                .any(|g| g.grant.covers(asked)),
            None => self
                .memory()
                .get(session_key)
                .is_some_and(|list| list.iter().any(|g| g.covers(asked))),
        }
    }

    pub async fn clear(&self, session_key: &str) {
        self.memory().remove(session_key);
        if let Some(store) = self.shared.as_ref() {
            if let Err(e) = store.kv_delete(&kv_key(session_key)).await {
                tracing::warn!("cannot clear the grants of {session_key}: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtree_coverage() {
        assert!(covers("/a/b", "/a/b"));
        assert!(covers("/a/b", "/a/b/c/d"));
        assert!(!covers("/a/b", "/a/other"));
        assert!(!covers("/a/b", "/a/bc"), "a string prefix is not a subtree");
        assert!(!covers("/a/b/c", "/a/b"));
        assert!(covers("shell", "shell"));
        assert!(!covers("shell", "file_write"));
    }

    #[test]
    fn a_grant_covers_its_kind_and_tool_only() {
        let dir = Grant::own("file_write", "/work/proj");
        assert!(dir.covers(&Grant::own("file_write", "/work/proj/src/x")));
        assert!(!dir.covers(&Grant::own("knowledge_edit", "/work/proj/src/x")));
        assert!(!dir.covers(&Grant::egress("file_write", "/work/proj/src/x")));
        let out = Grant::egress("web_fetch", "host:example.com");
        assert!(out.covers(&Grant::egress("web_fetch", "host:example.com")));
        assert!(!out.covers(&Grant::own("web_fetch", "host:example.com")));
        assert!(!out.covers(&Grant::egress("browser_page", "host:example.com")));
        let old: Grant = serde_json::from_str(r#"{"scope":"shell"}"#).unwrap();
        assert!(!old.covers(&Grant::own("shell", "shell")));
    }

    #[tokio::test]
    async fn grants_are_per_session_and_cleared() {
        let g = Grants::default();
        g.grant("s1", &Grant::own("file_write", "/work/proj")).await;
        assert!(
            g.is_granted("s1", &Grant::own("file_write", "/work/proj/src/x"))
                .await
        );
        assert!(
            !g.is_granted("s1", &Grant::own("file_write", "/work/other"))
                .await
        );
        assert!(
            !g.is_granted("s2", &Grant::own("file_write", "/work/proj/src/x"))
                .await
        );
        g.clear("s1").await;
        assert!(
            !g.is_granted("s1", &Grant::own("file_write", "/work/proj"))
                .await
        );
    }

    /// Two replicas on one store: a grant given on one holds on the other, and `/new` on either
    /// clears it for both.
    #[tokio::test]
    async fn shared_grants_hold_on_every_replica() {
        let store = crate::store::Store::open_in_memory().unwrap().shared();
        let (a, b) = (
            Grants::shared_through(store.clone()),
            Grants::shared_through(store),
        );
        let shell = Grant::own("shell", "shell");
        a.grant("telegram:1", &shell).await;
        a.grant("telegram:1", &Grant::own("file_write", "/work/proj"))
            .await;
        assert!(b.is_granted("telegram:1", &shell).await);
        assert!(
            b.is_granted("telegram:1", &Grant::own("file_write", "/work/proj/x"))
                .await
        );
        assert!(
            !b.is_granted("telegram:1", &Grant::egress("shell", "shell"))
                .await
        );
        assert!(!b.is_granted("telegram:2", &shell).await);
        b.clear("telegram:1").await;
        assert!(!a.is_granted("telegram:1", &shell).await);
    }

    /// A stored grant older than SHARED_GRANT_SECS no longer counts.
    #[tokio::test]
    async fn a_shared_grant_expires() {
        let store = crate::store::Store::open_in_memory().unwrap().shared();
        let g = Grants::shared_through(store.clone());
        let old = now() - SHARED_GRANT_SECS - 1;
        store
            .kv_set(
                &kv_key("telegram:1"),
                &format!(
                    r#"[{{"kind":"own","tool":"shell","scope":"shell","at":{old}}},
                        {{"kind":"own","tool":"file_write","scope":"/w","at":{}}}]"#,
                    now()
                ),
            )
            .await
            .unwrap();
        assert!(
            !g.is_granted("telegram:1", &Grant::own("shell", "shell"))
                .await,
            "expired"
        );
        assert!(
            g.is_granted("telegram:1", &Grant::own("file_write", "/w/x"))
                .await,
            "fresh"
        );
    }
}
