//! What every hook binary's `main` calls. It guarantees the harness contract
//! whatever happens: stdout is exactly one JSON document of the event's shape
//! or nothing (the neutral answer), diagnostics go to the hook log, and the
//! exit code is 0. A panic anywhere yields the neutral answer too.

use crate::Harness;
use crate::config::Config;
use crate::flow::{CarrierLimit, Engine, Input, Outcome};
use serde_json::Value;
use std::io::{Read, Write};
use std::panic::{self, AssertUnwindSafe};
use std::time::{Duration, Instant};

/// Largest stdin we read; a hook payload past this is not one we can use.
const MAX_STDIN: u64 = 64 << 20;

/// What an adapter's parse step decided.
pub enum Parsed {
    /// Run the engine.
    Run(Input),
    /// Answer neutrally without touching anything (e.g. Cursor running the
    /// Claude Code hooks it imported); the string says why, for the log.
    StandDown(&'static str),
}

/// A harness event's pure steps: stdin JSON → input, outcome → stdout JSON.
/// Each harness crate implements it on its event enum.
pub trait Adapter: Send + Sync {
    /// stdin JSON → input. `Err` → neutral answer, logged.
    fn parse(&self, stdin: &Value) -> Result<Parsed, String>;
    /// outcome → stdout JSON; `None` prints nothing.
    fn render(&self, outcome: &Outcome) -> Option<Value>;
    /// The neutral answer (printed when anything fails); `None` prints nothing.
    fn neutral(&self) -> Option<Value> {
        None
    }
}

/// One hook binary: a harness event with its pure parse and render steps.
pub struct HookSpec {
    pub harness: Harness,
    /// The harness's event name, for the log.
    pub event: &'static str,
    /// The event's parse, render and neutral answer.
    pub adapter: Box<dyn Adapter>,
    /// How much model-visible text this event's output takes.
    pub limit: CarrierLimit,
    /// A tighter whole-hook budget for every call (SessionEnd), if any.
    pub budget: Option<fn(&Config) -> Duration>,
    /// Side effects after the engine and before the output (Claude's env file).
    pub side_effects: Option<fn(&Input, &Outcome)>,
}

/// Run the hook and exit 0.
pub fn main(spec: HookSpec) -> ! {
    install_panic_hook();
    let code = run(&spec, &mut std::io::stdin().lock(), &mut std::io::stdout().lock());
    std::process::exit(code)
}

/// The body of [`main`], with its streams passed in (tests call this).
pub fn run(spec: &HookSpec, stdin: &mut dyn Read, stdout: &mut dyn Write) -> i32 {
    let started = Instant::now();
    let mut line = LogLine { harness: spec.harness.slug(), event: spec.event, ..LogLine::default() };
    let config = Config::load(Some(spec.harness));
    line.warnings.extend(config.warnings.iter().cloned());

    let result = panic::catch_unwind(AssertUnwindSafe(|| decide(spec, &config, stdin, &mut line)));
    let (output, engine_after) = match result {
        Ok(Ok(pair)) => pair,
        Ok(Err(msg)) => {
            line.outcome = "neutral";
            line.error = Some(msg);
            (spec.adapter.neutral(), None)
        }
        Err(p) => {
            line.outcome = "panic";
            line.error = Some(panic_message(&p));
            (spec.adapter.neutral(), None)
        }
    };

    let written = write_output(stdout, output.as_ref());
    if written && output.is_some() {
        crate::flow::kill_point("after_stdout");
    }
    if !written {
        line.warnings.push("stdout write failed".into());
    }
    if let Some((mut engine, after)) = engine_after {
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            engine.finish(after, written);
            engine.warnings
        }));
        match r {
            Ok(w) => line.warnings.extend(w),
            Err(p) => line.warnings.push(format!("panic after output: {}", panic_message(&p))),
        }
    }
    line.millis = started.elapsed().as_millis();
    crate::log::append(&config.log_dir(), config.settings.log_max_bytes, &line.render());
    0
}

type Decided = (Option<Value>, Option<(Engine, crate::flow::AfterFlush)>);

