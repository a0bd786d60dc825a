//! `fd_find{pattern, path=".", file_type? (f|d|l), extension?, max_results=50}`: find files and
//! directories by name, the way `fd` does, built on ripgrep's own crates (`ignore` for the walk,
//! `grep-regex` for the pattern) — no external binary.
//!
//! - The pattern is a regular expression searched in the file *name* (not the whole path);
//!   smart case as in `fd`: case-insensitive unless the pattern has an upper-case letter. An
//!   empty pattern lists everything.
//! - The walk is `rg_search`'s ([`super::common::Scope`]): `.gitignore`, `.ignore`, `.fdignore` and
//!   git excludes respected, hidden entries (and `.git`) skipped, symlinks not followed,
//!   secret-looking and protected entries left out. Binary files are listed like any other, as
//!   `fd` does.
//! - `file_type`: `f` (regular files), `d` (directories), `l` (symbolic links); `extension`
//!   (without the dot, case-insensitive, may be multi-part like `tar.gz`).
//!
//! Output: one path per line, sorted, relative to the workspace (absolute outside it),
//! directories ending in `/`; a closing note when `max_results` cut the list.

use super::common::{declaration, max_results, more_note, opt_str, pattern_and_path};
use super::common::{run_blocking, Scope};
use crate::{ErrorKind, Tool, ToolContext};
use crate::{ToolDecl, ToolError, ToolOutput};
use async_trait::async_trait;
use grep_matcher::Matcher;
use grep_regex::RegexMatcherBuilder;
use ignore::WalkState;
use serde_json::{json, Value};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::LazyLock;
use std::sync::Mutex;

/// The kinds of entry `file_type` selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryType {
    File,
    Dir,
    Symlink,
}

impl EntryType {
    fn parse(s: &str) -> Option<EntryType> {
        match s.trim().to_ascii_lowercase().as_str() {
            "f" | "file" => Some(EntryType::File),
            "d" | "dir" | "directory" => Some(EntryType::Dir),
            "l" | "symlink" | "link" => Some(EntryType::Symlink),
            _ => None,
        }
    }
}

/// The options of one call.
#[derive(Debug, Clone)]
pub struct FindQuery {
    pub pattern: String,
    pub entry_type: Option<EntryType>,
    /// Lower-case, without a leading dot.
    pub extension: Option<String>,
    pub max_results: usize,
}

/// What a search found: `(path, is_dir)`, sorted.
#[derive(Debug, Default)]
pub struct FoundPaths {
    pub paths: Vec<(PathBuf, bool)>,
    pub more: bool,
}

/// Whether `pattern` has an upper-case letter outside an escape (`\D`, `\W`, `\S`, `\B`, `\P{…}`
/// do not count), which makes the search case-sensitive.
fn has_uppercase(pattern: &str) -> bool {
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            chars.next();
            continue;
        }
        if c.is_uppercase() {
            return true;
        }
    }
    false
}

