//! `file_list{path}`: the entries of a directory, sorted, directories marked with `/`, files with
//! their size in bytes. At most [`MAX_ENTRIES`] entries.

use crate::args::req_str;
use crate::{paths, ErrorKind, Risk, Tool, ToolContext};
use crate::{CallPlan, ToolDecl};
use crate::{ToolError, ToolOutput};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::sync::LazyLock;

pub const MAX_ENTRIES: usize = 1000;

pub struct FileList;

#[async_trait]
impl Tool for FileList {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "file_list",
                "List a directory (relative paths are in the workspace; \".\" is the workspace itself).",
                json!({
                    "type": "object",
                    "properties": {"path": {"type": "string", "description": "Directory path"}},
                    "required": ["path"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::ReadOnly)
            .max_retries(1)
        });
        &DECL
    }
    fn describe(&self, args: &Value, ctx: &ToolContext) -> CallPlan {
        CallPlan {
            consent: self.consent_check(args, ctx),
            always: self.consent_always(args, ctx),
            identity: args
                .get("path")
                .and_then(Value::as_str)
                .and_then(|raw| paths::protected_identity(ctx, raw)),
            ..CallPlan::of(self.decl(), args)
        }
    }
    /// An approved protected list: the folder it leads to now ([`paths::Pinned`]), made again
    /// by the executor right before the run, which lists that folder or nothing.
    async fn assess(&self, args: &Value, ctx: &ToolContext) -> Option<crate::Assessment> {
        let raw = args.get("path").and_then(Value::as_str)?;
        paths::pin_approved(ctx, raw).map(crate::Assessment::new)
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let path = match req_str(&args, "path") {
            Ok(p) => match paths::resolve_checked(ctx, p) {
                Ok(p) => p,
                Err(e) => return Err(e),
            },
            Err(e) => return Err(e),
        };
        // Approved: the pinned folder, held open and listed through its descriptor.
        let (_held, listed) = match pinned_folder(ctx, &path)? {
            Some((dir, fd_path)) => (Some(dir), fd_path),
            None => (None, path.clone()),
        };
        let mut rd = match tokio::fs::read_dir(&listed).await {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ToolError::new(
                    ErrorKind::Validation,
                    format!("{} does not exist", path.display()),
                ))
            }
            Err(e) => {
                return Err(ToolError::new(
                    ErrorKind::Dependency,
                    format!("{}: {e}", path.display()),
                ))
            }
        };
        let mut entries = Vec::new();
        let mut total = 0usize;
        loop {
            match rd.next_entry().await {
                Ok(Some(e)) => {
                    total += 1;
                    if entries.len() >= MAX_ENTRIES {
                        continue;
                    }
                    let name = e.file_name().to_string_lossy().into_owned();
                    let line = match e.metadata().await {
                        Ok(m) if m.is_dir() => format!("{name}/"),
                        Ok(m) => format!("{name}  ({} bytes)", m.len()),
                        Err(_) => name,
                    };
                    entries.push(line);
                }
                Ok(None) => break,
                Err(e) => {
                    return Err(ToolError::new(
                        ErrorKind::Dependency,
                        format!("{}: {e}", path.display()),
                    ))
                }
            }
        }
        ethan_core::sort::sort(&mut entries);
        let mut out = format!("{} ({total} entries)\n", path.display());
        out.push_str(&entries.join("\n"));
        if total > entries.len() {
            out.push_str(&format!(
                "\n[… {} more entries not shown]",
                total - entries.len()
            ));
        }
        Ok(ToolOutput::new(out).with_metadata(json!({"entries": total})))
    }
}

/// For an approved call: `path` opened, checked to be the pinned folder ([`paths::is_pinned`]),
/// and the name that reaches what was opened whatever `path` leads to later
/// (`/proc/self/fd/N`), while the returned descriptor is held. `None` when not approved.
fn pinned_folder(
    ctx: &ToolContext,
    path: &std::path::Path,
) -> Result<Option<(std::fs::File, std::path::PathBuf)>, ToolError> {
    use std::os::fd::AsRawFd;
    if !paths::approved(ctx) {
        return Ok(None);
    }
    let (dir, held) = paths::open_held(path)
        .map_err(|e| ToolError::new(ErrorKind::Dependency, format!("{}: {e}", path.display())))?;
    paths::is_pinned(ctx, &held, path)?;
    let fd_path = format!("/proc/self/fd/{}", dir.as_raw_fd()).into();
    Ok(Some((dir, fd_path)))
}

impl FileList {
    /// Read-only, so no consent, except a protected path: an always-ask call for the owner.
    fn consent_check(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
        let raw = args.get("path").and_then(Value::as_str)?;
        paths::protected_description(ctx, raw, "list")
    }
    fn consent_always(&self, _args: &Value, _ctx: &ToolContext) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::tests::ctx_in;

    #[tokio::test]
    async fn lists_sorted_with_markers() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("b.txt"), "12345").unwrap();
        let r: crate::ToolResult = FileList
            .run(json!({"path": "."}), &ctx_in(dir.path()))
            .await
            .into();
        assert!(r.output.contains("b.txt  (5 bytes)\nsub/"), "{}", r.output);
    }

    /// As for `file_read`: an approved list of a protected folder through a link, re-pointed
    /// after the executor's check right before the run, is refused; the other folder's names
    /// are not shown. Unchanged, the approved folder is listed.
    #[tokio::test]
    async fn an_approved_list_re_pointed_after_the_check_lists_only_what_was_approved() {
        let home = tempfile::tempdir().unwrap();
        let ws = home.path().join("workspace");
        std::fs::create_dir_all(home.path().join("shown")).unwrap();
        std::fs::create_dir_all(home.path().join("other")).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(home.path().join("other/SECRET-NAME.txt"), "x").unwrap();
        let mut ctx = ctx_in(&ws);
        ctx.ethan_home = Some(home.path().to_path_buf());
        std::os::unix::fs::symlink(home.path().join("shown"), ws.join("link")).unwrap();
        let args = json!({"path": "link"});
        let asked = FileList.describe(&args, &ctx).consent.unwrap();
        assert!(asked.contains("shown"), "{asked}");
        ctx.approved_actions
            .push(ethan_core::tool::PROTECTED_PATHS_APPROVED.to_string());
        // The executor's check after the yes assesses the call again: the folder is pinned.
        ctx.assessment = FileList.assess(&args, &ctx).await;
        assert!(ctx.assessment.is_some(), "an approved list is pinned");
        let tmp = ws.join("link.new");
        std::os::unix::fs::symlink(home.path().join("other"), &tmp).unwrap();
        std::fs::rename(&tmp, ws.join("link")).unwrap();
        let r: crate::ToolResult = FileList.run(args, &ctx).await.into();
        assert!(
            !r.output.contains("SECRET-NAME"),
            "listed what was not approved: {r:?}"
        );
        assert_eq!(r.error_kind, Some(ErrorKind::Denied), "{r:?}");
        // Unchanged since the check, the approved folder is listed.
        std::fs::write(home.path().join("shown/visible.txt"), "x").unwrap();
        let back = ws.join("link.back");
        std::os::unix::fs::symlink(home.path().join("shown"), &back).unwrap();
        std::fs::rename(&back, ws.join("link")).unwrap();
        ctx.assessment = FileList.assess(&json!({"path": "link"}), &ctx).await;
        let r: crate::ToolResult = FileList.run(json!({"path": "link"}), &ctx).await.into();
        assert!(r.ok && r.output.contains("visible.txt"), "{r:?}");
    }
}
