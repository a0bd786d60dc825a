//! What `rg_search` and `fd_find` share: their common arguments (`pattern`, `path`,
//! `max_results`) read with the same checks and error texts, the [`Scope`] of a search (the
//! walk, what it leaves out, how paths are shown), the blocking search run so that a call that
//! gives up stops it, and the closing notes of their output.

use crate::args::{opt_u64, req_str};
use crate::{paths, ErrorKind, Risk, ToolContext, ToolDecl, ToolError, ToolOutput};
use ignore::WalkBuilder;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// `max_results` when the call gives none.
pub const DEFAULT_MAX_RESULTS: u64 = 50;
/// The largest `max_results` honoured.
pub const MAX_RESULTS_CAP: u64 = 1000;

/// Optional string field `key`.
pub(crate) fn opt_str<'a>(args: &'a Value, key: &str) -> Result<Option<&'a str>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(other) => Err(ToolError::new(
            ErrorKind::Validation,
            format!(
                "argument `{key}` must be a string, got {}",
                crate::args::type_name(other)
            ),
        )),
    }
}

/// `max_results`, defaulted and clamped to `1..=MAX_RESULTS_CAP`.
pub(crate) fn max_results(args: &Value) -> Result<usize, ToolError> {
    let n = opt_u64(args, "max_results")?.unwrap_or(DEFAULT_MAX_RESULTS);
    Ok(n.clamp(1, MAX_RESULTS_CAP) as usize)
}

/// Where a search runs and what it leaves out: secret-looking entries, `$ETHAN_HOME` outside
/// the workspace, credential places and hard links to protected files. Paths are shown relative to the workspace when inside it.
#[derive(Debug, Clone)]
pub(crate) struct Scope {
    /// The real (symlink-free) root to walk.
    pub root: PathBuf,
    workspace: PathBuf,
    protection: Arc<ethan_sandbox::protected::Protection>,
    pub left_out: Arc<AtomicUsize>,
}

