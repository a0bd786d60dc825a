//! A2UI v0.9 (v0.9.1): checking the model's custom `messages`, and laying out the four
//! templates as A2UI for the web interface.
//!
//! Source: the A2UI protocol specification v0.9 / v0.9.1
//! (<https://a2ui.org/specification/v0.9.1-a2ui/>, text in the `google/A2UI` repository,
//! `specification/0.9/docs/a2ui_protocol.md`, now `a2ui-project/a2ui`
//! `specification/v0_9/docs/a2ui_protocol.md`) and its basic catalog (`Card`, `Column`, `Row`,
//! `List`, `Text`, `Divider`). Facts used:
//!
//! - every message is an object with `version` and exactly one of `createSurface`,
//!   `updateComponents`, `updateDataModel`, `deleteSurface`; v0.9.1 keeps `"v0.9"` on the wire
//!   and accepts `"v0.9.1"` too — we emit [`A2UI_VERSION`];
//! - `createSurface {surfaceId, catalogId, theme?, sendDataModel?}` comes before the first
//!   `updateComponents` of that surface;
//! - `updateComponents {surfaceId, components}` is a flat adjacency list: each component has
//!   `id` and `component` (its type) and refers to others by id through `child` / `children`
//!   (`children` is an array of ids, or a template `{componentId, path}`); one component is
//!   `root`;
//! - `updateDataModel {surfaceId, path?, value?}`, `deleteSurface {surfaceId}`.
//!
//! Our checks on the model's messages go further than the protocol, because a tool call is one
//! complete card: `updateComponents` must contain `root`, every reference must resolve, and
//! every component must be reachable from `root` (orphans are reported by id). Repairs: a literal
//! `\n` in any string becomes a newline, a missing `version` is added, a missing `catalogId`
//! becomes the basic catalog, and an `updateComponents` for a surface not yet created gets its
//! `createSurface` inserted before it.

use crate::error::CardError;
use crate::model::{Card, Compare, Rank, Stats, Timeline};
use crate::normalize::fix_strings_in;
use crate::parse::type_name;
use serde_json::{json, Map, Value};
use std::collections::{BTreeSet, HashMap, HashSet};

/// The `version` we put on every message (accepted by v0.9 and v0.9.1 renderers).
pub const A2UI_VERSION: &str = "v0.9";
/// The basic catalog's id, used for our surfaces and for model surfaces that name none.
pub const BASIC_CATALOG_ID: &str =
    "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json";

const KINDS: [&str; 4] = [
    "createSurface",
    "updateComponents",
    "updateDataModel",
    "deleteSurface",
];
const VERSIONS: [&str; 2] = ["v0.9", "v0.9.1"];

// --- the model's messages ------------------------------------------------------------------

/// Checks and repairs the `messages` argument (found at `path`) and returns the messages to
/// send, in order.
pub(crate) fn parse_messages(v: &Value, path: &str) -> Result<Vec<Value>, CardError> {
    let list = message_list(v, path)?;
    let mut out = Vec::with_capacity(list.len() + 1);
    let mut live: HashSet<String> = HashSet::new();
    for (i, mut msg) in list.into_iter().enumerate() {
        let mp = format!("{path}[{i}]");
        fix_strings_in(&mut msg);
        let Value::Object(mut m) = msg else {
            return Err(CardError::invalid(
                mp,
                format!(
                    "expected a message object like {{\"createSurface\": {{...}}}}, got {}",
                    type_name(&msg)
                ),
            ));
        };
        let kind = message_kind(&mut m, &mp)?;
        let pp = format!("{mp}.{kind}");
        let Some(Value::Object(payload)) = m.get_mut(kind) else {
            let got = m.get(kind).map(type_name).unwrap_or("nothing");
            return Err(CardError::invalid(
                pp,
                format!("expected an object, got {got}"),
            ));
        };
        let surface = surface_id(payload, &pp)?;
        match kind {
            "createSurface" => {
                check_create_surface(payload, &pp)?;
                if !live.insert(surface.clone()) {
                    return Err(CardError::invalid(
                        format!("{pp}.surfaceId"),
                        format!(
                            "surface \"{surface}\" is created twice; send deleteSurface first \
                             or use another surfaceId"
                        ),
                    ));
                }
            }
            "updateComponents" => {
                only_keys(payload, &pp, &["surfaceId", "components"])?;
                check_components(payload.get("components"), &pp)?;
                if live.insert(surface.clone()) {
                    out.push(create_surface(&surface));
                }
            }
            "updateDataModel" => {
                only_keys(payload, &pp, &["surfaceId", "path", "value"])?;
                if let Some(p) = payload.get("path").filter(|p| !p.is_string()) {
                    return Err(CardError::invalid(
                        format!("{pp}.path"),
                        format!(
                            "expected a JSON Pointer string like \"/user/name\", got {}",
                            type_name(p)
                        ),
                    ));
                }
            }
            _ => {
                only_keys(payload, &pp, &["surfaceId"])?;
                live.remove(&surface);
            }
        }
        out.push(Value::Object(m));
    }
    Ok(out)
}

