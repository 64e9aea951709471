//! What we write for others to read matches schemas/preloop-hooks: the
//! session file (read by conductors), the run state, receipts, the config.

use crate::common::*;
use serde_json::Value;
use std::path::Path;

fn validator(name: &str) -> jsonschema::Validator {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemas/preloop-hooks").join(name);
    jsonschema::validator_for(&serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()).unwrap()
}

fn check(v: &jsonschema::Validator, doc: &Value, what: &str) {
    let errors: Vec<String> = v.iter_errors(doc).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(errors.is_empty(), "{what}: {errors:?}\n{doc:#}");
}

fn read(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn session_file_run_state_and_receipts_match_their_schemas() {
    let home = Home::new("cc");
    let s = "written-files-session";
    let id = home.send(s, "hello");
    run("SessionStart", home.path(), &[("PRELOOP_SESSION_ALIAS", "w1")], &payload("SessionStart", s));
    hook(&home, "UserPromptSubmit", s);
    let pending = home.send(s, "later");
    check(
        &validator("session-file.schema.json"),
        &read(&home.path().join(format!("sessions/{s}.json"))),
        "session file",
    );
    check(&validator("run-state.schema.json"), &read(&home.path().join(format!("run/{s}.json"))), "run state");
    for n in [&id, &pending] {
        check(&validator("receipt.schema.json"), &serde_json::to_value(home.receipt(n)).unwrap(), "receipt");
    }
    hook(&home, "SessionEnd", s);
    check(
        &validator("session-file.schema.json"),
        &read(&home.path().join(format!("sessions/{s}.json"))),
        "ended session file",
    );
    check(
        &validator("receipt.schema.json"),
        &serde_json::to_value(home.receipt(&pending)).unwrap(),
        "undeliverable receipt",
    );
}

#[test]
fn the_default_config_matches_its_schema() {
    let cfg = preloop_shared::config::ConfigFile::default();
    check(&validator("config.schema.json"), &serde_json::to_value(&cfg).unwrap(), "default config");
}
