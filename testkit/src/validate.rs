//! Request validation with FastAPI/pydantic v2 error bodies (docs/contracts/preloop-server.md §1): 422
//! `{"detail": [{"type", "loc", "msg", "input", "ctx"?}, ...]}`, every field
//! error collected in field order, model validators only when the fields
//! passed. The messages are pydantic's own wording.

use crate::http::{Request, Response};
use serde::Serialize;
use serde_json::{Map, Value, json};

/// One pydantic error item.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FieldError {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub loc: Vec<Value>,
    pub msg: String,
    pub input: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ctx: Option<Value>,
}

impl FieldError {
    pub fn new(
        kind: &'static str,
        loc: Vec<Value>,
        msg: impl Into<String>,
        input: Value,
        ctx: Option<Value>,
    ) -> FieldError {
        FieldError { kind, loc, msg: msg.into(), input, ctx }
    }

    /// A model-level `ValueError` (loc `["body"]`, ctx `{"error": {}}`).
    pub fn value_error(input: Value, message: &str) -> FieldError {
        FieldError::new(
            "value_error",
            vec![json!("body")],
            format!("Value error, {message}"),
            input,
            Some(json!({"error": {}})),
        )
    }
}

/// The 422 response for a list of errors.
pub(crate) fn unprocessable(errors: Vec<FieldError>) -> Response {
    // A struct, not `json!`, so each item keeps pydantic's key order.
    #[derive(Serialize)]
    struct Detail {
        detail: Vec<FieldError>,
    }
    Response::json(422, &Detail { detail: errors })
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 { format!("{n} {word}") } else { format!("{n} {word}s") }
}

/// pydantic's rendering of a literal's allowed values: `'a', 'b' or 'c'`.
pub(crate) fn expected_literals(allowed: &[&str]) -> String {
    let quoted: Vec<String> = allowed.iter().map(|a| format!("'{a}'")).collect();
    match quoted.len() {
        0 => String::new(),
        1 => quoted[0].clone(),
        n => format!("{} or {}", quoted[..n - 1].join(", "), quoted[n - 1]),
    }
}

/// Read the JSON body the way FastAPI does for a required model body:
/// empty → `missing`; a JSON content type (or none) → parsed, a decode error
/// is `json_invalid`; another content type → the raw text, which then fails
/// as `model_attributes_type`; a non-object → `model_attributes_type`.
pub(crate) fn json_object(req: &Request) -> Result<Map<String, Value>, Vec<FieldError>> {
    if req.body.is_empty() {
        return Err(vec![FieldError::new("missing", vec![json!("body")], "Field required", Value::Null, None)]);
    }
    let is_json = match req.header("content-type") {
        None => true,
        Some(ct) => {
            let main = ct.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
            match main.split_once('/') {
                Some(("application", sub)) => sub == "json" || sub.ends_with("+json"),
                _ => false,
            }
        }
    };
    let value = if is_json {
        match serde_json::from_slice::<Value>(&req.body) {
            Ok(v) => v,
            Err(e) => {
                let pos = byte_offset(&req.body, e.line(), e.column());
                let msg = python_json_message(&e.to_string());
                return Err(vec![FieldError::new(
                    "json_invalid",
                    vec![json!("body"), json!(pos)],
                    "JSON decode error",
                    json!({}),
                    Some(json!({ "error": msg })),
                )]);
            }
        }
    } else {
        Value::String(String::from_utf8_lossy(&req.body).into_owned())
    };
    match value {
        Value::Object(map) => Ok(map),
        other => Err(vec![FieldError::new(
            "model_attributes_type",
            vec![json!("body")],
            "Input should be a valid dictionary or object to extract fields from",
            other,
            None,
        )]),
    }
}

