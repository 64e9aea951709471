//! The command line. Exit codes: 0 ok; 1 failure (refused, not found, I/O,
//! server error); 2 usage; 3 note undeliverable/expired (`notes send
//! --wait`); 4 wait timed out; `doctor`: 5 not installed, 6 installation
//! problem, 7 server problem.

use crate::install::{self, Action, Ctx, Scope};
use crate::{demo, doctor, login, notes, output, sessions};
use clap::{Args, Parser, Subcommand, ValueEnum};
use preloop_shared::config::{Config, Env};
use preloop_shared::{Exit, Harness, Result};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "preloop-hooks",
    version,
    about = "Steer a running coding agent (Claude Code, Codex CLI, Cursor) with operator notes, and manage the preloop hooks",
    after_help = "Start here:\n  preloop-hooks demo                 see a session take notes, step by step\n  preloop-hooks install              hook up Claude Code, Codex and Cursor\n  preloop-hooks doctor               check the setup\n\nFind, watch, steer:\n  preloop-hooks sessions list --active             find the run\n  preloop-hooks sessions attach ID                 watch it; type a line to send a note\n  preloop-hooks notes send --session ID \"text\"     steer it (--children all from a conductor)\n\nExit codes: 0 ok, 1 failure, 2 usage (bad arguments; the valid values are named), 3 note not\ndeliverable (undeliverable, expired, cancelled, or its session ended), 4 --wait ran out or was\ninterrupted (the note is still pending); doctor: 5 not installed, 6 installation problem,\n7 server problem. A closed stdout (| head) exits 0."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Add our hook entries to the harnesses' configs.
    #[command(after_help = INSTALL_HELP)]
    Install(InstallArgs),
    /// Remove exactly the entries install added.
    #[command(
        after_help = "Examples:\n  preloop-hooks uninstall --dry-run\n  preloop-hooks uninstall --harness codex\n\nEvery other entry, key and comment stays; the previous file is kept as <name>.bak.preloop-<time>.\nCursor's hooks.json is left as {\"version\":1,\"hooks\":{}} rather than deleted (deleting does not unload hooks)."
    )]
    Uninstall(InstallArgs),
    /// Check the installation, the server and the local state.
    #[command(visible_alias = "status", after_help = DOCTOR_HELP)]
    Doctor(DoctorArgs),
    /// Store the server URL and a token (read from stdin or a hidden prompt).
    #[command(after_help = LOGIN_HELP)]
    Login(LoginArgs),
    /// Remove the stored tokens (and the URL).
    #[command(
        after_help = "Examples:\n  preloop-hooks logout          # URL, runtime token and user token: back to local mode\n  preloop-hooks logout --user   # only the user token"
    )]
    Logout {
        /// Remove only the user token.
        #[arg(long)]
        user: bool,
    },
    /// Send, list, track and cancel operator notes.
    #[command(subcommand)]
    Notes(notes::NotesCmd),
    /// Find the run to steer (list) and watch it live while you steer it (attach).
    #[command(subcommand)]
    Sessions(sessions::SessionsCmd),
    /// Walk through a scripted session: notes carried by the real hook binaries.
    #[command(
        after_help = "Example:\n  cargo build --workspace && target/debug/preloop-hooks demo\n\nRuns SessionStart, a note sent mid-run carried by PreToolUse, a late note rescued by Stop,\nand SessionEnd, against a throwaway local inbox; prints what Claude Code would receive."
    )]
    Demo {
        /// Where the hook binaries are (default: next to preloop-hooks).
        #[arg(long, value_name = "DIR")]
        bin_dir: Option<PathBuf>,
        /// Keep the demo's PRELOOP_HOME afterwards.
        #[arg(long)]
        keep: bool,
    },
}

const INSTALL_HELP: &str = "Examples:
  preloop-hooks install                          # every harness whose hook binaries are here
  preloop-hooks install --harness claude-code --dry-run
  preloop-hooks install --harness codex          # hooks.json + trust in config.toml
  preloop-hooks install --scope project          # ./.claude/settings.json, ./.codex/hooks.json, ./.cursor/hooks.json

Files: Claude Code ~/.claude/settings.json; Codex $CODEX_HOME/hooks.json and the trust entries in
$CODEX_HOME/config.toml; Cursor ~/.cursor/hooks.json. Commands are absolute paths to the binaries
next to preloop-hooks (--bin-dir to change). Running it twice changes nothing the second time.
A file that does not parse is refused and left alone. Each changed file is backed up first.
A harness whose binaries are missing is refused (skipped with --harness all).";

