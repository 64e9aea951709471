//! The command line. Exit codes ([`crate::error::Exit`], one table): 0 ok; 1 failure
//! (refused, not found, I/O, server error); 2 usage; 3 note not deliverable
//! (`--wait`: undeliverable, expired, cancelled, or its session ended); 4
//! `--wait` ran out or was interrupted; `doctor`: 5 not installed, 6
//! installation problem, 7 server problem. A closed stdout ends a report with
//! exit 0; a command that changes files finishes its work first and exits
//! as the work did ([`output::out_line`]).

use crate::context::{Ctx, Scope};
use crate::error::{CliError, CliResult, Exit};
use crate::install::{self, Action};
use crate::{demo, doctor, login, notes, output, sessions};
use clap::{Args, Parser, Subcommand};
use preloop_shared::config::{Config, Env};
use preloop_shared::words::{count, noun_for};
use preloop_shared::{Harness, Result};
use std::path::PathBuf;

/// `preloop-hooks --version`: the version and the commit it was built from.
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("PRELOOP_COMMIT"), ")");

#[derive(Parser)]
#[command(
    name = "preloop-hooks",
    version = VERSION,
    about = "Steer a running coding agent (Claude Code, Codex CLI, Cursor, Gemini CLI, Copilot CLI) with operator notes, and manage the preloop hooks",
    after_help = "Start here:\n  preloop-hooks demo       # see a session take notes, step by step\n  preloop-hooks install    # hook up every harness (a checkout: scripts/install)\n  preloop-hooks doctor     # check the setup\n\nFind, watch, steer:\n  preloop-hooks sessions list --active            # find the run\n  preloop-hooks sessions attach ID                # watch it, type notes to it\n  preloop-hooks notes send --session ID \"text\"    # steer it\n  preloop-hooks notes send --children all \"text\"  # from a conductor: its runs\n\nExit codes: 0 ok, 1 failure, 2 usage (bad arguments; the valid values are named), 3 note not\ndeliverable (undeliverable, expired, cancelled, or its session ended), 4 --wait ran out or was\ninterrupted (the note is still pending); doctor: 5 not installed, 6 installation problem,\n7 server problem. A closed stdout (| head) ends a report with exit 0; install, uninstall,\nlogin and logout finish their work anyway and exit as it did."
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
        after_help = "Examples:\n  preloop-hooks uninstall --dry-run\n  preloop-hooks uninstall --harness codex\n\nEvery other entry, key and comment stays; the previous file is kept as <name>.bak.preloop-<time>.\nCursor's hooks.json is left as {\"version\":1,\"hooks\":{}} rather than deleted (deleting does not unload hooks).\nCopilot's preloop.json is ours alone and is removed. $PRELOOP_HOME (notes, sessions, log) stays;\nthe last line says what is left."
    )]
    Uninstall(UninstallArgs),
    /// Check the installation, the server and the local state.
    #[command(visible_alias = "check", alias = "status", after_help = DOCTOR_HELP)]
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
        after_help = "Examples:\n  preloop-hooks demo\n  scripts/demo                       # from a checkout: build, then the demo\n\nRuns SessionStart, a note sent mid-run carried by PreToolUse, a late note rescued by Stop,\nand SessionEnd, against a throwaway local inbox; prints what Claude Code would receive."
    )]
    Demo {
        /// Where the preloop-hooks executable that serves the hooks is (default: this one).
        #[arg(long, value_name = "DIR")]
        bin_dir: Option<PathBuf>,
        /// Keep the demo's PRELOOP_HOME afterwards.
        #[arg(long)]
        keep: bool,
    },
    /// Print the version and the commit it was built from (as --version does).
    Version,
    /// Make the hook commands (preloop-<harness>-<event>) in DIR as links to this executable (and it, when DIR is elsewhere).
    #[command(
        after_help = "Examples:\n  preloop-hooks links --list          # the hook commands, one per line\n  preloop-hooks links /usr/local/bin   # a package's own layout\n\n`install` does this itself (beside this executable, or in $PRELOOP_HOME/bin for a copy in a cargo\ntarget dir or an npm package). Each name becomes a hard link to preloop-hooks (a symlink, or a copy,\nwhere the file system takes no hard link), replacing whatever had that name; one file on disk\nserves them all, by the name it is started as."
    )]
    Links {
        /// The directory (default: the one this executable is in).
        dir: Option<PathBuf>,
        /// Print the hook command names instead, one per line.
        #[arg(long)]
        list: bool,
    },
}

