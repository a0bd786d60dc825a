//! From the model's JSON to a [`Card`]: lenient about form, exact about what is wrong.
//!
//! Accepted shapes (`card` object of the `ui_card` tool):
//!
//! | `type` | fields |
//! |---|---|
//! | `compare` | `title`, `columns: [name]`, `rows: [{values: [cell]}]` — also `rows: [{label, values}]` (label becomes the first cell) and `rows: [[cell]]` |
//! | `rank` | `title`, `subtitle?`, `items: [{name, score?, desc?}]` |
//! | `stats` | `title?`, `metrics: [{label, value, trend?}]` |
//! | `timeline` | `title`, `nodes: [{title, body?: text or [text], items?: [text]}]` |
//!
//! Leniency: any text may arrive as a string, number or boolean; literal `\n` becomes a newline;
//! compare rows are padded with empty cells or cut to the column count; when every labelled row
//! has as many values as there are columns, an empty first column name is added for the labels;
//! timeline `items` win over `body`, a `body` array becomes items, a `body` whose every line
//! starts with a bullet becomes items, and markers (`- * • +`) are stripped.
//!
//! Strictness: a missing field, a wrong type or an unknown `type` is a
//! [`CardError::Invalid`] naming the path (`card.rows[2].values`) and the expected shape.

use crate::error::CardError;
use crate::model::{Card, Compare, Metric, Rank, RankItem, Stats, Timeline, TimelineNode};
use crate::normalize::{has_bullet, scalar_text, strip_bullet};
use serde_json::{Map, Value};

type Obj = Map<String, Value>;

impl Card {
    /// Parses the `card` argument of `ui_card` (see the [module docs](crate::parse) for the
    /// shapes). Errors name the field under `card.`.
    pub fn from_json(v: &Value) -> Result<Card, CardError> {
        parse_card(v, "card")
    }
}

/// Parses a card found at `path` in the tool arguments.
pub(crate) fn parse_card(v: &Value, path: &str) -> Result<Card, CardError> {
    let o = as_obj(
        v,
        path,
        "an object like {\"type\": \"compare\", \"title\": ..., ...}",
    )?;
    let ty = match o.get("type") {
        Some(Value::String(s)) => s.trim().to_ascii_lowercase(),
        Some(other) => {
            return Err(CardError::invalid(
                format!("{path}.type"),
                format!(
                    "expected one of \"compare\", \"rank\", \"stats\", \"timeline\", got {}",
                    type_name(other)
                ),
            ))
        }
        None => {
            return Err(CardError::invalid(
                format!("{path}.type"),
                format!(
                    "missing; say which template this is: \"compare\" (table), \"rank\" \
                     (numbered list), \"stats\" (headline numbers) or \"timeline\"{}",
                    present_keys(o)
                ),
            ))
        }
    };
    match ty.as_str() {
        "compare" | "comparison" | "table" => parse_compare(o, path).map(Card::Compare),
        "rank" | "ranking" => parse_rank(o, path).map(Card::Rank),
        "stats" | "metrics" => parse_stats(o, path).map(Card::Stats),
        "timeline" => parse_timeline(o, path).map(Card::Timeline),
        other => Err(CardError::invalid(
            format!("{path}.type"),
            format!(
                "unknown card type {other:?}; use one of \"compare\", \"rank\", \"stats\", \
                 \"timeline\" (for any other layout send `messages` with A2UI v0.9 instead of \
                 `card`)"
            ),
        )),
    }
}

