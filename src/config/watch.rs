//! Live configuration for settings that take effect without a restart (today:
//! `tools.web_search`).
//!
//! A [`ConfigWatch`] remembers the config file's modification time and size. Each call to
//! [`ConfigWatch::config`] looks at the file again (one `stat`) and, when either changed, re-reads
//! and re-validates it with [`super::load`] — same sources, same precedence, same checks as at
//! start. A file that no longer parses or validates is not applied: the last good configuration
//! stays in force, the error is logged once per change and kept in [`ConfigWatch::last_error`].

use super::{load, Config, LoadOptions, Loaded, WebSearchConfig};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// What identifies a version of the file: modification time and size (`None`: no file).
type Stamp = Option<(Option<SystemTime>, u64)>;

fn stamp(path: &Path) -> Stamp {
    std::fs::metadata(path)
        .ok()
        .map(|m| (m.modified().ok(), m.len()))
}

struct State {
    stamp: Stamp,
    current: Arc<Config>,
    last_error: Option<String>,
}

/// The configuration as it is in the file now.
pub struct ConfigWatch {
    path: PathBuf,
    state: Mutex<State>,
}

impl std::fmt::Debug for ConfigWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigWatch")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl ConfigWatch {
    /// Watch the file `loaded` came from, starting with `loaded.config`.
    pub fn new(loaded: &Loaded) -> Self {
        Self::at(loaded.path.clone(), &loaded.config)
    }

    /// Watch the config file at `path` (`Loaded::path`), starting with `config` as loaded from
    /// it.
    pub fn at(path: PathBuf, config: &Config) -> Self {
        Self {
            state: Mutex::new(State {
                stamp: stamp(&path),
                current: Arc::new(config.clone()),
                last_error: None,
            }),
            path,
        }
    }

    /// The file watched.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The current configuration, re-read first if the file changed.
    pub fn config(&self) -> Arc<Config> {
        let now = stamp(&self.path);
        let mut st = match self.state.lock() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        if now == st.stamp {
            return st.current.clone();
        }
        st.stamp = now;
        if now.is_none() {
            // The file went away (perhaps mid-save): keep what we have.
            return st.current.clone();
        }
        match load(&LoadOptions {
            config_path: Some(self.path.clone()),
        }) {
            Ok(l) => {
                tracing::info!("config: {} changed; reloaded", self.path.display());
                st.current = Arc::new(l.config);
                st.last_error = None;
            }
            Err(e) => {
                tracing::warn!(
                    "config: {} changed but was not applied: {e}",
                    self.path.display()
                );
                st.last_error = Some(e.to_string());
            }
        }
        st.current.clone()
    }

    /// `tools.web_search` as it is now.
    pub fn web_search(&self) -> WebSearchConfig {
        self.config().tools.web_search.clone()
    }

    /// Why the last change of the file was not applied, if it was not.
    pub fn last_error(&self) -> Option<String> {
        self.state.lock().ok().and_then(|s| s.last_error.clone())
    }
}

impl crate::tools::settings::LiveSettings for ConfigWatch {
    fn web_search(&self) -> WebSearchConfig {
        ConfigWatch::web_search(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SearchProvider;

    #[test]
    fn picks_up_changes_and_keeps_the_last_good_config() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, "tools:\n  web_search:\n    provider: duckduckgo\n").unwrap();
        let loaded = load(&LoadOptions {
            config_path: Some(path.clone()),
        })
        .unwrap();
        let w = ConfigWatch::new(&loaded);
        assert_eq!(w.web_search().provider, SearchProvider::Duckduckgo);
        std::fs::write(
            &path,
            "tools:\n  web_search:\n    provider: searxng\n    searxng: { base_url: \"http://127.0.0.1:1\" }\n",
        )
        .unwrap();
        assert_eq!(w.web_search().provider, SearchProvider::Searxng);
        // A broken edit is not applied.
        std::fs::write(&path, "tools:\n  web_search:\n    provider: bing\n").unwrap();
        assert_eq!(w.web_search().provider, SearchProvider::Searxng);
        assert!(w
            .last_error()
            .unwrap()
            .contains("tools.web_search.provider"));
    }
}
