//! Install/uninstall round trips on realistic existing configs: everything
//! that is not ours survives byte for byte, a second install changes
//! nothing, uninstall removes exactly what install added, a corrupt file is
//! refused.

use crate::common::*;
use preloop_hooks::codex_trust;
use preloop_hooks::edit;
use preloop_hooks::hook_rows;
use preloop_hooks::install::{self, Action, Ctx, Scope};
use preloop_shared::Harness;
use serde_json::Value;
use std::path::Path;

const CLAUDE_SETTINGS: &str = r#"{
    "$schema": "https://json.schemastore.org/claude-code-settings.json",
    "model": "opus",
    "permissions": {
        "allow": ["Bash(npm test:*)", "Read(~/.zshrc)"],
        "deny": []
    },
    "hooks": {
        "PreToolUse": [
            {
                "matcher": "Bash",
                "hooks": [
                    { "type": "command", "command": "~/.claude/hooks/guard.sh", "timeout": 5 }
                ]
            }
        ],
        "Notification": [
            {"hooks": [{"type": "command", "command": "notify-send 'Claude' \"$MSG\""}]}
        ],
        "Stop": [
            {"hooks": [{"type": "command", "command": "/opt/other-tool/bin/other-hook stop"}]}
        ]
    },
    "statusLine": {"type": "command", "command": "~/.claude/statusline.sh"},
    "futureKey": {"nested": [1, 2.50, true, null, "ü ☃ \u00e9"]}
}
"#;

const CODEX_HOOKS: &str = r#"{
  "description": "team hooks",
  "hooks": {
    "PreToolUse": [
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "/usr/local/bin/audit-shell", "timeout": 30, "statusMessage": "auditing"}]}
    ],
    "PostToolUse": [
      {"hooks": [{"type": "command", "command": "/usr/local/bin/log-tool"}]}
    ]
  }
}"#;

const CODEX_CONFIG: &str = r#"# Codex config, hand written
model = "o3"            # my favourite
approval_policy = "on-request"

[profiles.fast]
model = "o4-mini"

# MCP servers
[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]   # keep this comment

[projects."/work/thing"]
trust_level = "trusted"
"#;

const CURSOR_HOOKS: &str = "{\n\t\"version\": 1,\n\t\"hooks\": {\n\t\t\"afterFileEdit\": [{\"command\": \"./hooks/format.sh\"}],\n\t\t\"stop\": [{\"command\": \"/opt/notify/bin/ping\", \"timeout\": 5}]\n\t}\n}\n";

fn plan(ctx: &Ctx, h: Harness, action: Action) -> install::Plan {
    install::plan(ctx, h, Scope::User, action).unwrap()
}

fn run(ctx: &Ctx, h: Harness, action: Action) -> install::Plan {
    let p = plan(ctx, h, action);
    install::apply(ctx, &p).unwrap();
    p
}

fn parse(p: &Path) -> Value {
    serde_json::from_str(&read(p)).unwrap()
}

fn ours(ctx: &Ctx, v: &Value, h: Harness) -> usize {
    edit::our_entries(v, &edit::Owner::new(h, &ctx.bin_dir)).len()
}

fn owner(ctx: &Ctx) -> edit::Owner<'_> {
    edit::Owner::new(Harness::Codex, &ctx.bin_dir)
}

/// Install, check, install again (no change), uninstall: the file is back
/// byte for byte.
fn round_trip(ctx: &Ctx, h: Harness, files: &[(&Path, &str)]) {
    for (p, t) in files {
        write(p, t);
    }
    let first = run(ctx, h, Action::Install);
    assert!(first.edits.iter().any(|e| e.changed()), "{h:?}: the first install changes something");
    assert_eq!(first.entries, hook_rows::hooks_for(h).count());
    let second = plan(ctx, h, Action::Install);
    for e in &second.edits {
        assert!(
            !e.changed(),
            "{h:?}: a second install must change nothing, but {} would change:\n{}",
            e.path.display(),
            install::diff(ctx, e)
        );
    }
    run(ctx, h, Action::Uninstall);
    for (p, t) in files {
        assert_eq!(read(p), *t, "{h:?}: uninstall must restore {} byte for byte", p.display());
    }
    let again = plan(ctx, h, Action::Uninstall);
    assert!(again.edits.iter().all(|e| !e.changed()), "a second uninstall changes nothing");
}