fn parse_compare(o: &Obj, path: &str) -> Result<Compare, CardError> {
    let title = req_text(o, path, &["title"], "give the table a short title")?;
    let cols = req_array(
        o,
        path,
        &["columns"],
        "give the column names, e.g. \"columns\": [\"Model\", \"Price\", \"Context\"]",
    )?;
    let mut columns = Vec::with_capacity(cols.len());
    for (i, c) in cols.iter().enumerate() {
        columns.push(cell_text(
            c,
            &format!("{path}.columns[{i}]"),
            "a column name",
        )?);
    }
    if columns.is_empty() {
        return Err(CardError::invalid(
            format!("{path}.columns"),
            "empty; give at least one column name",
        ));
    }
    let rows_v = req_array(
        o,
        path,
        &["rows"],
        "give the rows, e.g. \"rows\": [{\"values\": [\"GPT-4o\", \"$5\", \"128k\"]}]",
    )?;
    // (label, values) per row, before fitting to the columns.
    let mut raw: Vec<(Option<String>, Vec<String>)> = Vec::with_capacity(rows_v.len());
    for (i, row) in rows_v.iter().enumerate() {
        let rp = format!("{path}.rows[{i}]");
        let (label, values): (Option<String>, &[Value]) = match row {
            Value::Array(a) => (None, a.as_slice()),
            Value::Object(m) => {
                let label = match first(m, &["label"]) {
                    Some((k, v)) => Some(cell_text(v, &format!("{rp}.{k}"), "the row's label")?),
                    None => None,
                };
                let values: &[Value] = match first(m, &["values", "cells"]) {
                    Some((_, Value::Array(a))) => a.as_slice(),
                    Some((_, v @ (Value::String(_) | Value::Number(_) | Value::Bool(_)))) => {
                        std::slice::from_ref(v)
                    }
                    Some((k, other)) => {
                        return Err(CardError::invalid(
                            format!("{rp}.{k}"),
                            format!("expected an array of cells, got {}", type_name(other)),
                        ))
                    }
                    None if label.is_some() => &[],
                    None => {
                        return Err(CardError::invalid(
                            format!("{rp}.values"),
                            format!(
                                "missing; give the row's cells in column order, e.g. \
                                 {{\"values\": [\"GPT-4o\", \"$5\"]}}{}",
                                present_keys(m)
                            ),
                        ))
                    }
                };
                (label, values)
            }
            other => {
                return Err(CardError::invalid(
                    rp,
                    format!(
                        "expected a row like {{\"values\": [\"GPT-4o\", \"$5\"]}}, got {}",
                        type_name(other)
                    ),
                ))
            }
        };
        let mut cells = Vec::with_capacity(values.len());
        for (j, c) in values.iter().enumerate() {
            cells.push(cell_text(c, &format!("{rp}.values[{j}]"), "a cell")?);
        }
        raw.push((label, cells));
    }
    // Older form: `columns` names only the values and the labels need a column of their own.
    let labelled_width = raw
        .iter()
        .filter(|(l, _)| l.is_some())
        .map(|(_, v)| v.len())
        .max();
    if labelled_width == Some(columns.len()) {
        columns.insert(0, String::new());
    }
    let n = columns.len();
    let rows = raw
        .into_iter()
        .map(|(label, values)| {
            let mut cells: Vec<String> = label.into_iter().chain(values).collect();
            cells.resize(n, String::new());
            cells
        })
        .collect();
    Ok(Compare {
        title,
        columns,
        rows,
    })
}

fn parse_rank(o: &Obj, path: &str) -> Result<Rank, CardError> {
    let title = req_text(o, path, &["title"], "give the ranking a short title")?;
    let subtitle = opt_text(o, path, &["subtitle"])?;
    let items_v = req_array(
        o,
        path,
        &["items"],
        "give the entries best first, e.g. \"items\": [{\"name\": \"Rust\", \"score\": 9.5, \
         \"desc\": \"fast and safe\"}]",
    )?;
    let mut items = Vec::with_capacity(items_v.len());
    for (i, it) in items_v.iter().enumerate() {
        let ip = format!("{path}.items[{i}]");
        let item = match it {
            Value::Object(m) => RankItem {
                name: req_text(m, &ip, &["name", "title", "label"], "give the entry's name")?,
                score: opt_text(m, &ip, &["score", "value"])?,
                desc: opt_text(m, &ip, &["desc", "description", "detail"])?,
            },
            Value::String(_) | Value::Number(_) => RankItem {
                name: scalar_text(it).unwrap_or_default(),
                score: None,
                desc: None,
            },
            other => {
                return Err(CardError::invalid(
                    ip,
                    format!(
                        "expected an entry like {{\"name\": \"Rust\", \"score\": 9.5}}, got {}",
                        type_name(other)
                    ),
                ))
            }
        };
        items.push(item);
    }
    Ok(Rank {
        title,
        subtitle,
        items,
    })
}

