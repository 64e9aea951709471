//! Codex hook trust (Codex 0.169.0).
//!
//! Codex runs a non-managed hook only when `$CODEX_HOME/config.toml` holds
//!
//! ```toml
//! [hooks.state."<key>"]
//! trusted_hash = "sha256:<hex>"
//! ```
//!
//! matching the hook's current definition; an untrusted hook is skipped
//! silently. Derivation, exactly as Codex does it (checked against the real
//! binary's `codex app-server` `hooks/list`, see `tests/codex_trust.rs`):
//!
//! * key: `<hooks.json path, symlinks resolved>:<event in snake_case>:<group index>:<handler index>`,
//!   indices counted within that event's array and that group's `hooks`;
//! * hash: `sha256:` + hex SHA-256 of the compact JSON, keys sorted, nulls
//!   dropped, of `{"event_name": <snake>, "matcher"?: .., "hooks": [{"type", "command",
//!   "timeout": <effective seconds>, "async", "statusMessage"?, "additionalContextLimit"?}]}`;
//!   the effective timeout is the handler's, or 600 s (SessionEnd: 1 s), and
//!   SessionEnd's is clamped to 3 s.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use toml_edit::{DocumentMut, Item, Table};

/// `PreToolUse` → `pre_tool_use`.
pub fn snake(event: &str) -> String {
    preloop_shared::registry::lower_words(event, '_')
}

/// The timeout Codex uses for a handler, in seconds.
pub fn effective_timeout(event: &str, timeout: Option<u64>) -> u64 {
    let end = event == "SessionEnd";
    let t = timeout.unwrap_or(if end { 1 } else { 600 });
    if end { t.min(3) } else { t }
}

/// Compact JSON with sorted keys and without nulls (Python's
/// `json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)`).
pub fn canonical_json(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let sorted: BTreeMap<&String, &Value> = m.iter().filter(|(_, v)| !v.is_null()).collect();
            let inner: Vec<String> = sorted
                .into_iter()
                .map(|(k, v)| format!("{}:{}", serde_json::to_string(k).unwrap_or_default(), canonical_json(v)))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(canonical_json).collect::<Vec<_>>().join(",")),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

/// The trust hash of one handler of an event's group.
pub fn hook_hash(event: &str, matcher: Option<&Value>, handler: &Value) -> String {
    let get = |k: &str| handler.get(k).cloned().unwrap_or(Value::Null);
    let timeout = effective_timeout(event, handler.get("timeout").and_then(Value::as_u64));
    let mut h = serde_json::Map::new();
    h.insert("type".into(), handler.get("type").cloned().unwrap_or_else(|| Value::from("command")));
    h.insert("command".into(), get("command"));
    h.insert("timeout".into(), Value::from(timeout));
    h.insert("async".into(), handler.get("async").cloned().unwrap_or(Value::Bool(false)));
    h.insert("statusMessage".into(), get("statusMessage"));
    h.insert("additionalContextLimit".into(), get("additionalContextLimit"));
    let mut d = serde_json::Map::new();
    d.insert("event_name".into(), Value::from(snake(event)));
    d.insert("matcher".into(), matcher.cloned().unwrap_or(Value::Null));
    d.insert("hooks".into(), Value::Array(vec![Value::Object(h)]));
    let digest = Sha256::digest(canonical_json(&Value::Object(d)).as_bytes());
    format!("sha256:{}", preloop_shared::fsutil::hex(&digest))
}

/// One handler of a hooks.json with its trust key and hash.
#[derive(Debug, Clone, PartialEq)]
pub struct HookKey {
    pub key: String,
    pub event: String,
    pub hash: String,
    pub command: String,
    pub ours: bool,
}

