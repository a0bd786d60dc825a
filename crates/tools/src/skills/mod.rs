//! Skills: instructions for recurring work, loaded when needed rather than sent in every prompt.
//! A skill is a folder with a `SKILL.md` whose YAML front matter gives `name`, `description` and,
//! optionally, the `tools` it expects (the public Agent Skills layout); the body is the
//! instructions. The built-in skills ship in the binary ([`BUILTIN`]); the owner's live in
//! `$ETHAN_HOME/skills/<name>/SKILL.md`, and one of the same name replaces a built-in.
//!
//! The system prompt lists the names and descriptions ([`prompt_section`]); `skill_read` returns
//! a body and the files beside it. They live with the tools; the crate root re-exports
//! them as `skills` for the agent's prompt and `ethan skills list`. Skill text is content, not policy: it reaches the model as a
//! tool result and changes nothing about which tools exist or what is asked.

use ethan_core::knowledge::split_front_matter;
use std::path::{Path, PathBuf};
use yaml_rust2::{Yaml, YamlLoader};

/// The skills built into the binary: `(folder name, SKILL.md)`.
pub const BUILTIN: &[(&str, &str)] = &[("ui-card", include_str!("builtin/ui-card/SKILL.md"))];

/// The most characters of a description put in the system prompt.
pub const MAX_DESCRIPTION_CHARS: usize = 300;
/// The most skills listed in the system prompt.
pub const MAX_LISTED: usize = 50;

/// The largest `SKILL.md` read, in bytes.
pub const MAX_SKILL_BYTES: u64 = 256 * 1024;

/// One skill.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// Tools it expects (informative only).
    pub tools: Vec<String>,
    pub body: String,
    /// Its folder; `None` for a built-in skill.
    pub dir: Option<PathBuf>,
}

/// Parse a `SKILL.md`; `folder` is the skill's folder name, used when the front matter has no
/// `name`. Errors: no front matter, or no `description`.
pub fn parse(folder: &str, text: &str) -> Result<Skill, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (front, body) = split_front_matter(text);
    let front = front.ok_or("no YAML front matter (--- name / description ---)")?;
    let yaml = YamlLoader::load_from_str(front)
        .map_err(|e| format!("front matter: {e}"))?
        .into_iter()
        .next()
        .unwrap_or(Yaml::Null);
    let field = |k: &str| yaml[k].as_str().map(|s| s.trim().to_string());
    let name = field("name")
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| folder.to_string());
    let description = field("description")
        .filter(|d| !d.is_empty())
        .ok_or("front matter has no description")?;
    let tools = match &yaml["tools"] {
        Yaml::Array(items) => items
            .iter()
            .filter_map(|t| t.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    };
    let one_line = |s: &str, max: usize| -> String {
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .chars()
            .take(max)
            .collect()
    };
    Ok(Skill {
        name: one_line(&name, 64),
        description: one_line(&description, MAX_DESCRIPTION_CHARS),
        tools,
        body: body.trim().to_string(),
        dir: None,
    })
}

/// Every skill: the built-ins, then those under `dir` (`$ETHAN_HOME/skills`), a skill there
/// replacing a built-in of the same name; sorted by name. A folder whose `SKILL.md` is missing,
/// too large or malformed is skipped with a warning (also returned, for `ethan skills list`).
pub fn load(dir: &Path) -> (Vec<Skill>, Vec<String>) {
    Parsed::default().load(dir)
}

/// What a `SKILL.md` was when it was parsed: its size, modification time and inode.
type Seen = (u64, Option<std::time::SystemTime>, u64);

/// Each `SKILL.md` parsed: what it was then, and what it gave.
type Files = std::collections::HashMap<PathBuf, (Seen, Result<Skill, String>)>;

/// The skills parsed so far, for [`load`]ing them again each turn without parsing their YAML
/// again: the built-ins parsed once, an owner's `SKILL.md` again when its size, modification
/// time or inode changed. The folders are still listed and each file's metadata read each
/// time, so a skill added, edited or removed is seen at the next load.
pub struct Parsed {
    builtin: Vec<Skill>,
    files: std::sync::Mutex<Files>,
}

impl Default for Parsed {
    /// The built-ins parsed, no file yet.
    fn default() -> Self {
        Self {
            builtin: BUILTIN
                .iter()
                .filter_map(|(folder, text)| parse(folder, text).ok())
                .collect(),
            files: Default::default(),
        }
    }
}

impl Parsed {
    /// As [`load`].
    pub fn load(&self, dir: &Path) -> (Vec<Skill>, Vec<String>) {
        let mut skills = self.builtin.clone();
        let mut problems = Vec::new();
        let mut entries: Vec<_> = match std::fs::read_dir(dir) {
            Ok(rd) => rd.filter_map(Result::ok).collect(),
            Err(_) => Vec::new(),
        };
        ethan_core::sort::sort_by_key(&mut entries, |e| e.file_name());
        let mut seen_now = std::collections::HashSet::new();
        for entry in entries {
            let path = entry.path();
            if path.is_symlink() {
                // A link could make any folder (the home directory) a skill's, readable by
                // skill_read.
                problems.push(format!(
                    "{}: a symbolic link; skill folders must be real folders",
                    path.display()
                ));
                continue;
            }
            if !path.is_dir() {
                continue;
            }
            let folder = entry.file_name().to_string_lossy().to_string();
            let file = path.join("SKILL.md");
            seen_now.insert(file.clone());
            match self.skill(&folder, &file) {
                Some(Ok(mut s)) => {
                    s.dir = Some(path);
                    skills.retain(|b| b.name != s.name);
                    skills.push(s);
                }
                Some(Err(e)) => problems.push(e),
                None => {}
            }
        }
        self.lock().retain(|file, _| seen_now.contains(file));
        for p in &problems {
            tracing::warn!("skill skipped: {p}");
        }
        ethan_core::sort::sort_by(&mut skills, |a, b| a.name.cmp(&b.name));
        (skills, problems)
    }

