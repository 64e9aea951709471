//! The Cursor adapter: pure functions from a Cursor hook's stdin JSON to a
//! harness-neutral [`Input`], and from an [`Outcome`] to the typed,
//! flat snake_case [`Output`] that event accepts. Everything else is the
//! shared engine; events, binaries and carriers are the registry's.
//!
//! No Cursor binary was run for this adapter: it rests on
//! docs/contracts/cursor.md (docs, third-party measurements) and the public
//! captures in `fixtures/cursor/`. Every choice below is argued, with its
//! source tag, in `hooks/cursor/README.md`.
//!
//! | event | server calls | carrier | output | neutral |
//! |---|---|---|---|---|
//! | sessionStart | session-start; notes/pending `session_start` (CLI only) | `additional_context` | `env` + context | `{}` |
//! | beforeSubmitPrompt | session-start with `first_prompt` | none (claims nothing) | `{"continue": true}` | same |
//! | beforeShellExecution | permission-check (`permission_request`, tool `Shell`) | none: a claimed note is spooled | `permission` allow / deny + messages | `{"permission": "allow"}`; deny by the fail policy where a server decides |
//! | beforeMCPExecution | permission-check (`permission_request`) | none: spooled | as above | as above |
//! | preToolUse | permission-check (`pre_tool_use`) | `additional_context` (allow and deny) | `permission` allow / deny (+ messages) | `{"permission": "allow"}` (fail policy where a server decides) |
//! | stop | notes/pending `stop` (completed, `loop_count` < `loop_limit`, rescues < 3) | `followup_message` | follow-up or `{}` | `{}` |
//! | sessionEnd | notes/ack `spool_dropped`; session-end | none | `{}` | `{}` |

// Shipped code never panics on a value it did not check: an `unwrap` or
// `expect` outside tests is refused, and each true invariant is allowed by
// name where it is (docs/adding-a-harness.md, "Code rules").
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use preloop_shared::adapter::{check_event_name, deny_reason_verbatim};
use preloop_shared::config::Env;
use preloop_shared::flow::{Carry, Input, InputKind, Outcome};
use preloop_shared::json::{non_blank, str_field};
use preloop_shared::registry::{CURSOR_LOOP_LIMIT, def_of};
use preloop_shared::runner::{Adapter, Parsed};
use preloop_shared::wire::Decision;
use serde_json::{Value, json};

pub mod output;

pub use output::Output;
pub use preloop_shared::registry::event::Cursor as Event;

/// The environment variable `sessionStart` exports to the session's later
/// hooks (and, where Cursor passes it on, to the processes the run starts).
pub const PARENT_SESSION_ENV: &str = "PRELOOP_PARENT_SESSION_ID";

/// The documented limit of Cursor headless runs, for `doctor` and the docs.
pub const HEADLESS_STOP_LIMIT: &str = "Cursor headless runs (cursor-agent -p / --print) never fire the stop hook, so a note that arrives after the run's last tool call cannot be rescued: it stays pending until sessionEnd, which marks it undeliverable (session_ended). It is never reported as delivered. Interactive cursor-agent and the IDE fire stop; notes addressed to the agent rather than the session wait for its next run.";

/// The Cursor adapter.
pub struct Cursor;

impl Adapter for Cursor {
    type Event = Event;
    type Output = Output;

    fn parse(event: Event, stdin: &Value, env: &Env) -> Result<Parsed, String> {
        parse_with(event, stdin, env.get("CURSOR_PROJECT_DIR").as_deref())
    }
    fn render(event: Event, outcome: &Outcome) -> Option<Output> {
        Some(render(event, outcome))
    }
    fn neutral(event: Event) -> Option<Output> {
        Some(neutral(event))
    }
}

/// Run one hook binary; returns its exit code.
pub fn main(event: Event) -> i32 {
    preloop_shared::entry::main::<Cursor>(event)
}

/// The answer with no opinion (and where nothing decides: the local inbox).
///
/// A gate says `allow`: it is the only answer that can neither block the
/// tool (empty or non-JSON output blocks it in the IDE; a missing
/// `permission` is reported to) nor prompt the user on every call (`ask`
/// on beforeShellExecution prompts even in "Run Everything" mode and is
/// unknown under `-p`). It grants nothing Cursor would not: the before* hooks
/// run before Cursor's own permission decision and Cursor's allowlist still
/// applies after an allow (README, "Neutral answers"). Where a server
/// decides, a gate that cannot get an answer follows its fail policy
/// instead (the runner renders the deny).
pub fn neutral(event: Event) -> Output {
    render(event, &Outcome::default())
}