/// Every handler of a parsed hooks.json, in file order.
pub fn hook_keys(hooks_json: &Path, doc: &Value, owner: &crate::edit::Owner) -> Vec<HookKey> {
    let mut out = Vec::new();
    let Some(events) = doc.get("hooks").and_then(Value::as_object) else { return out };
    for (event, groups) in events {
        for (gi, group) in groups.as_array().into_iter().flatten().enumerate() {
            let matcher = group.get("matcher");
            for (hi, handler) in group.get("hooks").and_then(Value::as_array).into_iter().flatten().enumerate() {
                let command = handler.get("command").and_then(Value::as_str).unwrap_or("").to_string();
                out.push(HookKey {
                    key: format!("{}:{}:{gi}:{hi}", hooks_json.display(), snake(event)),
                    event: event.clone(),
                    hash: hook_hash(event, matcher, handler),
                    ours: owner.owns(&command, matcher.is_some_and(|m| !m.is_null())),
                    command,
                });
            }
        }
    }
    out
}

/// `trusted_hash` per key from a config.toml (empty if none or unparsable).
pub fn trusted_hashes(toml_text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Ok(doc) = toml_text.parse::<DocumentMut>() else { return out };
    if let Some(state) = doc.get("hooks").and_then(|h| h.get("state")).and_then(Item::as_table_like) {
        for (k, v) in state.iter() {
            if let Some(h) = v.get("trusted_hash").and_then(Item::as_str) {
                out.insert(k.to_string(), h.to_string());
            }
        }
    }
    out
}

/// The trust entries to write and remove when hooks.json goes from `before`
/// to `after`: ours get trusted at their (new) keys; our old keys go; a
/// user hook that moved (an earlier group of ours was removed) keeps the
/// trust it had under its old key.
pub fn plan_trust(
    before: &[HookKey],
    after: &[HookKey],
    current: &BTreeMap<String, String>,
) -> (Vec<(String, String)>, Vec<String>) {
    let mut set: Vec<(String, String)> = Vec::new();
    let mut remove: Vec<String> = Vec::new();
    for b in before.iter().filter(|b| b.ours) {
        if !after.iter().any(|a| a.ours && a.key == b.key) && current.contains_key(&b.key) {
            remove.push(b.key.clone());
        }
    }
    // User hooks keep their order per event: pair them up to follow moves.
    let theirs = |v: &[HookKey], ev: &str| v.iter().filter(|h| !h.ours && h.event == ev).cloned().collect::<Vec<_>>();
    let mut events: Vec<&str> = after.iter().map(|h| h.event.as_str()).collect();
    events.dedup();
    for ev in events {
        for (b, a) in theirs(before, ev).iter().zip(theirs(after, ev).iter()) {
            if b.key != a.key && b.hash == a.hash && current.get(&b.key) == Some(&b.hash) {
                remove.retain(|k| k != &a.key);
                set.push((a.key.clone(), a.hash.clone()));
            }
        }
    }
    for a in after.iter().filter(|a| a.ours) {
        remove.retain(|k| k != &a.key);
        if current.get(&a.key) != Some(&a.hash) {
            set.retain(|(k, _)| k != &a.key);
            set.push((a.key.clone(), a.hash.clone()));
        }
    }
    // A user hook now sitting at one of our old keys: drop our hash there
    // only if it is not the user's own (migrated above).
    remove.retain(|k| !set.iter().any(|(s, _)| s == k));
    (set, remove)
}