    /// The skill of `file` in `folder`: as parsed before when the file is unchanged, else read
    /// and parsed; `None` when there is no file; an error names the file.
    fn skill(&self, folder: &str, file: &Path) -> Option<Result<Skill, String>> {
        let meta = std::fs::metadata(file).ok()?;
        if meta.len() > MAX_SKILL_BYTES {
            let e = format!("{}: larger than {MAX_SKILL_BYTES} bytes", file.display());
            return Some(Err(e));
        }
        use std::os::unix::fs::MetadataExt;
        let seen: Seen = (meta.len(), meta.modified().ok(), meta.ino());
        if let Some((was, parsed)) = self.lock().get(file) {
            if *was == seen {
                return Some(parsed.clone());
            }
        }
        let parsed = match std::fs::read_to_string(file) {
            Ok(text) => parse(folder, &text).map_err(|e| format!("{}: {e}", file.display())),
            Err(e) => return Some(Err(format!("{}: {e}", file.display()))),
        };
        self.lock()
            .insert(file.to_path_buf(), (seen, parsed.clone()));
        Some(parsed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Files> {
        self.files.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The files beside a skill's `SKILL.md` (relative paths, at most 50, hidden ones skipped).
pub fn files_of(skill: &Skill) -> Vec<String> {
    let Some(dir) = &skill.dir else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in ignore::WalkBuilder::new(dir)
        .max_depth(Some(3))
        .build()
        .flatten()
    {
        let p = entry.path();
        if !p.is_file() || p.file_name().is_some_and(|n| n == "SKILL.md") {
            continue;
        }
        if let Ok(rel) = p.strip_prefix(dir) {
            out.push(rel.display().to_string());
        }
        if out.len() >= 50 {
            break;
        }
    }
    ethan_core::sort::sort(&mut out);
    out
}

/// The system prompt's list of skills (empty when there are none).
pub fn prompt_section(skills: &[Skill]) -> String {
    if skills.is_empty() {
        return String::new();
    }
    let lines: Vec<String> = skills
        .iter()
        .take(MAX_LISTED)
        .map(|s| format!("- {}: {}", s.name, s.description))
        .collect();
    format!(
        "## Skills\nInstructions for recurring work; read one with skill_read (find_tools gives it) \
         before doing that work:\n{}",
        lines.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_ui_card_skill_parses() {
        let (skills, problems) = load(Path::new("/nonexistent"));
        assert!(problems.is_empty());
        let ui = skills.iter().find(|s| s.name == "ui-card").unwrap();
        assert!(ui.description.contains("ui_card"));
        assert_eq!(ui.tools, ["ui_card"]);
        assert!(ui.body.contains("**compare**"));
        assert!(prompt_section(&skills).contains("- ui-card: How to choose"));
    }

    #[test]
    fn an_owner_skill_replaces_a_builtin_and_bad_ones_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let put = |folder: &str, text: &str| {
            std::fs::create_dir_all(dir.path().join(folder)).unwrap();
            std::fs::write(dir.path().join(folder).join("SKILL.md"), text).unwrap();
        };
        put(
            "ui-card",
            "---\nname: ui-card\ndescription: mine\n---\nbody",
        );
        put("digest", "---\ndescription: Weekly digest\n---\nSteps");
        put("broken", "no front matter");
        std::fs::write(dir.path().join("digest").join("template.md"), "x").unwrap();
        let (skills, problems) = load(dir.path());
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("broken"));
        let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["digest", "ui-card"]);
        assert_eq!(skills[1].description, "mine");
        assert_eq!(files_of(&skills[0]), ["template.md"]);
    }

    #[test]
    fn skills_kept_between_loads_follow_each_edit() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("digest").join("SKILL.md");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        let kept = Parsed::default();
        let described = |p: &Parsed| {
            let (skills, problems) = p.load(dir.path());
            let d = skills.iter().find(|s| s.name == "digest");
            (d.map(|s| s.description.clone()), problems.len())
        };
        std::fs::write(&file, "---\ndescription: one\n---\nSteps").unwrap();
        assert_eq!(described(&kept), (Some("one".into()), 0));
        // Edited to the same size: a new file (its inode) or a new time, parsed again.
        let edited = dir.path().join("new.md");
        std::fs::write(&edited, "---\ndescription: two\n---\nSteps").unwrap();
        std::fs::rename(&edited, &file).unwrap();
        assert_eq!(described(&kept), (Some("two".into()), 0));
        std::fs::write(&file, "no front matter any more").unwrap();
        assert_eq!(described(&kept), (None, 1));
        std::fs::write(&file, "---\ndescription: three, longer\n---\nSteps").unwrap();
        assert_eq!(described(&kept), (Some("three, longer".into()), 0));
        // Each load gives what a fresh load gives; a removed skill is gone.
        assert_eq!(kept.load(dir.path()), load(dir.path()));
        std::fs::remove_dir_all(file.parent().unwrap()).unwrap();
        assert_eq!(described(&kept), (None, 0));
        assert!(kept.lock().is_empty());
    }
}
