//! Following a harness transcript on the agent's own machine (the
//! `transcript_path` the hooks recorded in the session file): prompts, tool
//! calls with their arguments (which the server does not keep), and model
//! calls. Claude Code writes `~/.claude/projects/<cwd>/<session>.jsonl`;
//! Codex its rollout `…/sessions/YYYY/MM/DD/rollout-….jsonl`.

use preloop_shared::time::Timestamp;
use serde_json::Value;
use std::collections::HashSet;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

/// What a transcript line says happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Happening {
    Prompt(String),
    /// A tool call: its name and a short form of its arguments.
    ToolCall {
        name: String,
        args: String,
    },
    /// A model call (one per model response), with the start of its text.
    ModelCall(Option<String>),
}

pub struct Follower {
    path: PathBuf,
    offset: u64,
    partial: String,
    seen_messages: HashSet<String>,
}

impl Follower {
    pub fn new(path: PathBuf) -> Follower {
        Follower { path, offset: 0, partial: String::new(), seen_messages: HashSet::new() }
    }

    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// What was appended since the last call (complete lines only).
    pub fn poll(&mut self) -> Vec<(Option<Timestamp>, Happening)> {
        let Ok(mut f) = std::fs::File::open(&self.path) else { return Vec::new() };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len < self.offset {
            // Rewritten (compaction): start over.
            self.offset = 0;
            self.partial.clear();
        }
        if f.seek(SeekFrom::Start(self.offset)).is_err() {
            return Vec::new();
        }
        let mut buf = Vec::new();
        if f.by_ref().take(16 << 20).read_to_end(&mut buf).is_err() {
            return Vec::new();
        }
        self.offset += buf.len() as u64;
        self.partial.push_str(&String::from_utf8_lossy(&buf));
        let mut out = Vec::new();
        while let Some(i) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=i).collect();
            if let Ok(v) = serde_json::from_str::<Value>(line.trim()) {
                out.extend(self.parse(&v));
            }
        }
        out
    }

    fn parse(&mut self, v: &Value) -> Vec<(Option<Timestamp>, Happening)> {
        let at = v.get("timestamp").and_then(Value::as_str).and_then(Timestamp::parse);
        let mut out = Vec::new();
        match v.get("type").and_then(Value::as_str) {
            // Claude Code
            Some("user") => {
                if v.get("isMeta").and_then(Value::as_bool) == Some(true) {
                    return out;
                }
                if let Some(text) = v.pointer("/message/content").and_then(Value::as_str)
                    && !text.trim_start().starts_with('<')
                {
                    out.push((at, Happening::Prompt(text.to_string())));
                }
            }
            Some("assistant") => {
                let id = v.pointer("/message/id").and_then(Value::as_str).unwrap_or("").to_string();
                let blocks = v.pointer("/message/content").and_then(Value::as_array).cloned().unwrap_or_default();
                if !id.is_empty() && self.seen_messages.insert(id) {
                    let text = blocks
                        .iter()
                        .find(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                        .and_then(|b| b.get("text").and_then(Value::as_str))
                        .map(str::to_string);
                    out.push((at, Happening::ModelCall(text)));
                }
                for b in blocks.iter().filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use")) {
                    let name = b.get("name").and_then(Value::as_str).unwrap_or("?").to_string();
                    out.push((
                        at,
                        Happening::ToolCall { name, args: short_args(b.get("input").unwrap_or(&Value::Null)) },
                    ));
                }
            }
            // Codex rollout
            Some("token_usage_record") => out.push((at, Happening::ModelCall(None))),
            Some("response_item") => {
                let p = v.get("payload").cloned().unwrap_or(Value::Null);
                match p.get("type").and_then(Value::as_str) {
                    Some("function_call") | Some("custom_tool_call") | Some("local_shell_call") => {
                        let name = p.get("name").and_then(Value::as_str).unwrap_or("shell").to_string();
                        let args = p
                            .get("arguments")
                            .and_then(Value::as_str)
                            .and_then(|a| serde_json::from_str::<Value>(a).ok())
                            .or_else(|| p.get("input").cloned())
                            .or_else(|| p.get("action").cloned())
                            .unwrap_or(Value::Null);
                        out.push((at, Happening::ToolCall { name, args: short_args(&args) }));
                    }
                    Some("message") if p.get("role").and_then(Value::as_str) == Some("user") => {
                        let text = p
                            .get("content")
                            .and_then(Value::as_array)
                            .and_then(|c| c.iter().find_map(|x| x.get("text").and_then(Value::as_str)))
                            .unwrap_or("");
                        if !text.is_empty() && !text.trim_start().starts_with('<') {
                            out.push((at, Happening::Prompt(text.to_string())));
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        out
    }
}

/// A tool's arguments in a few words: the command, path, pattern, URL or
/// description when there is one, else compact JSON.
pub fn short_args(input: &Value) -> String {
    for key in ["command", "cmd", "file_path", "path", "pattern", "url", "query", "prompt", "description"] {
        match input.get(key) {
            Some(Value::String(s)) => return s.clone(),
            Some(Value::Array(a)) if key == "command" || key == "cmd" => {
                return a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" ");
            }
            _ => {}
        }
    }
    match input {
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Model calls in a transcript (for `sessions list` on this machine):
/// `None` for a transcript in a format we do not read (nothing in it is a
/// prompt, a tool call or a model call), so the count shows as unknown
/// rather than as 0.
pub fn count_model_calls(path: &str) -> Option<u64> {
    if !std::path::Path::new(path).is_file() {
        return None;
    }
    let seen = Follower::new(PathBuf::from(path)).poll();
    if seen.is_empty() {
        return None;
    }
    Some(seen.iter().filter(|(_, h)| matches!(h, Happening::ModelCall(_))).count() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn claude_lines_become_prompts_tools_and_model_calls() {
        let p = std::env::temp_dir().join(format!("preloop-transcript-{}.jsonl", preloop_shared::fsutil::note_id()));
        let mut f = std::fs::File::create(&p).unwrap();
        writeln!(f, r#"{{"type":"user","message":{{"role":"user","content":"Fix the test"}},"timestamp":"2026-12-02T10:00:00Z"}}"#).unwrap();
        writeln!(f, r#"{{"type":"assistant","message":{{"id":"m1","content":[{{"type":"text","text":"On it."}}]}}}}"#)
            .unwrap();
        writeln!(f, r#"{{"type":"assistant","message":{{"id":"m1","content":[{{"type":"tool_use","name":"Bash","input":{{"command":"cargo test"}}}}]}}}}"#).unwrap();
        write!(f, r#"{{"type":"user","message""#).unwrap();
        drop(f);
        let mut fo = Follower::new(p.clone());
        let got: Vec<Happening> = fo.poll().into_iter().map(|(_, h)| h).collect();
        assert_eq!(
            got,
            vec![
                Happening::Prompt("Fix the test".into()),
                Happening::ModelCall(Some("On it.".into())),
                Happening::ToolCall { name: "Bash".into(), args: "cargo test".into() },
            ]
        );
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        writeln!(f, r#":{{"content":[{{"type":"tool_result"}}]}}}}"#).unwrap();
        assert!(fo.poll().is_empty(), "a tool result is not a prompt");
        assert_eq!(count_model_calls(p.to_str().unwrap()), Some(1));
        let _ = std::fs::remove_file(p);
    }

    #[test]
    fn a_transcript_we_cannot_read_counts_as_unknown_not_zero() {
        let p = std::env::temp_dir().join(format!("preloop-transcript-{}.json", preloop_shared::fsutil::note_id()));
        std::fs::write(&p, "{\"sessionId\":\"g-1\",\"messages\":[{\"type\":\"gemini\"}]}\n").unwrap();
        assert_eq!(count_model_calls(p.to_str().unwrap()), None);
        let _ = std::fs::remove_file(p);
    }
}