/// Apply trust changes to config.toml text, keeping every comment and the
/// order of everything else. Tables we create are implicit (no bare
/// `[hooks]` / `[hooks.state]` headers); tables we empty are removed.
pub fn edit_config_toml(text: &str, set: &[(String, String)], remove: &[String]) -> Result<String, String> {
    if set.is_empty() && remove.is_empty() {
        return Ok(text.to_string());
    }
    let mut doc = text.parse::<DocumentMut>().map_err(|e| e.to_string().trim().replace('\n', " "))?;
    let hooks_existed = doc.contains_key("hooks");
    if !set.is_empty() && !hooks_existed {
        let mut t = Table::new();
        t.set_implicit(true);
        doc.insert("hooks", Item::Table(t));
    }
    let Some(hooks) = doc.get_mut("hooks") else { return Ok(text.to_string()) };
    let hooks = hooks.as_table_like_mut().ok_or("[hooks] is not a table")?;
    let state_existed = hooks.contains_key("state");
    if !set.is_empty() && !state_existed {
        let mut t = Table::new();
        t.set_implicit(true);
        hooks.insert("state", Item::Table(t));
    }
    let mut removed_any = false;
    if let Some(state) = hooks.get_mut("state") {
        let state = state.as_table_like_mut().ok_or("[hooks.state] is not a table")?;
        for k in remove {
            removed_any |= state.remove(k).is_some();
        }
        for (k, h) in set {
            match state.get_mut(k).and_then(Item::as_table_like_mut) {
                Some(entry) => {
                    entry.insert("trusted_hash", toml_edit::value(h.as_str()));
                }
                None => {
                    let mut t = Table::new();
                    t.insert("trusted_hash", toml_edit::value(h.as_str()));
                    state.insert(k, Item::Table(t));
                }
            }
        }
        if removed_any && state.is_empty() {
            hooks.remove("state");
        }
    }
    if removed_any && hooks.is_empty() {
        doc.remove("hooks");
    }
    let mut out = doc.to_string();
    if text.is_empty() {
        out = out.trim_start_matches('\n').to_string();
    }
    Ok(out)
}

/// `CODEX_HOME` (default `~/.codex`) as Codex sees it: symlinks resolved.
/// Missing trailing components are kept as given.
pub fn canonical_dir(dir: &Path) -> PathBuf {
    let mut existing = dir.to_path_buf();
    let mut rest = Vec::new();
    while !existing.exists() {
        match (existing.file_name().map(|n| n.to_os_string()), existing.parent()) {
            (Some(n), Some(p)) => {
                rest.push(n);
                existing = p.to_path_buf();
            }
            _ => return dir.to_path_buf(),
        }
    }
    let mut out = std::fs::canonicalize(&existing).unwrap_or(existing);
    for n in rest.into_iter().rev() {
        out.push(n);
    }
    out
}

/// One hook as `codex app-server` `hooks/list` reports it.
#[derive(Debug, Clone)]
pub struct ListedHook {
    pub key: String,
    pub event: String,
    pub trust_status: String,
    pub current_hash: String,
    pub command: String,
    pub managed: bool,
}

