//! install/README.md's table of the files `install` writes per harness is
//! rendered from the dialects (`Dialect::files_doc`) and the registry's
//! events, and its `install --harness` list from the registry: a new
//! harness's row comes from its own dialect, never a hand edit.
//! `PRELOOP_BLESS=1 cargo test -p preloop-hooks --test all readme_files`
//! rewrites both.

use preloop_hooks::context::Scope;
use preloop_hooks::dialect;
use preloop_shared::registry::Does;

const BEGIN: &str =
    "<!-- dialects:files begin (generated from install/src/dialect/: install/tests/suite/readme_files.rs) -->\n";
const END: &str = "<!-- dialects:files end -->";

/// The events a dialect's hooks are on, in registry order: each hook-file
/// event once, the idle-wake watcher where it rides one of them, and apart
/// where our plugin runs it on the harness's idle.
fn events(d: &dyn dialect::Dialect) -> String {
    let hooks: Vec<_> = d.harness().hooks().collect();
    let mut out: Vec<String> = Vec::new();
    for h in hooks.iter().filter(|h| h.does != Does::Watch) {
        if out.iter().any(|e| e.split(' ').next() == Some(h.on)) {
            continue;
        }
        let watched = hooks.iter().any(|w| w.does == Does::Watch && w.on == h.on);
        out.push(if watched { format!("{} (+ the idle-wake watcher)", h.on) } else { h.on.to_string() });
    }
    for w in hooks.iter().filter(|w| w.does == Does::Watch) {
        if !out.iter().any(|e| e.split(' ').next() == Some(w.on)) {
            out.push(format!("the idle-wake watcher on `{}` (run by our plugin)", w.on));
        }
    }
    out.join(", ")
}

/// The table, one row per dialect in registry order.
fn table() -> String {
    let mut out =
        String::from("| harness | file (user scope) | file (`--scope project`) | events |\n|---|---|---|---|\n");
    for d in dialect::all() {
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            d.harness().name(),
            d.files_doc().of(Scope::User),
            d.files_doc().of(Scope::Project),
            events(d)
        ));
    }
    out
}

/// README's `install` usage row with the registry's slugs in its
/// `--harness` list (`cli.rs`'s `every_harness_list_is_the_registrys` holds
/// every such list to the registry; this test writes this one).
fn with_registry_slugs(text: &str) -> String {
    const START: &str = "| `install [--harness ";
    const STOP: &str = "\\|all]";
    let Some(b) = text.find(START).map(|i| i + START.len()) else {
        panic!("install/README.md has no `install [--harness …|all]` row")
    };
    let Some(e) = text[b..].find(STOP).map(|i| i + b) else {
        panic!("install/README.md's `install --harness` list does not end in `\\|all]`")
    };
    let slugs: Vec<&str> = preloop_shared::Harness::all().map(|h| h.slug()).collect();
    format!("{}{}{}", &text[..b], slugs.join("\\|"), &text[e..])
}

#[test]
fn readme_files_table_follows_the_dialects() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let (Some(b), Some(e)) = (text.find(BEGIN), text.find(END)) else {
        panic!("install/README.md has no dialects:files block ({BEGIN:?} … {END:?})")
    };
    let want = with_registry_slugs(&format!("{}{}{}", &text[..b + BEGIN.len()], table(), &text[e..]));
    if text != want {
        assert!(
            preloop_testkit::golden::blessing(),
            "install/README.md: the table of files is not the dialects' or the `install --harness` list not the registry's (PRELOOP_BLESS=1 cargo test -p preloop-hooks --test all readme_files rewrites them)"
        );
        std::fs::write(&path, want).unwrap();
    }
    for d in dialect::all() {
        for scope in [Scope::User, Scope::Project] {
            let doc = d.files_doc().of(scope);
            assert!(!doc.is_empty() && !doc.contains('|') && !doc.contains('\n'), "{}: {doc:?}", d.slug());
        }
    }
}