/// Python's `JSONDecodeError.msg` for the closest serde_json error.
fn python_json_message(serde_message: &str) -> &'static str {
    const MAP: &[(&str, &str)] = &[
        ("key must be a string", "Expecting property name enclosed in double quotes"),
        ("trailing characters", "Extra data"),
        ("expected `:`", "Expecting ':' delimiter"),
        ("expected `,` or `}`", "Expecting ',' delimiter"),
        ("expected `,` or `]`", "Expecting ',' delimiter"),
        ("EOF while parsing a string", "Unterminated string starting at"),
        ("control character", "Invalid control character at"),
        ("invalid escape", "Invalid \\escape"),
    ];
    MAP.iter().find(|(k, _)| serde_message.starts_with(k)).map(|(_, v)| *v).unwrap_or("Expecting value")
}

fn byte_offset(body: &[u8], line: usize, column: usize) -> usize {
    let mut offset = 0;
    for (i, l) in body.split(|b| *b == b'\n').enumerate() {
        if i + 1 == line {
            return (offset + column.saturating_sub(1)).min(body.len());
        }
        offset += l.len() + 1;
    }
    body.len()
}

/// Field-by-field validation of one JSON object (`loc` = prefix + field).
pub(crate) struct Fields<'a> {
    pub obj: &'a Map<String, Value>,
    prefix: Vec<Value>,
    pub errors: Vec<FieldError>,
}