fn parse_stats(o: &Obj, path: &str) -> Result<Stats, CardError> {
    let title = opt_text(o, path, &["title"])?;
    let metrics_v = req_array(
        o,
        path,
        &["metrics"],
        "give the numbers, e.g. \"metrics\": [{\"label\": \"Users\", \"value\": 1204, \
         \"trend\": \"+12%\"}]",
    )?;
    let mut metrics = Vec::with_capacity(metrics_v.len());
    for (i, m) in metrics_v.iter().enumerate() {
        let mp = format!("{path}.metrics[{i}]");
        let m = as_obj(
            m,
            &mp,
            "a metric like {\"label\": \"Users\", \"value\": 1204, \"trend\": \"+12%\"}",
        )?;
        let label = req_text(m, &mp, &["label", "name", "title"], "say what is measured")?;
        let value = match first(m, &["value"]) {
            Some((k, v)) => cell_text(v, &format!("{mp}.{k}"), "the metric's value")?,
            None => {
                return Err(CardError::invalid(
                    format!("{mp}.value"),
                    format!(
                        "missing; give the number or text to show big, e.g. \"value\": \
                         \"98.5%\"{}",
                        present_keys(m)
                    ),
                ))
            }
        };
        let trend = opt_text(m, &mp, &["trend", "change", "delta"])?;
        metrics.push(Metric {
            label,
            value,
            trend,
        });
    }
    Ok(Stats { title, metrics })
}

fn parse_timeline(o: &Obj, path: &str) -> Result<Timeline, CardError> {
    let title = req_text(o, path, &["title"], "give the timeline a short title")?;
    let nodes_v = req_array(
        o,
        path,
        &["nodes", "events"],
        "give the sections in order, e.g. \"nodes\": [{\"title\": \"09:00 Kick-off\", \
         \"items\": [\"agenda\", \"owners\"]}]",
    )?;
    let mut nodes = Vec::with_capacity(nodes_v.len());
    for (i, n) in nodes_v.iter().enumerate() {
        let np = format!("{path}.nodes[{i}]");
        let node = match n {
            Value::Object(m) => parse_node(m, &np)?,
            Value::String(_) | Value::Number(_) => TimelineNode {
                title: scalar_text(n).unwrap_or_default(),
                body: None,
                items: Vec::new(),
            },
            other => {
                return Err(CardError::invalid(
                    np,
                    format!(
                        "expected a section like {{\"title\": \"Day 1\", \"body\": \"...\"}}, \
                         got {}",
                        type_name(other)
                    ),
                ))
            }
        };
        nodes.push(node);
    }
    Ok(Timeline { title, nodes })
}

fn parse_node(m: &Obj, np: &str) -> Result<TimelineNode, CardError> {
    let title = req_text(m, np, &["title", "name"], "give the section a title")?;
    let mut items = match first(m, &["items"]) {
        Some((k, v)) => text_list(v, &format!("{np}.{k}"))?,
        None => Vec::new(),
    };
    let mut body = None;
    if items.is_empty() {
        match first(m, &["body", "desc", "description"]) {
            Some((k, v @ Value::Array(_))) => items = text_list(v, &format!("{np}.{k}"))?,
            Some((k, v)) => {
                let text = cell_text(v, &format!("{np}.{k}"), "text or an array of texts")?;
                let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
                if lines.len() > 1 && lines.iter().all(|l| has_bullet(l)) {
                    items = lines
                        .iter()
                        .map(|l| strip_bullet(l).trim().to_string())
                        .collect();
                } else if !text.is_empty() {
                    body = Some(text);
                }
            }
            None => {}
        }
    }
    Ok(TimelineNode { title, body, items })
}