/// The messages of the argument: its array, or the one message not wrapped in one; never
/// empty.
fn message_list(v: &Value, path: &str) -> Result<Vec<Value>, CardError> {
    let list: Vec<Value> = match v {
        Value::Array(a) => a.clone(),
        // One message not wrapped in an array.
        Value::Object(m) if KINDS.iter().any(|k| m.contains_key(*k)) => vec![v.clone()],
        other => {
            return Err(CardError::invalid(
                path,
                format!(
                    "expected an array of A2UI v0.9 messages (createSurface, then \
                     updateComponents), got {}",
                    type_name(other)
                ),
            ))
        }
    };
    if list.is_empty() {
        return Err(CardError::invalid(
            path,
            "empty; send a createSurface message, then an updateComponents message whose \
             components include one with \"id\": \"root\"",
        ));
    }
    Ok(list)
}

/// The one kind of message `m` (at `mp`) is; it has no other key but `version`, which is
/// added when missing.
fn message_kind(m: &mut Map<String, Value>, mp: &str) -> Result<&'static str, CardError> {
    let kinds: Vec<&'static str> = KINDS
        .iter()
        .copied()
        .filter(|k| m.contains_key(*k))
        .collect();
    let kind = match kinds.as_slice() {
        [k] => *k,
        [] => {
            return Err(CardError::invalid(
                mp,
                format!(
                    "has none of createSurface, updateComponents, updateDataModel, \
                     deleteSurface; each message must have exactly one{}",
                    keys_of(m)
                ),
            ))
        }
        many => {
            return Err(CardError::invalid(
                mp,
                format!(
                    "has {}; each message must have exactly one of createSurface, \
                     updateComponents, updateDataModel, deleteSurface — send them as \
                     separate messages",
                    many.join(" and ")
                ),
            ))
        }
    };
    if let Some(k) = m.keys().find(|k| *k != kind && *k != "version") {
        return Err(CardError::invalid(
            format!("{mp}.{k}"),
            format!(
                "unknown key; a message has only \"version\" and \"{kind}\" (put \
                 component properties inside the components)"
            ),
        ));
    }
    match m.get("version") {
        None | Some(Value::Null) => {
            m.insert("version".into(), json!(A2UI_VERSION));
        }
        Some(Value::String(s)) if VERSIONS.contains(&s.as_str()) => {}
        Some(other) => {
            return Err(CardError::invalid(
                format!("{mp}.version"),
                format!("must be \"v0.9\" (or \"v0.9.1\"), got {other}"),
            ))
        }
    }
    Ok(kind)
}

/// A `createSurface` payload (at `pp`): its keys and their types; a missing `catalogId`
/// becomes the basic catalog.
fn check_create_surface(payload: &mut Map<String, Value>, pp: &str) -> Result<(), CardError> {
    only_keys(
        payload,
        pp,
        &["surfaceId", "catalogId", "theme", "sendDataModel"],
    )?;
    match payload.get("catalogId") {
        None | Some(Value::Null) => {
            payload.insert("catalogId".into(), json!(BASIC_CATALOG_ID));
        }
        Some(Value::String(_)) => {}
        Some(other) => {
            return Err(CardError::invalid(
                format!("{pp}.catalogId"),
                format!(
                    "expected a string (e.g. \"{BASIC_CATALOG_ID}\"), got {}",
                    type_name(other)
                ),
            ))
        }
    }
    if let Some(t) = payload.get("theme").filter(|t| !t.is_object()) {
        return Err(CardError::invalid(
            format!("{pp}.theme"),
            format!("expected an object, got {}", type_name(t)),
        ));
    }
    if let Some(b) = payload.get("sendDataModel").filter(|b| !b.is_boolean()) {
        return Err(CardError::invalid(
            format!("{pp}.sendDataModel"),
            format!("expected true or false, got {}", type_name(b)),
        ));
    }
    Ok(())
}