const INSTALL_HELP: &str = "Examples:
  scripts/install                                # from a checkout: build, copy to ~/.local/bin, install
  preloop-hooks install                          # every harness (one not on PATH too, with a note)
  preloop-hooks install --harness claude-code --dry-run
  preloop-hooks install --harness codex          # hooks.json + trust in config.toml
  preloop-hooks install --scope project          # ./.claude, ./.codex, ./.cursor, ./.gemini, ./.github/hooks, ./.pi, ./.opencode

Files: Claude Code ~/.claude/settings.json; Codex CLI $CODEX_HOME/hooks.json and the trust entries
in $CODEX_HOME/config.toml; Cursor CLI ~/.cursor/hooks.json; Gemini CLI ~/.gemini/settings.json
($GEMINI_CLI_HOME); Copilot CLI $COPILOT_HOME/hooks/preloop.json (default ~/.copilot);
Pi $PI_CODING_AGENT_DIR/extensions/preloop.js and preloop.json (default ~/.pi/agent);
OpenCode $XDG_CONFIG_HOME/opencode/plugins/preloop.js and preloop.json (default ~/.config), with
a package-lock.json and node_modules/ beside plugins/ where missing, so that OpenCode installs
nothing at start. Commands are
absolute paths to the hook commands, links to this preloop-hooks executable made beside it (one
file on disk serves every hook, by the name it is started as; --bin-dir to use another). An
executable in a cargo target dir or an npm package is first hard-linked (or copied) to
$PRELOOP_HOME/bin and the links go there (`cargo clean` and `npm update` replace those places). Running it twice changes
nothing the second time. A file that does not parse is refused and left alone. Each changed file
is backed up first. A harness whose program is not on PATH is installed anyway, with a note.";

const DOCTOR_HELP: &str = "Examples:
  preloop-hooks doctor
  preloop-hooks doctor --verbose                 # every hook entry and the known limits
  preloop-hooks doctor --json | jq .problems     # schemas/preloop-hooks/doctor.schema.json

Each problem is one line with its fix. Exit codes: 0 healthy (warnings allowed); 5 our hooks are
installed in no harness; 6 an installation or configuration problem (a config that does not parse
or that another user can write, missing or stale entries, an untrusted Codex hook or project, a
missing or different binary, a wrong timeout); 7 a server problem (unreachable, not a Preloop
server, a token rejected). With Codex hooked up, trust is read from `codex app-server`, which
writes Codex's own state into CODEX_HOME (--no-codex-query derives it from config.toml).";

const LOGIN_HELP: &str = "Examples:
  printf %s \"$API_KEY\" | preloop-hooks login --user --url https://preloop.example.com
        # the operator: a user token (personal API key or JWT) for notes and sessions
  printf %s \"$AGT_TOKEN\" | preloop-hooks login --url https://preloop.example.com
        # an agent's machine: the runtime token (agt_…) the hooks use
  preloop-hooks login --url https://preloop.example.com            # prompts (input hidden)

Either login stores the URL. Tokens are never taken from the command line and never printed. They
are stored in $PRELOOP_HOME/config.json (default ~/.preloop), mode 0600. The URL must be a Preloop
server and the token is checked with a cheap authenticated call first (--no-verify to skip); a
rejected token is not saved.";

/// `--harness` values: every harness slug in the registry, and `all`.
fn harness_values() -> clap::builder::PossibleValuesParser {
    let mut v: Vec<&'static str> = Harness::all().map(Harness::slug).collect();
    v.push("all");
    clap::builder::PossibleValuesParser::new(v)
}

/// What install and uninstall both take: where, and whether to write.
#[derive(Args)]
struct InstallTarget {
    /// Which harness.
    #[arg(long, value_parser = harness_values(), default_value = "all")]
    harness: String,
    /// The user's config (home directory) or the current project's.
    #[arg(long, value_enum, default_value = "user")]
    scope: Scope,
    /// Print the change as a diff and write nothing.
    #[arg(long)]
    dry_run: bool,
}

#[derive(Args)]
struct InstallArgs {
    #[command(flatten)]
    target: InstallTarget,
    /// Where the preloop-hooks executable whose hook commands to install is (default: this one's directory).
    #[arg(long, value_name = "DIR")]
    bin_dir: Option<PathBuf>,
}

#[derive(Args)]
struct UninstallArgs {
    #[command(flatten)]
    target: InstallTarget,
    /// Accepted and ignored: uninstall does not need the binaries.
    #[arg(long, value_name = "DIR", hide = true)]
    bin_dir: Option<PathBuf>,
}