/// The harness session id: `conversation_id` (stable across the turns of a
/// chat, present on every event), falling back to `session_id` (equal to it
/// since 3.1, absent on some older builds).
pub fn session_id_of(v: &Value) -> Option<String> {
    non_blank(v, "conversation_id").or_else(|| non_blank(v, "session_id")).map(str::to_string)
}

/// The working directory: the payload's `cwd` is usually `""`, so fall back
/// to `workspace_roots[0]`, then to `$CURSOR_PROJECT_DIR`.
pub fn cwd_of(v: &Value, project_dir: Option<&str>) -> Option<String> {
    non_blank(v, "cwd")
        .or_else(|| {
            v.get("workspace_roots")
                .and_then(Value::as_array)
                .and_then(|r| r.first())
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
        })
        .or_else(|| project_dir.map(str::trim).filter(|s| !s.is_empty()))
        .map(str::to_string)
}

/// Whether a `cursor_version` is the CLI's (`2026.07.23-e383d2b`: a date)
/// rather than the IDE's (`3.18.25`, `2.7.0-pre.78.patch.0`).
pub fn is_cli_version(version: &str) -> bool {
    let year = version.trim().split(['.', '-']).next().unwrap_or("");
    year.len() == 4 && year.bytes().all(|b| b.is_ascii_digit()) && year >= "2000"
}

/// A tool input as the server takes it (a JSON object). Cursor sends
/// beforeMCPExecution's `tool_input` as a JSON-encoded string and
/// preToolUse's as an object; anything that is not an object after decoding
/// is kept under `value` rather than dropped.
pub fn decode_tool_input(v: Option<&Value>) -> Value {
    match v {
        None | Some(Value::Null) => json!({}),
        Some(Value::Object(_)) => v.cloned().unwrap_or_default(),
        Some(Value::String(s)) => {
            let t = s.trim();
            if t.is_empty() {
                return json!({});
            }
            match serde_json::from_str::<Value>(t) {
                Ok(Value::Object(m)) => Value::Object(m),
                Ok(other) => json!({"value": other}),
                Err(_) => json!({"value": s}),
            }
        }
        Some(other) => json!({"value": other}),
    }
}

/// Our own stop follow-up comes back through beforeSubmitPrompt as a user
/// prompt [M36]; it must not become the session's title.
fn is_our_followup(prompt: &str) -> bool {
    prompt.trim_start().starts_with("<operator-notes ")
}

/// stdin → input (pure). Lenient: unknown fields are ignored and optional
/// ones may be missing; a session id is required, and the fields each event
/// acts on.
pub fn parse_with(event: Event, v: &Value, project_dir: Option<&str>) -> Result<Parsed, String> {
    let def = def_of(event);
    check_event_name(v, def.on)?;
    let session_id = session_id_of(v).ok_or("no conversation_id or session_id")?;
    let cwd = cwd_of(v, project_dir);
    let transcript_path = non_blank(v, "transcript_path").map(str::to_string);
    let model = non_blank(v, "model").map(str::to_string);
    let kind = match event {
        // The IDE drops sessionStart's additional_context in a race with the
        // composer (3.12.17, acknowledged by staff) while the CLI delivers it:
        // claim at startup only where the context is known to arrive.
        Event::SessionStart => {
            InputKind::SessionStart { pull: str_field(v, "cursor_version").is_some_and(is_cli_version) }
        }
        Event::BeforeSubmitPrompt => {
            let prompt = str_field(v, "prompt").unwrap_or_default();
            InputKind::Prompt {
                prompt: if is_our_followup(prompt) { String::new() } else { prompt.to_string() },
                pull: false,
            }
        }
        Event::BeforeShellExecution => InputKind::Tool {
            tool_name: "Shell".into(),
            mcp_tool: None,
            tool_input: json!({"command": str_field(v, "command").filter(|c| !c.trim().is_empty()).ok_or("no command")?}),
            model,
            carry: Carry::of(def.carrier),
        },
        Event::BeforeMcpExecution | Event::PreToolUse => InputKind::Tool {
            tool_name: non_blank(v, "tool_name").ok_or("no tool_name")?.to_string(),
            mcp_tool: None,
            tool_input: decode_tool_input(v.get("tool_input")),
            model,
            carry: Carry::of(def.carrier),
        },
        Event::Stop => {
            let completed = str_field(v, "status") == Some("completed");
            // A missing or odd loop_count is treated as "at the limit": a
            // claimed note Cursor then discards would be lost, an unclaimed
            // one waits for the next carrier.
            let loop_count = v.get("loop_count").and_then(|n| {
                n.as_u64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0).map(|f| f as u64))
            });
            InputKind::Stop { may_continue: completed && loop_count.is_some_and(|n| n < u64::from(CURSOR_LOOP_LIMIT)) }
        }
        Event::SessionEnd => {
            InputKind::SessionEnd { reason: non_blank(v, "reason").unwrap_or("session_end").to_string() }
        }
    };
    Ok(Parsed::Run(Input { session_id, cwd, transcript_path, parent_session_id: None, kind }))
}