fn surface_id(payload: &Map<String, Value>, pp: &str) -> Result<String, CardError> {
    match payload.get("surfaceId") {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err(CardError::invalid(
            format!("{pp}.surfaceId"),
            "empty; give the surface a name such as \"main\"",
        )),
        Some(other) => Err(CardError::invalid(
            format!("{pp}.surfaceId"),
            format!("expected a string, got {}", type_name(other)),
        )),
        None => Err(CardError::invalid(
            format!("{pp}.surfaceId"),
            "missing; every message names its surface, e.g. \"surfaceId\": \"main\"",
        )),
    }
}

fn only_keys(payload: &Map<String, Value>, pp: &str, allowed: &[&str]) -> Result<(), CardError> {
    match payload.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(CardError::invalid(
            format!("{pp}.{k}"),
            format!("unknown key; allowed here: {}", allowed.join(", ")),
        )),
        None => Ok(()),
    }
}

fn keys_of(m: &Map<String, Value>) -> String {
    if m.is_empty() {
        " (the message is empty)".into()
    } else {
        let k: Vec<&str> = m.keys().map(String::as_str).collect();
        format!(" (it has: {})", k.join(", "))
    }
}

fn create_surface(surface: &str) -> Value {
    json!({"version": A2UI_VERSION, "createSurface": {"surfaceId": surface, "catalogId": BASIC_CATALOG_ID}})
}

/// Properties every component may have (`ComponentCommon` + the catalog's `weight`).
const COMMON_PROPS: [&str; 4] = ["id", "component", "weight", "accessibility"];

/// A basic-catalog component whose properties we check (the ones our templates use; kept in
/// step with `schema/a2ui_v0_9.schema.json`). Other component types pass unchecked.
struct Known {
    name: &'static str,
    required: &'static [&'static str],
    /// (property, allowed values; empty = any value of the right kind)
    optional: &'static [(&'static str, &'static [&'static str])],
}

const JUSTIFY: &[&str] = &[
    "start",
    "center",
    "end",
    "spaceBetween",
    "spaceAround",
    "spaceEvenly",
    "stretch",
];
const ALIGN: &[&str] = &["start", "center", "end", "stretch"];

const KNOWN: &[Known] = &[
    Known {
        name: "Text",
        required: &["text"],
        optional: &[(
            "variant",
            &["h1", "h2", "h3", "h4", "h5", "caption", "body"],
        )],
    },
    Known {
        name: "Card",
        required: &["child"],
        optional: &[],
    },
    Known {
        name: "Column",
        required: &["children"],
        optional: &[("justify", JUSTIFY), ("align", ALIGN)],
    },
    Known {
        name: "Row",
        required: &["children"],
        optional: &[("justify", JUSTIFY), ("align", ALIGN)],
    },
    Known {
        name: "List",
        required: &["children"],
        optional: &[("direction", &["vertical", "horizontal"]), ("align", ALIGN)],
    },
    Known {
        name: "Divider",
        required: &[],
        optional: &[("axis", &["horizontal", "vertical"])],
    },
];

