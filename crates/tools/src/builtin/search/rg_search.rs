//! `rg_search{pattern, path=".", case_sensitive=false, file_type?, max_results=50}`: search file
//! contents with a regular expression, the way `rg` does, built on ripgrep's own crates — no
//! external binary.
//!
//! - Walking (`ignore`): `.gitignore` (also outside a git repository), `.ignore`, `.rgignore`,
//!   `.git/info/exclude` and the global git excludes are respected; hidden files and directories
//!   (and so `.git`) are skipped; symbolic links are not followed. Directories are walked in
//!   parallel.
//! - Matching (`grep-regex`): Rust regex syntax, case-insensitive unless `case_sensitive` is
//!   true; `file_type` is one of ripgrep's type names (`rust`, `py`, `js`, `md`, …).
//! - Searching (`grep-searcher`): line by line, with line numbers; a file is treated as binary
//!   and left as soon as a NUL byte shows up, exactly as `rg` does for files it finds by walking;
//!   UTF-16 files with a BOM are transcoded.
//! - Protection: the path argument goes through [`crate::paths::resolve_checked`];
//!   inside the tree, secret-looking files and directories (`.ssh`, `*.pem`, `credentials*`, …
//!   see [`crate::paths::secret_looking`]) and `$ETHAN_HOME` outside the workspace are
//!   left out, and the output says how many were. Each file is searched through the descriptor
//!   opened and checked ([`Scope::open`]: its real path is the walked one), so a folder swapped
//!   for a symlink beside the search hands it nothing protected.
//!
//! Output: one `path:line: text` per matching line, sorted by path and line, paths relative to
//! the workspace (absolute outside it), long lines cut; a closing note when `max_results` cut the
//! list (the search stops early then, so which matches are shown is not fixed).
//!
//! The arguments it shares with `fd_find`, the [`Scope`] (what is left out, how paths are
//! shown) and the closing notes are [`super::common`]'s.

use super::common::{declaration, max_results, more_note, opt_str, pattern_and_path};
use super::common::{run_blocking, Scope};
pub use super::common::{DEFAULT_MAX_RESULTS, MAX_RESULTS_CAP};
use crate::args::opt_bool;
use crate::{Tool, ToolContext};
use crate::{ToolDecl, ToolError, ToolOutput};
use async_trait::async_trait;
use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use ignore::WalkState;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::LazyLock;
use std::sync::Mutex;

/// Longest matching line shown, in characters.
pub const MAX_LINE_CHARS: usize = 300;

/// One matching line.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Match {
    pub path: PathBuf,
    pub line: u64,
    pub text: String,
}

/// What a search found.
#[derive(Debug, Default)]
pub struct Found {
    /// Sorted by path, then line.
    pub matches: Vec<Match>,
    /// Whether there were more matches than `max_results`.
    pub more: bool,
    pub files_searched: usize,
    /// Files that could not be read.
    pub unreadable: usize,
}

/// The search options of one call.
#[derive(Debug, Clone)]
pub struct Query {
    pub pattern: String,
    pub case_sensitive: bool,
    pub file_type: Option<String>,
    pub max_results: usize,
}

fn cut_line(bytes: &str) -> String {
    let s = bytes.trim_end_matches(['\n', '\r']);
    if s.chars().count() <= MAX_LINE_CHARS {
        return s.to_string();
    }
    let mut out: String = s.chars().take(MAX_LINE_CHARS).collect();
    out.push('…');
    out
}

/// Build the type matcher for `file_type` (ripgrep's type names).
pub(crate) fn types(file_type: Option<&str>) -> Result<Option<ignore::types::Types>, String> {
    let Some(t) = file_type.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let mut b = ignore::types::TypesBuilder::new();
    b.add_defaults();
    let known = b.definitions().iter().any(|d| d.name() == t);
    if !known {
        return Err(format!(
            "unknown file_type {t:?}; use one of ripgrep's type names, e.g. rust, py, js, ts, \
             go, c, cpp, java, md, json, yaml, toml, html, css, sh"
        ));
    }
    b.select(t);
    b.build().map(Some).map_err(|e| e.to_string())
}

