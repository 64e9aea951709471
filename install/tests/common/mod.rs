//! Shared helpers for the preloop-hooks tests.

use preloop_hooks::install::Ctx;
use preloop_shared::config::{Env, Settings};
use serde_json::Value;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// A fresh directory under the system temp dir (removed on drop).
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("preloop-hooks-test-{tag}-{}", preloop_shared::fsutil::note_id()));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("PRELOOP_TEST_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A bin dir (with a space in its path) holding a stand-in `preloop-hooks`
/// executable (install links the hook commands to it).
pub fn fake_bin_dir(root: &Path) -> PathBuf {
    let dir = root.join("my bin");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("preloop-hooks");
    std::fs::write(&p, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// A context whose home, project and bin dir are all under `root`.
pub fn ctx(root: &Path) -> Ctx {
    let home = root.join("home");
    let cwd = root.join("project");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&cwd).unwrap();
    Ctx {
        env: Env::of(&[("HOME", &home.display().to_string())]),
        home: home.clone(),
        cwd,
        bin_dir: fake_bin_dir(root),
        settings: Settings::default(),
        preloop_home: root.join("home/.preloop"),
    }
}

pub fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

pub fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

/// The workspace's target dir holding this test binary's siblings.
pub fn cli() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_preloop-hooks"))
}

// ----- running the CLI ---------------------------------------------------------------

/// The exit code (-1 when killed by a signal).
pub fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The CLI with `args` as an operator working in `root` runs it: `HOME`
/// is `root/home`, `PRELOOP_HOME` is `preloop_home`, `USER` is `tester`, and
/// none of the test runner's server, session or harness settings leak in;
/// stdio piped.
pub fn operator_cmd(root: &Path, preloop_home: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(cli());
    c.args(args)
        .current_dir(root)
        .env("HOME", root.join("home"))
        .env("PRELOOP_HOME", preloop_home)
        .env("USER", "tester");
    for k in [
        "PRELOOP_URL",
        "PRELOOP_TOKEN",
        "PRELOOP_USER_TOKEN",
        "PRELOOP_PARENT_SESSION_ID",
        "PRELOOP_AGENT_ID",
        "CODEX_HOME",
        "CLAUDE_CONFIG_DIR",
    ] {
        c.env_remove(k);
    }
    c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

/// Run `cmd` (stdio piped) with `stdin` written, if any, and closed (the
/// CLI may exit before reading it).
pub fn run_with_stdin(mut cmd: Command, stdin: Option<&str>) -> Output {
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut pipe = child.stdin.take().unwrap();
    if let Some(s) = stdin {
        let _ = pipe.write_all(s.as_bytes());
    }
    drop(pipe);
    child.wait_with_output().unwrap()
}

/// A `notes send --wait` (or any command) started in the background with
/// stdin closed.
pub fn spawn_waiting(mut cmd: Command) -> Child {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

/// A background `notes send --wait --json` ended with `expected` (0
/// delivered, 3 undeliverable, 4 timed out): its JSON answer.
pub fn waited(child: Child, expected: i32) -> Value {
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), expected, "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// A run's stdout as JSON, after exit 0.
pub fn json_of(args: &[&str], out: &Output) -> Value {
    assert_eq!(code(out), 0, "{args:?}: {}", stderr(out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {}", stdout(out)))
}

/// Where every schema under `schemas/` is published: its `$id` is this
/// plus its path there.
pub const SCHEMA_BASE: &str = "https://preloop.ai/schemas/";

/// Every schema under `schemas/`: (path relative to it, document).
pub fn all_schemas() -> Vec<(String, Value)> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<(String, Value)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, root, out);
            } else if p.to_string_lossy().ends_with(".schema.json") {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                let doc = serde_json::from_str(&std::fs::read_to_string(&p).unwrap())
                    .unwrap_or_else(|e| panic!("{rel}: {e}"));
                out.push((rel, doc));
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas");
    let mut out = Vec::new();
    walk(&root, &root, &mut out);
    out
}

/// Every schema under `schemas/` in one registry, each under its `$id`
/// (or, without one, the address its path gives it), as a standard
/// validator loads them: a `$ref` between files resolves only if it
/// names another file's `$id`.
pub fn schema_registry() -> &'static jsonschema::Registry<'static> {
    static R: std::sync::OnceLock<jsonschema::Registry<'static>> = std::sync::OnceLock::new();
    R.get_or_init(|| {
        let pairs = all_schemas().into_iter().map(|(rel, doc)| {
            let id =
                doc.get("$id").and_then(Value::as_str).map_or_else(|| format!("{SCHEMA_BASE}{rel}"), str::to_string);
            (id, doc)
        });
        jsonschema::Registry::new().extend(pairs).unwrap().prepare().unwrap_or_else(|e| panic!("schemas/: {e}"))
    })
}

/// A schema of ours (`schemas/preloop-hooks/<name>`), compiled by the
/// jsonschema crate with every other schema loaded and nothing fetched.
pub fn schema(name: &str) -> jsonschema::Validator {
    let rel = format!("preloop-hooks/{name}");
    let (_, doc) = all_schemas().into_iter().find(|(r, _)| *r == rel).unwrap_or_else(|| panic!("no schema {rel}"));
    jsonschema::options()
        .with_registry(schema_registry())
        .offline()
        .build(&doc)
        .unwrap_or_else(|e| panic!("{rel} does not compile with every schema loaded: {e}"))
}

/// `doc` passes our schema `name`.
pub fn check_schema(name: &str, doc: &Value) {
    let errors: Vec<String> = schema(name).iter_errors(doc).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(errors.is_empty(), "{name}: {errors:?}\n{doc:#}");
}

/// One operator's world: a temp root, a `PRELOOP_HOME` under it, and the
/// server's variables when it runs against one. Suites add what they need
/// with their own `impl World` blocks.
pub struct World {
    _t: TempDir,
    pub root: PathBuf,
    pub home: PathBuf,
    pub env: Vec<(String, String)>,
}

impl World {
    /// The local inbox, or `server` (URL, runtime and user tokens) when given.
    pub fn new(tag: &str, server: Option<&preloop_testkit::FakeServer>) -> World {
        let t = TempDir::new(tag);
        let root = t.path().to_path_buf();
        let env = server
            .map(|s| {
                vec![
                    ("PRELOOP_URL".to_string(), s.url()),
                    ("PRELOOP_TOKEN".to_string(), s.runtime_token()),
                    ("PRELOOP_USER_TOKEN".to_string(), s.user_token()),
                ]
            })
            .unwrap_or_default();
        World { home: root.join("preloop"), root, _t: t, env }
    }
    pub fn local(tag: &str) -> World {
        World::new(tag, None)
    }
    pub fn server(tag: &str, s: &preloop_testkit::FakeServer) -> World {
        World::new(tag, Some(s))
    }
    /// `preloop-hooks <args>` in this world.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = operator_cmd(&self.root, &self.home, args);
        c.envs(self.env.iter().cloned());
        c
    }
    pub fn run_env(&self, args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Output {
        let mut c = self.cmd(args);
        c.envs(env.iter().copied());
        run_with_stdin(c, stdin)
    }
    pub fn run(&self, args: &[&str]) -> Output {
        self.run_env(args, &[], None)
    }
    pub fn json(&self, args: &[&str]) -> Value {
        self.json_env(args, &[])
    }
    pub fn json_env(&self, args: &[&str], env: &[(&str, &str)]) -> Value {
        json_of(args, &self.run_env(args, env, None))
    }
    pub fn inbox(&self) -> preloop_shared::local::LocalInbox {
        preloop_shared::local::LocalInbox::new(&self.home, 86_400)
    }
}
