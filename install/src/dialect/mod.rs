//! One dialect per harness: everything the installer and `doctor` must know
//! about one harness's own configuration, in one file each.
//!
//! A dialect says where the harness reads hooks from in each scope, how
//! its hook file is laid out and what one entry of ours looks like, whether
//! it takes comments, which other files change with it (Codex's trust in
//! `config.toml`), whether it loads a project's config in this folder, the
//! settings that switch its hooks off, the checks an entry of ours must pass,
//! and the known limits `doctor --verbose` lists. The facts the hooks share
//! with the installer (events, binaries, timeouts, the version we proved)
//! stay in the registry (`preloop_shared::registry`); a dialect reads them
//! from there.
//!
//! `install`, `uninstall` and `doctor` iterate [`all`] or look one up with
//! [`of`]; both, and the module list, are written from the registry's
//! blocks, so adding a harness is one file here (named as its registry
//! block's `dialect`) and nothing else in this module. Still outside the
//! dialects: Codex's trust store (`crate::codex_trust`, whose event keys
//! `doctor` reads).
//!
//! The [`Dialect`] trait and the types it speaks live in `api.rs`, which
//! each dialect file imports; this file only lists the dialects and
//! re-exports the trait's types, so no dialect depends on it.

mod api;
mod plugin;

use preloop_shared::Harness;

pub use api::{
    Concern, Dialect, EnvFacts, FilesDoc, FolderTrust, Layout, Trust, TrustState, first_version, version_by_running,
};
pub use codex::codex_config;

/// The dialect modules (`<dialect>.rs`, one per registry block), [`ALL`]
/// and [`of`], written from the registry (`preloop_shared::for_each_harness!`):
/// each dialect is the unit struct named as its [`Harness`] variant in the
/// module the registry block names.
macro_rules! dialects {
    ($($h:ident $krate:ident $module:ident),+) => {
        $(mod $module;)+

        /// Every dialect, in registry order.
        pub static ALL: [&dyn Dialect; Harness::ALL.len()] = [$(&$module::$h),+];

        /// The dialect of `h` (one arm per registry block).
        pub fn of(h: Harness) -> &'static dyn Dialect {
            match h {
                $(Harness::$h => &$module::$h,)+
            }
        }
    };
}
preloop_shared::for_each_harness!(dialects);

