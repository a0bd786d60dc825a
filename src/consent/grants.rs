//! Consent grants, in memory, per session and scope. A scope is a tool name (`shell`) or, for file
//! tools, a directory: a grant on `/a/b` covers `/a/b/c/d` but not `/a/other` (path components,
//! not string prefixes). `consent_always` calls are never granted. A session's grants are cleared
//! with the session (`/new`).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

#[derive(Default)]
pub struct Grants {
    by_session: Mutex<HashMap<String, Vec<String>>>,
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
    pub fn grant(&self, session_key: &str, scope: &str) {
        let mut m = self.by_session.lock().unwrap_or_else(|p| p.into_inner());
        let list = m.entry(session_key.to_string()).or_default();
        if !list.iter().any(|g| g == scope) {
            list.push(scope.to_string());
        }
    }

    pub fn is_granted(&self, session_key: &str, scope: &str) -> bool {
        let m = self.by_session.lock().unwrap_or_else(|p| p.into_inner());
        m.get(session_key)
            .is_some_and(|list| list.iter().any(|g| covers(g, scope)))
    }

    pub fn clear(&self, session_key: &str) {
        self.by_session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(session_key);
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
    fn grants_are_per_session_and_cleared() {
        let g = Grants::default();
        g.grant("s1", "/work/proj");
        assert!(g.is_granted("s1", "/work/proj/src/x"));
        assert!(!g.is_granted("s1", "/work/other"));
        assert!(!g.is_granted("s2", "/work/proj/src/x"));
        g.clear("s1");
        assert!(!g.is_granted("s1", "/work/proj"));
    }
}
