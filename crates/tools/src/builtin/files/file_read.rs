//! `file_read{path, max_lines?}`: a text file's content. Files over 1 MB are refused unless
//! `max_lines` is given; binary files are refused, except pictures (JPEG, PNG, GIF, WebP),
//! which are named as such and shown to a model with `model.vision` by the agent.

use crate::args::{opt_u64, req_str};
use crate::ToolError;
use crate::{paths, ErrorKind, Risk, Tool, ToolContext};
use crate::{CallPlan, ToolDecl, ToolOutput};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::sync::LazyLock;

/// Largest file read whole, in bytes.
pub const MAX_WHOLE_FILE: u64 = 1024 * 1024;

pub struct FileRead;

#[async_trait]
impl Tool for FileRead {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "file_read",
                "Read a text file. Relative paths are in the workspace. Files over 1 MB need `max_lines` (reads the first N lines).",
                json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "File path, absolute or relative to the workspace"},
                        "max_lines": {"type": "integer", "minimum": 1, "description": "Read only the first N lines"}
                    },
                    "required": ["path"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::ReadOnly)
            .fast_path()
            .no_compress()
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
    /// An approved protected read: the file it leads to now ([`paths::Pinned`]), made again by
    /// the executor right before the run, which opens that file or nothing.
    async fn assess(&self, args: &Value, ctx: &ToolContext) -> Option<crate::Assessment> {
        let raw = args.get("path").and_then(Value::as_str)?;
        paths::pin_approved(ctx, raw).map(crate::Assessment::new)
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        // The protected places, worked out once for the path's check and the opened file's.
        let rules = paths::protection_of(ctx);
        let path = match req_str(&args, "path") {
            Ok(p) => match paths::resolve_checked_by(ctx, &rules, p) {
                Ok(p) => p,
                Err(e) => return Err(e),
            },
            Err(e) => return Err(e),
        };
        let max_lines = opt_u64(&args, "max_lines")?;
        // Opened once and checked as opened; everything below reads this one file.
        let file = match paths::open_checked(ctx, &rules, &path) {
            Ok(Ok(file)) => file,
            Ok(Err(denied)) => return Err(denied),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ToolError::new(
                    ErrorKind::Validation,
                    format!(
                        "{} does not exist (use file_list to see what is there)",
                        path.display()
                    ),
                ))
            }
            Err(e) => {
                return Err(ToolError::new(
                    ErrorKind::Dependency,
                    format!("{}: {e}", path.display()),
                ))
            }
        };
        let meta = file.metadata().map_err(|e| {
            ToolError::new(ErrorKind::Dependency, format!("{}: {e}", path.display()))
        })?;
        if meta.is_dir() {
            return Err(ToolError::new(
                ErrorKind::Validation,
                format!("{} is a directory; use file_list", path.display()),
            ));
        }
        let text = match max_lines {
            None if meta.len() > MAX_WHOLE_FILE => {
                return Err(ToolError::new(
                    ErrorKind::Validation,
                    format!(
                    "{} is {} bytes, over the 1 MB limit; pass max_lines to read the first lines",
                    path.display(),
                    meta.len()
                ),
                ))
            }
            _ => match read_text(file, max_lines, meta.len()).await {
                Ok(bytes) => bytes,
                Err(e) => {
                    return Err(ToolError::new(
                        ErrorKind::Dependency,
                        format!("{}: {e}", path.display()),
                    ))
                }
            },
        };
        // A picture (one sent in a chat and saved in the inbox, say): named as one; the agent
        // shows it to a model that can see pictures (metadata `image`).
        if let Some(mime) = ethan_core::message::ImagePart::sniff(&text) {
            return Ok(ToolOutput::new(format!(
                "{} is a picture ({mime}, {} bytes). A model that can see pictures is shown it \
                 next; its content cannot be read as text.",
                path.display(),
                meta.len()
            ))
            .with_metadata(json!({
                "path": path.display().to_string(),
                "bytes": meta.len(),
                "image": mime,
            })));
        }
        if text[..text.len().min(8192)].contains(&0) {
            return Err(ToolError::new(
                ErrorKind::Validation,
                format!(
                    "{} looks like a binary file; it cannot be shown as text",
                    path.display()
                ),
            ));
        }
        Ok(ToolOutput::new(String::from_utf8_lossy(&text).into_owned())
            .with_metadata(json!({"path": path.display().to_string(), "bytes": meta.len()})))
    }
}