impl Scope {
    /// Resolve and check the `path` argument.
    pub fn new(ctx: &ToolContext, path: &str) -> Result<Scope, ToolError> {
        let protection = paths::protection_of(ctx);
        let resolved = paths::resolve_checked_by(ctx, &protection, path)?;
        let root = paths::real_path(&resolved);
        if !root.exists() {
            return Err(ToolError::new(
                ErrorKind::Validation,
                format!("{} does not exist", resolved.display()),
            ));
        }
        Ok(Scope {
            root,
            workspace: paths::real_path(&ctx.workspace),
            protection: Arc::new(protection),
            left_out: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// Whether the walk must skip `path` (and not descend into it). The walk does not follow
    /// symbolic links, so every path below the real root is itself real.
    pub fn excluded(&self, path: &Path, depth: usize) -> bool {
        if depth == 0 {
            return false;
        }
        let secret = path
            .file_name()
            .is_some_and(|n| paths::secret_looking(&n.to_string_lossy()));
        if secret
            || self.protection.place_of(path).is_some()
            || self.protection.hard_link_target(path).is_some()
        {
            self.left_out.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Open `path`, a file the walk let through, for reading — if it is still what the walk
    /// checked: a regular file whose descriptor's real path (`/proc/self/fd`) is `path` itself
    /// and that is no hard link to a protected file. A folder on the way swapped for a symlink
    /// since it was walked (by a command running beside the search) would otherwise hand the
    /// search whatever the link leads to, `$ETHAN_HOME` included; a FIFO swapped in would hold
    /// it. Such a file is counted as left out; one that cannot be opened is an error.
    pub fn open(&self, path: &Path) -> std::io::Result<Option<std::fs::File>> {
        let (file, held) = paths::open_held(path)?;
        let opened = paths::opened_path(&file)?;
        if !held.is_file() || opened != path || self.protection.hard_link_target_of(&held).is_some()
        {
            self.left_out.fetch_add(1, Ordering::Relaxed);
            return Ok(None);
        }
        Ok(Some(file))
    }

    /// `path` as shown to the model.
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.workspace) {
            Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
            Ok(_) => ".".to_string(),
            Err(_) => path.display().to_string(),
        }
    }

    /// The walker shared by `rg_search` and `fd_find`: standard filters, `.gitignore` also
    /// outside git repositories, `custom_ignore` (`.rgignore` / `.fdignore`), no symlinks,
    /// secret and protected entries left out.
    pub fn walker(&self, custom_ignore: &str) -> WalkBuilder {
        let mut b = WalkBuilder::new(&self.root);
        b.standard_filters(true)
            .require_git(false)
            .follow_links(false)
            .add_custom_ignore_filename(custom_ignore)
            .threads(threads());
        let me = self.clone();
        b.filter_entry(move |e| !me.excluded(e.path(), e.depth()));
        b
    }

    /// `text`, then the note on what was left out: the tool's output, with `meta`.
    pub fn output(&self, mut text: String, meta: Value) -> ToolOutput {
        text.push_str(&self.left_out_note());
        ToolOutput::new(text).with_metadata(meta)
    }

    /// A note on what was left out, or nothing.
    pub fn left_out_note(&self) -> String {
        match self.left_out.load(Ordering::Relaxed) {
            0 => String::new(),
            n => format!(
                "\n[{n} secret-looking or protected entr{} left out]",
                if n == 1 { "y was" } else { "ies were" }
            ),
        }
    }
}

/// Walker threads: the machine's parallelism, at most 12 (as `rg`).
fn threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .min(12)
}

/// Sets the flag when dropped: stops a blocking search whose caller gave up (timeout).
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The declaration of a search tool: its `properties` (`pattern`, `path` and its own) and
/// `max_results`, at most that many `unit` returned; `pattern` required and nothing else
/// accepted; read-only, 60 s, one retry.
pub(crate) fn declaration(
    name: &str,
    description: &str,
    properties: Value,
    unit: &str,
) -> ToolDecl {
    let mut properties = properties;
    properties["max_results"] = json!({
        "type": "integer",
        "minimum": 1,
        "maximum": MAX_RESULTS_CAP,
        "description": format!("Most {unit} returned; default {DEFAULT_MAX_RESULTS}"),
    });
    let schema = json!({
        "type": "object",
        "properties": properties,
        "required": ["pattern"],
        "additionalProperties": false
    });
    ToolDecl::new(name, description, schema)
        .risk(Risk::ReadOnly)
        .timeout(Duration::from_secs(60))
        .max_retries(1)
}

/// The required `pattern` and the `path` searched (default `.`, the workspace).
pub(crate) fn pattern_and_path(args: &Value) -> Result<(String, String), ToolError> {
    let pattern = req_str(args, "pattern")?.to_string();
    let path = opt_str(args, "path")?.unwrap_or(".").to_string();
    Ok((pattern, path))
}

/// Run `search` on a blocking thread; dropping the call (a timeout) sets the flag it is given,
/// which stops it. Its error text comes back as a validation error (a bad pattern or type); a
/// panic as an internal one, `"{what} failed: …"`.
pub(crate) async fn run_blocking<T, F>(what: &str, search: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce(&AtomicBool) -> Result<T, String> + Send + 'static,
{
    let cancel = Arc::new(AtomicBool::new(false));
    let _guard = CancelOnDrop(cancel.clone());
    match ethan_core::task::spawn_blocking(move || search(&cancel)).await {
        Ok(Ok(found)) => Ok(found),
        Ok(Err(msg)) => Err(ToolError::new(ErrorKind::Validation, msg)),
        Err(e) => Err(ToolError::new(
            ErrorKind::Internal,
            format!("{what} failed: {e}"),
        )),
    }
}

/// The note closing a list that `max_results` cut: `shown` `unit`s shown, and what to
/// `narrow`.
pub(crate) fn more_note(shown: usize, unit: &str, narrow: &str) -> String {
    format!(
        "\n[showing {shown} {unit}; there are more — narrow {narrow}, or raise max_results (up to \
         {MAX_RESULTS_CAP})]"
    )
}

#[cfg(test)]
mod tests {
    use super::super::{fd_find::FdFind, rg_search::RgSearch};
    use crate::Tool;
    use serde_json::json;

    /// The schema both tools are declared with: `pattern` required, `max_results` bounded and
    /// described with what each returns, nothing else accepted.
    #[test]
    fn both_tools_declare_the_shared_arguments_alike() {
        for (decl, unit) in [
            (RgSearch.decl(), "matching lines"),
            (FdFind.decl(), "paths"),
        ] {
            let p = &decl.parameters;
            assert_eq!(p["required"], json!(["pattern"]));
            assert_eq!(p["additionalProperties"], json!(false));
            assert_eq!(
                p["properties"]["max_results"],
                json!({"type": "integer", "minimum": 1, "maximum": 1000,
                       "description": format!("Most {unit} returned; default 50")})
            );
            assert!(p["properties"]["path"]["description"]
                .as_str()
                .is_some_and(|d| d.ends_with("default \".\" (the workspace)")));
            assert_eq!(decl.timeout.as_secs(), 60);
        }
    }
}