/// Run a search below `scope.root` (blocking; call from a blocking thread).
pub(crate) fn search(scope: &Scope, q: &Query, cancel: &AtomicBool) -> Result<Found, String> {
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(!q.case_sensitive)
        .line_terminator(Some(b'\n'))
        .build(&q.pattern)
        .map_err(|e| format!("invalid regular expression: {e}"))?;
    let mut walker = scope.walker(".rgignore");
    if let Some(t) = types(q.file_type.as_deref())? {
        walker.types(t);
    }
    let found: Mutex<Vec<Match>> = Mutex::new(Vec::new());
    let count = AtomicUsize::new(0);
    let files = AtomicUsize::new(0);
    let unreadable = AtomicUsize::new(0);
    let more = AtomicBool::new(false);
    let limit = q.max_results;
    walker.build_parallel().run(|| {
        let matcher = matcher.clone();
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(b'\x00'))
            .build();
        let (found, count, files, unreadable, more) = (&found, &count, &files, &unreadable, &more);
        Box::new(move |entry| {
            if cancel.load(Ordering::Relaxed) || more.load(Ordering::Relaxed) {
                return WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return WalkState::Continue;
            }
            files.fetch_add(1, Ordering::Relaxed);
            let path = entry.path();
            let mut local: Vec<Match> = Vec::new();
            let sink = grep_searcher::sinks::Lossy(|line, text: &str| {
                if count.fetch_add(1, Ordering::Relaxed) >= limit {
                    more.store(true, Ordering::Relaxed);
                    return Ok(false);
                }
                local.push(Match {
                    path: path.to_path_buf(),
                    line,
                    text: cut_line(text),
                });
                Ok(!cancel.load(Ordering::Relaxed))
            });
            match scope.open(path) {
                Ok(Some(file)) => {
                    if searcher.search_file(&matcher, &file, sink).is_err() {
                        unreadable.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Ok(None) => {}
                Err(_) => {
                    unreadable.fetch_add(1, Ordering::Relaxed);
                }
            }
            if !local.is_empty() {
                if let Ok(mut f) = found.lock() {
                    f.extend(local);
                }
            }
            if more.load(Ordering::Relaxed) {
                WalkState::Quit
            } else {
                WalkState::Continue
            }
        })
    });
    let mut matches = found.into_inner().unwrap_or_else(|p| p.into_inner());
    ethan_core::sort::sort(&mut matches);
    matches.truncate(limit);
    Ok(Found {
        matches,
        more: more.load(Ordering::Relaxed),
        files_searched: files.load(Ordering::Relaxed),
        unreadable: unreadable.load(Ordering::Relaxed),
    })
}

/// The `rg_search` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct RgSearch;

impl RgSearch {
    pub fn new() -> Self {
        RgSearch
    }
}

#[async_trait]
impl Tool for RgSearch {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            declaration(
                "rg_search",
                "Search file contents with a regular expression (like ripgrep): respects .gitignore, \
                 skips hidden and binary files. Returns `path:line: text` lines.",
                json!({
                    "pattern": {"type": "string", "description": "Regular expression (Rust regex syntax)"},
                    "path": {"type": "string", "description": "File or directory to search; default \".\" (the workspace)"},
                    "case_sensitive": {"type": "boolean", "description": "Match case exactly; default false"},
                    "file_type": {"type": "string", "description": "Only files of this ripgrep type, e.g. rust, py, js, md"}
                }),
                "matching lines",
            )
        });
        &DECL
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let (pattern, path) = pattern_and_path(&args)?;
        let q = Query {
            pattern,
            case_sensitive: opt_bool(&args, "case_sensitive")?.unwrap_or(false),
            file_type: opt_str(&args, "file_type")?.map(str::to_string),
            max_results: max_results(&args)?,
        };
        let scope = Scope::new(ctx, &path)?;
        let (scope2, q2) = (scope.clone(), q.clone());
        let found = run_blocking("search", move |cancel| search(&scope2, &q2, cancel)).await?;
        let meta = json!({
            "matches": found.matches.len(),
            "truncated": found.more,
            "files_searched": found.files_searched,
            "unreadable": found.unreadable,
        });
        let where_ = scope.display(&scope.root);
        if found.matches.is_empty() {
            let out = format!(
                "No matches for /{}/ in {where_} ({} files searched).",
                q.pattern, found.files_searched
            );
            return Ok(scope.output(out, meta));
        }
        let mut out = String::new();
        for m in &found.matches {
            out.push_str(&format!(
                "{}:{}: {}\n",
                scope.display(&m.path),
                m.line,
                m.text
            ));
        }
        out.pop();
        if found.more {
            let shown = found.matches.len();
            out.push_str(&more_note(
                shown,
                "matching lines",
                "the pattern, path or file_type",
            ));
        }
        if found.unreadable > 0 {
            out.push_str(&format!("\n[{} files could not be read]", found.unreadable));
        }
        Ok(scope.output(out, meta))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::tests::ctx_in;
    use crate::ErrorKind;

    fn tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        std::fs::create_dir_all(p.join(".git")).unwrap();
        std::fs::create_dir_all(p.join("src")).unwrap();
        std::fs::write(p.join(".gitignore"), "target/\n").unwrap();
        std::fs::create_dir_all(p.join("target")).unwrap();
        std::fs::write(p.join("target/out.txt"), "needle\n").unwrap();
        std::fs::write(p.join("src/a.rs"), "fn main() {}\n// Needle here\n").unwrap();
        std::fs::write(p.join("notes.md"), "a needle\nnone\nneedle again\n").unwrap();
        std::fs::write(p.join(".hidden"), "needle\n").unwrap();
        std::fs::write(p.join("bin.dat"), b"needle\0\x01\x02").unwrap();
        std::fs::write(p.join("server.pem"), "needle\n").unwrap();
        d
    }

    #[tokio::test]
    async fn finds_like_rg() {
        let d = tree();
        let r: crate::ToolResult = RgSearch
            .run(json!({"pattern": "needle"}), &ctx_in(d.path()))
            .await
            .into();
        assert!(r.ok, "{r:?}");
        assert_eq!(
            r.output,
            "notes.md:1: a needle\nnotes.md:3: needle again\nsrc/a.rs:2: // Needle here\n\
             [1 secret-looking or protected entry was left out]"
        );
        let r: crate::ToolResult = RgSearch
            .run(
                json!({"pattern": "needle", "case_sensitive": true, "file_type": "rust"}),
                &ctx_in(d.path()),
            )
            .await
            .into();
        assert!(r.output.starts_with("No matches"), "{}", r.output);
        let r: crate::ToolResult = RgSearch
            .run(
                json!({"pattern": "needle", "max_results": 1, "path": "notes.md"}),
                &ctx_in(d.path()),
            )
            .await
            .into();
        assert!(
            r.output.starts_with("notes.md:1: a needle\n[showing 1"),
            "{}",
            r.output
        );
    }

    #[tokio::test]
    async fn bad_arguments() {
        let d = tree();
        let ctx = ctx_in(d.path());
        let r: crate::ToolResult = RgSearch.run(json!({"pattern": "("}), &ctx).await.into();
        assert_eq!(r.error_kind, Some(ErrorKind::Validation));
        assert!(r.error.unwrap().contains("invalid regular expression"));
        let r: crate::ToolResult = RgSearch
            .run(json!({"pattern": "x", "file_type": "klingon"}), &ctx)
            .await
            .into();
        assert!(r.error.unwrap().contains("unknown file_type"));
        let r: crate::ToolResult = RgSearch
            .run(json!({"pattern": "x", "path": "nope"}), &ctx)
            .await
            .into();
        assert!(r.error.unwrap().contains("does not exist"));
        let r: crate::ToolResult = RgSearch
            .run(json!({"pattern": "x", "path": "server.pem"}), &ctx)
            .await
            .into();
        assert_eq!(r.error_kind, Some(ErrorKind::Denied));
    }

    /// A command beside the search flips a folder of the workspace with a symlink to
    /// `$ETHAN_HOME` (`renameat2` with `RENAME_EXCHANGE`): what the walk checked by name is not
    /// what a name opens later, so the config never shows.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_folder_swapped_with_a_link_beside_the_search_never_shows_the_config() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let w = ws.path();
        std::fs::write(home.path().join("config.yaml"), "token: sk-live-secret").unwrap();
        let mut ctx = ctx_in(w);
        ctx.ethan_home = Some(home.path().to_path_buf());
        std::fs::create_dir(w.join("d")).unwrap();
        std::fs::write(w.join("d/config.yaml"), "token: sk-harmless").unwrap();
        std::os::unix::fs::symlink(home.path(), w.join("d2")).unwrap();
        let (d, d2) = (w.join("d"), w.join("d2"));
        let swapper = crate::swapper::Swapper::start(&[(&d, &d2)]).await;
        let (mut leaked, mut harmless) = (0, 0);
        for _ in 0..2_000 {
            let r: crate::ToolResult = RgSearch
                .run(json!({"pattern": "token: sk-"}), &ctx)
                .await
                .into();
            leaked += usize::from(r.output.contains("sk-live"));
            harmless += usize::from(r.output.contains("sk-harmless"));
        }
        swapper.stop();
        assert_eq!(
            leaked, 0,
            "the config was shown ({harmless} harmless finds)"
        );
        assert!(harmless > 0);
    }

    /// A search of a process's environment (`/proc/<pid>/environ`, or the process folder it
    /// lies in) is refused as a path and left out of a walk. It was searched; only the searcher's
    /// binary detection (the NUL after each variable, read with the first) kept the variables
    /// from being shown.
    #[tokio::test]
    async fn a_process_environment_is_not_searched() {
        let d = tree();
        let ctx = ctx_in(d.path());
        let mut child = crate::builtin::files::file_read::tests::with_environment(
            "EXTRA_SERVICE_TOKEN=ENVTOKENSECRET-55d1",
        );
        let pid = child.id();
        for path in [format!("/proc/{pid}/environ"), "/proc/self/environ".into()] {
            let r: crate::ToolResult = RgSearch
                .run(json!({"pattern": "TOKEN", "path": path}), &ctx)
                .await
                .into();
            assert!(!r.output.contains("ENVTOKENSECRET"), "{path}: {}", r.output);
            assert_eq!(
                r.error_kind,
                Some(ErrorKind::Denied),
                "{path}: {}",
                r.output
            );
        }
        let scope = Scope::new(&ctx, &format!("/proc/{pid}")).unwrap();
        assert!(scope.excluded(&scope.root.join("environ"), 1));
        assert!(scope.excluded(&scope.root.join(format!("task/{pid}/environ")), 3));
        assert!(!scope.excluded(&scope.root.join("status"), 1));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