impl FileRead {
    /// Read-only, so no consent, except a protected path: an always-ask call for the owner.
    fn consent_check(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
        let raw = args.get("path").and_then(Value::as_str)?;
        paths::protected_description(ctx, raw, "read")
    }
    fn consent_always(&self, _args: &Value, _ctx: &ToolContext) -> bool {
        true
    }
}

/// What the call reads of `file` (`size` bytes long by its metadata): the first `max_lines`
/// lines, or the whole file. Read on a blocking thread in one go: tokio's file reads go to a
/// blocking thread and back once per chunk, and `read_to_end` starts at 32 bytes.
async fn read_text(
    file: std::fs::File,
    max_lines: Option<u64>,
    size: u64,
) -> std::io::Result<Vec<u8>> {
    ethan_core::task::spawn_blocking(move || match max_lines {
        None => read_all(file, size),
        Some(n) => read_lines(file, n),
    })
    .await
    .map_err(|e| std::io::Error::other(format!("the read stopped: {e}")))?
}

/// The whole file, at most one byte past [`MAX_WHOLE_FILE`] (a file that grows while it is read,
/// or a `/proc` file whose size says 0).
fn read_all(file: std::fs::File, size: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::with_capacity(size.min(MAX_WHOLE_FILE) as usize + 1);
    file.take(MAX_WHOLE_FILE + 1).read_to_end(&mut out)?;
    Ok(out)
}

