//! The operator commands in server mode against the loopback fake Preloop
//! server (human routes with the user token), `--wait` exit codes, the
//! server's reasons on errors, login/logout, and doctor's server checks.

use crate::common::*;
use preloop_testkit::FakeServer;
use preloop_testkit::client;
use serde_json::{Value, json};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

struct Env {
    _t: TempDir,
    root: std::path::PathBuf,
    home: std::path::PathBuf,
    server: FakeServer,
    user_token: Option<String>,
    runtime_token: String,
}

impl Env {
    fn new(tag: &str) -> Env {
        let t = TempDir::new(tag);
        let root = t.path().to_path_buf();
        let server = FakeServer::start();
        let user_token = Some(server.user_token());
        let runtime_token = server.runtime_token();
        Env { _t: t, home: root.join("preloop"), root, server, user_token, runtime_token }
    }
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = operator_cmd(&self.root, &self.home, args);
        c.env("PRELOOP_URL", self.server.url()).env("PRELOOP_TOKEN", &self.runtime_token);
        if let Some(t) = &self.user_token {
            c.env("PRELOOP_USER_TOKEN", t);
        }
        c
    }
    fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        run_with_stdin(self.cmd(args), stdin)
    }
    fn json(&self, args: &[&str]) -> Value {
        json_of(args, &self.run(args, None))
    }
    fn hook(&self, route: &str, body: Value) -> client::HttpResponse {
        client::post_json(&format!("{}/agents/{route}", self.server.api_base()), Some(&self.runtime_token), &body)
            .unwrap()
    }
    fn start(&self, session: &str) -> String {
        let r = self.hook("session-start", json!({"session_id": session, "source": "claude_code", "cwd": "/w"}));
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()["runtime_session_id"].as_str().unwrap().to_string()
    }
}

#[test]
fn send_status_list_cancel_on_the_server() {
    let e = Env::new("srv-basic");
    let rsid = e.start("ext-1");
    let out =
        e.run(&["notes", "send", "--session", "ext-1", "--json", "--expires-in", "2h"], Some("Deploy to eu-west-1.\n"));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let sent: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = sent["note_id"].as_str().unwrap().to_string();
    assert_eq!(sent["target"]["session"], "ext-1");
    let receipt = e.server.receipt(&id);
    assert_eq!(receipt["state"], "pending");
    assert_eq!(receipt["text"], "Deploy to eu-west-1.");
    assert_eq!(receipt["runtime_session_id"], rsid.as_str());
    // The request went to the human route with the user token, never the runtime token.
    let req = e
        .server
        .requests()
        .into_iter()
        .find(|r| r.path == "/api/v1/operator-notes" && r.method == "POST")
        .expect("send request");
    assert_eq!(
        req.token_kind.as_deref(),
        Some("api_key"),
        "the user token (a personal API key), not the runtime token"
    );

    let st = e.json(&["notes", "status", &id, "--json"]);
    assert_eq!((st["note_id"].as_str(), st["state"].as_str()), (Some(id.as_str()), Some("pending")));
    let l = e.json(&["notes", "list", "--agent", &e.server.agent_id(), "--json"]);
    assert!(l["notes"].as_array().unwrap().iter().any(|n| n["note_id"] == id.as_str()), "{l}");
    // --session maps to the runtime id through the session file the hooks write.
    std::fs::create_dir_all(e.home.join("sessions")).unwrap();
    std::fs::write(
        e.home.join("sessions/ext-1.json"),
        json!({"runtime_session_id": rsid, "started_at": "2026-12-02T09:00:00Z", "agent_kind": "claude_code", "external_session_id": "ext-1", "mode": "server"}).to_string(),
    )
    .unwrap();
    let l = e.json(&["notes", "list", "--session", "ext-1", "--state", "pending", "--json"]);
    assert_eq!(l["total"], 1, "{l}");
    let out = e.run(&["notes", "list"], None);
    assert_eq!(code(&out), 2, "server mode: list needs a target");

    let out = e.run(&["notes", "cancel", &id], None);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(e.server.receipt(&id)["state"], "cancelled");

    let s = e.json(&["sessions", "list", "--agent", &e.server.agent_id(), "--json"]);
    assert!(s["sessions"].as_array().unwrap().iter().any(|x| x["runtime_session_id"] == rsid.as_str()), "{s}");
    assert_eq!(s["mode"], "server");
}

