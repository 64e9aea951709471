//! The published JSON Schemas resolve with a standard validator (the
//! jsonschema crate) when all are loaded (newcomer-ux N5): every `$id` is
//! the schema's own address, and every `$ref` between files names one.
//! The `--json` outputs themselves are checked against them wherever a CLI
//! test produces one (`check_schema`), through the same registry; the
//! receipt outputs are checked here.

use crate::common::*;
use preloop_shared::backend::Backend;
use preloop_shared::local::LocalInbox;
use preloop_shared::wire::SessionStartRequest;
use serde_json::Value;

/// Every `$ref` in `v` that points outside its own document.
fn external_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(r) = m.get("$ref").and_then(Value::as_str)
                && !r.starts_with('#')
            {
                out.push(r.to_string());
            }
            m.values().for_each(|x| external_refs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| external_refs(x, out)),
        _ => {}
    }
}

#[test]
fn every_id_is_the_schemas_own_address_and_every_ref_resolves() {
    let all = all_schemas();
    assert!(all.len() > 60, "{} schemas", all.len());
    let mut ids = std::collections::HashSet::new();
    let mut cross = 0;
    for (rel, doc) in &all {
        if let Some(id) = doc.get("$id").and_then(Value::as_str) {
            assert_eq!(id, format!("{SCHEMA_BASE}{rel}"), "{rel}: $id is not where the file is published");
            assert!(ids.insert(id.to_string()), "{rel}: $id {id} used twice");
        }
        let mut refs = Vec::new();
        external_refs(doc, &mut refs);
        for r in refs {
            cross += 1;
            // Relative to the schema's own address, as a validator resolves it.
            let dir = rel.rsplit_once('/').map_or("", |(d, _)| d);
            let target = format!("{SCHEMA_BASE}{dir}/{}", r.split('#').next().unwrap_or(""));
            assert!(
                all.iter().any(|(_, d)| d.get("$id").and_then(Value::as_str) == Some(target.as_str())),
                "{rel}: $ref {r} names no schema's $id ({target})"
            );
        }
        // Compiles with every schema loaded, nothing fetched: an
        // unresolvable `$ref` fails here.
        jsonschema::options()
            .with_registry(schema_registry())
            .offline()
            .build(doc)
            .unwrap_or_else(|e| panic!("{rel}: {e}"));
    }
    assert!(cross >= 1, "notes-list refers to the receipt schema");
}

/// The receipt a `notes status --json` and `notes cancel --json` print,
/// and `notes list --json` around it, pass the schemas as a standard
/// validator resolves them.
#[test]
fn receipts_validate_with_the_schemas_as_published() {
    let t = TempDir::new("schemas-receipts");
    let (root, home) = (t.path().to_path_buf(), t.path().join("preloop"));
    let req = SessionStartRequest { session_id: "s-1".into(), source: Some("codex".into()), ..Default::default() };
    LocalInbox::new(&home, 86_400).session_start(&req).unwrap();
    let run = |args: &[&str]| json_of(args, &run_with_stdin(operator_cmd(&root, &home, args), None));
    let sent = run(&["notes", "send", "--session", "s-1", "--json", "check the schema"]);
    check_schema("notes-send.schema.json", &sent);
    let id = sent["note_id"].as_str().unwrap().to_string();
    check_schema("receipt.schema.json", &run(&["notes", "status", &id, "--json"]));
    check_schema("notes-list.schema.json", &run(&["notes", "list", "--session", "s-1", "--json"]));
    check_schema("receipt.schema.json", &run(&["notes", "cancel", &id, "--json"]));
    // A receipt that breaks the referenced schema is caught through the
    // `$ref`, so the reference is really followed.
    let mut list = run(&["notes", "list", "--session", "s-1", "--json"]);
    list["notes"][0]["state"] = Value::from(42);
    assert!(!schema("notes-list.schema.json").is_valid(&list), "{list}");
}

/// The schemas' enums that name harnesses are the registry's (PRELOOP_BLESS=1
/// rewrites them): `doctor --json`'s `harness` (slugs) and the session
/// file's `agent_kind` (sources, as our hooks write them).
#[test]
fn the_harness_enums_are_the_registrys() {
    use preloop_shared::Harness;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas/preloop-hooks");
    let slugs: Vec<&str> = Harness::all().map(|h| h.slug()).collect();
    preloop_testkit::golden::check_json_enum(&dir.join("doctor.schema.json"), "harness", &slugs);
    let sources: Vec<&str> = Harness::all().map(|h| h.source()).collect();
    preloop_testkit::golden::check_json_enum(&dir.join("session-file.schema.json"), "agent_kind", &sources);
}