#[derive(Args)]
struct DoctorArgs {
    /// Print the report as JSON (schemas/preloop-hooks/doctor.schema.json).
    #[arg(long)]
    json: bool,
    /// Also show every hook entry and the known limits.
    #[arg(long, short)]
    verbose: bool,
    /// Where the preloop-hooks executable is (default: this one's directory).
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

/// Where things are. The home directory is resolved as the hooks resolve
/// it; without one nothing can be installed.
fn ctx(bin_dir: Option<PathBuf>, config: &Config) -> Result<Ctx> {
    let env = Env::process();
    let cwd = std::env::current_dir().map_err(|e| {
        preloop_shared::Error::Config(format!(
            "the current directory is not usable ({}): cd to a directory that exists",
            preloop_shared::fsutil::io_text(&e)
        ))
    })?;
    let bin_dir = bin_dir.map(|b| if b.is_absolute() { b } else { cwd.join(b) }).unwrap_or_else(default_bin_dir);
    if bin_dir.to_str().is_none() {
        return Err(preloop_shared::Error::Usage(format!(
            "--bin-dir {}: the path is not UTF-8 text, which a hook command cannot hold",
            bin_dir.display()
        )));
    }
    let home = crate::util::home_dir(&env).ok_or_else(|| {
        preloop_shared::Error::Config("cannot tell your home directory: set HOME to it (an absolute path)".into())
    })?;
    Ok(Ctx { home, env, cwd, bin_dir, settings: config.settings.clone(), preloop_home: config.home.clone() })
}

fn run_install(target: &InstallTarget, bin_dir: Option<PathBuf>, action: Action) -> Result<()> {
    let InstallTarget { harness, scope, dry_run } = target;
    let (scope, dry_run) = (*scope, *dry_run);
    let all = harness == "all";
    let harnesses: Vec<Harness> =
        if all { Harness::all().collect() } else { Harness::from_slug(harness).into_iter().collect() };
    let config = Config::load(None);
    // A configuration the hooks would not trust (or read) is fixed first.
    login::refuse_on_problems(&config)?;
    let c = ctx(bin_dir, &config)?;
    install::run(&c, &install::Request { harnesses, all, scope, action, dry_run })
}

/// `--help`'s text after the commands (its "Exit codes:" line is held to
/// [`Exit::ALL`] by `crate::error`'s tests).
#[cfg(test)]
pub(crate) fn after_help() -> String {
    use clap::CommandFactory;
    Cli::command().get_after_help().map(|h| h.to_string()).unwrap_or_default()
}

/// The CLI: parse the arguments ([`preloop_shared::args`]), run the
/// command, return the exit code.
pub fn main_code() -> i32 {
    i32::from(run().code())
}

fn run() -> Exit {
    let cli = Cli::parse_from(preloop_shared::args::args_os());
    // Commands that change files: a closed stdout never stops them
    // (output::out_line), and when it closed they say on stderr that the
    // work was done (newcomer-ux-4, P2).
    let changes = match &cli.command {
        Command::Install(_) => Some("install"),
        Command::Uninstall(_) => Some("uninstall"),
        Command::Login(_) => Some("login"),
        Command::Logout { .. } => Some("logout"),
        Command::Links { list: false, .. } => Some("links"),
        _ => None,
    };
    let result: CliResult<()> = match cli.command {
        Command::Install(a) => run_install(&a.target, a.bin_dir, Action::Install).map_err(CliError::from),
        Command::Uninstall(a) => run_install(&a.target, None, Action::Uninstall).map_err(CliError::from),
        Command::Doctor(a) => {
            let config = Config::load(None);
            match ctx(a.bin_dir, &config) {
                Ok(c) => {
                    let exit = doctor::run(&c, &config, a.json, !a.no_codex_query, a.verbose);
                    // A report read through `| head`: what was read is enough.
                    return if output::stdout_closed() { Exit::Ok } else { exit };
                }
                Err(e) => Err(e.into()),
            }
        }
        Command::Login(a) => {
            login::login(login::LoginArgs { url: a.url, user: a.user, no_verify: a.no_verify }).map_err(CliError::from)
        }
        Command::Logout { user } => login::logout(user).map_err(CliError::from),
        Command::Notes(c) => notes::run_notes(c),
        Command::Sessions(c) => sessions::run(c).map_err(CliError::from),
        Command::Demo { bin_dir, keep } => demo::run(bin_dir.as_deref(), keep).map_err(CliError::from),
        Command::Links { dir, list } => links(dir, list).map_err(CliError::from),
        // `preloop-hooks version`, as in gh, git and kubectl (newcomer 4, P14).
        Command::Version => output::line(&format!("preloop-hooks {VERSION}")).map_err(CliError::from),
    };
    if let Some(verb) = changes
        && output::stdout_closed()
    {
        // The work went on to its end; the exit code is the work's.
        crate::errln!(
            "preloop-hooks: stdout closed before {verb} finished its report; {verb} {} (`preloop-hooks doctor` shows the result)",
            if result.is_ok() { "completed" } else { "did not complete" }
        );
    }
    match result {
        Ok(()) => Exit::Ok,
        // `… -o id | head -1`: stdout went away; that is not a failure.
        Err(e) if e.engine().is_some_and(output::is_broken_pipe) => Exit::Ok,
        Err(e) => {
            // A server (or a proxy) may echo a token in its answer: never print one.
            let secrets = crate::util::secrets(&Config::load(None));
            crate::errln!("preloop-hooks: {}", crate::util::redact(&e.to_string(), &secrets));
            e.exit()
        }
    }
}

/// `links`: the hook commands in a directory, as links to this executable.
fn links(dir: Option<PathBuf>, list: bool) -> Result<()> {
    if list {
        for n in crate::links::names() {
            output::line(n)?;
        }
        return Ok(());
    }
    let exe = std::env::current_exe().map_err(|e| preloop_shared::Error::io("find preloop-hooks itself", e))?;
    let dir = dir.unwrap_or_else(default_bin_dir);
    // Elsewhere, the executable itself goes there too (a link, as the
    // commands): DIR then holds the whole layout.
    let exe = if exe.parent() == Some(dir.as_path()) {
        exe
    } else {
        let own = dir.join(crate::names::CLI_NAME);
        crate::links::link_one(&exe, &own)?;
        own
    };
    let l = crate::links::link_all(&exe, &dir)?;
    if l.changed() == 0 {
        crate::outln!(
            "the {} in {} already link to {}",
            count(crate::links::names().len(), "hook command"),
            dir.display(),
            exe.display()
        );
    } else {
        crate::outln!(
            "{} in {} now {} to {} ({}s; {} replaced another file)",
            count(l.changed(), "hook command"),
            dir.display(),
            noun_for(l.changed(), "links", "link"),
            exe.display(),
            l.how,
            l.replaced.len()
        );
    }
    Ok(())
}

/// README.md, install/README.md and every `--help` say the same (newcomer
/// 4, P12): each `preloop-hooks …` line they show parses, each flag a
/// synopsis names exists, each list of `--harness` values is the
/// registry's, and every command is in install/README.md's table.
#[cfg(test)]
mod readme_agrees_with_help {
    use super::Cli;
    use clap::CommandFactory;
    use clap::error::ErrorKind;