/// The dialects, in registry order.
pub fn all() -> impl Iterator<Item = &'static dyn Dialect> {
    ALL.iter().copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{Ctx, Scope};
    use crate::edit::Entry;
    use crate::hook_rows;
    use preloop_shared::config::Env;
    use preloop_shared::config::Settings;
    use serde_json::json;
    use std::path::PathBuf;

    fn ctx(env: &[(&str, &str)]) -> Ctx {
        Ctx {
            env: Env::of(env),
            home: "/h".into(),
            cwd: "/p".into(),
            bin_dir: "/b".into(),
            settings: Settings::default(),
            preloop_home: "/h/.preloop".into(),
        }
    }

    #[test]
    fn dialects_cover_the_registry_in_its_order() {
        let ours: Vec<Harness> = all().map(|d| d.harness()).collect();
        assert_eq!(ours, Harness::all().collect::<Vec<_>>());
        for h in Harness::all() {
            assert_eq!(of(h).harness(), h);
        }
    }

    /// A dialect whose hook file is ours alone writes it in its own
    /// format: every hook of its harness is in the file it makes, and an
    /// empty wish makes nothing.
    #[test]
    fn own_file_dialects_write_their_file() {
        let c = ctx(&[]);
        for d in all().filter(|d| d.layout() == Layout::OwnFile) {
            let desired = crate::install::desired(&c, d.harness());
            assert!(!desired.is_empty(), "{:?}", d.harness());
            let text = d.own_file(&c, &desired);
            for hook in hook_rows::hooks_for(d.harness()) {
                assert!(text.contains(hook.binary), "{:?}: {} is not in {text}", d.harness(), hook.binary);
            }
            assert_eq!(d.own_file(&c, &Vec::new()), "", "{:?}", d.harness());
        }
    }

    #[test]
    fn user_and_project_files_follow_each_harness_home() {
        let plain = ctx(&[]);
        let moved = ctx(&[
            ("CLAUDE_CONFIG_DIR", "/c"),
            ("CODEX_HOME", "/x"),
            ("GEMINI_CLI_HOME", "/g"),
            ("COPILOT_HOME", "/k"),
            ("PI_CODING_AGENT_DIR", "/q"),
            ("XDG_CONFIG_HOME", "/o"),
        ]);
        let user = |c: &Ctx| all().map(|d| d.hooks_file(c, Scope::User)).collect::<Vec<_>>();
        let p = |s: &str| PathBuf::from(s);
        assert_eq!(
            user(&plain),
            [
                p("/h/.claude/settings.json"),
                p("/h/.codex/hooks.json"),
                p("/h/.cursor/hooks.json"),
                p("/h/.gemini/settings.json"),
                p("/h/.copilot/hooks/preloop.json"),
                p("/h/.pi/agent/extensions/preloop.json"),
                p("/h/.config/opencode/plugins/preloop.json")
            ]
        );
        assert_eq!(
            user(&moved),
            [
                p("/c/settings.json"),
                p("/x/hooks.json"),
                p("/h/.cursor/hooks.json"),
                p("/g/.gemini/settings.json"),
                p("/k/hooks/preloop.json"),
                p("/q/extensions/preloop.json"),
                p("/o/opencode/plugins/preloop.json")
            ]
        );
        for d in all() {
            let project = d.hooks_file(&moved, Scope::Project);
            assert!(project.starts_with("/p"), "{project:?}");
        }
        // Codex's trust lives beside its hooks in CODEX_HOME, for either scope.
        assert_eq!(of(Harness::Codex).files(&moved, Scope::Project), [p("/p/.codex/hooks.json"), p("/x/config.toml")]);
        assert_eq!(of(Harness::Cursor).files(&moved, Scope::User).len(), 1);
    }

    #[test]
    fn entries_speak_each_harness_dialect() {
        let s = Settings::default();
        for d in all() {
            for def in hook_rows::hooks_for(d.harness()) {
                let t = hook_rows::timeout_value(def, &s);
                let e = d.entry(def, "/b/x".into(), t);
                let (cmd, timeout) = match (d.layout(), d.harness()) {
                    (Layout::OwnFile, Harness::Copilot) => ("bash", "timeoutSec"),
                    _ => ("command", "timeout"),
                };
                assert_eq!((e[cmd].as_str(), e[timeout].as_u64()), (Some("/b/x"), Some(t)), "{}", def.binary);
                if let Some(known) = d.known_events() {
                    assert!(known.contains(&def.on), "{}", def.on);
                }
            }
        }
        let def = |h: Harness, on: &str| hook_rows::hooks_for(h).find(|d| d.on == on).unwrap();
        let cursor_stop = of(Harness::Cursor).entry(def(Harness::Cursor, "stop"), "c".into(), 20);
        assert_eq!(cursor_stop["loop_limit"], json!(preloop_shared::registry::CURSOR_LOOP_LIMIT));
        assert!(
            of(Harness::Cursor).entry(def(Harness::Cursor, "sessionStart"), "c".into(), 20).get("loop_limit").is_none()
        );
        let gemini = of(Harness::Gemini).entry(def(Harness::Gemini, "AfterTool"), "c".into(), 20_000);
        assert_eq!(gemini["name"], json!("preloop-gemini-after-tool"));
        // Pi's extension runs `preloop-hooks hook <command>` beside the link.
        let pi = of(Harness::Pi).entry(def(Harness::Pi, "tool_call"), "/b/preloop-pi-tool-call".into(), 600_000);
        assert_eq!(pi["argv"], json!(["/b/preloop-hooks", "hook", "preloop-pi-tool-call"]));
        let oc =
            of(Harness::OpenCode).entry(def(Harness::OpenCode, "dispose"), "/b/preloop-opencode-dispose".into(), 9);
        assert_eq!(oc["argv"], json!(["/b/preloop-hooks", "hook", "preloop-opencode-dispose"]));
        let codex = of(Harness::Codex).entry(def(Harness::Codex, "SessionStart"), "c".into(), 20);
        assert_eq!(codex["additionalContextLimit"], json!(preloop_shared::registry::CODEX_CONTEXT_LIMIT_TOKENS));
        assert!(
            of(Harness::Codex)
                .entry(def(Harness::Codex, "Stop"), "c".into(), 20)
                .get("additionalContextLimit")
                .is_none()
        );
    }

    #[test]
    fn only_gemini_takes_comments_and_only_codex_restricts_top_level_keys() {
        let comments: Vec<Harness> = all().filter(|d| d.comments_allowed()).map(|d| d.harness()).collect();
        assert_eq!(comments, [Harness::Gemini]);
        let doc = json!({"hooks": {}, "description": "x", "extra": 1});
        for d in all() {
            let want: Vec<String> = if d.harness() == Harness::Codex { vec!["extra".into()] } else { Vec::new() };
            assert_eq!(d.rejected_keys(&doc), want, "{}", d.slug());
        }
    }

    #[test]
    fn switches_that_turn_the_hooks_off() {
        let none: &[Entry] = &[];
        let off = json!({"disableAllHooks": true});
        assert_eq!(of(Harness::ClaudeCode).switched_off("f", &off, none, &[]).len(), 1);
        assert!(of(Harness::ClaudeCode).switched_off("f", &json!({}), none, &[]).is_empty());
        assert!(of(Harness::Cursor).switched_off("f", &off, none, &[]).is_empty());
        let gemini = json!({"hooksConfig": {"enabled": false, "disabled": ["preloop-gemini-stop", "theirs"]}});
        let ours = Entry {
            event: "AfterAgent".into(),
            group: Some(0),
            index: 0,
            matcher: false,
            command: "/b/preloop-gemini-stop".into(),
            value: json!({"name": "preloop-gemini-stop"}),
        };
        let notes = of(Harness::Gemini).switched_off("f", &gemini, &[ours], &[]);
        assert_eq!(
            notes.iter().map(|n| n.what.as_str()).collect::<Vec<_>>(),
            [
                "gemini: f sets hooksConfig.enabled to false, so Gemini CLI runs no hooks",
                "gemini: f lists our hooks in hooksConfig.disabled (preloop-gemini-stop)"
            ]
        );
        assert!(notes.iter().all(|n| n.problem));
        let copilot =
            of(Harness::Copilot).switched_off("f", &json!({}), none, &[("s".into(), off), ("c".into(), json!({}))]);
        assert_eq!(copilot.len(), 1);
        assert!(copilot[0].what.starts_with("copilot: s sets"));
    }

    #[test]
    fn version_words() {
        assert_eq!(first_version("2.1.328 (Claude Code)\n"), "2.1.328");
        assert_eq!(first_version("codex-cli 0.169.0"), "0.169.0");
        assert_eq!(first_version("GitHub Copilot CLI 1.0.102."), "1.0.102");
        assert_eq!(first_version("dev build"), "dev build");
    }
}