/// A regex as reported in errors, and the check that implements it.
pub(crate) type Pattern = (&'static str, fn(&str) -> bool);

/// String constraints of one field.
#[derive(Clone, Copy, Default)]
pub(crate) struct StrRule {
    pub min: Option<usize>,
    pub max: Option<usize>,
    /// A regex-like pattern, checked by `pattern_check`, reported as text.
    pub pattern: Option<Pattern>,
}

impl StrRule {
    pub const ANY: StrRule = StrRule { min: None, max: None, pattern: None };
    pub fn max(n: usize) -> StrRule {
        StrRule { min: None, max: Some(n), pattern: None }
    }
    pub fn range(min: usize, max: usize) -> StrRule {
        StrRule { min: Some(min), max: Some(max), pattern: None }
    }
}

impl<'a> Fields<'a> {
    pub fn body(obj: &'a Map<String, Value>) -> Fields<'a> {
        Fields { obj, prefix: vec![json!("body")], errors: Vec::new() }
    }

    pub fn nested(obj: &'a Map<String, Value>, prefix: Vec<Value>) -> Fields<'a> {
        Fields { obj, prefix, errors: Vec::new() }
    }

    pub fn loc(&self, name: &str) -> Vec<Value> {
        let mut l = self.prefix.clone();
        l.push(json!(name));
        l
    }

    fn push(&mut self, kind: &'static str, name: &str, msg: impl Into<String>, input: Value, ctx: Option<Value>) {
        let loc = self.loc(name);
        self.errors.push(FieldError::new(kind, loc, msg, input, ctx));
    }

    fn missing(&mut self, name: &str) {
        let input = Value::Object(self.obj.clone());
        self.push("missing", name, "Field required", input, None);
    }

    /// The field's value, if it has one: absent is `missing` when
    /// `required`, and `null` counts as absent when `nullable`.
    fn present(&mut self, name: &str, required: bool, nullable: bool) -> Option<Value> {
        match self.obj.get(name) {
            None => {
                if required {
                    self.missing(name);
                }
                None
            }
            Some(Value::Null) if nullable => None,
            Some(v) => Some(v.clone()),
        }
    }

    /// A parsed value, or its error recorded.
    fn checked<T>(&mut self, parsed: Result<T, Box<FieldError>>) -> Option<T> {
        parsed.map_err(|e| self.errors.push(*e)).ok()
    }

    /// A string field. `required`: absent is `missing`. `nullable`: `null`
    /// is accepted as absent (an `Optional[str]`).
    pub fn string(&mut self, name: &str, required: bool, nullable: bool, rule: StrRule) -> Option<String> {
        let v = self.present(name, required, nullable)?;
        let s = match &v {
            Value::String(s) => s.clone(),
            _ => {
                self.push("string_type", name, "Input should be a valid string", v, None);
                return None;
            }
        };
        let len = s.chars().count();
        if let Some(min) = rule.min
            && len < min
        {
            self.push(
                "string_too_short",
                name,
                format!("String should have at least {}", plural(min, "character")),
                v,
                Some(json!({ "min_length": min })),
            );
            return None;
        }
        if let Some(max) = rule.max
            && len > max
        {
            self.push(
                "string_too_long",
                name,
                format!("String should have at most {}", plural(max, "character")),
                v,
                Some(json!({ "max_length": max })),
            );
            return None;
        }
        if let Some((text, check)) = rule.pattern
            && !check(&s)
        {
            self.push(
                "string_pattern_mismatch",
                name,
                format!("String should match pattern '{text}'"),
                v,
                Some(json!({ "pattern": text })),
            );
            return None;
        }
        Some(s)
    }

    /// A `Literal[...]` field (optionally nullable), `None` when absent.
    pub fn literal(&mut self, name: &str, required: bool, nullable: bool, allowed: &[&str]) -> Option<String> {
        let v = self.present(name, required, nullable)?;
        if let Value::String(s) = &v
            && allowed.contains(&s.as_str())
        {
            return Some(s.clone());
        }
        let expected = expected_literals(allowed);
        self.push(
            "literal_error",
            name,
            format!("Input should be {expected}"),
            v,
            Some(json!({ "expected": expected })),
        );
        None
    }

    /// A `bool` field with a default (lax mode: 0/1 and the usual strings).
    pub fn boolean(&mut self, name: &str, default: bool) -> bool {
        let v = match self.obj.get(name) {
            None => return default,
            Some(v) => v.clone(),
        };
        match &v {
            Value::Bool(b) => return *b,
            Value::Number(n) => {
                if let Some(f) = n.as_f64() {
                    if f == 0.0 {
                        return false;
                    }
                    if f == 1.0 {
                        return true;
                    }
                }
                self.push("bool_parsing", name, "Input should be a valid boolean, unable to interpret input", v, None);
            }
            Value::String(s) => match s.to_ascii_lowercase().as_str() {
                "0" | "off" | "f" | "false" | "n" | "no" => return false,
                "1" | "on" | "t" | "true" | "y" | "yes" => return true,
                _ => self.push(
                    "bool_parsing",
                    name,
                    "Input should be a valid boolean, unable to interpret input",
                    v,
                    None,
                ),
            },
            _ => self.push("bool_type", name, "Input should be a valid boolean", v, None),
        }
        default
    }

    /// A `Dict[str, Any]` field with an empty default.
    pub fn dict(&mut self, name: &str) -> Map<String, Value> {
        match self.obj.get(name) {
            None => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(v) => {
                let v = v.clone();
                self.push("dict_type", name, "Input should be a valid dictionary", v, None);
                Map::new()
            }
        }
    }

    /// A `list[str]` field with an empty default and a maximum length.
    pub fn string_list(&mut self, name: &str, max: usize) -> Vec<String> {
        let v = match self.obj.get(name) {
            None => return Vec::new(),
            Some(v) => v.clone(),
        };
        let items = match &v {
            Value::Array(a) => a.clone(),
            _ => {
                self.push("list_type", name, "Input should be a valid list", v, None);
                return Vec::new();
            }
        };
        let mut out = Vec::new();
        let mut bad = false;
        for (i, item) in items.iter().enumerate() {
            match item {
                Value::String(s) => out.push(s.clone()),
                _ => {
                    bad = true;
                    let mut loc = self.loc(name);
                    loc.push(json!(i));
                    self.errors.push(FieldError::new(
                        "string_type",
                        loc,
                        "Input should be a valid string",
                        item.clone(),
                        None,
                    ));
                }
            }
        }
        if !bad && items.len() > max {
            self.push(
                "too_long",
                name,
                format!("List should have at most {} after validation, not {}", plural(max, "item"), items.len()),
                v,
                Some(json!({ "field_type": "List", "max_length": max, "actual_length": items.len() })),
            );
            return Vec::new();
        }
        out
    }

    /// An `Optional[int]` with bounds.
    pub fn int(&mut self, name: &str, ge: Option<i64>, le: Option<i64>) -> Option<i64> {
        let v = self.present(name, false, true)?;
        let parsed = parse_int(&v, self.loc(name), ge, le);
        self.checked(parsed)
    }

    /// An `Optional[UUID]`, returned canonical (lowercase, hyphenated).
    pub fn uuid(&mut self, name: &str) -> Option<String> {
        let v = self.present(name, false, true)?;
        let parsed = parse_uuid_value(&v, self.loc(name));
        self.checked(parsed)
    }

    /// Reject keys not in `allowed` (`extra="forbid"`).
    pub fn forbid_extra(&mut self, allowed: &[&str]) {
        let extra: Vec<(String, Value)> = self
            .obj
            .iter()
            .filter(|(k, _)| !allowed.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (k, v) in extra {
            self.push("extra_forbidden", &k, "Extra inputs are not permitted", v, None);
        }
    }
}

/// pydantic's lax int: ints, integral floats, numeric strings.
pub(crate) fn parse_int(v: &Value, loc: Vec<Value>, ge: Option<i64>, le: Option<i64>) -> Result<i64, Box<FieldError>> {
    let fail = |kind: &'static str, msg: String, ctx: Option<Value>| {
        Err(Box::new(FieldError::new(kind, loc.clone(), msg, v.clone(), ctx)))
    };
    let n = match v {
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i,
            (None, Some(f)) if f.fract() == 0.0 && f.is_finite() => f as i64,
            (None, Some(_)) => {
                return fail(
                    "int_from_float",
                    "Input should be a valid integer, got a number with a fractional part".into(),
                    None,
                );
            }
            _ => return fail("int_type", "Input should be a valid integer".into(), None),
        },
        Value::String(s) => match s.trim().parse::<i64>() {
            Ok(i) => i,
            Err(_) => {
                return fail(
                    "int_parsing",
                    "Input should be a valid integer, unable to parse string as an integer".into(),
                    None,
                );
            }
        },
        _ => return fail("int_type", "Input should be a valid integer".into(), None),
    };
    if let Some(ge) = ge
        && n < ge
    {
        return fail(
            "greater_than_equal",
            format!("Input should be greater than or equal to {ge}"),
            Some(json!({ "ge": ge })),
        );
    }
    if let Some(le) = le
        && n > le
    {
        return fail(
            "less_than_equal",
            format!("Input should be less than or equal to {le}"),
            Some(json!({ "le": le })),
        );
    }
    Ok(n)
}

/// Parse a UUID as pydantic does (hyphenated, simple 32-hex, braced or
/// `urn:uuid:`, any case); the error text follows the `uuid` crate's.
pub(crate) fn parse_uuid(s: &str) -> Result<String, String> {
    let mut t = s;
    if let Some(r) = t.strip_prefix("urn:uuid:") {
        t = r;
    } else if let Some(r) = t.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
        t = r;
    }
    if let Some((i, c)) = t.char_indices().find(|(_, c)| !(c.is_ascii_hexdigit() || *c == '-')) {
        return Err(format!(
            "invalid character: expected an optional prefix of `urn:uuid:` followed by [0-9a-fA-F-], found `{c}` at {}",
            i + 1
        ));
    }
    let hex: String = t.chars().filter(|c| *c != '-').collect::<String>().to_ascii_lowercase();
    if t.contains('-') {
        let groups: Vec<&str> = t.split('-').collect();
        if groups.len() != 5 {
            return Err(format!("invalid group count: expected 5, found {}", groups.len()));
        }
        for (i, (g, want)) in groups.iter().zip([8usize, 4, 4, 4, 12]).enumerate() {
            if g.len() != want {
                return Err(format!("invalid group length in group {i}: expected {want}, found {}", g.len()));
            }
        }
    } else if hex.len() != 32 {
        return Err(format!("invalid length: expected length 32 for simple format, found {}", hex.len()));
    }
    Ok(format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32]))
}