    fn readme(name: &str) -> String {
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(name)).unwrap()
    }

    /// The code in a markdown text: its fenced blocks, line by line, and its
    /// inline code spans.
    fn code_of(md: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut fenced = false;
        for line in md.lines() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                continue;
            }
            if fenced {
                out.push(line.to_string());
                continue;
            }
            let parts: Vec<&str> = line.split('`').collect();
            out.extend(parts.iter().skip(1).step_by(2).map(|s| s.replace("\\|", "|")));
        }
        out
    }

    /// Every `preloop-hooks ARGS` in `code` (a comment, a pipe or `&&`
    /// ends it), as its argument words.
    fn invocations(code: &str) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        // A shell comment is prose.
        let code = if code.trim_start().starts_with('#') { "" } else { code };
        let mut rest = code.split(" # ").next().unwrap_or(code);
        while let Some(i) = rest.find("preloop-hooks ") {
            let before = &rest[..i];
            let after = &rest[i + "preloop-hooks ".len()..];
            rest = after;
            // `npm install -g preloop-hooks` names the package.
            if before.trim_end().ends_with("-g") || before.ends_with(|c: char| c.is_alphanumeric() || c == '-') {
                continue;
            }
            let end =
                [" # ", " | ", "&&", ";", " > "].iter().filter_map(|s| after.find(s)).min().unwrap_or(after.len());
            let words = shlex::split(after[..end].trim().trim_end_matches('\\'))
                .unwrap_or_else(|| panic!("not shell words: preloop-hooks {}", &after[..end]));
            if !words.is_empty() {
                out.push(words);
            }
        }
        out
    }

    /// Every command's after-help text, with its path (`notes send`).
    fn helps(c: &clap::Command, path: &str, out: &mut Vec<(String, String)>) {
        if let Some(h) = c.get_after_help() {
            out.push((path.to_string(), h.to_string()));
        }
        for s in c.get_subcommands() {
            helps(s, format!("{path} {}", s.get_name()).trim(), out);
        }
    }

    /// Why `preloop-hooks words` does not parse, if it does not.
    fn parses(words: &[String], whence: &str) -> Option<String> {
        let mut argv = vec!["preloop-hooks".to_string()];
        argv.extend(words.iter().cloned());
        match Cli::command().try_get_matches_from(&argv) {
            Err(e) if !matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => Some(format!(
                "{whence}: `{}` does not parse: {}",
                argv.join(" "),
                e.to_string().lines().next().unwrap_or("")
            )),
            _ => None,
        }
    }

    #[test]
    fn every_command_line_the_readmes_and_help_show_parses() {
        let (mut seen, mut bad) = (0, Vec::new());
        for name in ["../README.md", "README.md"] {
            for code in code_of(&readme(name)) {
                for words in invocations(&code) {
                    bad.extend(parses(&words, name));
                    seen += 1;
                }
            }
        }
        let mut hs = Vec::new();
        helps(&Cli::command(), "", &mut hs);
        for (path, text) in &hs {
            // An example line, or `code` in the prose.
            let code: Vec<String> = text
                .lines()
                .flat_map(|l| {
                    let t = l.trim_start();
                    if t.starts_with("preloop-hooks ") || t.starts_with("cat ") || t.starts_with("printf ") {
                        vec![t.to_string()]
                    } else {
                        l.split('`').skip(1).step_by(2).map(str::to_string).collect()
                    }
                })
                .collect();
            for line in &code {
                for words in invocations(line) {
                    bad.extend(parses(&words, &format!("`{path} --help`")));
                    seen += 1;
                }
            }
        }
        assert!(bad.is_empty(), "{}", bad.join("\n"));
        assert!(seen > 60, "only {seen} command lines found: the scan is broken");
    }

    #[test]
    fn every_harness_list_is_the_registrys() {
        let slugs: std::collections::BTreeSet<String> =
            preloop_shared::Harness::all().map(|h| h.slug().to_string()).collect();
        let mut lists = 0;
        for name in ["../README.md", "README.md"] {
            for code in code_of(&readme(name)) {
                for (i, _) in code.match_indices("--harness ") {
                    let word = code[i + "--harness ".len()..].split([' ', ']', ')', '`']).next().unwrap_or("");
                    if !word.contains('|') {
                        continue;
                    }
                    let mut listed: std::collections::BTreeSet<String> = word.split('|').map(str::to_string).collect();
                    listed.remove("all");
                    assert_eq!(listed, slugs, "{name}: `{code}` lists other harnesses than the registry");
                    lists += 1;
                }
            }
        }
        assert!(lists >= 2, "the --harness lists were not found");
    }

    #[test]
    fn install_readme_lists_every_command_with_flags_that_exist() {
        let md = readme("README.md");
        let rows: Vec<String> = md
            .lines()
            .filter(|l| l.starts_with("| `"))
            .flat_map(|l| {
                let cell = l.split(" | ").next().unwrap_or("");
                cell.split('`').skip(1).step_by(2).map(|s| s.replace("\\|", "|")).collect::<Vec<_>>()
            })
            .collect();
        let cli = Cli::command();
        for c in cli.get_subcommands().filter(|c| !c.is_hide_set()) {
            let name = c.get_name();
            let rows_of: Vec<&String> = rows.iter().filter(|r| r.split_whitespace().next() == Some(name)).collect();
            assert!(!rows_of.is_empty(), "install/README.md's command table has no row for `{name}`");
        }
        // Each flag a row names exists on that command.
        for row in &rows {
            let words: Vec<&str> = row.split_whitespace().collect();
            let Some(top) = cli.find_subcommand(words[0]) else { continue };
            let sub = words.get(1).and_then(|w| top.find_subcommand(w)).unwrap_or(top);
            for w in &words {
                let Some(flag) = w.trim_start_matches(['[', '(']).strip_prefix("--") else { continue };
                let flag = flag.trim_end_matches([']', ')', ',']);
                let flag = flag.split('=').next().unwrap_or(flag);
                assert!(
                    sub.get_arguments().any(|a| a.get_long() == Some(flag)),
                    "install/README.md: `{row}` names --{flag}, which `{}` does not take",
                    sub.get_name()
                );
            }
        }
    }
}