/// An array of texts (or one text) as list items: bullets stripped, empty entries dropped.
fn text_list(v: &Value, path: &str) -> Result<Vec<String>, CardError> {
    let entries: &[Value] = match v {
        Value::Array(a) => a,
        other => std::slice::from_ref(other),
    };
    let mut out = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        let t = cell_text(e, &format!("{path}[{i}]"), "a list item (text)")?;
        let t = strip_bullet(&t).trim().to_string();
        if !t.is_empty() {
            out.push(t);
        }
    }
    Ok(out)
}

// --- helpers -------------------------------------------------------------------------------

fn as_obj<'a>(v: &'a Value, path: &str, what: &str) -> Result<&'a Obj, CardError> {
    v.as_object()
        .ok_or_else(|| CardError::invalid(path, format!("expected {what}, got {}", type_name(v))))
}

/// The first of `keys` present with a non-null value.
fn first<'a, 'k>(o: &'a Obj, keys: &[&'k str]) -> Option<(&'k str, &'a Value)> {
    keys.iter()
        .find_map(|k| o.get(*k).filter(|v| !v.is_null()).map(|v| (*k, v)))
}

/// Text of a scalar; an array of scalars is joined with `, `; objects are refused.
fn cell_text(v: &Value, path: &str, what: &str) -> Result<String, CardError> {
    if let Some(t) = scalar_text(v) {
        return Ok(t);
    }
    if let Value::Array(a) = v {
        if let Some(parts) = a.iter().map(scalar_text).collect::<Option<Vec<_>>>() {
            return Ok(parts.join(", "));
        }
    }
    Err(CardError::invalid(
        path,
        format!("expected {what} as text or a number, got {}", type_name(v)),
    ))
}

fn req_text(o: &Obj, path: &str, keys: &[&str], hint: &str) -> Result<String, CardError> {
    match first(o, keys) {
        Some((k, v)) => {
            let t = cell_text(v, &format!("{path}.{k}"), "text")?;
            if t.is_empty() {
                Err(CardError::invalid(
                    format!("{path}.{k}"),
                    format!("empty; {hint}"),
                ))
            } else {
                Ok(t)
            }
        }
        None => Err(CardError::invalid(
            format!("{path}.{}", keys[0]),
            format!("missing; {hint}{}", present_keys(o)),
        )),
    }
}

fn opt_text(o: &Obj, path: &str, keys: &[&str]) -> Result<Option<String>, CardError> {
    match first(o, keys) {
        Some((k, v)) => {
            let t = cell_text(v, &format!("{path}.{k}"), "text")?;
            Ok(if t.is_empty() { None } else { Some(t) })
        }
        None => Ok(None),
    }
}

fn req_array<'a>(
    o: &'a Obj,
    path: &str,
    keys: &[&str],
    hint: &str,
) -> Result<&'a Vec<Value>, CardError> {
    match first(o, keys) {
        Some((_, Value::Array(a))) => Ok(a),
        Some((k, other)) => Err(CardError::invalid(
            format!("{path}.{k}"),
            format!("expected an array, got {}; {hint}", type_name(other)),
        )),
        None => Err(CardError::invalid(
            format!("{path}.{}", keys[0]),
            format!("missing; {hint}{}", present_keys(o)),
        )),
    }
}

/// ` (the object has: a, b)` — helps the model see a misspelt field.
fn present_keys(o: &Obj) -> String {
    if o.is_empty() {
        " (the object is empty)".to_string()
    } else {
        let keys: Vec<&str> = o.keys().map(String::as_str).collect();
        format!(" (the object has: {})", keys.join(", "))
    }
}

pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn compare(v: Value) -> Compare {
        match Card::from_json(&v).unwrap() {
            Card::Compare(c) => c,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn compare_values_form_pads_and_cuts() {
        let c = compare(
            json!({"type": "compare", "title": "T", "columns": ["a", "b", "c"],
            "rows": [{"values": [1, 2.5]}, {"values": ["x", "y", "z", "extra"]}, ["p", true]]}),
        );
        assert_eq!(c.rows[0], ["1", "2.5", ""]);
        assert_eq!(c.rows[1], ["x", "y", "z"]);
        assert_eq!(c.rows[2], ["p", "true", ""]);
    }

    #[test]
    fn compare_label_form() {
        // columns name every cell: the label fills the first one
        let c = compare(
            json!({"type": "compare", "title": "T", "columns": ["Feature", "A", "B"],
            "rows": [{"label": "Price", "values": [1, 2]}]}),
        );
        assert_eq!(c.columns, ["Feature", "A", "B"]);
        assert_eq!(c.rows[0], ["Price", "1", "2"]);
        // columns name only the values: an empty first column is added for the labels
        let c = compare(
            json!({"type": "compare", "title": "T", "columns": ["A", "B"],
            "rows": [{"label": "Price", "values": [1, 2]}, {"label": "Speed", "values": ["fast"]}]}),
        );
        assert_eq!(c.columns, ["", "A", "B"]);
        assert_eq!(c.rows[1], ["Speed", "fast", ""]);
    }

    #[test]
    fn errors_name_the_path() {
        let e = Card::from_json(&json!({"type": "compare", "title": "T", "columns": ["a"],
            "rows": [{"values": ["ok"]}, {"values": [{"x": 1}]}]}))
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "card.rows[1].values[0]: expected a cell as text or a number, got an object"
        );
        let e = Card::from_json(&json!({"type": "compare", "title": "T", "columns": ["a"],
            "data": []}))
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("card.rows: missing;"), "{e}");
        assert!(
            e.contains("(the object has: columns, data, title, type)"),
            "{e}"
        );
        let e = Card::from_json(&json!({"type": "chart"}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown card type \"chart\""), "{e}");
        let e = Card::from_json(&json!({"title": "x"}))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("card.type: missing"), "{e}");
        let e = Card::from_json(&json!({"type": "stats", "metrics": [{"label": "x"}]}))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("card.metrics[0].value: missing"), "{e}");
        let e =
            Card::from_json(&json!({"type": "compare", "title": "T", "columns": [], "rows": []}))
                .unwrap_err()
                .to_string();
        assert_eq!(e, "card.columns: empty; give at least one column name");
    }

    #[test]
    fn timeline_items_win_and_bullets_go() {
        let c = Card::from_json(&json!({"type": "timeline", "title": "T", "nodes": [
            {"title": "a", "body": "ignored", "items": ["- one", "• two", "", "* three"]},
            {"title": "b", "body": ["+ x", "y"]},
            {"title": "c", "body": "- p\\n- q"},
            {"title": "d", "body": "line one\\nline two"},
        ]}))
        .unwrap();
        let Card::Timeline(t) = c else { panic!() };
        assert_eq!(t.nodes[0].items, ["one", "two", "three"]);
        assert_eq!(t.nodes[0].body, None);
        assert_eq!(t.nodes[1].items, ["x", "y"]);
        assert_eq!(t.nodes[2].items, ["p", "q"]);
        assert_eq!(t.nodes[3].body.as_deref(), Some("line one\nline two"));
    }

    #[test]
    fn rank_and_stats_accept_numbers() {
        let Card::Rank(r) = Card::from_json(&json!({"type": "Rank", "title": 2024,
            "items": [{"name": "a", "score": 9.5}, "b"]}))
        .unwrap() else {
            panic!()
        };
        assert_eq!(r.title, "2024");
        assert_eq!(r.items[0].score.as_deref(), Some("9.5"));
        assert_eq!(r.items[1].name, "b");
        let Card::Stats(s) = Card::from_json(&json!({"type": "stats",
            "metrics": [{"label": "Users", "value": 1204, "trend": "+3%"}]}))
        .unwrap() else {
            panic!()
        };
        assert_eq!(s.title, None);
        assert_eq!(s.metrics[0].value, "1204");
    }
}
