//! Helpers shared by the integration tests: the two JSON Schemas we keep in `schema/`, exact
//! snapshot files under `tests/snapshots/`, and a Telegram HTML checker.
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `tests/fixtures/lark/` of the repository (the workspace root is the crate's parent).
pub fn lark_fixture(name: &str) -> Value {
    let p = crate_dir().join("../tests/fixtures/lark").join(name);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn load_schema(name: &str) -> jsonschema::Validator {
    let p = crate_dir().join("schema").join(name);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let schema: Value = serde_json::from_str(&text).expect("schema is JSON");
    jsonschema::validator_for(&schema)
        .unwrap_or_else(|e| panic!("{name} is not a valid schema: {e}"))
}

pub fn lark_schema() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| load_schema("lark_card_v2.schema.json"))
}

pub fn a2ui_schema() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| load_schema("a2ui_v0_9.schema.json"))
}

/// Every schema violation, as `path: message` lines (empty when valid).
pub fn violations(v: &jsonschema::Validator, instance: &Value) -> Vec<String> {
    v.iter_errors(instance)
        .map(|e| format!("{}: {e}", e.instance_path))
        .collect()
}

pub fn assert_lark_valid(card: &Value, what: &str) {
    let errs = violations(lark_schema(), card);
    assert!(
        errs.is_empty(),
        "{what}: Lark card fails the schema:\n{}",
        errs.join("\n")
    );
}

pub fn assert_a2ui_valid(messages: &[Value], what: &str) {
    for (i, m) in messages.iter().enumerate() {
        let errs = violations(a2ui_schema(), m);
        assert!(
            errs.is_empty(),
            "{what}: A2UI message {i} fails the schema:\n{}",
            errs.join("\n")
        );
    }
}

fn snapshot_path(name: &str) -> PathBuf {
    crate_dir().join("tests/snapshots").join(name)
}

/// Compares `actual` with `tests/snapshots/<name>` exactly; `UPDATE_SNAPSHOTS=1` rewrites the
/// file instead. Returns a description of the mismatch.
pub fn snapshot(name: &str, actual: &str) -> Result<(), String> {
    let path = snapshot_path(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some_and(|v| v != "0") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return Ok(());
    }
    let expected = match std::fs::read_to_string(&path) {
        Ok(s) => s,
        Err(_) => {
            return Err(format!(
                "{name}: no snapshot (run `UPDATE_SNAPSHOTS=1 cargo test -p ethan-cards` to \
                 create it)"
            ))
        }
    };
    if expected == actual {
        return Ok(());
    }
    let line = expected
        .lines()
        .zip(actual.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
    Err(format!(
        "{name}: differs from the snapshot at line {}\n  expected: {:?}\n  actual:   {:?}\n\
         (UPDATE_SNAPSHOTS=1 rewrites snapshots after an intended change)",
        line + 1,
        expected.lines().nth(line).unwrap_or("<end>"),
        actual.lines().nth(line).unwrap_or("<end>"),
    ))
}

/// Tags Telegram's HTML parse mode accepts and we allow ourselves.
const TELEGRAM_TAGS: [&str; 8] = ["b", "i", "u", "s", "code", "pre", "a", "blockquote"];

/// Checks one Telegram part: within 4096 UTF-16 units, only allowed tags, balanced, and no
/// bare `<`, `>` or `&` outside tags and entities.
pub fn assert_telegram_part(part: &str, what: &str) {
    let units: usize = part.chars().map(char::len_utf16).sum();
    assert!(units <= 4096, "{what}: part is {units} UTF-16 units");
    assert!(!part.trim().is_empty(), "{what}: empty part");
    let mut stack: Vec<String> = Vec::new();
    let mut rest = part;
    while let Some(pos) = rest.find(['<', '>', '&']) {
        let tail = &rest[pos..];
        if tail.starts_with('>') {
            panic!("{what}: bare '>' in {part:?}");
        }
        if tail.starts_with('&') {
            let end = tail.find(';').unwrap_or_else(|| panic!("{what}: bare '&'"));
            let ent = &tail[..=end];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;"].contains(&ent),
                "{what}: unexpected entity {ent}"
            );
            rest = &tail[end + 1..];
            continue;
        }
        let end = tail
            .find('>')
            .unwrap_or_else(|| panic!("{what}: unclosed tag"));
        let tag = &tail[1..end];
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(
                stack.pop().as_deref(),
                Some(name),
                "{what}: unbalanced </{name}>"
            );
        } else {
            let name = tag.split_whitespace().next().unwrap_or("");
            assert!(
                TELEGRAM_TAGS.contains(&name),
                "{what}: tag <{name}> not allowed"
            );
            stack.push(name.to_string());
        }
        rest = &tail[end + 1..];
    }
    assert!(stack.is_empty(), "{what}: unclosed tags {stack:?}");
}
