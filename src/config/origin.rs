//! Where a configuration value came from, so an error can point at it: the line of each key in
//! the YAML file (read from the parser's events, as the merged value has no positions), the
//! `ETHAN__…` variable that overrode a key, or the well-known variable that supplied it. Also the
//! variables that look like a misspelt override (`ETHAN_MODEL_NAME`), which are warned about.

use std::collections::HashMap;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// One step of a key path: a map key or a list index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// `model.fallback[0].name` for `[Key(model), Key(fallback), Index(0), Key(name)]`.
pub fn key_string(segs: &[Seg]) -> String {
    let mut s = String::new();
    for seg in segs {
        match seg {
            Seg::Key(k) if s.is_empty() => s.push_str(k),
            Seg::Key(k) => {
                s.push('.');
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// The variables read into keys (lowest precedence, below the file): (variable, key).
pub const WELL_KNOWN_VARS: &[(&str, &str)] = &[
    ("TELEGRAM_BOT_TOKEN", "channels.telegram.token"),
    ("LARK_APP_ID", "channels.lark.app_id"),
    ("LARK_APP_SECRET", "channels.lark.app_secret"),
    ("SEARXNG_BASE_URL", "tools.web_search.searxng.base_url"),
];

/// Variables starting with `ETHAN_` that are not overrides.
const OWN_VARS: &[&str] = &["ETHAN_HOME", "ETHAN_CONFIG", "ETHAN_TEST_TOOLS"];

/// What the YAML file says about its keys.
#[derive(Debug, Default)]
pub struct FileLines {
    /// Key path (as [`key_string`]) → 1-based line where the key (or list item) starts.
    lines: HashMap<String, usize>,
}

impl FileLines {
    /// Parse `text`; `Err((line, message))` when it is not YAML, or when its top level is not a
    /// map of sections (a list, a plain value).
    pub fn parse(text: &str) -> Result<FileLines, (usize, String)> {
        let mut r = Receiver::default();
        Parser::new_from_str(text)
            .load(&mut r, false)
            .map_err(|e| (e.marker().line(), e.info().to_string()))?;
        if let Some((line, what)) = r.top_not_a_map {
            return Err((
                line,
                format!(
                    "the top level must be a map of sections (model:, channels:, …), found {what}"
                ),
            ));
        }
        Ok(FileLines { lines: r.lines })
    }

    /// The line of `key`, else of the nearest enclosing key that has one.
    pub fn line_of(&self, segs: &[Seg]) -> Option<usize> {
        (1..=segs.len())
            .rev()
            .find_map(|n| self.lines.get(&key_string(&segs[..n])).copied())
    }

    /// The line of exactly `key`, if the file has it.
    pub fn has(&self, key: &str) -> bool {
        self.lines.contains_key(key)
    }
}

enum Frame {
    Map { path: Vec<Seg>, key: Option<String> },
    Seq { path: Vec<Seg>, index: usize },
}

#[derive(Default)]
struct Receiver {
    stack: Vec<Frame>,
    lines: HashMap<String, usize>,
    depth0_seen: bool,
    top_not_a_map: Option<(usize, &'static str)>,
}

impl Receiver {
    /// The path of the value that starts now, recording its line; `None` at the top.
    fn value_path(&mut self, line: usize) -> Option<Vec<Seg>> {
        match self.stack.last_mut()? {
            Frame::Map { path, key } => {
                let mut p = path.clone();
                p.push(Seg::Key(key.take().unwrap_or_default()));
                Some(p)
            }
            Frame::Seq { path, index } => {
                let mut p = path.clone();
                p.push(Seg::Index(*index));
                *index += 1;
                self.lines.entry(key_string(&p)).or_insert(line);
                Some(p)
            }
        }
    }

    fn top(&mut self, line: usize, what: &'static str) {
        if !self.depth0_seen {
            self.depth0_seen = true;
            if what != "map" {
                self.top_not_a_map = Some((line, what));
            }
        }
    }
}

impl MarkedEventReceiver for Receiver {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let line = mark.line();
        match ev {
            Event::Scalar(s, ..) => {
                if let Some(Frame::Map { path, key }) = self.stack.last_mut() {
                    if key.is_none() {
                        let mut p = path.clone();
                        p.push(Seg::Key(s.clone()));
                        self.lines.entry(key_string(&p)).or_insert(line);
                        *key = Some(s);
                        return;
                    }
                }
                if self.stack.is_empty() {
                    // An empty file is one empty scalar: no sections, all defaults.
                    if !s.trim().is_empty() {
                        self.top(line, "a plain value");
                    }
                    return;
                }
                self.value_path(line);
            }
            Event::Alias(_) => {
                self.value_path(line);
            }
            Event::MappingStart(..) => {
                if self.stack.is_empty() {
                    self.top(line, "map");
                }
                let path = self.value_path(line).unwrap_or_default();
                self.stack.push(Frame::Map { path, key: None });
            }
            Event::SequenceStart(..) => {
                if self.stack.is_empty() {
                    self.top(line, "a list");
                }
                let path = self.value_path(line).unwrap_or_default();
                self.stack.push(Frame::Seq { path, index: 0 });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                self.stack.pop();
            }
            _ => {}
        }
    }
}

/// The `ETHAN__…` overrides set now: (variable, key path in lower case, as `model.name`).
pub fn env_overrides() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .filter_map(|k| {
            let rest = k.strip_prefix("ETHAN__")?;
            let key = rest
                .split("__")
                .map(|p| p.to_ascii_lowercase())
                .collect::<Vec<_>>()
                .join(".");
            Some((k.clone(), key))
        })
        .collect()
}

/// Where `segs` came from: the variable that set it (or one of its enclosing keys), else the
/// file's line, else a well-known variable; `None` when it is a default.
pub fn source_of(segs: &[Seg], file: Option<&FileLines>, path: &str) -> Option<String> {
    let key = key_string(segs).to_ascii_lowercase();
    let within = |p: &str| {
        key == p
            || key.starts_with(&format!("{p}."))
            || key.starts_with(&format!("{p}["))
            || p.starts_with(&format!("{key}."))
    };
    let overrides = env_overrides();
    // The deepest matching override is the one at fault.
    if let Some((var, _)) = overrides
        .iter()
        .filter(|(_, p)| within(p))
        .max_by_key(|(_, p)| p.len())
    {
        return Some(format!("environment variable {var}"));
    }
    if let Some(line) = file.and_then(|f| f.line_of(segs)) {
        return Some(format!("{path}:{line}"));
    }
    WELL_KNOWN_VARS
        .iter()
        .find(|(var, k)| within(k) && std::env::var_os(var).is_some_and(|v| !v.is_empty()))
        .map(|(var, _)| format!("environment variable {var}"))
}

/// One warning per variable that looks like a misspelt override: `ETHAN_` with single
/// underscores (`ETHAN_MODEL_NAME`), which is not read at all.
pub fn env_warnings() -> Vec<String> {
    let mut names: Vec<String> = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .filter(|k| {
            k.starts_with("ETHAN_") && !k.starts_with("ETHAN__") && !OWN_VARS.contains(&k.as_str())
        })
        .collect();
    ethan_core::sort::sort(&mut names);
    names
        .into_iter()
        .map(|k| {
            let guess = format!("ETHAN__{}", k["ETHAN_".len()..].replacen('_', "__", 1));
            format!(
                "environment variable {k} is not read: overrides are ETHAN__SECTION__KEY with \
                 double underscores (did you mean {guess}?)"
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_keys_and_list_items() {
        let f = FileLines::parse(
            "# comment\nmodel:\n  name: x\n  fallback:\n    - name: a\n    - name: b\nowners:\n  - telegram:1\n",
        )
        .unwrap();
        let k = |s: &str| Seg::Key(s.into());
        assert_eq!(f.line_of(&[k("model")]), Some(2));
        assert_eq!(f.line_of(&[k("model"), k("name")]), Some(3));
        assert_eq!(
            f.line_of(&[k("model"), k("fallback"), Seg::Index(1), k("name")]),
            Some(6)
        );
        assert_eq!(f.line_of(&[k("owners"), Seg::Index(0)]), Some(8));
        // A key the file does not have: its nearest parent's line.
        assert_eq!(f.line_of(&[k("model"), k("timeout_secs")]), Some(2));
        assert_eq!(f.line_of(&[k("gateway")]), None);
    }

    #[test]
    fn a_top_level_that_is_not_a_map_is_refused_once() {
        let (line, msg) = FileLines::parse("\n- model: x\n").unwrap_err();
        assert_eq!(line, 2);
        assert!(msg.contains("found a list"), "{msg}");
        assert!(FileLines::parse("hello\n")
            .unwrap_err()
            .1
            .contains("plain value"));
        assert!(FileLines::parse("").is_ok());
        assert!(FileLines::parse("# only comments\n").is_ok());
        let (line, _) = FileLines::parse("model:\n  name: [x\n").unwrap_err();
        assert!(line >= 2, "{line}");
    }
}