/// A runtime session id we are willing to export (a UUID).
fn exportable(id: &str) -> bool {
    preloop_shared::flow::is_uuid(id)
}

/// outcome → stdout. Always an object: Cursor reads only flat snake_case
/// keys, and a gate must never print nothing.
pub fn render(event: Event, o: &Outcome) -> Output {
    use output::*;
    let ctx = o.context.clone().filter(|c| !c.is_empty());
    // Never `ask`: it drops the context and prompts on every call.
    let deny = (o.decision == Some(Decision::Deny)).then(|| deny_reason_verbatim(o));
    match event {
        Event::SessionStart => Output::SessionStart(SessionStartOutput {
            env: o
                .runtime_session_id
                .as_deref()
                .filter(|id| exportable(id))
                .map(|id| LineageEnv { parent_session_id: id.to_string() }),
            additional_context: ctx,
        }),
        Event::BeforeSubmitPrompt => Output::BeforeSubmitPrompt(ContinueOutput { proceed: true }),
        // Non-carrying: the engine spooled any note; never a context here.
        // user_message is what reaches the model (postToolUseFailure);
        // agent_message is documented for it but was not seen arriving.
        Event::BeforeShellExecution | Event::BeforeMcpExecution => Output::Gate(match deny {
            Some(reason) => GateOutput::Deny { user_message: reason.clone(), agent_message: reason },
            // Allow, or no opinion (local mode, fail-open): see [`neutral`].
            None => GateOutput::Allow {},
        }),
        // Cursor keeps preToolUse's additional_context on allow and deny; the
        // server never answers ask and we never say it (ask drops the context).
        Event::PreToolUse => Output::PreToolUse(match deny {
            Some(reason) => {
                PreToolUseOutput::Deny { user_message: reason.clone(), agent_message: reason, additional_context: ctx }
            }
            None => PreToolUseOutput::Allow { additional_context: ctx },
        }),
        Event::Stop => Output::Stop(StopOutput { followup_message: if o.continue_turn { ctx } else { None } }),
        Event::SessionEnd => Output::SessionEnd(Empty {}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_input(p: Parsed) -> Input {
        match p {
            Parsed::Run(i) => i,
            Parsed::StandDown(w) => panic!("stood down: {w}"),
        }
    }

    #[test]
    fn cli_versions_are_dates() {
        assert!(is_cli_version("2026.07.23-e383d2b"));
        assert!(is_cli_version("2026.10.01-e373342"));
        assert!(!is_cli_version("3.18.25"));
        assert!(!is_cli_version("2.7.0-pre.78.patch.0"));
        assert!(!is_cli_version(""));
        assert!(!is_cli_version("1999.01.01-x"));
    }

    #[test]
    fn session_id_and_cwd_fallbacks() {
        let v = json!({"session_id": "s1", "cwd": "", "workspace_roots": []});
        assert_eq!(session_id_of(&v).as_deref(), Some("s1"));
        assert_eq!(cwd_of(&v, Some("/proj")).as_deref(), Some("/proj"));
        let v = json!({"conversation_id": "c1", "session_id": "s1", "cwd": "", "workspace_roots": ["/ws", "/other"]});
        assert_eq!(session_id_of(&v).as_deref(), Some("c1"));
        assert_eq!(cwd_of(&v, Some("/proj")).as_deref(), Some("/ws"));
        let v = json!({"conversation_id": " ", "cwd": "/here"});
        assert_eq!(session_id_of(&v), None);
        assert_eq!(cwd_of(&v, None).as_deref(), Some("/here"));
        assert_eq!(cwd_of(&json!({}), None), None);
    }

    #[test]
    fn mcp_tool_input_is_decoded() {
        assert_eq!(decode_tool_input(Some(&json!("{\"limit\":1}"))), json!({"limit": 1}));
        assert_eq!(decode_tool_input(Some(&json!({"q": "x"}))), json!({"q": "x"}));
        assert_eq!(decode_tool_input(Some(&json!("[1,2]"))), json!({"value": [1, 2]}));
        assert_eq!(decode_tool_input(Some(&json!("not json"))), json!({"value": "not json"}));
        assert_eq!(decode_tool_input(Some(&json!(""))), json!({}));
        assert_eq!(decode_tool_input(None), json!({}));
        assert_eq!(decode_tool_input(Some(&json!(7))), json!({"value": 7}));
    }

    #[test]
    fn stop_continues_only_on_completed_below_the_loop_limit() {
        let may = |v: Value| match run_input(parse_with(Event::Stop, &v, None).unwrap()).kind {
            InputKind::Stop { may_continue } => may_continue,
            k => panic!("{k:?}"),
        };
        assert!(may(json!({"conversation_id": "c", "status": "completed", "loop_count": 0})));
        assert!(may(json!({"conversation_id": "c", "status": "completed", "loop_count": 4})));
        assert!(!may(json!({"conversation_id": "c", "status": "completed", "loop_count": 5})));
        assert!(!may(json!({"conversation_id": "c", "status": "completed"})));
        assert!(!may(json!({"conversation_id": "c", "status": "completed", "loop_count": "0"})));
        assert!(!may(json!({"conversation_id": "c", "status": "error", "loop_count": 0})));
        assert!(!may(json!({"conversation_id": "c", "status": "aborted", "loop_count": 0})));
        assert!(may(json!({"conversation_id": "c", "status": "completed", "loop_count": 1.0})));
    }

    #[test]
    fn a_foreign_event_is_refused() {
        let v = json!({"conversation_id": "c", "hook_event_name": "postToolUse", "tool_name": "Shell"});
        assert!(parse_with(Event::PreToolUse, &v, None).is_err());
        let v = json!({"session_id": "c", "hook_event_name": "PreToolUse", "tool_name": "Bash"});
        assert!(parse_with(Event::PreToolUse, &v, None).is_err());
    }

    #[test]
    fn our_followup_does_not_title_the_session() {
        let v = json!({"conversation_id": "c", "prompt": "<operator-notes count=\"1\" source=\"preloop-control-plane\">\n…"});
        match run_input(parse_with(Event::BeforeSubmitPrompt, &v, None).unwrap()).kind {
            InputKind::Prompt { prompt, pull } => {
                assert_eq!(prompt, "");
                assert!(!pull);
            }
            k => panic!("{k:?}"),
        }
    }

    #[test]
    fn gates_never_print_ask_and_always_name_a_permission() {
        for event in [Event::BeforeShellExecution, Event::BeforeMcpExecution, Event::PreToolUse] {
            for decision in [None, Some(Decision::Allow), Some(Decision::Deny)] {
                let o =
                    Outcome { decision, reason: Some("r".into()), context: Some("ctx".into()), ..Outcome::default() };
                let v = serde_json::to_value(render(event, &o)).unwrap();
                let p = v["permission"].as_str().unwrap();
                assert!(p == "allow" || p == "deny");
                assert_eq!(v.get("additional_context").is_some(), event == Event::PreToolUse, "{event:?}");
                assert_eq!(v.get("user_message").is_some(), p == "deny");
            }
        }
    }

    #[test]
    fn session_start_exports_only_a_plain_runtime_id() {
        let o =
            Outcome { runtime_session_id: Some("5f9c7c7b-e77b-4e3c-99be-5a7a623325db".into()), ..Outcome::default() };
        assert_eq!(
            serde_json::to_value(render(Event::SessionStart, &o)).unwrap(),
            json!({"env": {"PRELOOP_PARENT_SESSION_ID": "5f9c7c7b-e77b-4e3c-99be-5a7a623325db"}})
        );
        let o = Outcome { runtime_session_id: Some("x; rm -rf /".into()), ..Outcome::default() };
        assert_eq!(serde_json::to_value(render(Event::SessionStart, &o)).unwrap(), json!({}));
    }
}