#[test]
fn claude_code_round_trip_keeps_user_hooks_and_formatting() {
    let t = TempDir::new("claude");
    let ctx = ctx(t.path());
    let settings = ctx.hooks_file(Harness::ClaudeCode, Scope::User);
    write(&settings, CLAUDE_SETTINGS);
    run(&ctx, Harness::ClaudeCode, Action::Install);
    let text = read(&settings);
    // The user's entries and unknown keys are untouched, in order, verbatim.
    for frag in [
        "{ \"type\": \"command\", \"command\": \"~/.claude/hooks/guard.sh\", \"timeout\": 5 }",
        "{\"hooks\": [{\"type\": \"command\", \"command\": \"notify-send 'Claude' \\\"$MSG\\\"\"}]}",
        "\"futureKey\": {\"nested\": [1, 2.50, true, null, \"ü ☃ \\u00e9\"]}",
    ] {
        assert!(text.contains(frag), "missing {frag} in\n{text}");
    }
    let v = parse(&settings);
    assert_eq!(v["hooks"]["PreToolUse"][0]["matcher"], "Bash", "the user's group stays first");
    let ours = &v["hooks"]["PreToolUse"][1]["hooks"][0];
    let bin = ctx.bin_dir.join("preloop-claude-code-pre-tool-use");
    assert_eq!(ours["command"], format!("'{}'", bin.display()), "absolute, quoted (the path has a space)");
    assert_eq!(ours["timeout"], 340);
    assert_eq!(
        v["hooks"]["Stop"].as_array().unwrap().len(),
        3,
        "the other tool's Stop hook stays, then our Stop hook and the idle-wake watcher"
    );
    assert_eq!(v["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"], 3);
    // New entries take the file's 4-space indentation.
    assert!(text.contains("\n        \"SessionStart\": [\n            {\n                \"hooks\": ["), "{text}");
    // The command runs: the shell quoting is right (install links it to the executable).
    preloop_hooks::links::link_all(&ctx.exe(), &ctx.bin_dir).unwrap();
    let status =
        std::process::Command::new("/bin/sh").arg("-c").arg(ours["command"].as_str().unwrap()).status().unwrap();
    assert!(status.success());
    run(&ctx, Harness::ClaudeCode, Action::Uninstall);
    assert_eq!(read(&settings), CLAUDE_SETTINGS);
    round_trip(&ctx, Harness::ClaudeCode, &[(&settings, CLAUDE_SETTINGS)]);
}

