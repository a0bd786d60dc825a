//! Every problem of a configuration in one pass: deserialising again without each bad value
//! until none is left, sections that are not maps refused (serde would read `channels: []` as
//! an empty section), and serde's messages in plain words (`expected struct ModelConfig` becomes
//! "expected a map with keys provider, base_url, …").

use super::origin::{key_string, Seg};
use super::types::{Config, ToolOverride, TOOLS_SECTION_KEYS};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

/// One thing wrong with the configuration: the key, what is wrong, and where the value came
/// from (`config.yaml:4`, `environment variable ETHAN__MODEL__NAME`; `None` for a default).
#[derive(Debug, Clone)]
pub struct Problem {
    pub key: String,
    pub message: String,
    pub source: Option<String>,
    pub(crate) segs: Vec<Seg>,
    /// Line in the file, for ordering (problems from variables and defaults come last).
    pub(crate) line: Option<usize>,
}

impl Problem {
    pub(crate) fn new(segs: Vec<Seg>, message: impl Into<String>) -> Self {
        Problem {
            key: key_string(&segs),
            message: message.into(),
            source: None,
            segs,
            line: None,
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(s) = &self.source {
            write!(f, "{s}: ")?;
        }
        write!(f, "config key `{}`: {}", self.key, self.message)
    }
}

/// `model.fallback[0].name` → its segments.
pub(crate) fn parse_key(key: &str) -> Vec<Seg> {
    let mut out = Vec::new();
    for part in key.split('.') {
        let (name, mut rest) = part.split_once('[').map_or((part, ""), |(n, r)| (n, r));
        if !name.is_empty() {
            out.push(Seg::Key(name.to_string()));
        }
        while let Some((idx, r)) = rest.split_once(']') {
            if let Ok(i) = idx.parse() {
                out.push(Seg::Index(i));
            }
            rest = r.trim_start_matches('[');
        }
    }
    out
}

/// Deserialise `raw` into `T`, recording a problem for each bad or unknown key (its path under
/// `prefix`) and leaving it out to find the next; `T::default()` if none of it could be read.
pub(crate) fn deserialize_all<T: DeserializeOwned + Default>(
    mut raw: Value,
    prefix: &[Seg],
    problems: &mut Vec<Problem>,
) -> T {
    for _ in 0..200 {
        let e = match serde_path_to_error::deserialize::<_, T>(raw.clone()) {
            Ok(t) => return t,
            Err(e) => e,
        };
        let mut segs = prefix.to_vec();
        for s in e.path().iter() {
            match s {
                serde_path_to_error::Segment::Seq { index } => segs.push(Seg::Index(*index)),
                serde_path_to_error::Segment::Map { key } => segs.push(Seg::Key(key.clone())),
                serde_path_to_error::Segment::Enum { .. }
                | serde_path_to_error::Segment::Unknown => {}
            }
        }
        let inner = e.into_inner().to_string();
        let message = match inner
            .strip_prefix("unknown field `")
            .and_then(|r| r.split('`').next())
        {
            Some(field) => {
                // serde_path_to_error names the field in the path; older versions stop at the
                // parent.
                if segs.last() == Some(&Seg::Key(field.to_string())) {
                    segs.pop();
                }
                let known = keys_at(&segs).unwrap_or_default();
                segs.push(Seg::Key(field.to_string()));
                match closest(field, &known) {
                    Some(k) => format!("unknown key (did you mean `{k}`?)"),
                    None if known.is_empty() => "unknown key".to_string(),
                    None => format!("unknown key; the keys here are {}", list(&known)),
                }
            }
            None => plain(&inner, &segs),
        };
        let rel = segs[prefix.len()..].to_vec();
        problems.push(Problem::new(segs, message));
        if rel.is_empty() || !remove_at(&mut raw, &rel) {
            break;
        }
    }
    T::default()
}

/// Remove the value at `segs`; a bad list item takes its whole list with it (later items would
/// otherwise be renumbered). Whether something was removed.
fn remove_at(v: &mut Value, segs: &[Seg]) -> bool {
    match segs {
        [] => false,
        [.., Seg::Index(_)] => remove_at(v, &segs[..segs.len() - 1]),
        [Seg::Key(k)] => v.as_object_mut().is_some_and(|m| m.remove(k).is_some()),
        [first, rest @ ..] => {
            let child = match first {
                Seg::Key(k) => v.get_mut(k.as_str()),
                Seg::Index(i) => v.get_mut(*i),
            };
            child.is_some_and(|c| remove_at(c, rest))
        }
    }
}

/// Refuse (and leave out) every section given as something other than a map: a list, a
/// string, a number. Before deserialising, because serde reads a list into a struct.
pub(crate) fn refuse_misshapen_sections(raw: &mut Value, problems: &mut Vec<Problem>) {
    let mut found = Vec::new();
    walk(raw, &mut Vec::new(), &mut found);
    for (segs, keys) in found {
        let what = describe(lookup(raw, &segs));
        let message = format!("expected a map with keys {}, found {what}", list(&keys));
        remove_at(raw, &segs);
        problems.push(Problem::new(segs, message));
    }
}

fn walk(v: &Value, path: &mut Vec<Seg>, found: &mut Vec<(Vec<Seg>, Vec<String>)>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                path.push(Seg::Key(k.clone()));
                walk(child, path, found);
                path.pop();
            }
        }
        _ if path.is_empty() => {}
        other => {
            if let Some(keys) = keys_at(path) {
                found.push((path.clone(), keys));
                return;
            }
            if let Value::Array(items) = other {
                for (i, item) in items.iter().enumerate() {
                    path.push(Seg::Index(i));
                    walk(item, path, found);
                    path.pop();
                }
            }
        }
    }
}