/// Checks one `updateComponents.components` list: ids, known component properties, `root`,
/// references, reachability.
fn check_components(v: Option<&Value>, pp: &str) -> Result<(), CardError> {
    let cp = format!("{pp}.components");
    let comps = match v {
        Some(Value::Array(a)) if !a.is_empty() => a,
        Some(Value::Array(_)) => {
            return Err(CardError::invalid(
                cp,
                "empty; give the components, one of them with \"id\": \"root\"",
            ))
        }
        Some(other) => {
            return Err(CardError::invalid(
                cp,
                format!("expected an array of components, got {}", type_name(other)),
            ))
        }
        None => {
            return Err(CardError::invalid(
                cp,
                "missing; give the components as a flat list, e.g. [{\"id\": \"root\", \
                 \"component\": \"Column\", \"children\": [\"t\"]}, {\"id\": \"t\", \
                 \"component\": \"Text\", \"text\": \"Hello\"}]",
            ))
        }
    };
    let mut ids: Vec<&str> = Vec::with_capacity(comps.len());
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    for (j, c) in comps.iter().enumerate() {
        let jp = format!("{cp}[{j}]");
        let Value::Object(c) = c else {
            return Err(CardError::invalid(
                jp,
                format!(
                    "expected a component like {{\"id\": \"t\", \"component\": \"Text\", \
                     \"text\": \"Hello\"}}, got {}",
                    type_name(c)
                ),
            ));
        };
        let id = match c.get("id") {
            Some(Value::String(s)) if !s.is_empty() => s.as_str(),
            _ => {
                return Err(CardError::invalid(
                    format!("{jp}.id"),
                    "missing or not a string; every component needs a unique \"id\"",
                ))
            }
        };
        let jp = format!("{cp}[{j}] (\"{id}\")");
        let ty = match c.get("component") {
            Some(Value::String(s)) if !s.is_empty() => s.as_str(),
            _ => {
                return Err(CardError::invalid(
                    format!("{jp}.component"),
                    "missing or not a string; give the component type, e.g. \"component\": \
                     \"Text\" (v0.9 uses a \"component\" property, not a wrapper object)",
                ))
            }
        };
        if by_id.insert(id, j).is_some() {
            return Err(CardError::invalid(
                format!("{jp}.id"),
                format!("duplicate id \"{id}\"; ids must be unique"),
            ));
        }
        ids.push(id);
        check_known(c, ty, &jp)?;
        if let Some(w) = c.get("weight").filter(|w| !w.is_number()) {
            return Err(CardError::invalid(
                format!("{jp}.weight"),
                format!("expected a number, got {}", type_name(w)),
            ));
        }
    }
    if !by_id.contains_key("root") {
        return Err(CardError::invalid(
            cp,
            format!(
                "no component has \"id\": \"root\"; name the outermost component \"root\" \
                 (ids sent: {})",
                ids.join(", ")
            ),
        ));
    }
    check_tree(comps, &ids, &by_id, &cp, pp)
}

/// Every child a component refers to exists, and every component is reachable from `root`.
fn check_tree(
    comps: &[Value],
    ids: &[&str],
    by_id: &HashMap<&str, usize>,
    cp: &str,
    pp: &str,
) -> Result<(), CardError> {
    // References, then reachability from root.
    let mut edges: Vec<Vec<&str>> = Vec::with_capacity(comps.len());
    for (j, c) in comps.iter().enumerate() {
        let refs = child_refs(c);
        for r in &refs {
            if !by_id.contains_key(r) {
                return Err(CardError::invalid(
                    format!("{cp}[{j}] (\"{}\")", ids[j]),
                    format!(
                        "refers to child \"{r}\", which is not among the components; define \
                         it or remove the reference"
                    ),
                ));
            }
        }
        edges.push(refs);
    }
    let mut seen = vec![false; comps.len()];
    let mut stack = vec![by_id["root"]];
    while let Some(j) = stack.pop() {
        if std::mem::replace(&mut seen[j], true) {
            continue;
        }
        stack.extend(edges[j].iter().map(|r| by_id[r]));
    }
    let orphans: Vec<String> = ids
        .iter()
        .zip(&seen)
        .filter(|(_, s)| !**s)
        .map(|(id, _)| id.to_string())
        .collect();
    if !orphans.is_empty() {
        return Err(CardError::Orphans {
            path: pp.to_string(),
            ids: orphans,
        });
    }
    Ok(())
}

