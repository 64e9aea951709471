//! `preloop-bench`: what a hook costs, measured beside its floors, in one run
//! on one machine. Build and run with `scripts/bench` (release profile).
//!
//! Every case spawns a fresh process per run, writes its stdin, and waits for
//! it to exit: exactly what a harness pays per hook. Reported: median and p95
//! wall time over `--runs` runs (after warm-up), and the ratios the
//! performance targets are stated in.

use preloop_shared::local::LocalInbox;
use preloop_shared::operator::{Author, SendRequest, Target};
use preloop_testkit::fake_server::FakeServer;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Case {
    name: String,
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    stdin: Box<dyn FnMut(usize) -> Vec<u8>>,
    before: Option<Box<dyn FnMut(usize)>>,
}

#[derive(Clone, Copy)]
struct Stats {
    median: Duration,
    p95: Duration,
    /// Largest peak resident set over the runs, KiB (from wait4's rusage).
    max_rss_kib: i64,
}

/// Wait for a child and return its peak RSS in KiB (`std` does not expose rusage).
fn wait_rss(child: &std::process::Child) -> Option<(bool, i64)> {
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child's pid with valid out-pointers.
    let r = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    (r > 0).then(|| (libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, usage.ru_maxrss))
}

fn measure(case: &mut Case, runs: usize, warmup: usize) -> Option<Stats> {
    let mut times = Vec::with_capacity(runs);
    let mut max_rss_kib = 0;
    for i in 0..(runs + warmup) {
        if let Some(b) = case.before.as_mut() {
            b(i);
        }
        let input = (case.stdin)(i);
        let mut c = Command::new(&case.program);
        c.args(&case.args).env_clear().envs(case.env.iter().cloned()).stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null());
        let t = Instant::now();
        let mut child = c.spawn().ok()?;
        {
            let mut sin = child.stdin.take()?;
            let _ = sin.write_all(&input);
        }
        let (ok, rss) = wait_rss(&child)?;
        let d = t.elapsed();
        max_rss_kib = max_rss_kib.max(rss);
        if !ok {
            eprintln!("{}: non-zero exit", case.name);
        }
        if i >= warmup {
            times.push(d);
        }
    }
    times.sort();
    Some(Stats { median: times[times.len() / 2], p95: times[(times.len() * 95 / 100).min(times.len() - 1)], max_rss_kib })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn bin_dir() -> PathBuf {
    std::env::current_exe().ok().and_then(|p| p.parent().map(Path::to_path_buf)).unwrap_or_else(|| PathBuf::from("target/release"))
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(name)).find(|p| p.is_file()))
}

fn pre_tool_use(session: &str) -> Vec<u8> {
    json!({"session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp/proj", "hook_event_name": "PreToolUse",
           "tool_name": "Bash", "tool_input": {"command": "echo hi", "description": "say hi"}, "tool_use_id": "toolu_1"})
    .to_string()
    .into_bytes()
}

fn payload(event: &str, session: &str) -> Vec<u8> {
    let mut v = json!({"session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp/proj", "hook_event_name": event});
    match event {
        "PreToolUse" => return pre_tool_use(session),
        "SessionStart" => v["source"] = json!("startup"),
        "UserPromptSubmit" => v["prompt"] = json!("hello"),
        "Stop" => v["stop_hook_active"] = json!(false),
        "SessionEnd" => v["reason"] = json!("other"),
        _ => {}
    }
    v.to_string().into_bytes()
}