#[test]
fn compact_and_crlf_files_round_trip() {
    let t = TempDir::new("compact");
    let ctx = ctx(t.path());
    let settings = ctx.hooks_file(Harness::ClaudeCode, Scope::User);
    round_trip(
        &ctx,
        Harness::ClaudeCode,
        &[(&settings, r#"{"model":"opus","hooks":{"Stop":[{"hooks":[{"type":"command","command":"x"}]}]}}"#)],
    );
    round_trip(&ctx, Harness::ClaudeCode, &[(&settings, "{\r\n  \"model\": \"opus\"\r\n}\r\n")]);
    round_trip(&ctx, Harness::ClaudeCode, &[(&settings, "{}\n")]);
    round_trip(&ctx, Harness::ClaudeCode, &[(&settings, "{\"hooks\": {\"Stop\": [{\"hooks\": []}]}}")]);
}

#[test]
fn fresh_claude_file_is_created_and_removed() {
    let t = TempDir::new("fresh");
    let ctx = ctx(t.path());
    let settings = ctx.hooks_file(Harness::ClaudeCode, Scope::User);
    run(&ctx, Harness::ClaudeCode, Action::Install);
    assert!(read(&settings).ends_with("}\n"));
    assert_eq!(
        ours(&ctx, &parse(&settings), Harness::ClaudeCode),
        7,
        "5 hooks and the watcher on SessionStart and Stop"
    );
    run(&ctx, Harness::ClaudeCode, Action::Uninstall);
    // Install created it and it held only our hooks: removed, with no backup
    // (nothing of the user's was in it; newcomer-ux-3 N16).
    assert!(!settings.exists(), "a file that held only our hooks is removed");
    let backups: Vec<_> = std::fs::read_dir(settings.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    assert!(backups.is_empty(), "{backups:?}");
}

/// Installing `harness` (user scope) over `path` holding `text` is refused,
/// and the file is left as it was. The error.
fn refused_over(ctx: &Ctx, harness: Harness, path: &Path, text: &str) -> String {
    write(path, text);
    let err = install::plan(ctx, harness, Scope::User, Action::Install).unwrap_err().to_string();
    assert_eq!(read(path), text);
    err
}

#[test]
fn corrupt_files_are_refused_and_left_alone() {
    let t = TempDir::new("corrupt");
    let ctx = ctx(t.path());
    let settings = ctx.hooks_file(Harness::ClaudeCode, Scope::User);
    let bad = "{\n  \"model\": \"opus\",\n  \"hooks\": {,}\n}\n";
    let err = refused_over(&ctx, Harness::ClaudeCode, &settings, bad);
    // Named as doctor names it, with ~ (newcomer 4, P14).
    assert!(err.starts_with("~/.claude/settings.json: ") && err.contains("line 3"), "{err}");
    // Not an object, hooks not an object: refused too.
    for bad in ["[1, 2]", "{\"hooks\": [1]}", "{\"hooks\": {\"Stop\": {}}}"] {
        write(&settings, bad);
        assert!(install::plan(&ctx, Harness::ClaudeCode, Scope::User, Action::Install).is_err(), "{bad}");
        assert_eq!(read(&settings), bad);
    }
    // A corrupt config.toml stops the Codex install before anything is written.
    let cfg = preloop_hooks::dialect::codex_config(&ctx);
    write(&cfg, "model = \"o3\"\n[broken\n");
    let err = install::plan(&ctx, Harness::Codex, Scope::User, Action::Install).unwrap_err().to_string();
    assert!(err.contains("config.toml"), "{err}");
    assert!(!ctx.hooks_file(Harness::Codex, Scope::User).exists());
    // Cursor: an unknown version is refused.
    let cursor = ctx.hooks_file(Harness::Cursor, Scope::User);
    write(&cursor, "{\"version\": 2, \"hooks\": {}}");
    assert!(install::plan(&ctx, Harness::Cursor, Scope::User, Action::Install).is_err());
}

#[test]
fn stale_entries_are_updated_in_place_and_duplicates_removed() {
    let t = TempDir::new("stale");
    let ctx = ctx(t.path());
    let settings = ctx.hooks_file(Harness::ClaudeCode, Scope::User);
    // An older install from another directory, a duplicate, and one with a
    // matcher (it would not fire for every tool).
    let old = r#"{
  "hooks": {
    "Stop": [
      {"hooks": [{"type": "command", "command": "/old/bin/preloop-claude-code-stop", "timeout": 10}]},
      {"hooks": [{"type": "command", "command": "/old/bin/preloop-claude-code-stop"}]}
    ],
    "PreToolUse": [
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "mine"}, {"type": "command", "command": "/old/preloop-claude-code-pre-tool-use"}]}
    ]
  }
}"#;
    write(&settings, old);
    run(&ctx, Harness::ClaudeCode, Action::Install);
    let v = parse(&settings);
    let stop = v["hooks"]["Stop"].as_array().unwrap();
    assert_eq!(stop.len(), 2, "the duplicate is gone (ours and the watcher remain): {stop:?}");
    assert_eq!(stop[1]["hooks"][0]["asyncRewake"], true);
    assert_eq!(stop[0]["hooks"][0]["command"], format!("'{}'", ctx.bin_dir.join("preloop-claude-code-stop").display()));
    let pre = v["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(
        pre[0]["hooks"].as_array().unwrap().len(),
        2,
        "a same-named program under the user's matcher, outside our bin dir, is the user's: {pre:?}"
    );
    assert_eq!(pre[0]["hooks"][0]["command"], "mine");
    assert_eq!(pre.len(), 2);
    assert_eq!(ours(&ctx, &v, Harness::ClaudeCode), 7);
    // One of ours (in our bin dir) under a matcher is moved out: it would not fire for every tool.
    let cmd = edit::shell_quote(&ctx.bin_dir.join("preloop-claude-code-pre-tool-use").display().to_string());
    let inside = serde_json::json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "mine"}, {"type": "command", "command": cmd}]}]}});
    write(&settings, &serde_json::to_string_pretty(&inside).unwrap());
    run(&ctx, Harness::ClaudeCode, Action::Install);
    let v = parse(&settings);
    let pre = v["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(pre[0]["hooks"].as_array().unwrap().len(), 1, "ours left the user's matcher group: {pre:?}");
    assert_eq!(pre.len(), 2);
}

