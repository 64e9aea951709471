//! The one golden-file helper of the workspace, and the adapter goldens
//! every harness checks the same way (parsed captures, rendered outcomes).
//! Set `PRELOOP_BLESS=1` to rewrite the expected files instead of comparing
//! against them.

use crate::hooks::Hooks;
use preloop_shared::flow::{Input, InputKind, Outcome};
use preloop_shared::runner::Parsed;
use preloop_shared::wire::Decision;
use serde::Serialize;
use serde_json::{Value, json};
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
    let expected: Value =
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

/// The hand-written schema at `path` lists exactly `values` in the `enum` of
/// its first property named `key`, or is rewritten so (when blessing) in its
/// own layout: the array on one line or one value per line, as it was. For
/// the enums a schema takes from the registry (harness slugs, sources).
pub fn check_json_enum(path: &Path, key: &str, values: &[&str]) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let at = text.find(&format!("\"{key}\"")).unwrap_or_else(|| panic!("{}: no {key:?}", path.display()));
    let open = at + text[at..].find("\"enum\"").expect("an enum after the key");
    let open = open + text[open..].find('[').expect("the enum's array");
    let close = open + text[open..].find(']').expect("the array's end");
    let listed: Vec<String> = serde_json::from_str(&text[open..=close]).expect("an array of strings");
    if listed == values {
        return;
    }
    assert!(
        blessing(),
        "{}: {key}'s enum is {listed:?}, the registry's is {values:?} (PRELOOP_BLESS=1 rewrites it)",
        path.display()
    );
    let quoted: Vec<String> = values.iter().map(|v| json!(v).to_string()).collect();
    let array = match text[open..close].rfind('\n') {
        // One value per line, indented as the closing bracket's line plus two.
        Some(_) => {
            let line_start = text[..close].rfind('\n').map_or(0, |i| i + 1);
            let indent = &text[line_start..close];
            let inner = format!("{indent}  ");
            format!("[\n{inner}{}\n{indent}]", quoted.join(&format!(",\n{inner}")))
        }
        None => format!("[{}]", quoted.join(", ")),
    };
    let new = format!("{}{array}{}", &text[..open], &text[close + 1..]);
    std::fs::write(path, new).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
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

/// An adapter's schema test: each output shape's generated JSON Schema
/// (`(event, schema)`) against the checked-in
/// `schemas/<dir>/<event>.output.schema.json`.
pub fn check_output_schemas<'a>(dir: &str, shapes: impl IntoIterator<Item = (&'a str, schemars::Schema)>) {
    let dir = crate::support::schemas_dir(dir);
    for (event, schema) in shapes {
        check_json(&dir.join(format!("{event}.output.schema.json")), &schema);
    }
}