const DOCTOR_HELP: &str = "Examples:
  preloop-hooks doctor
  preloop-hooks doctor --json | jq .problems

Exit codes: 0 healthy (warnings allowed); 5 our hooks are installed in no harness; 6 an installation
problem (missing or stale entries, a config that does not parse, an untrusted Codex hook, a missing
or different binary, a wrong timeout); 7 a server problem (unreachable, a token rejected).";

const LOGIN_HELP: &str = "Examples:
  preloop-hooks login --url https://preloop.example.com            # prompts for the runtime token (agt_…)
  printf %s \"$AGT_TOKEN\" | preloop-hooks login --url https://preloop.example.com
  printf %s \"$API_KEY\" | preloop-hooks login --user                # a user token for notes send/list

Tokens are never taken from the command line and never printed. They are stored in
$PRELOOP_HOME/config.json (default ~/.preloop), mode 0600. The token is checked with a cheap
authenticated call first (--no-verify to skip); a rejected token is not saved.";

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum HarnessArg {
    ClaudeCode,
    Codex,
    Cursor,
    All,
}

#[derive(Args)]
struct InstallArgs {
    /// Which harness.
    #[arg(long, value_enum, default_value = "all")]
    harness: HarnessArg,
    /// The user's config (home directory) or the current project's.
    #[arg(long, value_enum, default_value = "user")]
    scope: Scope,
    /// Print the change as a diff and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Where our hook binaries are (default: the directory of this preloop-hooks).
    #[arg(long, value_name = "DIR")]
    bin_dir: Option<PathBuf>,
}

#[derive(Args)]
struct DoctorArgs {
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Where our hook binaries are (default: the directory of this preloop-hooks).
    #[arg(long, value_name = "DIR")]
    bin_dir: Option<PathBuf>,
    /// Derive Codex trust from config.toml instead of asking `codex app-server`.
    #[arg(long)]
    no_codex_query: bool,
}

#[derive(Args)]
struct LoginArgs {
    /// The Preloop server (e.g. https://preloop.example.com); kept from the config when omitted.
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// Store a user token (personal API key or JWT) for the operator commands instead.
    #[arg(long)]
    user: bool,
    /// Save without checking the token against the server.
    #[arg(long)]
    no_verify: bool,
}

fn default_bin_dir() -> PathBuf {
    std::env::current_exe().ok().and_then(|p| p.parent().map(PathBuf::from)).unwrap_or_else(|| PathBuf::from("."))
}

fn ctx(bin_dir: Option<PathBuf>) -> Ctx {
    let env = Env::process();
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let bin_dir = bin_dir.map(|b| if b.is_absolute() { b } else { cwd.join(b) }).unwrap_or_else(default_bin_dir);
    let config = Config::load(None);
    Ctx { home: crate::util::home_dir(&env), env, cwd, bin_dir, settings: config.settings, preloop_home: config.home }
}

fn run_install(a: InstallArgs, action: Action) -> Result<()> {
    let harnesses = match a.harness {
        HarnessArg::ClaudeCode => vec![Harness::ClaudeCode],
        HarnessArg::Codex => vec![Harness::Codex],
        HarnessArg::Cursor => vec![Harness::Cursor],
        HarnessArg::All => Harness::all().collect(),
    };
    let c = ctx(a.bin_dir);
    install::run(
        &c,
        &install::Request { harnesses, all: a.harness == HarnessArg::All, scope: a.scope, action, dry_run: a.dry_run },
    )
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Install(a) => run_install(a, Action::Install),
        Command::Uninstall(a) => run_install(a, Action::Uninstall),
        Command::Doctor(a) => {
            let c = ctx(a.bin_dir);
            let config = Config::load(None);
            return doctor::run(&c, &config, a.json, !a.no_codex_query).into();
        }
        Command::Login(a) => login::login(login::LoginArgs { url: a.url, user: a.user, no_verify: a.no_verify }),
        Command::Logout { user } => login::logout(user),
        Command::Notes(c) => notes::run_notes(c),
        Command::Sessions(c) => sessions::run(c),
        Command::Demo { bin_dir, keep } => {
            let dir = bin_dir.unwrap_or_else(default_bin_dir);
            demo::run(&dir, keep)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // `… -o id | head -1`: stdout went away; that is not a failure.
        Err(e) if output::is_broken_pipe(&e) => Exit::Ok.into(),
        Err(e) => {
            eprintln!("preloop-hooks: {e}");
            e.exit().into()
        }
    }
}