/// Ask the real Codex (`codex app-server`, JSON-RPC over stdio): `initialize`,
/// then `hooks/list {"cwds": [cwd]}`. Returns the hooks and any warnings or
/// errors Codex reported about the config files.
pub fn list_hooks_via_app_server(
    codex: &Path,
    codex_home: &Path,
    cwd: &Path,
    envs: &[(String, String)],
    timeout: Duration,
) -> Result<(Vec<ListedHook>, Vec<String>), String> {
    let mut cmd = Command::new(codex);
    cmd.arg("app-server")
        .env("CODEX_HOME", codex_home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().map_err(|e| format!("start {} app-server: {e}", codex.display()))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let (tx, rx) = mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Ok(v) = serde_json::from_str::<Value>(line.trim())
                && tx.send(v).is_err()
            {
                break;
            }
        }
    });
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let deadline = Instant::now() + timeout;
    let call = |id: u64, method: &str, params: Value, stdin: &mut std::process::ChildStdin| -> Result<Value, String> {
        let msg = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{msg}").and_then(|_| stdin.flush()).map_err(|e| format!("write to app-server: {e}"))?;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = rx.recv_timeout(left).map_err(|_| format!("no answer to {method} from codex app-server"))?;
            if v.get("id").and_then(Value::as_u64) == Some(id) && v.get("method").is_none() {
                if let Some(e) = v.get("error") {
                    return Err(format!("{method} failed: {e}"));
                }
                return Ok(v.get("result").cloned().unwrap_or(Value::Null));
            }
        }
    };
    let result = (|| {
        call(
            1,
            "initialize",
            serde_json::json!({"clientInfo": {"name": "preloop-hooks", "version": env!("CARGO_PKG_VERSION")}}),
            &mut stdin,
        )?;
        writeln!(stdin, "{}", serde_json::json!({"jsonrpc": "2.0", "method": "initialized"}))
            .map_err(|e| e.to_string())?;
        call(2, "hooks/list", serde_json::json!({"cwds": [cwd]}), &mut stdin)
    })();
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    let res = result?;
    let mut hooks = Vec::new();
    let mut problems = Vec::new();
    for entry in res.get("data").and_then(Value::as_array).into_iter().flatten() {
        for w in entry.get("warnings").and_then(Value::as_array).into_iter().flatten() {
            problems.push(format!("warning: {}", w.as_str().map(str::to_string).unwrap_or_else(|| w.to_string())));
        }
        for e in entry.get("errors").and_then(Value::as_array).into_iter().flatten() {
            problems.push(format!(
                "error: {}: {}",
                e.get("path").and_then(Value::as_str).unwrap_or("?"),
                e.get("message").and_then(Value::as_str).unwrap_or("?")
            ));
        }
        for h in entry.get("hooks").and_then(Value::as_array).into_iter().flatten() {
            let s = |k: &str| h.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let key = s("key");
            if hooks.iter().any(|x: &ListedHook| x.key == key) {
                continue;
            }
            hooks.push(ListedHook {
                key,
                event: s("eventName"),
                trust_status: s("trustStatus"),
                current_hash: s("currentHash"),
                command: s("command"),
                managed: h.get("isManaged").and_then(Value::as_bool).unwrap_or(false),
            });
        }
    }
    Ok((hooks, problems))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn snake_case_events() {
        assert_eq!(snake("PreToolUse"), "pre_tool_use");
        assert_eq!(snake("PermissionRequest"), "permission_request");
        assert_eq!(snake("SessionEnd"), "session_end");
    }

    #[test]
    fn hash_matches_the_observed_formula() {
        // Recorded from `codex app-server` hooks/list (Codex 0.169.0).
        let h = hook_hash(
            "PreToolUse",
            None,
            &json!({"type": "command", "command": "'/tmp/a b/preloop-codex-pre-tool-use'", "timeout": 340}),
        );
        assert_eq!(h, "sha256:f3a69e0f8bb5ca60e0370329c61d23c5595603e75c095cb9a1e3728459bc2071");
        let h = hook_hash("SessionEnd", None, &json!({"type": "command", "command": "/x/end", "timeout": 3}));
        assert_eq!(h, "sha256:fc4336c9886708791be4cb40f6a1bd2958e26286a33f90d817a20f97836079f7");
        // SessionEnd is clamped to 3 s, so 20 hashes like 3.
        assert_eq!(hook_hash("SessionEnd", None, &json!({"type": "command", "command": "/x/end", "timeout": 20})), h);
    }

    #[test]
    fn toml_round_trip_keeps_comments() {
        let original = "# my codex config\nmodel = \"o3\" # inline\n\n[projects.\"/w\"]\ntrust_level = \"trusted\"\n";
        let set = vec![("/h/hooks.json:stop:0:0".to_string(), "sha256:ab".to_string())];
        let installed = edit_config_toml(original, &set, &[]).unwrap();
        assert!(installed.starts_with(original), "{installed}");
        assert!(
            installed.contains("[hooks.state.\"/h/hooks.json:stop:0:0\"]\ntrusted_hash = \"sha256:ab\"\n"),
            "{installed}"
        );
        assert!(!installed.contains("[hooks]\n") && !installed.contains("[hooks.state]\n"), "{installed}");
        assert_eq!(trusted_hashes(&installed).get("/h/hooks.json:stop:0:0").map(String::as_str), Some("sha256:ab"));
        let back = edit_config_toml(&installed, &[], &["/h/hooks.json:stop:0:0".to_string()]).unwrap();
        assert_eq!(back, original);
    }
}