/// `v` with every object's keys in order, whether or not serde_json's
/// `preserve_order` is on in this build.
pub fn sorted(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut pairs: Vec<(String, Value)> = m.into_iter().collect();
            pairs.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(pairs.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(sorted).collect()),
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
    if let Some(Value::Array(types)) = obj.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types[0].clone();
            obj.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(any)) = obj.get("anyOf") {
        let kept: Vec<Value> = any.iter().filter(|s| s.get("type") != Some(&Value::from("null"))).cloned().collect();
        if kept.len() == 1 {
            obj.remove("anyOf");
            if let Some(Value::Object(inner)) = kept.into_iter().next() {
                obj.extend(inner);
            }
        } else {
            obj.insert("anyOf".into(), Value::Array(kept));
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

// ----- the adapters' goldens, for every harness ---------------------------------------

/// Compare `actual` with `fixtures/<H::FIXTURES>/expected/<rel>` (or write
/// it when blessing).
pub fn check_expected<H: Hooks>(rel: &str, actual: &Value) {
    check_json(&crate::support::fixtures_dir(H::FIXTURES).join("expected").join(rel), actual);
}

/// A parse as the input goldens hold it; `transcript_path` only `with_transcript`.
pub fn input_json(p: &Parsed, with_transcript: bool) -> Value {
    let Input { session_id, cwd, kind, transcript_path, parent_session_id } = match p {
        Parsed::StandDown(why) => return json!({"stand_down": why}),
        Parsed::Run(i) => i,
    };
    let kind = match kind {
        InputKind::SessionStart { pull } => json!({"session_start": {"pull": pull}}),
        InputKind::Prompt { prompt, pull } => json!({"user_prompt": {"prompt": prompt, "pull": pull}}),
        InputKind::Tool { tool_name, mcp_tool, tool_input, model, carry } => {
            let mut tool = json!({
                "tool_name": tool_name, "tool_input": tool_input, "model": model, "carry": format!("{carry:?}")});
            // Only where an adapter gave one: the older goldens stay as they were.
            if let Some(mcp_tool) = mcp_tool {
                tool["mcp_tool"] = json!(format!("{mcp_tool:?}"));
            }
            json!({ "tool": tool })
        }
        InputKind::AfterTool { carry } => json!({"after_tool": {"carry": carry}}),
        InputKind::Stop { may_continue } => json!({"stop": {"may_continue": may_continue}}),
        InputKind::SessionEnd { reason } => json!({"session_end": {"reason": reason}}),
    };
    let mut v = json!({"session_id": session_id, "cwd": cwd, "kind": kind});
    if with_transcript {
        v["transcript_path"] = json!(transcript_path);
    }
    // Only where a harness names one (an OpenCode sub-agent): the other goldens stay as they were.
    if let Some(parent) = parent_session_id {
        v["parent_session_id"] = json!(parent);
    }
    v
}

/// Each capture in `names` parses, for the hook of its own event (`own`),
/// into the input checked in under `expected/<capture>.input.json`, and every
/// other hook refuses it. How many goldens were compared.
pub fn check_parse_goldens<H: Hooks>(
    names: &[String],
    own: impl Fn(&str, &Value) -> Option<H::Event>,
    with_transcript: bool,
) -> usize {
    let mut ran = 0;
    for name in names {
        let v = crate::support::fixture(H::FIXTURES, name);
        let own = own(name, &v);
        for event in H::events() {
            let parsed = H::parse(event, &v);
            if Some(event) == own {
                let parsed = parsed.unwrap_or_else(|e| panic!("{name}: {e}"));
                let rel = format!("{}.input.json", name.trim_end_matches(".json"));
                check_expected::<H>(&rel, &input_json(&parsed, with_transcript));
                ran += 1;
            } else if let Ok(p) = parsed {
                panic!("{name} was accepted by the {} hook: {}", H::name(event), input_json(&p, with_transcript));
            }
        }
    }
    ran
}

/// A note block with fixed attributes: notes `3f2a9c0d1e4b5a6<i>` by Olive
/// Operator (`jwt`) at `at`, with `text(i)`, for `i` in `0..n`.
pub fn fixed_block(n: usize, at: &str, text: impl Fn(usize) -> String) -> String {
    let at = preloop_shared::time::Timestamp::parse(at).unwrap();
    let notes: Vec<_> = (0..n)
        .map(|i| {
            let id = format!("3f2a9c0d1e4b5a6{i}");
            preloop_shared::render::render_element(&id, "Olive Operator", "jwt", at, &text(i))
        })
        .collect();
    preloop_shared::render::frame(&notes).unwrap()
}

/// The goldens' note block: one note with fixed attributes.
pub fn note_block() -> String {
    let t = preloop_shared::time::Timestamp::parse("2026-12-02T09:20:38.291972").unwrap();
    let text = "Stop editing the parser; run the tests first.";
    let a = preloop_shared::render::render_element("3f2a9c0d1e4b5a6c", "Olive Operator", "jwt", t, text);
    preloop_shared::render::frame(&[a]).unwrap()
}

/// The outcomes every harness's render goldens cover, by case name:
/// nothing, notes, a deny (with `deny_reason`, with notes, without a
/// reason), an allow (with and without notes), and a continuation.
pub fn render_cases(deny_reason: &str) -> Vec<(&'static str, Outcome)> {
    let block = note_block();
    let notes =
        Outcome { context: Some(block.clone()), note_ids: vec!["3f2a9c0d1e4b5a6c".into()], ..Outcome::default() };
    let deny = Outcome { decision: Some(Decision::Deny), reason: Some(deny_reason.into()), ..Outcome::default() };
    let allow = Outcome {
        decision: Some(Decision::Allow),
        reason: Some("No central native rule requires approval".into()),
        ..Outcome::default()
    };
    vec![
        ("nothing", Outcome::default()),
        ("notes", notes.clone()),
        ("deny", deny.clone()),
        ("deny_notes", Outcome { context: Some(block.clone()), note_ids: notes.note_ids.clone(), ..deny.clone() }),
        ("deny_no_reason", Outcome { reason: None, ..deny }),
        ("allow", allow.clone()),
        ("allow_notes", Outcome { context: Some(block), ..allow }),
        ("continue", Outcome { continue_turn: true, ..notes }),
    ]
}

/// What each event renders for each case, checked in under
/// `expected/render/<name>.<case>.json` (`null`: prints nothing).
pub fn check_render_goldens<H: Hooks>(cases: &[(&str, Outcome)]) {
    for event in H::events() {
        for (case, o) in cases {
            let out = H::render(event, o).unwrap_or(Value::Null);
            check_expected::<H>(&format!("render/{}.{case}.json", H::name(event)), &out);
        }
    }
}

/// Every combination of context (none, empty, [`note_block`], 4,000 'é',
/// and `extra`), decision, reason (none, empty, blank, one) and
/// `continue_turn`.
pub fn outcome_grid(extra: &[String]) -> Vec<Outcome> {
    let mut contexts = vec![None, Some(String::new()), Some(note_block()), Some("é".repeat(4000))];
    contexts.extend(extra.iter().cloned().map(Some));
    let reasons = [None, Some(String::new()), Some("  ".to_string()), Some("Blocked by access rule".to_string())];
    let mut grid = Vec::new();
    for context in &contexts {
        for decision in [None, Some(Decision::Allow), Some(Decision::Deny)] {
            for reason in &reasons {
                for continue_turn in [false, true] {
                    grid.push(Outcome {
                        context: context.clone(),
                        decision,
                        reason: reason.clone(),
                        continue_turn,
                        ..Outcome::default()
                    });
                }
            }
        }
    }
    grid
}

/// Every event's render of every [`outcome_grid`] outcome is nothing or an
/// output that passes its output schema and names none of `banned` (keys
/// and values the harness would act on beyond the ones we mean); `more`
/// checks each `(event, outcome, output)` further. How many rendered.
pub fn every_render_passes_schema<H: Hooks>(
    extra: &[String],
    banned: &[&str],
    more: impl Fn(H::Event, &Outcome, &Value),
) -> usize {
    let mut rendered = 0;
    for event in H::events() {
        for o in outcome_grid(extra) {
            let Some(v) = H::render(event, &o) else { continue };
            rendered += 1;
            let s =
                H::output_schema(event).unwrap_or_else(|| panic!("{} rendered {v} but has no schema", H::name(event)));
            crate::support::validate(&s, &v).unwrap_or_else(|e| panic!("{} {o:?}: {e}", H::name(event)));
            let text = v.to_string();
            for bad in banned {
                assert!(!text.contains(bad), "{} emitted {bad}: {text}", H::name(event));
            }
            more(event, &o, &v);
        }
    }
    rendered
}
