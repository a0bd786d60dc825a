//! JSON Schema handling for tool parameters: registration checks (a valid schema by the
//! `jsonschema` crate's meta-validation, and every `array` has `items`, recursively through
//! `properties`, `items`, `anyOf`, `oneOf`, `allOf`, `additionalProperties`, `$defs`) and argument
//! validation with every violation listed by its JSON path.
//!
//! Models (and some providers, e.g. OpenAI's strict mode) fail on arrays without `items`; that is
//! why it is checked even though JSON Schema allows it.
//!
//! Dialect: a schema that names its `$schema` is read in that draft; one that does not (every
//! built-in tool's) is read as Draft 7, the dialect function-calling schemas are written in. The
//! choice matters for memory, not meaning (the built-in schemas use no keyword whose meaning
//! differs between Draft 7 and 2020-12): the `jsonschema` crate builds the draft's meta-schema
//! validator once per process, about 5.5 MiB live for Draft 7 against 13 MiB (19 MiB allocated,
//! ~30 ms) for 2020-12.

use serde_json::Value;

/// Check a tool's `parameters` schema; the error says what is wrong and where.
pub fn check_parameters(schema: &Value) -> Result<(), String> {
    check_shape(schema)?;
    let checked = if declares_draft(schema) {
        jsonschema::meta::validate(schema)
    } else {
        jsonschema::draft7::meta::validate(schema)
    };
    if let Err(e) = checked {
        return Err(format!(
            "not a valid JSON Schema: {e} (at {})",
            e.instance_path
        ));
    }
    Ok(())
}

/// The checks of [`check_parameters`] that need no JSON Schema machinery: an object, and every
/// array has `items`. Used alone for the built-in tools, whose schemas a unit test
/// meta-validates.
pub fn check_shape(schema: &Value) -> Result<(), String> {
    if !schema.is_object() {
        return Err("parameters must be a JSON Schema object".into());
    }
    check_arrays(schema, "#")
}

/// Whether the schema names its dialect with `$schema`.
fn declares_draft(schema: &Value) -> bool {
    schema.get("$schema").is_some_and(Value::is_string)
}

fn is_array_type(t: Option<&Value>) -> bool {
    match t {
        Some(Value::String(s)) => s == "array",
        Some(Value::Array(a)) => a.iter().any(|v| v == "array"),
        _ => false,
    }
}

fn check_arrays(node: &Value, path: &str) -> Result<(), String> {
    let Value::Object(map) = node else {
        return Ok(());
    };
    if is_array_type(map.get("type"))
        && !map.contains_key("items")
        && !map.contains_key("prefixItems")
    {
        return Err(format!("the array at {path} has no `items`"));
    }
    for key in ["properties", "$defs", "definitions", "patternProperties"] {
        if let Some(Value::Object(props)) = map.get(key) {
            for (name, sub) in props {
                check_arrays(sub, &format!("{path}/{key}/{name}"))?;
            }
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(list)) = map.get(key) {
            for (i, sub) in list.iter().enumerate() {
                check_arrays(sub, &format!("{path}/{key}/{i}"))?;
            }
        }
    }
    for key in [
        "items",
        "additionalProperties",
        "not",
        "if",
        "then",
        "else",
        "contains",
    ] {
        if let Some(sub @ Value::Object(_)) = map.get(key) {
            check_arrays(sub, &format!("{path}/{key}"))?;
        }
    }
    Ok(())
}

/// A compiled validator for one tool's arguments.
pub struct ArgsValidator {
    inner: jsonschema::Validator,
}

impl ArgsValidator {
    /// Compile `schema` (the draft chosen as the module docs say); the error names the problem.
    pub fn compile(schema: &Value) -> Result<Self, String> {
        let compiled = if declares_draft(schema) {
            jsonschema::validator_for(schema)
        } else {
            jsonschema::draft7::new(schema)
        };
        compiled
            .map(|inner| Self { inner })
            .map_err(|e| format!("cannot compile the schema: {e}"))
    }

    /// `Ok` or one line per violation: `- <JSON path>: <message>`.
    pub fn validate(&self, args: &Value) -> Result<(), String> {
        if self.inner.is_valid(args) {
            return Ok(());
        }
        let mut lines: Vec<String> = self
            .inner
            .iter_errors(args)
            .map(|e| {
                let p = e.instance_path.to_string();
                let at = if p.is_empty() {
                    "(arguments)".to_string()
                } else {
                    format!("${}", p.replace('/', "."))
                };
                format!("- {at}: {e}")
            })
            .collect();
        ethan_core::sort::sort(&mut lines);
        lines.dedup();
        Err(lines.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arrays_need_items_everywhere() {
        assert!(check_parameters(&json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}})).is_ok());
        let e =
            check_parameters(&json!({"type": "object", "properties": {"a": {"type": "array"}}}))
                .unwrap_err();
        assert!(e.contains("#/properties/a"), "{e}");
        let e = check_parameters(&json!({"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": ["array", "null"]}]}}})).unwrap_err();
        assert!(e.contains("anyOf/1"), "{e}");
        let e = check_parameters(&json!({"allOf": [{"properties": {"x": {"oneOf": [{"type": "array", "items": {"type": "array"}}]}}}]})).unwrap_err();
        assert!(e.contains("items"), "{e}");
    }

    #[test]
    fn invalid_schema_is_refused() {
        let e =
            check_parameters(&json!({"type": "object", "properties": {"a": {"type": "strnig"}}}))
                .unwrap_err();
        assert!(e.contains("not a valid JSON Schema"), "{e}");
        assert!(check_parameters(&json!("object")).is_err());
        // A declared dialect is honoured: `prefixItems` must be an array only in 2020-12.
        let bad_2020 = json!({"$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "array", "prefixItems": 3});
        assert!(check_parameters(&bad_2020).is_err());
    }

    #[test]
    fn draft_7_is_the_default_dialect_and_2020_12_can_be_named() {
        // Draft 7 has no `dependentRequired`; 2020-12 enforces it.
        let schema = |with_draft: bool| {
            let mut s = json!({"type": "object",
                "dependentRequired": {"a": ["b"]}});
            if with_draft {
                s["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
            }
            s
        };
        let d7 = ArgsValidator::compile(&schema(false)).unwrap();
        assert!(d7.validate(&json!({"a": 1})).is_ok());
        let d2020 = ArgsValidator::compile(&schema(true)).unwrap();
        assert!(d2020.validate(&json!({"a": 1})).is_err());
    }

    #[test]
    fn violations_are_listed_with_paths() {
        let v = ArgsValidator::compile(&json!({
            "type": "object",
            "properties": {
                "n": {"type": "integer"},
                "list": {"type": "array", "items": {"type": "string"}},
                "mode": {"enum": ["a", "b"]}
            },
            "required": ["n", "list"],
            "additionalProperties": false
        }))
        .unwrap();
        assert!(v.validate(&json!({"n": 1, "list": []})).is_ok());
        let e = v
            .validate(&json!({"n": true, "list": "[\"x\"]", "mode": "c", "extra": 1}))
            .unwrap_err();
        assert!(e.contains("$.n:") && e.contains("integer"), "{e}");
        assert!(e.contains("$.list:") && e.contains("array"), "{e}");
        assert!(e.contains("$.mode:"), "{e}");
        assert!(e.contains("extra"), "{e}");
        let e = v.validate(&json!({})).unwrap_err();
        assert!(e.contains("\"n\" is a required property"), "{e}");
    }
}