fn check_known(c: &Map<String, Value>, ty: &str, jp: &str) -> Result<(), CardError> {
    let Some(k) = KNOWN.iter().find(|k| k.name == ty) else {
        return Ok(());
    };
    for r in k.required {
        if !c.contains_key(*r) {
            return Err(CardError::invalid(
                format!("{jp}.{r}"),
                format!("missing; a {ty} needs \"{r}\""),
            ));
        }
    }
    for (prop, v) in c {
        let p = prop.as_str();
        if COMMON_PROPS.contains(&p) || k.required.contains(&p) {
            continue;
        }
        match k.optional.iter().find(|(name, _)| *name == p) {
            Some((_, allowed)) => {
                let ok = matches!(v, Value::String(s) if allowed.contains(&s.as_str()));
                if !ok {
                    return Err(CardError::invalid(
                        format!("{jp}.{p}"),
                        format!("must be one of {}, got {v}", allowed.join(", ")),
                    ));
                }
            }
            None => {
                let mut allowed: Vec<&str> = COMMON_PROPS.to_vec();
                allowed.extend(k.required);
                allowed.extend(k.optional.iter().map(|(n, _)| *n));
                return Err(CardError::invalid(
                    format!("{jp}.{p}"),
                    format!(
                        "a {ty} has no property \"{p}\"; allowed: {}",
                        allowed.join(", ")
                    ),
                ));
            }
        }
    }
    match ty {
        "Text" if !(c["text"].is_string() || c["text"].is_object()) => Err(CardError::invalid(
            format!("{jp}.text"),
            format!(
                "expected a string (or a binding {{\"path\": \"/x\"}}), got {}",
                type_name(&c["text"])
            ),
        )),
        "Card" if !c["child"].is_string() => Err(CardError::invalid(
            format!("{jp}.child"),
            "expected one component id (a string); wrap several children in a Column",
        )),
        "Column" | "Row" | "List" => match &c["children"] {
            Value::Array(a) if a.iter().all(Value::is_string) => Ok(()),
            Value::Object(t)
                if t.get("componentId").is_some_and(Value::is_string)
                    && t.get("path").is_some_and(Value::is_string)
                    && t.len() == 2 =>
            {
                Ok(())
            }
            _ => Err(CardError::invalid(
                format!("{jp}.children"),
                "expected an array of component ids, or a template {\"componentId\": \"...\", \
                 \"path\": \"/list\"}",
            )),
        },
        _ => Ok(()),
    }
}

/// The ids a component refers to: `child`, `children` (array or template `componentId`), and
/// for `Tabs` / `Modal` the basic catalog's `tabs[].child`, `trigger`, `content`.
fn child_refs(c: &Value) -> Vec<&str> {
    let mut out = Vec::new();
    if let Some(s) = c.get("child").and_then(Value::as_str) {
        out.push(s);
    }
    match c.get("children") {
        Some(Value::Array(a)) => out.extend(a.iter().filter_map(Value::as_str)),
        Some(Value::Object(t)) => out.extend(t.get("componentId").and_then(Value::as_str)),
        _ => {}
    }
    match c.get("component").and_then(Value::as_str) {
        Some("Tabs") => {
            if let Some(Value::Array(tabs)) = c.get("tabs") {
                out.extend(
                    tabs.iter()
                        .filter_map(|t| t.get("child").and_then(Value::as_str)),
                );
            }
        }
        Some("Modal") => {
            out.extend(c.get("trigger").and_then(Value::as_str));
            out.extend(c.get("content").and_then(Value::as_str));
        }
        _ => {}
    }
    out
}

// --- outline of custom messages, for text channels ------------------------------------------

/// One line of the plain outline of custom A2UI messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OutlineLine {
    /// Literal text of a `Text` component; `heading` for variants h1–h5.
    Text { text: String, heading: bool },
    /// A `Divider`.
    Rule,
}

/// The literal texts of each surface's tree, in reading order (depth first from `root`), for
/// channels that cannot draw A2UI. Data-bound texts (`{"path": ...}`) are skipped.
pub(crate) fn outline(messages: &[Value]) -> Vec<OutlineLine> {
    let mut out = Vec::new();
    for m in messages {
        let Some(comps) = m
            .pointer("/updateComponents/components")
            .and_then(Value::as_array)
        else {
            continue;
        };
        let by_id: HashMap<&str, &Value> = comps
            .iter()
            .filter_map(|c| Some((c.get("id")?.as_str()?, c)))
            .collect();
        let mut seen = BTreeSet::new();
        walk(&by_id, "root", &mut seen, &mut out);
    }
    out
}