/// Find entries below `scope.root` (blocking).
pub(crate) fn find(
    scope: &Scope,
    q: &FindQuery,
    cancel: &AtomicBool,
) -> Result<FoundPaths, String> {
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(!has_uppercase(&q.pattern))
        .build(&q.pattern)
        .map_err(|e| format!("invalid regular expression: {e}"))?;
    let walker = scope.walker(".fdignore");
    let found: Mutex<Vec<(PathBuf, bool)>> = Mutex::new(Vec::new());
    let count = AtomicUsize::new(0);
    let more = AtomicBool::new(false);
    let ext_suffix = q.extension.as_ref().map(|e| format!(".{e}"));
    walker.build_parallel().run(|| {
        let matcher = matcher.clone();
        let (found, count, more, ext_suffix) = (&found, &count, &more, &ext_suffix);
        Box::new(move |entry| {
            if cancel.load(Ordering::Relaxed) || more.load(Ordering::Relaxed) {
                return WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            if entry.depth() == 0 {
                return WalkState::Continue;
            }
            let Some(ft) = entry.file_type() else {
                return WalkState::Continue;
            };
            let kind = if ft.is_symlink() {
                EntryType::Symlink
            } else if ft.is_dir() {
                EntryType::Dir
            } else if ft.is_file() {
                EntryType::File
            } else {
                // Sockets, FIFOs, devices: listed only without a type filter, as by fd.
                if q.entry_type.is_some() {
                    return WalkState::Continue;
                }
                EntryType::File
            };
            if q.entry_type.is_some_and(|t| t != kind) {
                return WalkState::Continue;
            }
            let name = entry.file_name();
            if let Some(suffix) = ext_suffix {
                let lower = name.to_string_lossy().to_lowercase();
                if !(lower.ends_with(suffix.as_str()) && lower.len() > suffix.len()) {
                    return WalkState::Continue;
                }
            }
            if !matcher.is_match(name.as_bytes()).unwrap_or(false) {
                return WalkState::Continue;
            }
            if count.fetch_add(1, Ordering::Relaxed) >= q.max_results {
                more.store(true, Ordering::Relaxed);
                return WalkState::Quit;
            }
            if let Ok(mut f) = found.lock() {
                f.push((entry.path().to_path_buf(), kind == EntryType::Dir));
            }
            WalkState::Continue
        })
    });
    let mut paths = found.into_inner().unwrap_or_else(|p| p.into_inner());
    ethan_core::sort::sort(&mut paths);
    paths.truncate(q.max_results);
    Ok(FoundPaths {
        paths,
        more: more.load(Ordering::Relaxed),
    })
}

/// The `fd_find` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct FdFind;

impl FdFind {
    pub fn new() -> Self {
        FdFind
    }
}

#[async_trait]
impl Tool for FdFind {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            declaration(
                "fd_find",
                "Find files and directories whose name matches a regular expression (like fd): respects \
                 .gitignore, skips hidden entries. Returns one path per line, directories ending in /.",
                json!({
                    "pattern": {"type": "string", "description": "Regular expression matched against file names; \"\" lists everything. Case-insensitive unless it has an upper-case letter"},
                    "path": {"type": "string", "description": "Directory to search; default \".\" (the workspace)"},
                    "file_type": {"type": "string", "enum": ["f", "d", "l"], "description": "f = files, d = directories, l = symbolic links"},
                    "extension": {"type": "string", "description": "Only names ending in this extension, e.g. rs or tar.gz"}
                }),
                "paths",
            )
        });
        &DECL
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let (pattern, path) = pattern_and_path(&args)?;
        let entry_type = match opt_str(&args, "file_type")? {
            None => None,
            Some(t) if t.trim().is_empty() => None,
            Some(t) => Some(EntryType::parse(t).ok_or_else(|| {
                ToolError::new(
                    ErrorKind::Validation,
                    format!(
                        "file_type {t:?} is not one of f (files), d (directories), l (symbolic links)"
                    ),
                )
            })?),
        };
        let extension = opt_str(&args, "extension")?
            .map(|e| e.trim().trim_start_matches('.').to_lowercase())
            .filter(|e| !e.is_empty());
        let q = FindQuery {
            pattern,
            entry_type,
            extension,
            max_results: max_results(&args)?,
        };
        let scope = Scope::new(ctx, &path)?;
        if !scope.root.is_dir() {
            return Err(ToolError::new(
                ErrorKind::Validation,
                format!("{} is not a directory", scope.display(&scope.root)),
            ));
        }
        let (scope2, q2) = (scope.clone(), q.clone());
        let found = run_blocking("find", move |cancel| find(&scope2, &q2, cancel)).await?;
        let meta = json!({"results": found.paths.len(), "truncated": found.more});
        if found.paths.is_empty() {
            let out = format!(
                "Nothing named like /{}/ in {}.",
                q.pattern,
                scope.display(&scope.root)
            );
            return Ok(scope.output(out, meta));
        }
        let mut out = String::new();
        for (p, dir) in &found.paths {
            out.push_str(&scope.display(p));
            if *dir {
                out.push('/');
            }
            out.push('\n');
        }
        out.pop();
        if found.more {
            let narrow = "the pattern, path, file_type or extension";
            out.push_str(&more_note(found.paths.len(), "paths", narrow));
        }
        Ok(scope.output(out, meta))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::tests::ctx_in;

    #[test]
    fn smart_case() {
        assert!(!has_uppercase("foo\\d\\D"));
        assert!(has_uppercase("Foo"));
        assert!(!has_uppercase("\\Wbar"));
    }

    #[tokio::test]
    async fn finds_like_fd() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        std::fs::create_dir_all(p.join(".git")).unwrap();
        std::fs::create_dir_all(p.join("src/report")).unwrap();
        std::fs::create_dir_all(p.join("build")).unwrap();
        std::fs::write(p.join(".gitignore"), "build/\n").unwrap();
        std::fs::write(p.join("build/report.txt"), "").unwrap();
        std::fs::write(p.join("src/Report.md"), "").unwrap();
        std::fs::write(p.join("src/report/data.BIN"), b"\0\x01").unwrap();
        std::fs::write(p.join(".report"), "").unwrap();
        let ctx = ctx_in(p);
        let r: crate::ToolResult = FdFind.run(json!({"pattern": "report"}), &ctx).await.into();
        assert_eq!(r.output, "src/Report.md\nsrc/report/", "{r:?}");
        let r: crate::ToolResult = FdFind.run(json!({"pattern": "Report"}), &ctx).await.into();
        assert_eq!(r.output, "src/Report.md");
        let r: crate::ToolResult = FdFind
            .run(
                json!({"pattern": "", "file_type": "f", "extension": "bin"}),
                &ctx,
            )
            .await
            .into();
        assert_eq!(r.output, "src/report/data.BIN");
        let r: crate::ToolResult = FdFind
            .run(json!({"pattern": "", "max_results": 2}), &ctx)
            .await
            .into();
        assert!(r.output.contains("[showing 2 paths"), "{}", r.output);
        let r: crate::ToolResult = FdFind
            .run(json!({"pattern": "x", "file_type": "q"}), &ctx)
            .await
            .into();
        assert_eq!(r.error_kind, Some(ErrorKind::Validation));
    }
}