fn decide(spec: &HookSpec, config: &Config, stdin: &mut dyn Read, line: &mut LogLine) -> Result<Decided, String> {
    let mut buf = Vec::new();
    stdin.take(MAX_STDIN).read_to_end(&mut buf).map_err(|e| format!("stdin: {e}"))?;
    let json = parse_stdin(&buf)?;
    let input = match spec.adapter.parse(&json).map_err(|e| format!("bad input: {e}"))? {
        Parsed::Run(i) => i,
        Parsed::StandDown(why) => {
            line.outcome = "stand_down";
            line.error = Some(why.to_string());
            return Ok((spec.adapter.neutral(), None));
        }
    };
    line.session = Some(input.session_id.clone());
    let mut config = config.clone();
    if let Some(budget) = spec.budget {
        let b = budget(&config);
        let ms = b.as_millis() as u64;
        config.settings.call_timeout_ms = config.settings.call_timeout_ms.min(ms / 2).max(1);
        config.settings.connect_timeout_ms = config.settings.connect_timeout_ms.min(ms / 2).max(1);
    }
    let mut engine = Engine::new(spec.harness, config, &input.session_id);
    engine.limit = spec.limit;
    line.mode = engine.mode();
    match engine.handle(&input) {
        Ok((outcome, after)) => {
            if let Some(f) = spec.side_effects {
                f(&input, &outcome);
            }
            line.notes = outcome.note_ids.clone();
            line.outcome = match (&outcome.decision, outcome.context.is_some()) {
                (Some(crate::wire::Decision::Deny), _) => "deny",
                (_, true) => "notes",
                _ => "ok",
            };
            let out = spec.adapter.render(&outcome);
            line.warnings.append(&mut engine.warnings);
            Ok((out, Some((engine, after))))
        }
        Err(e) => {
            line.warnings.append(&mut engine.warnings);
            Err(format!("{}: {e}", e.kind()))
        }
    }
}

/// stdin → JSON: a UTF-8 BOM and surrounding whitespace are tolerated.
pub fn parse_stdin(buf: &[u8]) -> Result<Value, String> {
    let buf = buf.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(buf);
    if buf.iter().all(u8::is_ascii_whitespace) {
        return Err("empty stdin".into());
    }
    let v: Value = serde_json::from_slice(buf).map_err(|e| format!("stdin is not JSON: {e}"))?;
    if !v.is_object() {
        return Err("stdin is not a JSON object".into());
    }
    Ok(v)
}

fn write_output(stdout: &mut dyn Write, output: Option<&Value>) -> bool {
    let Some(v) = output else { return true };
    let Ok(mut text) = serde_json::to_string(v) else { return false };
    text.push('\n');
    stdout.write_all(text.as_bytes()).and_then(|_| stdout.flush()).is_ok()
}

fn install_panic_hook() {
    // The default hook prints to stderr; the runner logs panics itself.
    panic::set_hook(Box::new(|_| {}));
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    let msg = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into());
    msg.chars().take(200).collect()
}

#[derive(Default)]
struct LogLine {
    harness: &'static str,
    event: &'static str,
    mode: &'static str,
    session: Option<String>,
    outcome: &'static str,
    notes: Vec<String>,
    millis: u128,
    error: Option<String>,
    warnings: Vec<String>,
}

impl LogLine {
    /// `<time> <harness> <event> mode=.. session=.. outcome=.. notes=.. ms=.. [error=..] [warn=..]`
    fn render(&self) -> String {
        let mut s = format!(
            "{} {} {} mode={} session={} outcome={} notes={} ms={}",
            crate::time::Timestamp::now().to_iso_z(),
            self.harness,
            self.event,
            if self.mode.is_empty() { "-" } else { self.mode },
            self.session.as_deref().map(|s| s.chars().take(80).collect::<String>()).unwrap_or_else(|| "-".into()),
            if self.outcome.is_empty() { "ok" } else { self.outcome },
            if self.notes.is_empty() { "-".into() } else { self.notes.join(",") },
            self.millis
        );
        if let Some(e) = &self.error {
            s.push_str(&format!(" error={e:?}"));
        }
        for w in &self.warnings {
            s.push_str(&format!(" warn={w:?}"));
        }
        s
    }
}