fn walk<'a>(
    by_id: &HashMap<&'a str, &'a Value>,
    id: &'a str,
    seen: &mut BTreeSet<&'a str>,
    out: &mut Vec<OutlineLine>,
) {
    let Some(c) = by_id.get(id) else { return };
    if !seen.insert(id) {
        return;
    }
    match c.get("component").and_then(Value::as_str) {
        Some("Text") => {
            if let Some(t) = c.get("text").and_then(Value::as_str) {
                let heading = matches!(
                    c.get("variant").and_then(Value::as_str),
                    Some("h1" | "h2" | "h3" | "h4" | "h5")
                );
                out.push(OutlineLine::Text {
                    text: t.to_string(),
                    heading,
                });
            }
        }
        Some("Divider") => out.push(OutlineLine::Rule),
        _ => {
            for r in child_refs(c) {
                walk(by_id, r, seen, out);
            }
        }
    }
}

// --- templates as A2UI ------------------------------------------------------------------------

/// A surface id for `card` that is stable for the same content: `ethan-<type>-<16 hex>`.
pub(crate) fn surface_for(card: &Card) -> String {
    let json = serde_json::to_string(card).unwrap_or_default();
    // FNV-1a, 64 bit: deterministic across runs and platforms (snapshots depend on it).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in json.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("ethan-{}-{h:016x}", card.kind())
}

/// `createSurface` then `updateComponents` for `card`: root `Card` → `Column` "body" → the
/// template's rows.
pub(crate) fn card_messages(card: &Card, surface: &str) -> Vec<Value> {
    let mut b = Builder::default();
    let mut body: Vec<String> = Vec::new();
    if let Some(title) = card.title() {
        body.push(b.text("title", title, Some("h3"), None));
    }
    match card {
        Card::Compare(c) => compare(&mut b, &mut body, c),
        Card::Rank(r) => rank(&mut b, &mut body, r),
        Card::Stats(s) => stats(&mut b, &mut body, s),
        Card::Timeline(t) => timeline(&mut b, &mut body, t),
    }
    let mut components = vec![
        json!({"id": "root", "component": "Card", "child": "body"}),
        json!({"id": "body", "component": "Column", "children": body}),
    ];
    components.append(&mut b.comps);
    vec![
        create_surface(surface),
        json!({"version": A2UI_VERSION, "updateComponents": {"surfaceId": surface, "components": components}}),
    ]
}

#[derive(Default)]
struct Builder {
    comps: Vec<Value>,
}

impl Builder {
    fn text(&mut self, id: &str, text: &str, variant: Option<&str>, weight: Option<u32>) -> String {
        let mut c = json!({"id": id, "component": "Text", "text": text});
        if let Some(v) = variant {
            c["variant"] = json!(v);
        }
        if let Some(w) = weight {
            c["weight"] = json!(w);
        }
        self.comps.push(c);
        id.to_string()
    }
    fn container(
        &mut self,
        id: &str,
        kind: &str,
        children: Vec<String>,
        weight: Option<u32>,
    ) -> String {
        let mut c = json!({"id": id, "component": kind, "children": children});
        if let Some(w) = weight {
            c["weight"] = json!(w);
        }
        self.comps.push(c);
        id.to_string()
    }
    fn divider(&mut self, id: &str) -> String {
        self.comps
            .push(json!({"id": id, "component": "Divider", "axis": "horizontal"}));
        id.to_string()
    }
}

fn bold(s: &str) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!("**{s}**")
    }
}

fn compare(b: &mut Builder, body: &mut Vec<String>, c: &Compare) {
    let head: Vec<String> = c
        .columns
        .iter()
        .enumerate()
        .map(|(j, name)| b.text(&format!("h{j}"), &bold(name), Some("caption"), Some(1)))
        .collect();
    body.push(b.container("header", "Row", head, None));
    body.push(b.divider("header_rule"));
    if c.rows.is_empty() {
        body.push(b.text("empty", "(no rows)", Some("caption"), None));
    }
    for (i, row) in c.rows.iter().enumerate() {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(j, cell)| {
                let text = if j == 0 { bold(cell) } else { cell.clone() };
                b.text(&format!("r{i}c{j}"), &text, None, Some(1))
            })
            .collect();
        body.push(b.container(&format!("r{i}"), "Row", cells, None));
    }
}