fn lookup<'a>(v: &'a Value, segs: &[Seg]) -> Option<&'a Value> {
    segs.iter().try_fold(v, |v, s| match s {
        Seg::Key(k) => v.get(k.as_str()),
        Seg::Index(i) => v.get(*i),
    })
}

fn describe(v: Option<&Value>) -> String {
    match v {
        Some(Value::Array(a)) if a.is_empty() => "an empty list".into(),
        Some(Value::Array(_)) => "a list".into(),
        Some(Value::String(s)) => format!("the text {s:?}"),
        Some(Value::Number(n)) => format!("the number {n}"),
        Some(Value::Bool(b)) => format!("{b}"),
        _ => "nothing".into(),
    }
}

/// The keys of the section at `segs` when it is a section (a struct), found by asking serde to
/// read a map with one unknown key there.
pub(crate) fn keys_at(segs: &[Seg]) -> Option<Vec<String>> {
    const PROBE: &str = "\u{1}probe";
    let nest = |segs: &[Seg]| {
        segs.iter().rev().fold(json!({ PROBE: 0 }), |v, s| match s {
            Seg::Key(k) => json!({ k.clone(): v }),
            Seg::Index(_) => json!([v]),
        })
    };
    let message = match segs {
        [Seg::Key(t), Seg::Key(name), rest @ ..]
            if t == "tools" && !TOOLS_SECTION_KEYS.contains(&name.as_str()) =>
        {
            serde_path_to_error::deserialize::<_, ToolOverride>(nest(rest)).err()?
        }
        _ => serde_path_to_error::deserialize::<_, Config>(nest(segs)).err()?,
    }
    .into_inner()
    .to_string();
    let expected = message
        .strip_prefix(&format!("unknown field `{PROBE}`"))?
        .split_once("expected")
        .map_or("", |(_, e)| e);
    Some(
        expected
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect(),
    )
}

fn list(keys: &[String]) -> String {
    keys.join(", ")
}

/// The known key a misspelt one was probably meant to be (one edit away, or a prefix).
fn closest<'a>(key: &str, known: &'a [String]) -> Option<&'a str> {
    known
        .iter()
        .find(|k| edit_distance(key, k) <= 2 && key.len() > 2)
        .map(String::as_str)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// serde's message in plain words.
fn plain(inner: &str, segs: &[Seg]) -> String {
    let mut m = inner.to_string();
    if let Some(pos) = m.find("expected struct ") {
        let keys = keys_at(segs).unwrap_or_default();
        m = format!("{}expected a map with keys {}", &m[..pos], list(&keys));
    }
    for (from, to) in [
        ("invalid type: sequence", "invalid type: a list"),
        ("invalid type: map", "invalid type: a map"),
        ("expected a sequence", "expected a list"),
        ("expected u64", "expected a whole number"),
        ("expected u32", "expected a whole number"),
        ("expected u16", "expected a whole number"),
        ("expected usize", "expected a whole number"),
        ("expected i64", "expected a whole number"),
        ("expected f64", "expected a number"),
    ] {
        m = m.replace(from, to);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_paths_round_trip() {
        for k in ["model", "model.fallback[1].name", "owners[0]", "a.b.c"] {
            assert_eq!(key_string(&parse_key(k)), k);
        }
    }

    #[test]
    fn sections_know_their_keys_and_leaves_are_not_sections() {
        let k = |s: &str| Seg::Key(s.into());
        let keys = keys_at(&[k("model")]).unwrap();
        assert!(keys.contains(&"base_url".to_string()), "{keys:?}");
        let keys = keys_at(&[k("model"), k("fallback"), Seg::Index(3)]).unwrap();
        assert!(keys.contains(&"max_tokens".to_string()), "{keys:?}");
        let keys = keys_at(&[k("tools"), k("shell")]).unwrap();
        assert!(keys.contains(&"timeout_secs".to_string()), "{keys:?}");
        assert!(keys_at(&[k("model"), k("name")]).is_none());
        assert!(keys_at(&[k("owners")]).is_none());
        assert!(keys_at(&[k("mcp"), k("servers")]).is_none());
    }

    #[test]
    fn every_bad_key_is_found_in_one_pass() {
        let mut problems = Vec::new();
        let mut raw = json!({
            "model": {"timeout_secs": "soon", "nmae": "x"},
            "channels": [],
            "gateway": {"listen": 5},
        });
        refuse_misshapen_sections(&mut raw, &mut problems);
        let _: Config = deserialize_all(raw, &[], &mut problems);
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        for k in [
            "channels",
            "model.timeout_secs",
            "model.nmae",
            "gateway.listen",
        ] {
            assert!(keys.contains(&k), "{k} in {problems:?}");
        }
        assert_eq!(problems.len(), 4, "{problems:?}");
        let p = problems.iter().find(|p| p.key == "model.nmae").unwrap();
        assert!(p.message.contains("did you mean `name`"), "{p}");
        let p = problems.iter().find(|p| p.key == "channels").unwrap();
        assert!(
            p.message.contains("expected a map with keys") && p.message.contains("an empty list"),
            "{p}"
        );
    }

    #[test]
    fn a_section_given_as_text_says_what_it_expects() {
        let mut problems = Vec::new();
        let mut raw = json!({"model": "gpt-4o"});
        refuse_misshapen_sections(&mut raw, &mut problems);
        let m = &problems[0].message;
        assert!(
            m.contains("expected a map with keys provider, base_url, api_key, name"),
            "{m}"
        );
        assert!(m.contains("\"gpt-4o\""), "{m}");
    }
}