#[test]
fn codex_round_trip_with_trust_and_comments() {
    let t = TempDir::new("codex");
    let ctx = ctx(t.path());
    let hooks = ctx.hooks_file(Harness::Codex, Scope::User);
    let cfg = preloop_hooks::dialect::codex_config(&ctx);
    write(&hooks, CODEX_HOOKS);
    // The user already trusted their own hook.
    let key_path = codex_trust::canonical_dir(hooks.parent().unwrap()).join("hooks.json");
    let user_keys = codex_trust::hook_keys(&key_path, &serde_json::from_str(CODEX_HOOKS).unwrap(), &owner(&ctx));
    let user_pre = user_keys.iter().find(|k| k.event == "PreToolUse").unwrap();
    let config = format!("{CODEX_CONFIG}\n[hooks.state.\"{}\"]\ntrusted_hash = \"{}\"\n", user_pre.key, user_pre.hash);
    write(&cfg, &config);
    run(&ctx, Harness::Codex, Action::Install);
    let after = read(&cfg);
    assert!(after.starts_with(&config), "config.toml keeps every line, comment and order:\n{after}");
    let doc = parse(&hooks);
    assert_eq!(doc.as_object().unwrap().keys().collect::<Vec<_>>(), ["description", "hooks"], "no extra top-level key");
    let trusted = codex_trust::trusted_hashes(&after);
    for k in codex_trust::hook_keys(&key_path, &doc, &owner(&ctx)) {
        if k.ours {
            assert_eq!(trusted.get(&k.key), Some(&k.hash), "{} trusted", k.key);
        }
    }
    assert_eq!(codex_trust::hook_keys(&key_path, &doc, &owner(&ctx)).iter().filter(|k| k.ours).count(), 6);
    assert_eq!(trusted.get(&user_pre.key), Some(&user_pre.hash), "the user's own trust stays");
    run(&ctx, Harness::Codex, Action::Uninstall);
    assert_eq!(read(&hooks), CODEX_HOOKS);
    assert_eq!(read(&cfg), config);
    round_trip(&ctx, Harness::Codex, &[(&hooks, CODEX_HOOKS), (&cfg, &config)]);
}

#[test]
fn codex_user_hook_added_after_ours_keeps_its_trust_on_uninstall() {
    let t = TempDir::new("codex-shift");
    let ctx = ctx(t.path());
    let hooks = ctx.hooks_file(Harness::Codex, Scope::User);
    run(&ctx, Harness::Codex, Action::Install);
    // The user adds a Stop group after ours and trusts it (as Codex's TUI would).
    let mut doc = parse(&hooks);
    doc["hooks"]["Stop"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"hooks": [{"type": "command", "command": "/usr/bin/true"}]}));
    write(&hooks, &serde_json::to_string_pretty(&doc).unwrap());
    let key_path = codex_trust::canonical_dir(hooks.parent().unwrap()).join("hooks.json");
    let user = codex_trust::hook_keys(&key_path, &doc, &owner(&ctx)).into_iter().find(|k| !k.ours).unwrap();
    assert!(user.key.ends_with(":stop:1:0"));
    let cfg = preloop_hooks::dialect::codex_config(&ctx);
    write(&cfg, &format!("{}\n[hooks.state.\"{}\"]\ntrusted_hash = \"{}\"\n", read(&cfg), user.key, user.hash));
    run(&ctx, Harness::Codex, Action::Uninstall);
    let left = parse(&hooks);
    let moved = codex_trust::hook_keys(&key_path, &left, &owner(&ctx)).into_iter().find(|k| !k.ours).unwrap();
    assert!(moved.key.ends_with(":stop:0:0"), "{}", moved.key);
    let trusted = codex_trust::trusted_hashes(&read(&cfg));
    assert_eq!(trusted.get(&moved.key), Some(&moved.hash), "the moved hook is still trusted: {trusted:?}");
    assert!(trusted.keys().all(|k| !k.contains("session_start")), "our trust entries are gone: {trusted:?}");
}

#[test]
fn codex_refuses_a_hooks_json_codex_would_reject() {
    let t = TempDir::new("codex-extra");
    let ctx = ctx(t.path());
    let hooks = ctx.hooks_file(Harness::Codex, Scope::User);
    let text = "{\"version\": 1, \"hooks\": {}}";
    let err = refused_over(&ctx, Harness::Codex, &hooks, text);
    assert!(err.contains("version"), "{err}");
}