#[test]
fn errors_print_the_servers_reason() {
    let e = Env::new("srv-errors");
    // An id no session in the account has or starts with: refused here, nothing sent.
    let out = e.run(&["notes", "send", "--session", "nobody", "x"], None);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("no session nobody in this account"), "{}", stderr(&out));
    assert!(
        !e.server.requests().iter().any(|r| r.method == "POST" && r.path == "/api/v1/operator-notes"),
        "no note was sent"
    );
    // Said not to have started: the server decides, with its own reason.
    let out =
        e.run(&["notes", "send", "--session", "0d9fc67d-6d54-4639-a547-e6bdcde2c737", "--not-started", "x"], None);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("No matching session in this account."), "{}", stderr(&out));
    e.start("ext-2");
    e.server.set_rate_limit(Some(1));
    assert_eq!(code(&e.run(&["notes", "send", "--session", "ext-2", "one"], None)), 0);
    let out = e.run(&["notes", "send", "--session", "ext-2", "two"], None);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("429") && stderr(&out).contains("Rate limit reached"), "{}", stderr(&out));
    let out = e.run(&["notes", "send", "--session", "ext-2", "--expires-in", "10s", "x"], None);
    assert_eq!(code(&out), 2, "checked before any request: {}", stderr(&out));
    assert!(stderr(&out).contains("60s to 7d"), "{}", stderr(&out));
    let out = e.run(&["notes", "status", "0123456789abcdef"], None);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("not found"), "{}", stderr(&out));
    // No user token: refused with what to do, before any request.
    let mut e2 = Env::new("srv-notoken");
    e2.user_token = None;
    let out = e2.run(&["notes", "send", "--session", "x", "t"], None);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("login --user"), "{}", stderr(&out));
    assert!(!e2.server.requests().iter().any(|r| r.path.starts_with("/api/v1/operator-notes")));
    // A rejected user token.
    e2.user_token = Some("x".repeat(40));
    let out = e2.run(&["notes", "status", "0123456789abcdef"], None);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("rejected the user token"), "{}", stderr(&out));
    assert!(!stderr(&out).contains(&"x".repeat(40)), "the token is never printed");
}

fn wait_for_pending(e: &Env) -> String {
    let url = format!("{}/operator-notes?agent_id={}", e.server.api_base(), e.server.agent_id());
    preloop_testkit::support::wait_for(Duration::from_secs(5), "the note to be sent", || {
        let l = client::get(&url, Some(&e.server.user_token())).unwrap().json();
        l["notes"].as_array().and_then(|n| n.first()).and_then(|n| n["note_id"].as_str()).map(str::to_string)
    })
}