fn base_env(home: &Path) -> Vec<(String, String)> {
    vec![("PATH".into(), std::env::var("PATH").unwrap_or_default()), ("HOME".into(), home.display().to_string()), ("PRELOOP_HOME".into(), home.display().to_string())]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs: usize = args.iter().position(|a| a == "--runs").and_then(|i| args.get(i + 1)).and_then(|s| s.parse().ok()).unwrap_or(200);
    let json_out = args.iter().position(|a| a == "--json").and_then(|i| args.get(i + 1)).cloned();
    let warmup = (runs / 10).max(3);
    let bins = bin_dir();
    let server = FakeServer::start();
    // The real server allows 20 notes an hour; the with-note cases send one per run.
    server.set_rate_limit(None);
    let url = server.url();
    let token = server.runtime_token();
    let tmp = std::env::temp_dir().join(format!("preloop-bench-{}", std::process::id()));
    let local_home = tmp.join("local");
    let server_home = tmp.join("server");
    std::fs::create_dir_all(&local_home).unwrap();
    std::fs::create_dir_all(&server_home).unwrap();
    let sid = "bench-session-0001";
    let cc = |e: &str| bins.join(format!("preloop-claude-code-{e}"));
    let mut server_env = base_env(&server_home);
    server_env.push(("PRELOOP_URL".into(), url.clone()));
    server_env.push(("PRELOOP_TOKEN".into(), token.clone()));
    let local_env = base_env(&local_home);

    // Register the session once in each mode, as SessionStart does in a real run.
    for env in [&server_env, &local_env] {
        let mut c = Command::new(cc("session-start"));
        c.env_clear().envs(env.iter().cloned()).stdin(Stdio::piped()).stdout(Stdio::null());
        let mut child = c.spawn().expect("build the release binaries first (scripts/bench)");
        child.stdin.take().unwrap().write_all(&payload("SessionStart", sid)).unwrap();
        child.wait().unwrap();
    }

    let addr = url.trim_start_matches("http://").to_string();
    let mut cases: Vec<Case> = Vec::new();
    cases.push(Case { name: "floor: /bin/true".into(), program: PathBuf::from("/bin/true"), args: vec![], env: vec![], stdin: Box::new(|_| Vec::new()), before: None });
    cases.push(Case {
        name: "floor: start + stdin + one loopback HTTP POST".into(),
        program: bins.join("preloop-floor-hook"),
        args: vec![],
        env: vec![("FLOOR_ADDR".into(), addr.clone()), ("FLOOR_PATH".into(), "/api/v1/agents/permission-check".into()), ("FLOOR_TOKEN".into(), token.clone())],
        stdin: Box::new(move |_| json!({"tool_name": "Bash", "tool_input": {"command": "echo hi"}, "source": "claude_code", "session_id": "bench-session-0001", "evaluation_phase": "pre_tool_use"}).to_string().into_bytes()),
        before: None,
    });
    if let Some(curl) = which("curl") {
        cases.push(Case {
            name: "reference: curl, same request".into(),
            program: curl,
            args: vec!["-s".into(), "-o".into(), "/dev/null".into(), "-X".into(), "POST".into(), "-H".into(), format!("Authorization: Bearer {token}"), "-H".into(), "Content-Type: application/json".into(), "--data-binary".into(), "@-".into(), format!("{url}/api/v1/agents/permission-check")],
            env: vec![],
            stdin: Box::new(|_| json!({"tool_name": "Bash", "tool_input": {}, "source": "claude_code", "session_id": "bench-session-0001", "evaluation_phase": "pre_tool_use"}).to_string().into_bytes()),
            before: None,
        });
    }
    if let Some(py) = which("python3") {
        let script = "import json,sys,urllib.request,os\nd=json.load(sys.stdin)\nb=json.dumps({'tool_name':d['tool_name'],'tool_input':d['tool_input'],'source':'claude_code','session_id':d['session_id'],'evaluation_phase':'pre_tool_use'}).encode()\nr=urllib.request.Request(os.environ['PRELOOP_URL']+'/api/v1/agents/permission-check',data=b,headers={'Authorization':'Bearer '+os.environ['PRELOOP_TOKEN'],'Content-Type':'application/json'})\nres=json.load(urllib.request.urlopen(r,timeout=5))\nif res.get('operator_note'): print(json.dumps({'hookSpecificOutput':{'hookEventName':'PreToolUse','additionalContext':res['operator_note']}}))\n";
        cases.push(Case {
            name: "reference: Python urllib hook".into(),
            program: py,
            args: vec!["-c".into(), script.into()],
            env: server_env.clone(),
            stdin: Box::new(|_| pre_tool_use("bench-session-0001")),
            before: None,
        });
    }
    for (mode, env) in [("server", server_env.clone()), ("local", local_env.clone())] {
        for event in ["SessionStart", "UserPromptSubmit", "PreToolUse", "Stop", "SessionEnd"] {
            let slug = match event {
                "SessionStart" => "session-start",
                "UserPromptSubmit" => "user-prompt-submit",
                "PreToolUse" => "pre-tool-use",
                "Stop" => "stop",
                _ => "session-end",
            };
            // SessionEnd ends its session: give each run its own.
            let per_run = event == "SessionEnd";
            cases.push(Case {
                name: format!("claude-code {event}, {mode}, no note"),
                program: cc(slug),
                args: vec![],
                env: env.clone(),
                stdin: Box::new(move |i| payload(event, &if per_run { format!("bench-end-{i}") } else { sid.to_string() })),
                before: None,
            });
        }
    }
    // With a note: one is sent (untimed) before each run.
    let inbox_home = local_home.clone();
    cases.push(Case {
        name: "claude-code PreToolUse, local, with note".into(),
        program: cc("pre-tool-use"),
        args: vec![],
        env: local_env.clone(),
        stdin: Box::new(|_| pre_tool_use("bench-session-0001")),
        before: Some(Box::new(move |_| {
            LocalInbox::new(&inbox_home, 86_400)
                .send(&SendRequest { text: "Deploy to eu-west-1, not us-east-1.".into(), target: Target::Session(sid.into()), next_session: false, expires_in_secs: None, author: Author { display: Some("bench".into()), auth_method: Some("local".into()), ..Author::default() } })
                .unwrap();
        })),
    });
    let (notes_url, user_token) = (format!("{url}/api/v1/operator-notes"), server.user_token());
    let send_server_note: Box<dyn FnMut(usize)> = Box::new(move |_| {
        let body = json!({"external_session_id": sid, "text": "Deploy to eu-west-1, not us-east-1."}).to_string();
        ureq::post(&notes_url)
            .header("Authorization", &format!("Bearer {user_token}"))
            .header("Content-Type", "application/json")
            .send(body.as_bytes())
            .expect("send a note to the fake server");
    });
    cases.push(Case { name: "claude-code PreToolUse, server, with note".into(), program: cc("pre-tool-use"), args: vec![], env: server_env.clone(), stdin: Box::new(|_| pre_tool_use("bench-session-0001")), before: Some(send_server_note) });

    println!("preloop-bench: {runs} runs per case after {warmup} warm-up runs; wall time per process (spawn, stdin, exit)\n");
    println!("| case | median ms | p95 ms | peak RSS MB |");
    println!("|---|---:|---:|---:|");
    let mut results: Vec<(String, Stats)> = Vec::new();
    for case in cases.iter_mut() {
        if let Some(s) = measure(case, runs, warmup) {
            println!("| {} | {:.2} | {:.2} | {:.1} |", case.name, ms(s.median), ms(s.p95), s.max_rss_kib as f64 / 1024.0);
            results.push((case.name.clone(), s));
        } else {
            println!("| {} | (failed to run) | |", case.name);
        }
    }
    let get = |prefix: &str| results.iter().find(|(n, _)| n.starts_with(prefix)).map(|(_, s)| ms(s.median));
    println!("\n| ratio (medians) | value | target |");
    println!("|---|---:|---|");
    let floor = get("floor: start");
    let truth = get("floor: /bin/true");
    let ours_server = get("claude-code PreToolUse, server, no note");
    let ours_local = get("claude-code PreToolUse, local, no note");
    let ratio = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| format!("{:.2}", a / b)).unwrap_or_else(|| "n/a".into());
    println!("| PreToolUse server no-note / physical floor | {} | ≤ 1.5 |", ratio(ours_server, floor));
    println!("| PreToolUse server no-note / curl | {} | reference |", ratio(ours_server, get("reference: curl")));
    println!("| PreToolUse server no-note / Python hook | {} | ≤ 0.05 |", ratio(ours_server, get("reference: Python")));
    println!("| PreToolUse local no-note / /bin/true | {} | ≤ 2 |", ratio(ours_local, truth));

    println!("\n| binary (release, stripped) | size |");
    println!("|---|---:|");
    let mut names: Vec<String> = std::fs::read_dir(&bins).map(|rd| rd.filter_map(|e| e.ok()).filter_map(|e| e.file_name().into_string().ok()).filter(|n| n.starts_with("preloop-") && !n.contains('.')).collect()).unwrap_or_default();
    names.sort();
    for n in names {
        if let Ok(m) = std::fs::metadata(bins.join(&n))
            && m.is_file() {
                println!("| {n} | {:.2} MB |", m.len() as f64 / 1e6);
            }
    }
    if let Some(path) = json_out {
        let v: Vec<Value> = results.iter().map(|(n, s)| json!({"case": n, "median_ms": ms(s.median), "p95_ms": ms(s.p95), "max_rss_kib": s.max_rss_kib})).collect();
        let _ = std::fs::write(path, serde_json::to_string_pretty(&json!({"runs": runs, "results": v})).unwrap());
    }
    let _ = std::fs::remove_dir_all(&tmp);
}