#[test]
fn cursor_round_trip_and_empty_file_is_kept() {
    let t = TempDir::new("cursor");
    let ctx = ctx(t.path());
    let path = ctx.hooks_file(Harness::Cursor, Scope::User);
    round_trip(&ctx, Harness::Cursor, &[(&path, CURSOR_HOOKS)]);
    write(&path, CURSOR_HOOKS);
    run(&ctx, Harness::Cursor, Action::Install);
    let v = parse(&path);
    let events: Vec<&String> = v["hooks"].as_object().unwrap().keys().collect();
    for e in &events {
        assert!(
            preloop_hooks::dialect::of(Harness::Cursor).known_events().unwrap().contains(&e.as_str()),
            "{e} is not a Cursor event"
        );
    }
    assert_eq!(v["hooks"]["stop"].as_array().unwrap().len(), 2);
    // The one loop_limit the adapter checks loop_count against.
    assert_eq!(v["hooks"]["stop"][1]["loop_limit"], preloop_shared::registry::CURSOR_LOOP_LIMIT);
    assert!(read(&path).contains("\n\t\t\"sessionStart\": ["), "tabs kept for new entries:\n{}", read(&path));
    // A file we created: uninstall leaves {"version":1,"hooks":{}}, never deletes it.
    std::fs::remove_file(&path).unwrap();
    run(&ctx, Harness::Cursor, Action::Install);
    assert_eq!(parse(&path)["version"], 1);
    run(&ctx, Harness::Cursor, Action::Uninstall);
    assert_eq!(parse(&path), serde_json::json!({"version": 1, "hooks": {}}));
    // Uninstall where nothing was installed creates nothing.
    let t2 = TempDir::new("cursor-none");
    let ctx2 = crate::common::ctx(t2.path());
    let p = install::plan(&ctx2, Harness::Cursor, Scope::User, Action::Uninstall).unwrap();
    assert!(p.edits.iter().all(|e| !e.changed()));
}

#[test]
fn project_scope_writes_project_files() {
    let t = TempDir::new("project");
    let ctx = ctx(t.path());
    for h in Harness::all() {
        run(&ctx, h, Action::Install);
    }
    let _ = install::plan(&ctx, Harness::Codex, Scope::Project, Action::Install).unwrap();
    for (h, p) in [
        (Harness::ClaudeCode, ctx.cwd.join(".claude/settings.json")),
        (Harness::Codex, ctx.cwd.join(".codex/hooks.json")),
        (Harness::Cursor, ctx.cwd.join(".cursor/hooks.json")),
    ] {
        let plan = install::plan(&ctx, h, Scope::Project, Action::Install).unwrap();
        assert_eq!(plan.edits[0].path, p);
        install::apply(&ctx, &plan).unwrap();
        assert_eq!(ours(&ctx, &parse(&p), h), hook_rows::hooks_for(h).count());
    }
    let codex = install::plan(&ctx, Harness::Codex, Scope::Project, Action::Install).unwrap();
    assert!(codex.notes.iter().any(|n| n.contains("trusted project")), "{:?}", codex.notes);
}

#[test]
fn symlinked_config_is_written_through() {
    let t = TempDir::new("symlink");
    let ctx = ctx(t.path());
    let real = t.path().join("dotfiles/claude-settings.json");
    write(&real, "{\"model\": \"opus\"}\n");
    let settings = ctx.hooks_file(Harness::ClaudeCode, Scope::User);
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&real, &settings).unwrap();
    run(&ctx, Harness::ClaudeCode, Action::Install);
    assert!(std::fs::symlink_metadata(&settings).unwrap().file_type().is_symlink(), "the link stays");
    assert_eq!(ours(&ctx, &parse(&real), Harness::ClaudeCode), 7);
}

#[test]
fn timeouts_follow_the_settings() {
    let t = TempDir::new("timeouts");
    let mut ctx = ctx(t.path());
    ctx.settings.permission_timeout_secs = 500;
    run(&ctx, Harness::ClaudeCode, Action::Install);
    let v = parse(&ctx.hooks_file(Harness::ClaudeCode, Scope::User));
    assert_eq!(v["hooks"]["PreToolUse"][0]["hooks"][0]["timeout"], 530);
    // Changing the setting and installing again updates the entry in place.
    ctx.settings.permission_timeout_secs = 310;
    let p = install::plan(&ctx, Harness::ClaudeCode, Scope::User, Action::Install).unwrap();
    assert!(p.edits[0].changed());
    install::apply(&ctx, &p).unwrap();
    let v = parse(&ctx.hooks_file(Harness::ClaudeCode, Scope::User));
    assert_eq!(v["hooks"]["PreToolUse"].as_array().unwrap().len(), 1);
    assert_eq!(v["hooks"]["PreToolUse"][0]["hooks"][0]["timeout"], 340);
}