pub(crate) fn parse_uuid_value(v: &Value, loc: Vec<Value>) -> Result<String, Box<FieldError>> {
    match v {
        Value::String(s) => parse_uuid(s).map_err(|e| {
            Box::new(FieldError::new(
                "uuid_parsing",
                loc,
                format!("Input should be a valid UUID, {e}"),
                v.clone(),
                Some(json!({ "error": e })),
            ))
        }),
        _ => Err(Box::new(FieldError::new(
            "uuid_type",
            loc,
            "UUID input should be a string, bytes or UUID object",
            v.clone(),
            None,
        ))),
    }
}

/// Query-string parameters (FastAPI: the last value of a repeated key wins).
pub(crate) struct Query {
    pairs: Vec<(String, String)>,
    pub errors: Vec<FieldError>,
}

impl Query {
    pub fn new(req: &Request) -> Query {
        Query { pairs: req.query_pairs(), errors: Vec::new() }
    }

    fn raw(&self, name: &str) -> Option<String> {
        self.pairs.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    fn loc(name: &str) -> Vec<Value> {
        vec![json!("query"), json!(name)]
    }

    pub fn uuid(&mut self, name: &str, required: bool) -> Option<String> {
        match self.raw(name) {
            None => {
                if required {
                    self.errors.push(FieldError::new("missing", Query::loc(name), "Field required", Value::Null, None));
                }
                None
            }
            Some(s) => match parse_uuid_value(&Value::String(s), Query::loc(name)) {
                Ok(u) => Some(u),
                Err(e) => {
                    self.errors.push(*e);
                    None
                }
            },
        }
    }

    pub fn int(&mut self, name: &str, default: i64, ge: Option<i64>, le: Option<i64>) -> i64 {
        match self.raw(name) {
            None => default,
            Some(s) => match parse_int(&Value::String(s), Query::loc(name), ge, le) {
                Ok(n) => n,
                Err(e) => {
                    self.errors.push(*e);
                    default
                }
            },
        }
    }

    pub fn literal(&mut self, name: &str, allowed: &[&str]) -> Option<String> {
        let s = self.raw(name)?;
        if allowed.contains(&s.as_str()) {
            return Some(s);
        }
        let expected = expected_literals(allowed);
        self.errors.push(FieldError::new(
            "literal_error",
            Query::loc(name),
            format!("Input should be {expected}"),
            Value::String(s),
            Some(json!({ "expected": expected })),
        ));
        None
    }

    pub fn string(&mut self, name: &str) -> Option<String> {
        self.raw(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_wording() {
        assert_eq!(expected_literals(&["a"]), "'a'");
        assert_eq!(expected_literals(&["a", "b"]), "'a' or 'b'");
        assert_eq!(expected_literals(&["a", "b", "c"]), "'a', 'b' or 'c'");
    }

    #[test]
    fn uuids() {
        assert_eq!(parse_uuid("5F9C7C7B-E77B-4E3C-99BE-5A7A623325DB").unwrap(), "5f9c7c7b-e77b-4e3c-99be-5a7a623325db");
        assert_eq!(parse_uuid("5f9c7c7be77b4e3c99be5a7a623325db").unwrap(), "5f9c7c7b-e77b-4e3c-99be-5a7a623325db");
        assert!(parse_uuid("nope").unwrap_err().starts_with("invalid character"));
        assert!(parse_uuid("abc").unwrap_err().starts_with("invalid length"));
        assert!(parse_uuid("5f9c7c7b-e77b-4e3c-99be").unwrap_err().starts_with("invalid group count"));
    }

    #[test]
    fn strings_and_lists() {
        let obj = json!({"a": "", "b": 5, "c": "xyz", "l": ["x", 1]});
        let map = obj.as_object().unwrap();
        let mut f = Fields::body(map);
        assert!(f.string("a", true, false, StrRule::range(1, 10)).is_none());
        assert!(f.string("b", true, false, StrRule::ANY).is_none());
        assert!(f.string("c", true, false, StrRule::max(2)).is_none());
        assert!(f.string("missing", true, false, StrRule::ANY).is_none());
        f.string_list("l", 100);
        let kinds: Vec<&str> = f.errors.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, ["string_too_short", "string_type", "string_too_long", "missing", "string_type"]);
        assert_eq!(f.errors[0].msg, "String should have at least 1 character");
        assert_eq!(f.errors[2].msg, "String should have at most 2 characters");
        assert_eq!(f.errors[4].loc, vec![json!("body"), json!("l"), json!(1)]);
    }
}