fn rank(b: &mut Builder, body: &mut Vec<String>, r: &Rank) {
    if let Some(s) = &r.subtitle {
        body.push(b.text("subtitle", s, Some("caption"), None));
    }
    if r.items.is_empty() {
        body.push(b.text("empty", "(no items)", Some("caption"), None));
    }
    for (i, it) in r.items.iter().enumerate() {
        let p = format!("item{i}");
        let num = b.text(&format!("{p}_no"), &format!("{}.", i + 1), Some("h4"), None);
        let mut main = vec![b.text(&format!("{p}_name"), &bold(&it.name), None, None)];
        if let Some(d) = &it.desc {
            main.push(b.text(&format!("{p}_desc"), d, Some("caption"), None));
        }
        let mut row = vec![
            num,
            b.container(&format!("{p}_main"), "Column", main, Some(1)),
        ];
        if let Some(s) = &it.score {
            row.push(b.text(&format!("{p}_score"), s, Some("h5"), None));
        }
        body.push(b.container(&p, "Row", row, None));
    }
}

/// Splits `n` metrics into rows of at most 3, as even as possible (4 → 2+2, 5 → 3+2).
pub(crate) fn stat_rows(n: usize) -> Vec<std::ops::Range<usize>> {
    if n == 0 {
        return Vec::new();
    }
    let rows = n.div_ceil(3);
    let (base, extra) = (n / rows, n % rows);
    let mut out = Vec::with_capacity(rows);
    let mut start = 0;
    for r in 0..rows {
        let len = base + usize::from(r < extra);
        out.push(start..start + len);
        start += len;
    }
    out
}

fn stats(b: &mut Builder, body: &mut Vec<String>, s: &Stats) {
    if s.metrics.is_empty() {
        body.push(b.text("empty", "(no metrics)", Some("caption"), None));
    }
    for (r, range) in stat_rows(s.metrics.len()).into_iter().enumerate() {
        let cols: Vec<String> = range
            .map(|i| {
                let m = &s.metrics[i];
                let p = format!("m{i}");
                let mut kids = vec![
                    b.text(&format!("{p}_label"), &m.label, Some("caption"), None),
                    b.text(&format!("{p}_value"), &m.value, Some("h2"), None),
                ];
                if let Some(t) = &m.trend {
                    kids.push(b.text(&format!("{p}_trend"), t, Some("caption"), None));
                }
                b.container(&p, "Column", kids, Some(1))
            })
            .collect();
        body.push(b.container(&format!("stats_row{r}"), "Row", cols, None));
    }
}

fn timeline(b: &mut Builder, body: &mut Vec<String>, t: &Timeline) {
    if t.nodes.is_empty() {
        body.push(b.text("empty", "(nothing yet)", Some("caption"), None));
    }
    for (i, n) in t.nodes.iter().enumerate() {
        let p = format!("node{i}");
        if i > 0 {
            body.push(b.divider(&format!("{p}_rule")));
        }
        let mut kids = vec![b.text(&format!("{p}_title"), &n.title, Some("h4"), None)];
        if let Some(text) = &n.body {
            kids.push(b.text(&format!("{p}_body"), text, None, None));
        }
        for (j, it) in n.items.iter().enumerate() {
            kids.push(b.text(&format!("{p}_item{j}"), &format!("• {it}"), None, None));
        }
        body.push(b.container(&p, "Column", kids, None));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_rows_are_balanced() {
        let lens = |n| stat_rows(n).iter().map(|r| r.len()).collect::<Vec<_>>();
        assert_eq!(lens(0), Vec::<usize>::new());
        assert_eq!(lens(3), [3]);
        assert_eq!(lens(4), [2, 2]);
        assert_eq!(lens(5), [3, 2]);
        assert_eq!(lens(7), [3, 2, 2]);
    }
}