#[test]
fn wait_exit_codes_server() {
    // 0: delivered while waiting.
    let e = Env::new("srv-w0");
    e.start("w-0");
    let child =
        spawn_waiting(e.cmd(&["notes", "send", "--session", "w-0", "--wait", "30s", "--json", "run the checks"]));
    let id = wait_for_pending(&e);
    let r = e.hook("notes/pending", json!({"session_id": "w-0", "event": "pre_tool_use", "defer_delivery": false}));
    assert_eq!(r.json()["notes"][0]["note_id"], id.as_str());
    let v = waited(child, 0);
    assert_eq!((v["state"].as_str(), v["delivery_event"].as_str()), (Some("delivered"), Some("pre_tool_use")));

    // 3: the session ends first.
    let e = Env::new("srv-w3");
    e.start("w-3");
    let child = spawn_waiting(e.cmd(&["notes", "send", "--session", "w-3", "--wait", "30s", "--json", "too late"]));
    wait_for_pending(&e);
    let r = e.hook("session-end", json!({"external_session_id": "w-3", "reason": "exit"}));
    assert_eq!(r.json()["marked"], 1);
    let v = waited(child, 3);
    assert_eq!(v["undeliverable_reason"], "session_ended");

    // 4: still pending when the time runs out.
    let e = Env::new("srv-w4");
    e.start("w-4");
    let out = e
        .cmd(&["notes", "send", "--session", "w-4", "--wait", "3s", "nobody reads this"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert!(stderr(&out).contains("still pending"), "{}", stderr(&out));
}

#[test]
fn agent_and_next_targets() {
    let e = Env::new("srv-agent");
    let v =
        e.json(&["notes", "send", "--agent", &e.server.agent_id(), "--next-session", "--json", "brief the next run"]);
    let id = v["note_id"].as_str().unwrap();
    let r = e.server.receipt(id);
    assert_eq!(r["next_session"], true);
    assert_eq!(r["managed_agent_id"], e.server.agent_id().as_str());
    // --next HARNESS finds the agent from the Preloop onboarding file.
    let dir = e.home.join("agents").join(e.server.agent_id());
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("permission_hook.json"),
        json!({"base_url": e.server.url(), "token": e.runtime_token, "source": "claude_code"}).to_string(),
    )
    .unwrap();
    let v = e.json(&["notes", "send", "--next", "claude-code", "--json", "next one"]);
    assert_eq!(v["target"]["agent_id"], e.server.agent_id().as_str());
    assert_eq!(e.server.receipt(v["note_id"].as_str().unwrap())["next_session"], true);
    // No onboarding file for codex: the account's only agent (newcomer 4, P5).
    let v = e.json(&["notes", "send", "--next", "codex", "--json", "next codex run"]);
    assert_eq!(v["target"]["agent_id"], e.server.agent_id().as_str());
    // --agent takes the display name `sessions list --agent` takes (N12), in send and list.
    let worker = e.server.add_agent("Release worker");
    let v = e.json(&["notes", "send", "--agent", "Release worker", "--next-session", "--json", "by name"]);
    assert_eq!(v["target"]["agent_id"], worker.agent_id.as_str());
    let id = v["note_id"].as_str().unwrap();
    assert_eq!(e.server.receipt(id)["managed_agent_id"], worker.agent_id.as_str());
    let l = e.json(&["notes", "list", "--agent", "Release worker", "--json"]);
    assert_eq!((l["total"].as_u64(), l["notes"][0]["note_id"].as_str()), (Some(1), Some(id)));
    e.server.add_agent("Release worker");
    let out = e.run(&["notes", "list", "--agent", "Release worker"], None);
    assert_eq!(code(&out), 2, "two agents share the name: {}", stderr(&out));
    assert!(stderr(&out).contains("2 agents in this account are named \"Release worker\""), "{}", stderr(&out));
}

#[test]
fn login_and_logout() {
    let e = Env::new("srv-login");
    let login = |args: &[&str], token: &str| {
        let mut c = e.cmd(args);
        c.env_remove("PRELOOP_URL").env_remove("PRELOOP_TOKEN").env_remove("PRELOOP_USER_TOKEN");
        let mut child = c.spawn().unwrap();
        child.stdin.take().unwrap().write_all(token.as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    };
    let url = e.server.url();
    let out = login(&["login", "--url", &url], &format!("{}\n", e.runtime_token));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let printed = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(!printed.contains(&e.runtime_token), "the token is never printed: {printed}");
    let cfg_path = e.home.join("config.json");
    assert_eq!(std::fs::metadata(&cfg_path).unwrap().permissions().mode() & 0o777, 0o600);
    let cfg: Value = serde_json::from_str(&read(&cfg_path)).unwrap();
    assert_eq!(cfg["url"], url.as_str());
    assert_eq!(cfg["token"], e.runtime_token.as_str());
    // A user token, stored the same way (the URL is kept).
    let out = login(&["login", "--user"], &e.server.user_token());
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let cfg: Value = serde_json::from_str(&read(&cfg_path)).unwrap();
    assert_eq!(cfg["user_token"], e.server.user_token().as_str());
    // A rejected token is not saved; the wrong kind is refused.
    let out = login(&["login", "--url", &url], &format!("agt_{}", "z".repeat(43)));
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert_eq!(serde_json::from_str::<Value>(&read(&cfg_path)).unwrap()["token"], e.runtime_token.as_str());
    let out = login(&["login", "--url", &url], &e.server.user_token());
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    // With the stored config (and no env), notes go to the server.
    let mut c = e.cmd(&["notes", "send", "--agent", &e.server.agent_id(), "--json", "via config"]);
    c.env_remove("PRELOOP_URL").env_remove("PRELOOP_TOKEN").env_remove("PRELOOP_USER_TOKEN");
    let out = c.output().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = e.run(&["logout", "--user"], None);
    assert_eq!(code(&out), 0);
    let cfg: Value = serde_json::from_str(&read(&cfg_path)).unwrap();
    assert!(cfg.get("user_token").is_none() && cfg.get("token").is_some());
    let out = e.run(&["logout"], None);
    assert_eq!(code(&out), 0);
    let cfg: Value = serde_json::from_str(&read(&cfg_path)).unwrap();
    assert!(cfg.get("token").is_none() && cfg.get("url").is_none());
}

#[test]
fn doctor_checks_the_server() {
    let e = Env::new("srv-doctor");
    let bin = fake_bin_dir(&e.root);
    assert_eq!(code(&e.run(&["install", "--harness", "claude-code", "--bin-dir", bin.to_str().unwrap()], None)), 0);
    let out = e.run(&["doctor", "--json", "--no-codex-query", "--bin-dir", bin.to_str().unwrap()], None);
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(code(&out), 0, "{r:#}");
    assert_eq!(r["mode"], "server");
    assert_eq!(r["server"]["reachable"], true);
    assert_eq!(r["server"]["runtime_token"], "accepted");
    assert_eq!(r["server"]["user_token"], "accepted");
    // A revoked runtime token: exit 7.
    e.server.revoke_token(&e.runtime_token);
    let out = e.run(&["doctor", "--json", "--no-codex-query", "--bin-dir", bin.to_str().unwrap()], None);
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(code(&out), 7, "{r:#}");
    assert_eq!(r["server"]["runtime_token"], "rejected");
    assert!(!String::from_utf8_lossy(&out.stdout).contains(&e.runtime_token), "no token in the report");
}
