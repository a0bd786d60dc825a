//! `skill_read{name, file?}`: a skill's instructions (its `SKILL.md` body) and the files beside
//! it; with `file`, one of those files. Skills are listed in the system prompt
//! ([`crate::skills`]). What a skill says is content: following it still goes through the normal
//! governance, and nothing here changes policy or consent. A `file` is read only inside the
//! skill's own folder (links resolved first) and never when it looks like a secret or is a hard
//! link to a protected file (the config, the database, a credential: the same check as for the
//! workspace, [`ethan_sandbox::protected`]); `SKILL.md` itself is checked the same way.
//!
//! What it returns is private data (the default of [`crate::ToolDecl::reads_private`]): an installed skill
//! is a file the owner or a package put on the machine.

use crate::skills::{self, Skill};
use crate::{ErrorKind, Risk, Tool, ToolContext};
use crate::{ToolDecl, ToolError, ToolOutput};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::sync::LazyLock;

/// The largest file beside a skill that is returned, in bytes.
const MAX_FILE_BYTES: u64 = 256 * 1024;

pub struct SkillRead;

fn skills_dir(ctx: &ToolContext) -> std::path::PathBuf {
    ctx.ethan_home
        .as_ref()
        .map(|h| h.join("skills"))
        .unwrap_or_default()
}

fn skills_of(ctx: &ToolContext) -> Vec<Skill> {
    skills::load(&skills_dir(ctx)).0
}

/// Why `path`, a file of a skill folder, may not be read: a secret-looking name, more than one
/// name (a file the owner or a package put in a skill folder has one; a hard link's other name
/// could be any protected file, and no search of the disk is needed to refuse it), or a
/// protected place (checked as the workspace is, the skills folder carved out of `$ETHAN_HOME`).
fn protected(ctx: &ToolContext, path: &std::path::Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    if std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.nlink() > 1) {
        return Some(format!(
            "{} has more than one name (a hard link); a skill's files are read only when they \
             have one, since the other name could be a protected file (the config, a credential)",
            path.display()
        ));
    }
    let protection =
        ethan_sandbox::protected::Protection::new(ctx.ethan_home.as_deref(), &skills_dir(ctx))
            .and(&ctx.services.sandbox.protected);
    protection.check(path).map(|p| p.describe(path))
}

fn read_beside(ctx: &ToolContext, skill: &Skill, file: &str) -> Result<String, ToolError> {
    let invalid = |why: String| ToolError::new(ErrorKind::Validation, why);
    let dir = skill.dir.as_ref().ok_or_else(|| {
        invalid(format!(
            "the built-in skill {:?} has no other files",
            skill.name
        ))
    })?;
    if std::path::Path::new(file)
        .components()
        .any(|c| ethan_sandbox::protected::secret_looking(&c.as_os_str().to_string_lossy()))
    {
        return Err(invalid(format!(
            "{file:?} looks like it holds a secret; not read"
        )));
    }
    let root = dir.canonicalize().map_err(|e| invalid(e.to_string()))?;
    let path = root
        .join(file)
        .canonicalize()
        .map_err(|e| invalid(format!("{file}: {e}")))?;
    if !path.starts_with(&root) || !path.is_file() {
        return Err(invalid(format!(
            "{file:?} is not a file of the skill {:?} (see the list skill_read gives)",
            skill.name
        )));
    }
    if let Some(why) = protected(ctx, &path) {
        return Err(ToolError::new(ErrorKind::Denied, why));
    }
    let meta = std::fs::metadata(&path).map_err(|e| invalid(e.to_string()))?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(invalid(format!(
            "{file} is larger than {MAX_FILE_BYTES} bytes"
        )));
    }
    std::fs::read_to_string(&path).map_err(|e| invalid(format!("{file}: {e}")))
}

#[async_trait]
impl Tool for SkillRead {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "skill_read",
                "Read a skill listed in the system prompt: its instructions and the files beside it; \
                 with file, one of those files.",
                json!({
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "minLength": 1},
                        "file": {"type": "string", "description": "A file beside the skill, as listed."}
                    },
                    "required": ["name"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::ReadOnly)
            .no_compress()
        });
        &DECL
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let name = args
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim();
        let all = skills_of(ctx);
        let Some(skill) = all.iter().find(|s| s.name == name) else {
            let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
            return Err(ToolError::new(
                ErrorKind::Validation,
                format!(
                    "there is no skill {name:?} (the skills are: {})",
                    names.join(", ")
                ),
            ));
        };
        if let Some(file) = args.get("file").and_then(Value::as_str) {
            return match read_beside(ctx, skill, file) {
                Ok(text) => Ok(ToolOutput::new(text)),
                Err(e) => Err(e),
            };
        }
        if let Some(why) = skill
            .dir
            .as_ref()
            .and_then(|d| protected(ctx, &d.join("SKILL.md")))
        {
            return Err(ToolError::new(ErrorKind::Denied, why));
        }
        let files = skills::files_of(skill);
        let mut out = format!("# Skill {}\n\n{}", skill.name, skill.body);
        if !files.is_empty() {
            out.push_str(&format!(
                "\n\n[files beside this skill, read with skill_read{{name, file}}: {}]",
                files.join(", ")
            ));
        }
        Ok(ToolOutput::new(out))
    }
}