/// The first `n` lines, at most four times [`MAX_WHOLE_FILE`] in all (a line without an end
/// stops there too).
fn read_lines(f: std::fs::File, n: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{BufRead, Read};
    let mut r = std::io::BufReader::new(f.take(4 * MAX_WHOLE_FILE));
    let mut out = Vec::new();
    for _ in 0..n {
        let before = out.len();
        if r.read_until(b'\n', &mut out)? == 0 || out.len() - before == 0 {
            break;
        }
        if out.len() > 4 * MAX_WHOLE_FILE as usize {
            break;
        }
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::executor::tests::ctx_in;

    #[tokio::test]
    async fn reads_relative_to_workspace_and_refuses_big_files() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx_in(dir.path());
        std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\n").unwrap();
        let r: crate::ToolResult = FileRead.run(json!({"path": "a.txt"}), &ctx).await.into();
        assert_eq!(r.output, "one\ntwo\nthree\n");
        let r: crate::ToolResult = FileRead
            .run(json!({"path": "a.txt", "max_lines": 2}), &ctx)
            .await
            .into();
        assert_eq!(r.output, "one\ntwo\n");
        std::fs::write(dir.path().join("big"), "x\n".repeat(600_000)).unwrap();
        let r: crate::ToolResult = FileRead.run(json!({"path": "big"}), &ctx).await.into();
        assert_eq!(r.error_kind, Some(ErrorKind::Validation));
        assert!(r.error.unwrap().contains("max_lines"));
        let r: crate::ToolResult = FileRead
            .run(json!({"path": "big", "max_lines": 3}), &ctx)
            .await
            .into();
        assert_eq!(r.output, "x\nx\nx\n");
        let r: crate::ToolResult = FileRead.run(json!({"path": "missing"}), &ctx).await.into();
        assert!(r.error.unwrap().contains("does not exist"));
    }

    /// A command beside the tool swaps two names of the workspace (`renameat2` with
    /// `RENAME_EXCHANGE`, no `link(2)` needed): one a hard link to the config (made outside the
    /// sandbox), one an ordinary file. The file read is the file checked: the config never
    /// comes back (it did 23 times in 3,000 when a name was checked after the open).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_hard_link_swapped_with_another_name_never_reads_the_config() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.yaml"), "SECRET: sk-live").unwrap();
        let mut ctx = ctx_in(ws.path());
        ctx.ethan_home = Some(home.path().to_path_buf());
        std::fs::hard_link(home.path().join("config.yaml"), ws.path().join("h")).unwrap();
        std::fs::write(ws.path().join("decoy"), "harmless").unwrap();
        let (h, decoy) = (ws.path().join("h"), ws.path().join("decoy"));
        let swapper = crate::swapper::Swapper::start(&[(&h, &decoy)]).await;
        for _ in 0..1_000 {
            let r: crate::ToolResult = FileRead.run(json!({"path": "h"}), &ctx).await.into();
            assert!(!r.output.contains("sk-live"), "the config was read");
        }
        swapper.stop();
    }

    /// A command beside the tool flips a name between a harmless file and a symlink to the
    /// config, and a folder between a real one and a symlink to `$ETHAN_HOME` (`renameat2`
    /// with `RENAME_EXCHANGE`), while the path is checked and opened against one resolution of
    /// the protected places: the config never comes back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_link_or_folder_swapped_beside_the_read_never_reads_the_config() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let w = ws.path();
        std::fs::write(home.path().join("config.yaml"), "SECRET: sk-live").unwrap();
        let mut ctx = ctx_in(w);
        ctx.ethan_home = Some(home.path().to_path_buf());
        std::fs::write(w.join("f"), "harmless").unwrap();
        std::os::unix::fs::symlink(home.path().join("config.yaml"), w.join("f2")).unwrap();
        std::fs::create_dir(w.join("d")).unwrap();
        std::fs::write(w.join("d/config.yaml"), "harmless").unwrap();
        std::os::unix::fs::symlink(home.path(), w.join("d2")).unwrap();
        let [f, f2, d, d2] = ["f", "f2", "d", "d2"].map(|n| w.join(n));
        let swapper = crate::swapper::Swapper::start(&[(&f, &f2), (&d, &d2)]).await;
        let mut read = 0;
        for i in 0..2_000 {
            let path = if i % 2 == 0 { "f" } else { "d/config.yaml" };
            let r: crate::ToolResult = FileRead.run(json!({ "path": path }), &ctx).await.into();
            assert!(
                !r.output.contains("sk-live"),
                "the config was read as {path}"
            );
            read += usize::from(r.output == "harmless");
        }
        swapper.stop();
        assert!(read > 0, "the harmless files were never read");
    }

    /// A huge file (8 GB, sparse, no line end) is refused whole and read at most 4 MB for
    /// `max_lines`; `/proc/self/pagemap` (size 0, endless) is not shown either.
    #[tokio::test]
    async fn a_huge_file_is_read_no_further_than_the_limits() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx_in(dir.path());
        let huge = std::fs::File::create(dir.path().join("huge")).unwrap();
        huge.set_len(8 << 30).unwrap();
        let r: crate::ToolResult = FileRead.run(json!({"path": "huge"}), &ctx).await.into();
        assert!(r.error.unwrap().contains("over the 1 MB limit"));
        let started = std::time::Instant::now();
        let r: crate::ToolResult = FileRead
            .run(json!({"path": "huge", "max_lines": u64::MAX}), &ctx)
            .await
            .into();
        assert!(r.error.unwrap().contains("binary"));
        // Read in odd sizes it fails (EINVAL), read whole it is a megabyte of binary: refused.
        for args in [
            json!({"path": "/proc/self/pagemap"}),
            json!({"path": "/proc/self/pagemap", "max_lines": u64::MAX}),
        ] {
            let r: crate::ToolResult = FileRead.run(args, &ctx).await.into();
            assert!(r.error_kind.is_some(), "{}", r.output.len());
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
        drop(huge);
        let huge = std::fs::File::open(dir.path().join("huge")).unwrap();
        assert_eq!(
            read_lines(huge, u64::MAX).unwrap().len() as u64,
            4 * MAX_WHOLE_FILE
        );
    }

    /// A device or FIFO has no end (`/dev/zero` grew the daemon's memory until it was cut
    /// off) or no answer: refused as not a regular file, at once.
    #[tokio::test]
    async fn a_device_or_fifo_is_refused_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx_in(dir.path());
        let fifo = dir.path().join("fifo");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path and a mode.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        for (path, lines) in [("/dev/zero", None), ("/dev/zero", Some(1)), ("fifo", None)] {
            let mut args = json!({ "path": path });
            if let Some(n) = lines {
                args["max_lines"] = json!(n);
            }
            let r: crate::ToolResult = FileRead.run(args, &ctx).await.into();
            assert_eq!(r.error_kind, Some(ErrorKind::Validation), "{path}");
            assert!(r.error.unwrap().contains("not a regular file"), "{path}");
        }
    }

    /// A process's environment holds its tokens (the daemon's `OPENAI_API_KEY=…` comes first
    /// when it was started as `OPENAI_API_KEY=… ethan`): `/proc/<pid>/environ` is refused by
    /// every spelling — `self`, a thread's, a symlink a command left in the workspace, another
    /// process of the user — as the shell classifier refuses it (a command cannot read the
    /// daemon's at all: Landlock's ptrace rule). It was refused only because its first 8 KB
    /// hold a NUL ("binary"), so a first variable over 8 KB (a key or a JSON credential) was
    /// read and shown.
    #[tokio::test]
    async fn a_process_environment_is_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx_in(dir.path());
        let secret = format!("ENVTOKENSECRET-{}", "k".repeat(9000));
        let mut child = with_environment(&format!("EXTRA_SERVICE_TOKEN={secret}"));
        std::os::unix::fs::symlink("/proc/self/environ", dir.path().join("env.txt")).unwrap();
        let (pid, other) = (std::process::id(), child.id());
        let spellings = [
            format!("/proc/{other}/environ"),
            "/proc/self/environ".to_string(),
            format!("/proc/{pid}/environ"),
            "/proc/thread-self/environ".to_string(),
            format!("/proc/{pid}/task/{pid}/environ"),
            "/proc/self/cwd/../../../../../../proc/self/environ".to_string(),
            "env.txt".to_string(),
        ];
        for path in spellings {
            for lines in [None, Some(1000)] {
                let mut args = json!({ "path": path });
                if let Some(n) = lines {
                    args["max_lines"] = json!(n);
                }
                let r: crate::ToolResult = FileRead.run(args, &ctx).await.into();
                assert!(!r.output.contains("ENVTOKENSECRET"), "{path}: read");
                assert_eq!(
                    r.error_kind,
                    Some(ErrorKind::Denied),
                    "{path}: {:?}",
                    r.error
                );
            }
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// A process whose whole environment is `var` (`NAME=value`), once it runs with it.
    pub(crate) fn with_environment(var: &str) -> std::process::Child {
        let (name, value) = var.split_once('=').unwrap();
        let child = std::process::Command::new("sleep")
            .arg("60")
            .env_clear()
            .env(name, value)
            .spawn()
            .unwrap();
        let environ = format!("/proc/{}/environ", child.id());
        let want = format!("{var}\0");
        for _ in 0..1000 {
            if std::fs::read(&environ).is_ok_and(|e| e == want.as_bytes()) {
                return child;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let mut child = child;
        let _ = child.kill();
        let _ = child.wait();
        panic!("{environ} never held {name}");
    }

    /// The window the executor's check before an approved call leaves open: the owner approved
    /// reading `link` as it led to the config (the call described again right before it runs
    /// still says so), and the link is re-pointed at another protected file after that check
    /// and before the open. The approved read opens only the file pinned at that check
    /// (`paths::Pinned`), so the other file is refused, not read.
    #[tokio::test]
    async fn an_approved_read_re_pointed_after_the_check_reads_only_what_was_approved() {
        let home = tempfile::tempdir().unwrap();
        let ws = home.path().join("workspace");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(home.path().join("config.yaml"), "approved: yes").unwrap();
        std::fs::write(home.path().join("secrets.key"), "SECRET: sk-live").unwrap();
        let mut ctx = ctx_in(&ws);
        ctx.ethan_home = Some(home.path().to_path_buf());
        std::os::unix::fs::symlink(home.path().join("config.yaml"), ws.join("link")).unwrap();
        let args = json!({"path": "link"});
        // What the owner approved, and what the executor's check right before the run sees.
        let plan = FileRead.describe(&args, &ctx);
        let asked = plan.consent.unwrap();
        assert!(asked.contains("config.yaml"), "{asked}");
        ctx.approved_actions
            .push(ethan_core::tool::PROTECTED_PATHS_APPROVED.to_string());
        // The executor's check after the yes assesses the call again: the file is pinned.
        ctx.assessment = FileRead.assess(&args, &ctx).await;
        assert!(ctx.assessment.is_some(), "an approved read is pinned");
        // Something beside the turn re-points the link in the window after that check.
        let tmp = ws.join("link.new");
        std::os::unix::fs::symlink(home.path().join("secrets.key"), &tmp).unwrap();
        std::fs::rename(&tmp, ws.join("link")).unwrap();
        let r: crate::ToolResult = FileRead.run(args, &ctx).await.into();
        assert!(
            !r.output.contains("sk-live"),
            "read what was not approved: {r:?}"
        );
        assert_eq!(r.error_kind, Some(ErrorKind::Denied), "{r:?}");
    }
}
