//! The one golden-file helper of the workspace. Set `PRELOOP_BLESS=1` to
//! rewrite the expected files instead of comparing against them.

use serde::Serialize;
use std::path::Path;

/// Whether this run rewrites expected files.
pub fn blessing() -> bool {
    std::env::var_os("PRELOOP_BLESS").is_some_and(|v| v != "0")
}

/// Compare `actual` with the JSON file at `path` as JSON values (key order
/// is not compared: it depends on whether serde_json's `preserve_order` is
/// on in this build), or write it, keys sorted, when blessing.
pub fn check_json<T: Serialize + ?Sized>(path: &Path, actual: &T) {
    let actual = sorted(serde_json::to_value(actual).expect("serializable"));
    let mut text = serde_json::to_string_pretty(&actual).expect("serializable");
    text.push('\n');
    if blessing() {
        check_text(path, &text);
        return;
    }
    let expected = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with PRELOOP_BLESS=1 to create it)", path.display()));
    let expected: serde_json::Value =
        serde_json::from_str(&expected).unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()));
    if expected != actual {
        let expected_text = serde_json::to_string_pretty(&sorted(expected)).unwrap_or_default() + "\n";
        panic!(
            "{} differs from what the code produces (PRELOOP_BLESS=1 rewrites it):\n{}",
            path.display(),
            similar_lines(&expected_text, &text)
        );
    }
}

/// Compare `actual` with the file at `path`, or write it when blessing.
pub fn check_text(path: &Path, actual: &str) {
    if blessing() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("create the golden directory");
        }
        std::fs::write(path, actual).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        return;
    }
    let expected = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with PRELOOP_BLESS=1 to create it)", path.display()));
    if expected != actual {
        let diff = similar_lines(&expected, actual);
        panic!("{} differs from what the code produces (PRELOOP_BLESS=1 rewrites it):\n{diff}", path.display());
    }
}

/// Generated JSON Schemas against the checked-in ones in `dir`.
pub fn check_schemas<'a, T: Serialize + 'a>(dir: &Path, schemas: impl IntoIterator<Item = (String, &'a T)>) {
    for (name, schema) in schemas {
        check_json(&dir.join(name), schema);
    }
}

/// `v` with every object's keys in order, whether or not serde_json's
/// `preserve_order` is on in this build.
pub fn sorted(v: serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(m) => {
            let mut pairs: Vec<(String, serde_json::Value)> = m.into_iter().collect();
            pairs.sort_by(|a, b| a.0.cmp(&b.0));
            serde_json::Value::Object(pairs.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        serde_json::Value::Array(a) => serde_json::Value::Array(a.into_iter().map(sorted).collect()),
        other => other,
    }
}

/// A type's JSON Schema as we publish it: an optional field we leave out
/// when absent is never `null` in our outputs, so the schema does not allow
/// `null` for it either.
pub fn schema<T: schemars::JsonSchema>() -> schemars::Schema {
    let mut schema = schemars::generate::SchemaSettings::draft2020_12().into_generator().into_root_schema_for::<T>();
    let mut strip = schemars::transform::RecursiveTransform(strip_null);
    schemars::transform::Transform::transform(&mut strip, &mut schema);
    schema
}

fn strip_null(schema: &mut schemars::Schema) {
    let Some(obj) = schema.as_object_mut() else { return };
    if let Some(serde_json::Value::Array(types)) = obj.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types[0].clone();
            obj.insert("type".into(), only);
        }
    }
    if let Some(serde_json::Value::Array(any)) = obj.get("anyOf") {
        let kept: Vec<serde_json::Value> =
            any.iter().filter(|s| s.get("type") != Some(&serde_json::Value::from("null"))).cloned().collect();
        if kept.len() == 1 {
            obj.remove("anyOf");
            if let Some(serde_json::Value::Object(inner)) = kept.into_iter().next() {
                obj.extend(inner);
            }
        } else {
            obj.insert("anyOf".into(), serde_json::Value::Array(kept));
        }
    }
}

/// A minimal line diff: the first differing lines with their numbers.
fn similar_lines(expected: &str, actual: &str) -> String {
    let (e, a): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let mut out = String::new();
    let mut shown = 0;
    for i in 0..e.len().max(a.len()) {
        let (x, y) = (e.get(i).copied(), a.get(i).copied());
        if x != y {
            out.push_str(&format!("line {}:\n  - {}\n  + {}\n", i + 1, x.unwrap_or("<none>"), y.unwrap_or("<none>")));
            shown += 1;
            if shown == 8 {
                out.push_str("  ...\n");
                break;
            }
        }
    }
    out
}
