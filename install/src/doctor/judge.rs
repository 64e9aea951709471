//! Turn the [`Facts`] into the [`Report`]: every verdict doctor gives, as a
//! pure function (no file, program or server is touched here), so each one
//! is unit-tested on constructed facts.

use super::collect::{Facts, HarnessFacts, ScopeFacts, ServerFacts};
use super::model::{
    ConfigState, EntryReport, Finding, HarnessReport, HealthState, HookMode, Modes, ProgramState, Report,
    SCHEMA_VERSION, ScopeReport, ServerReport, Severity, TokenState, proven_version,
};
use crate::codex_trust;
use crate::context::{Ctx, Scope};
use crate::dialect::{self, Concern, Dialect, FolderTrust, TrustState};
use crate::edit::{self, Entry, Owner};
use crate::error::Exit;
use crate::hook_rows;
use crate::probe::{Health, TokenCheck};
use crate::util;
use preloop_shared::Harness;
use preloop_shared::config::{Config, Origin, TokenOrigin};
use preloop_shared::words::{count, count_of, noun_for};
use std::path::{Path, PathBuf};

/// The findings so far, each filed once.
#[derive(Default)]
struct Findings {
    problems: Vec<Finding>,
    warnings: Vec<Finding>,
    install_problem: bool,
    server_problem: bool,
    info: Vec<String>,
    /// The harnesses whose asking is in `info` (once each, not per scope).
    asked: Vec<Harness>,
}

impl Findings {
    fn add(&mut self, severity: Severity, f: Finding) {
        let list = if severity == Severity::Warning { &mut self.warnings } else { &mut self.problems };
        if !list.contains(&f) {
            list.push(f);
        }
        match severity {
            Severity::Install => self.install_problem = true,
            Severity::Server => self.server_problem = true,
            Severity::Warning => {}
        }
    }
    fn install(&mut self, f: Finding) {
        self.add(Severity::Install, f);
    }
    fn server(&mut self, f: Finding) {
        self.add(Severity::Server, f);
    }
    fn warn(&mut self, f: Finding) {
        self.add(Severity::Warning, f);
    }
    fn concern(&mut self, n: Concern) {
        self.add(if n.problem { Severity::Install } else { Severity::Warning }, Finding::new(n.what, n.fix));
    }
}

/// The receipt that over-reports (docs/guarantees.md, "Once, per path"):
/// notes the server recorded delivered at the claim, in a session that
/// ended before any output carried them.
fn uncarried_finding(u: &super::model::Uncarried) -> Finding {
    Finding::new(
        format!(
            "session {} ended before {} the server recorded delivered reached the model: {}",
            u.session,
            count(u.note_ids.len(), "note"),
            u.note_ids.join(", ")
        ),
        if u.note_ids.len() == 1 {
            "send it again if it still matters (`preloop-hooks notes status ID` shows `carried: never`)"
        } else {
            "send them again if they still matter (`preloop-hooks notes status ID` shows `carried: never`)"
        },
    )
}

/// `preloop-hooks install` with the flags that reach one harness and scope.
fn install_cmd(h: Option<Harness>, scope: Scope) -> String {
    let mut s = "preloop-hooks install".to_string();
    if let Some(h) = h {
        s.push_str(&format!(" --harness {}", h.slug()));
    }
    if scope == Scope::Project {
        s.push_str(" --scope project");
    }
    s
}

fn scope_label(scope: Scope) -> &'static str {
    match scope {
        Scope::User => "",
        Scope::Project => " (project)",
    }
}

/// Binaries whose entries point at a directory that no longer holds them:
/// (scope, old dir) → harnesses, reported as one line each.
type Moved = Vec<(Scope, PathBuf, Vec<Harness>)>;

/// The report and its exit code, from what [`super::collect`] found.
pub fn judge(ctx: &Ctx, config: &Config, facts: &Facts) -> Report {
    let mut c = Findings::default();
    config_findings(ctx, config, facts, &mut c);
    let mut moved: Moved = Vec::new();
    let harnesses: Vec<HarnessReport> =
        facts.harnesses.iter().map(|h| harness(ctx, facts, h, &mut c, &mut moved)).collect();
    let hook_dir = &facts.hook_dir;
    for (scope, old, hs) in &moved {
        let names: Vec<&str> = hs.iter().map(|h| h.slug()).collect();
        c.install(Finding::new(
            format!(
                "{}{}: the hooks point at {}, which no longer holds the binaries; they are in {} now",
                names.join(", "),
                scope_label(*scope),
                util::tilde(&ctx.env, old),
                util::tilde(&ctx.env, hook_dir)
            ),
            install_cmd(if hs.len() == 1 { Some(hs[0]) } else { None }, *scope),
        ));
    }
    for u in &facts.state.uncarried {
        c.warn(uncarried_finding(u));
    }
    let any_installed = harnesses.iter().any(|r| r.hooks_present > 0);
    let server = server(ctx, config, facts.server.as_ref(), &mut c);
    for (hf, r) in facts.harnesses.iter().zip(&harnesses) {
        if (r.hooks_present > 0 || r.installed)
            && let Some(n) = hf.env.as_ref().and_then(|e| dialect::of(hf.harness).env_warning(e))
        {
            c.concern(n);
        }
    }
    if let Some(why) = &facts.unstable_reason
        && any_installed
    {
        if !facts.hook_exe_exists {
            c.warn(Finding::new(
                format!("this preloop-hooks is in {why}, and no copy of it is in {}", util::tilde(&ctx.env, hook_dir)),
                "preloop-hooks install (it links or copies itself to $PRELOOP_HOME/bin and links the hook commands there)",
            ));
        } else if !facts.exe_same_as_copy {
            c.warn(Finding::new(
                format!(
                    "{} differs from its copy in {}, which the hooks run (an upgrade or a rebuild)",
                    util::tilde(&ctx.env, &ctx.exe()),
                    util::tilde(&ctx.env, hook_dir)
                ),
                "preloop-hooks install (it links or copies it again)",
            ));
        }
    }
    // Hook commands that are not links to the executable beside them: an
    // earlier version's own binaries, or a link to an older copy.
    if any_installed && facts.hook_exe_exists && facts.stale_links > 0 {
        c.warn(Finding::new(
            format!(
                "{} in {} {} not {} to its preloop-hooks (an earlier version's binaries, or an older copy)",
                count(facts.stale_links, "hook command"),
                util::tilde(&ctx.env, hook_dir),
                noun_for(facts.stale_links, "is", "are"),
                noun_for(facts.stale_links, "a link", "links")
            ),
            if facts.stale_links == 1 {
                "preloop-hooks install (it links it again)"
            } else {
                "preloop-hooks install (it links them again)"
            },
        ));
    }
    let limits = limits(config, &harnesses);
    // A config that does not parse may hold our hooks: it is the problem
    // (exit 6), and "installed in no harness" with install as its fix would
    // contradict its line.
    let any_unreadable =
        harnesses.iter().flat_map(|h| &h.scopes).any(|s| matches!(s.config_state, ConfigState::Unparsable(_)));
    let not_installed = !any_installed && !any_unreadable;
    if not_installed {
        c.problems.insert(0, Finding::new("our hooks are installed in no harness", "preloop-hooks install"));
    }
    let exit = if not_installed {
        Exit::NotInstalled
    } else if c.install_problem {
        Exit::InstallProblem
    } else if c.server_problem {
        Exit::ServerProblem
    } else {
        Exit::Ok
    };
    let modes = modes(ctx, config);
    let mut report = Report {
        schema: SCHEMA_VERSION,
        healthy: exit == Exit::Ok,
        exit_code: exit.code(),
        exit: exit.name(),
        mode: modes.hooks,
        modes,
        preloop_home: config.home.display().to_string(),
        bin_dir: ctx.bin_dir.display().to_string(),
        hook_dir: hook_dir.display().to_string(),
        harnesses,
        server,
        state: facts.state.clone(),
        last_errors: facts.last_errors.clone(),
        limits,
        problems: c.problems,
        warnings: c.warnings,
        info: c.info,
        outcome: exit,
    };
    // Nothing a server said reaches the output with a token in it.
    let secrets = util::secrets(config);
    for f in report.problems.iter_mut().chain(report.warnings.iter_mut()) {
        f.what = util::redact(&f.what, &secrets);
        f.fix = util::redact(&f.fix, &secrets);
    }
    for d in report.server.detail.iter_mut() {
        *d = util::redact(d, &secrets);
    }
    report
}

fn harness(ctx: &Ctx, facts: &Facts, hf: &HarnessFacts, c: &mut Findings, moved: &mut Moved) -> HarnessReport {
    let h = hf.harness;
    let d = dialect::of(h);
    if let (Some(v), Some(p)) = (&hf.version, proven_version(h))
        && v != p
    {
        c.warn(Finding::new(format!("{} {v} is not the version the hooks were proven against ({p})", h.slug()), ""));
    }
    let scopes: Vec<ScopeReport> = hf.scopes.iter().filter_map(|s| scope(ctx, facts, d, s, c, moved)).collect();
    let present: Vec<&ScopeReport> = scopes.iter().filter(|s| s.hooks_present > 0).collect();
    if present.len() > 1 {
        c.warn(Finding::new(
            format!(
                "{}: both {} and {} hold our hooks: in this project every event runs them twice",
                h.slug(),
                util::tilde(&ctx.env, Path::new(&present[0].config)),
                util::tilde(&ctx.env, Path::new(&present[1].config))
            ),
            format!("preloop-hooks uninstall --harness {} --scope project", h.slug()),
        ));
    }
    let hooks_present = scopes.iter().map(|s| s.hooks_present).max().unwrap_or(0);
    // A config that does not parse is its own problem: its fix comes first.
    let unreadable = scopes.iter().any(|s| matches!(s.config_state, ConfigState::Unparsable(_)));
    if hf.program.is_some() && hooks_present == 0 && !unreadable {
        c.warn(Finding::new(format!("{} is installed but not hooked up", h.slug()), install_cmd(Some(h), Scope::User)));
    }
    HarnessReport {
        harness: h,
        name: h.name().into(),
        installed: hf.program.is_some(),
        program: hf.program.as_ref().map(|p| p.display().to_string()),
        version: hf.version.clone(),
        proven_version: proven_version(h).map(str::to_string),
        hooks_present,
        hooks_expected: hook_rows::hooks_for(h).count(),
        scopes,
    }
}

/// One scope of one harness, as the checks below see it: what each check
/// needs to name the file and the fix.
struct At<'a> {
    ctx: &'a Ctx,
    facts: &'a Facts,
    d: &'a dyn Dialect,
    sf: &'a ScopeFacts,
    h: Harness,
    /// The hook file, `~`-shortened.
    file: String,
    /// `slug` or `slug (project)`.
    label: String,
}

impl At<'_> {
    /// The install command that repairs this harness in this scope.
    fn install_cmd(&self) -> String {
        install_cmd(Some(self.h), self.sf.scope)
    }
}

/// What the entries of ours say, gathered per entry and judged together.
#[derive(Default)]
struct EntryTally {
    missing_programs: Vec<(PathBuf, ProgramState)>,
    differs: Vec<PathBuf>,
    bad_timeouts: Vec<String>,
    untrusted: Vec<(String, TrustState)>,
}

/// One scope's report: the file's own problems, then (once it holds
/// entries of ours) what may switch them off, then each expected entry,
/// then what the entries say together. `None`: a project scope without
/// entries of ours (nothing to report).
fn scope(
    ctx: &Ctx,
    facts: &Facts,
    d: &dyn Dialect,
    sf: &ScopeFacts,
    c: &mut Findings,
    moved: &mut Moved,
) -> Option<ScopeReport> {
    let h = d.harness();
    let at = At {
        ctx,
        facts,
        d,
        sf,
        h,
        file: util::tilde(&ctx.env, &sf.path),
        label: format!("{}{}", h.slug(), scope_label(sf.scope)),
    };
    let owner = Owner::new(h, &facts.hook_dir);
    let expected: Vec<&hook_rows::HookDef> = hook_rows::hooks_for(h).collect();
    let mut report = ScopeReport {
        scope: sf.scope.name().into(),
        config: sf.path.display().to_string(),
        config_state: sf.state.clone(),
        hooks_present: 0,
        hooks_expected: expected.len(),
        entries: Vec::new(),
        trust_source: None,
        folder_trusted: None,
    };
    if let ConfigState::Unparsable(e) = &sf.state {
        c.install(unparsable(&at, e));
        return Some(report);
    }
    let found: Vec<Entry> = edit::our_entries(&sf.doc, &owner);
    file_problems(&at, c);
    if found.is_empty() && sf.scope == Scope::Project {
        return None;
    }
    if !found.is_empty() {
        switches_and_trust(&at, &found, &mut report, c);
    }
    if sf.scope == Scope::Project {
        report.folder_trusted = sf.folder.known();
        if sf.folder != FolderTrust::Trusted
            && let Some((_, n)) = d.untrusted_folder(ctx, &sf.path, sf.folder)
        {
            c.concern(n);
        }
    }
    let mut tally = EntryTally::default();
    for def in &expected {
        let e = entry(&at, &owner, def, &found, &mut tally, c);
        if e.present {
            report.hooks_present += 1;
        }
        report.entries.push(e);
    }
    if !tally.missing_programs.is_empty() {
        missing_programs(&at, &tally.missing_programs, report.hooks_present, c, moved);
    }
    together(&at, &tally, &report, found.len(), c);
    Some(report)
}

/// The hook file does not parse: the harness may ignore it, and install
/// refuses to touch it.
fn unparsable(at: &At, e: &str) -> Finding {
    Finding::new(
        format!(
            "{}: {} does not parse ({e}); the harness may ignore it, and install refuses to touch it",
            at.h.slug(),
            at.file
        ),
        format!("fix or move {}, then run `{}`", at.file, at.install_cmd()),
    )
}

/// The file itself, whether or not it holds entries of ours: other users
/// can write it, or it also holds Preloop's own hooks.
fn file_problems(at: &At, c: &mut Findings) {
    let (h, file) = (at.h, &at.file);
    if at.sf.writable_by_others {
        c.install(Finding::new(
            format!(
                "{}{}: other users can write {file}, and so make {} run any command",
                h.slug(),
                scope_label(at.sf.scope),
                at.d.short_name()
            ),
            format!("chmod go-w {file}"),
        ));
    }
    let own = edit::preloop_own_entries(&at.sf.doc);
    if !own.is_empty() {
        let mut events: Vec<&str> = own.iter().map(|e| e.event.as_str()).collect();
        events.dedup();
        c.install(Finding::new(
            format!(
                "{}: {file} also holds Preloop's own hooks ({} on {}): each tool call is checked twice and notes are claimed twice",
                h.slug(),
                edit::program_of(&own[0].command).rsplit('/').next().unwrap_or("preloop"),
                events.join(", ")
            ),
            format!(
                "remove the entries that run `{}` from {file} (preloop-hooks does the permission check and carries the notes)",
                own[0].command.chars().take(80).collect::<String>(),
            ),
        ));
    }
}

/// A file that holds entries of ours: what the dialect says switches them
/// off, its companions' problems, the harness's own trust report, and
/// top-level keys the harness rejects the file for.
fn switches_and_trust(at: &At, found: &[Entry], report: &mut ScopeReport, c: &mut Findings) {
    let (h, sf, doc) = (at.h, at.sf, &at.sf.doc);
    for n in at.d.switched_off(&at.file, doc, found, &sf.switches) {
        c.concern(n);
    }
    for n in &sf.companions {
        c.concern(n.clone());
    }
    if let Some(t) = &sf.trust {
        report.trust_source = Some(t.source.clone());
        for p in &t.reported {
            c.warn(Finding::new(format!("{} reports: {p}", h.slug()), ""));
        }
        // Informational (--verbose): a warning on every healthy run would
        // teach people to skip the warnings.
        if let Some(n) = &t.asked
            && !c.asked.contains(&h)
        {
            c.asked.push(h);
            c.info.push(n.clone());
        }
    }
    let extra = at.d.rejected_keys(doc);
    if !extra.is_empty() {
        c.install(Finding::new(
            format!(
                "{}: {} has top-level {} {extra:?}: {} rejects the whole file",
                h.slug(),
                at.file,
                noun_for(extra.len(), "key", "keys"),
                at.d.short_name()
            ),
            format!("remove {} from {}", noun_for(extra.len(), "it", "them"), at.file),
        ));
    }
}

/// One expected hook: its entry of ours, if present, with its program,
/// timeout and trust; what is wrong goes into `tally` (judged together) or,
/// for the dialect's own entry problem, straight into `c`.
fn entry(
    at: &At,
    owner: &Owner,
    def: &hook_rows::HookDef,
    found: &[Entry],
    tally: &mut EntryTally,
    c: &mut Findings,
) -> EntryReport {
    let (h, sf) = (at.h, at.sf);
    let expected_timeout = hook_rows::timeout_value(def, &at.ctx.settings);
    let mine = found.iter().find(|e| e.event == def.on && owner.binary_of(&e.command) == Some(def.binary));
    let mut e = EntryReport {
        event: def.on.into(),
        binary: def.binary.into(),
        present: mine.is_some(),
        command: mine.map(|m| m.command.clone()),
        program: None,
        timeout: mine.and_then(Entry::timeout),
        expected_timeout,
        trust: None,
    };
    let Some(m) = mine else { return e };
    let prog = PathBuf::from(edit::program_of(&m.command));
    let state = sf.programs.iter().find(|(cmd, _)| *cmd == m.command).map(|(_, s)| *s).unwrap_or(ProgramState::Missing);
    e.program = Some(state);
    match state {
        ProgramState::Missing | ProgramState::NotExecutable => tally.missing_programs.push((prog, state)),
        ProgramState::ElsewhereDiffers => tally.differs.push(prog),
        _ => {}
    }
    if e.timeout != Some(expected_timeout) {
        let unit = hook_rows::timeout_unit(h);
        tally.bad_timeouts.push(format!(
            "{} {}, expected {expected_timeout} {unit}",
            def.on,
            e.timeout.map(|t| format!("{t} {unit}")).unwrap_or_else(|| "unset".into())
        ));
    }
    if let Some(p) = at.d.entry_problem(def, &m.value, &format!("{} {}{}", h.slug(), def.on, scope_label(sf.scope))) {
        c.install(Finding::new(p, at.install_cmd()));
    }
    if let Some(t) = &sf.trust {
        let key = codex_trust::snake(def.on);
        let state = t
            .states
            .iter()
            .find(|(cmd, ev, _)| *cmd == m.command && *ev == key)
            .map(|t| t.2)
            .unwrap_or(TrustState::Untrusted);
        if state != TrustState::Trusted {
            tally.untrusted.push((def.on.to_string(), state));
        }
        e.trust = Some(state);
    }
    e
}

/// Programs gone: one directory moved away (filed in `moved`, one line per
/// directory for every harness), or single binaries missing or not
/// executable.
fn missing_programs(
    at: &At,
    missing: &[(PathBuf, ProgramState)],
    hooks_present: usize,
    c: &mut Findings,
    moved: &mut Moved,
) {
    let (ctx, facts, h, scope) = (at.ctx, at.facts, at.h, at.sf.scope);
    let mut dirs: Vec<PathBuf> = missing.iter().filter_map(|(p, _)| p.parent().map(Path::to_path_buf)).collect();
    dirs.dedup();
    let all_gone = dirs.len() == 1 && missing.len() == hooks_present;
    if all_gone && dirs[0] != facts.hook_dir {
        match moved.iter_mut().find(|(s, d, _)| *s == scope && *d == dirs[0]) {
            Some((_, _, hs)) => hs.push(h),
            None => moved.push((scope, dirs[0].clone(), vec![h])),
        }
        return;
    }
    let names: Vec<String> = missing.iter().map(|(p, _)| util::tilde(&ctx.env, p)).collect();
    let all_not_executable = missing.iter().all(|(_, s)| *s == ProgramState::NotExecutable);
    let (what, fix) = if all_not_executable {
        ("not executable", format!("chmod +x {}", names.join(" ")))
    } else if !facts.hook_exe_exists {
        // Nothing to link them to: the executable itself is gone.
        (
            "missing or not executable",
            facts.install_method.as_ref().map(|m| m.reinstall(&ctx.env)).unwrap_or_else(|| at.install_cmd()),
        )
    } else {
        ("missing or not executable", format!("{} (it links the hook commands again)", at.install_cmd()))
    };
    c.install(Finding::new(format!("{}: {} {what}", at.label, names.join(", ")), fix));
}

/// What the entries say together: binaries that differ from this build's,
/// timeouts off the settings, entries the harness does not trust, hooks
/// missing, and entries of ours beyond the expected ones.
fn together(at: &At, tally: &EntryTally, report: &ScopeReport, found: usize, c: &mut Findings) {
    let label = &at.label;
    if !tally.differs.is_empty() {
        let mut dirs: Vec<String> =
            tally.differs.iter().filter_map(|p| p.parent()).map(|d| util::tilde(&at.ctx.env, d)).collect();
        dirs.dedup();
        c.install(Finding::new(
            format!(
                "{label}: {} {} binaries in {} that differ from this build's in {}",
                count(tally.differs.len(), "hook"),
                noun_for(tally.differs.len(), "runs", "run"),
                dirs.join(", "),
                util::tilde(&at.ctx.env, &at.facts.hook_dir)
            ),
            at.install_cmd(),
        ));
    }
    if !tally.bad_timeouts.is_empty() {
        c.install(Finding::new(
            format!("{label}: timeouts differ from the settings ({})", tally.bad_timeouts.join("; ")),
            at.install_cmd(),
        ));
    }
    if !tally.untrusted.is_empty() && report.folder_trusted != Some(false) {
        let events: Vec<String> = tally.untrusted.iter().map(|(e, t)| format!("{e} ({})", t.as_str())).collect();
        c.install(Finding::new(
            format!(
                "{label}: {} not trusted: {}; {} skips {} silently",
                count(tally.untrusted.len(), "hook"),
                events.join(", "),
                at.d.short_name(),
                noun_for(tally.untrusted.len(), "it", "them")
            ),
            at.install_cmd(),
        ));
    }
    if report.hooks_present > 0 && report.hooks_present < report.hooks_expected {
        let missing: Vec<&str> = report.entries.iter().filter(|e| !e.present).map(|e| e.event.as_str()).collect();
        c.install(Finding::new(format!("{label}: hooks missing for {}", missing.join(", ")), at.install_cmd()));
    }
    if found > report.hooks_present {
        c.warn(Finding::new(
            format!(
                "{label}: {} of ours (duplicates or retired events)",
                count_of(found - report.hooks_present, "extra entry", "extra entries")
            ),
            at.install_cmd(),
        ));
    }
}

/// The known limits of each harness the hooks are in (or that is installed).
fn limits(config: &Config, harnesses: &[HarnessReport]) -> Vec<String> {
    let mut l = Vec::new();
    if config.is_local() {
        l.push("local mode: the hooks never decide a permission (the harness's own flow stays in charge); notes reach sessions on this machine only".into());
    } else {
        l.push(format!(
            "server mode: a permission check may wait up to {} s for a human; on a server error PreToolUse fails {:?}, PermissionRequest/Cursor gates fail {:?}",
            config.settings.permission_timeout_secs, config.settings.pre_tool_use_on_error, config.settings.permission_request_on_error
        ));
    }
    for r in harnesses.iter().filter(|r| r.hooks_present > 0 || r.installed) {
        l.extend(dialect::of(r.harness).limits(&config.settings));
    }
    l
}

/// Which mode the hooks and the operator commands use, and why.
pub fn modes(ctx: &Ctx, config: &Config) -> Modes {
    let t = |p: &Path| util::tilde(&ctx.env, p);
    let origin = |o: &Origin| match o {
        Origin::Env => "PRELOOP_URL/PRELOOP_TOKEN in the environment".to_string(),
        Origin::ConfigFile(p) => t(p),
        Origin::Onboarding(p) => format!("{} (Preloop onboarding)", t(p)),
    };
    let (hooks, hooks_why) = match (&config.server, config.mode_unknown) {
        (Some(s), _) => (HookMode::Server, format!("{} with a runtime token from {}", s.url, origin(&s.origin))),
        (None, true) => (
            HookMode::Unknown,
            "a config file that may name a server cannot be used (see problems); gates answer by their fail policy"
                .to_string(),
        ),
        (None, false) => match &config.url {
            Some((u, o)) => (
                HookMode::Local,
                format!(
                    "a URL ({u}, from {}) but no runtime token: the local inbox under {}",
                    origin(o),
                    t(&config.home)
                ),
            ),
            None => (HookMode::Local, format!("no server configured: the local inbox under {}", t(&config.home))),
        },
    };
    let (operator, operator_why) = match (&config.url, &config.user_token) {
        (Some((u, o)), Some((_, to))) => (
            HookMode::Server,
            format!(
                "{u} (URL from {}), user token from {}",
                origin(o),
                match to {
                    TokenOrigin::Env => "PRELOOP_USER_TOKEN in the environment".to_string(),
                    TokenOrigin::ConfigFile(p) => t(p),
                }
            ),
        ),
        (Some((u, o)), None) => (HookMode::Server, format!("{u} (URL from {}), no user token yet", origin(o))),
        (None, _) => (HookMode::Local, format!("no server URL: the local inbox under {}", t(&config.home))),
    };
    // The proxy config.json names carries every call (none is ever taken
    // from the environment): say so where the server is named.
    let via = |why: String| match &config.settings.proxy {
        Some(p) => format!("{why}, through the proxy {} (\"proxy\" in config.json)", p.shown()),
        None => why,
    };
    let hooks_why = if hooks == HookMode::Server { via(hooks_why) } else { hooks_why };
    let operator_why = if operator == HookMode::Server { via(operator_why) } else { operator_why };
    Modes { hooks, hooks_why, operator, operator_why }
}

fn config_findings(ctx: &Ctx, config: &Config, facts: &Facts, c: &mut Findings) {
    for p in &config.problems {
        c.install(Finding::new(p.what.clone(), p.fix.clone()));
    }
    for w in &config.warnings {
        // An override the user's own configuration refused (docs/guarantees.md,
        // "A repository cannot move the gate"): say how to take it.
        let fix = match w.split_once(" in the environment ignored") {
            Some((var, _)) => format!(
                "unset {} (a project's .env or .claude/settings.json env may set it), or set \"allow_env_override\": true in ~/.preloop/config.json",
                var.split('=').next().unwrap_or(var)
            ),
            None => String::new(),
        };
        c.warn(Finding::new(w.clone(), fix));
    }
    for n in &config.notices {
        c.warn(Finding::new(n.what.clone(), n.fix.clone()));
    }
    for f in &facts.open_token_files {
        c.warn(Finding::new(
            format!("{} holds a token and other users can read it", util::tilde(&ctx.env, f)),
            format!("chmod 600 {}", util::tilde(&ctx.env, f)),
        ));
    }
}

fn token_origin_fix(o: &Origin, url: &str) -> String {
    match o {
        Origin::Env => {
            "set PRELOOP_TOKEN to the agent's runtime token (agt_…), or unset PRELOOP_URL/PRELOOP_TOKEN".into()
        }
        Origin::ConfigFile(_) => format!("printf %s \"$AGT_TOKEN\" | preloop-hooks login --url {url}"),
        Origin::Onboarding(p) => format!("onboard the agent again with Preloop's CLI (it rewrites {})", p.display()),
    }
}

fn server(ctx: &Ctx, config: &Config, facts: Option<&ServerFacts>, c: &mut Findings) -> ServerReport {
    let mut r = ServerReport {
        health: HealthState::Unchecked,
        runtime_token: TokenState::NotConfigured,
        user_token: TokenState::NotConfigured,
        ..Default::default()
    };
    let Some(sf) = facts else { return r };
    let url = sf.url.clone();
    let t = |p: &Path| util::tilde(&ctx.env, p);
    r.configured = true;
    r.url = Some(url.clone());
    r.url_from = Some(match &sf.url_origin {
        Origin::Env => "environment".into(),
        Origin::ConfigFile(p) => t(p),
        Origin::Onboarding(p) => format!("{} (Preloop onboarding)", t(p)),
    });
    r.runtime_token_from = config.server.as_ref().map(|s| match &s.origin {
        Origin::Env => "environment".into(),
        Origin::ConfigFile(p) => t(p),
        Origin::Onboarding(p) => t(p),
    });
    r.user_token_from = config.user_token.as_ref().map(|(_, o)| match o {
        TokenOrigin::Env => "environment".into(),
        TokenOrigin::ConfigFile(p) => t(p),
    });
    let url_fix = match &sf.url_origin {
        Origin::Env => "correct PRELOOP_URL (the server's base URL, without /api/v1)".to_string(),
        _ => "store the right one: preloop-hooks login --url URL".to_string(),
    };
    match &sf.health {
        Health::Preloop => {
            r.health = HealthState::Preloop;
            r.reachable = Some(true);
        }
        Health::Unhealthy(why) => {
            r.health = HealthState::Unhealthy;
            r.reachable = Some(true);
            r.detail.push(why.clone());
            c.server(Finding::new(
                format!("server {url}: the Preloop server reports a problem ({why})"),
                "check the server's own logs (its database, its workers)",
            ));
        }
        Health::NotPreloop(why) => {
            r.health = HealthState::NotPreloop;
            r.reachable = Some(true);
            r.detail.push(why.clone());
            c.server(Finding::new(format!("{url} answers but is not a Preloop server ({why})"), url_fix.clone()));
        }
        Health::Unreachable(why) => {
            r.health = HealthState::Unreachable;
            r.reachable = Some(false);
            r.detail.push(why.clone());
            c.server(Finding::new(format!("server {url} unreachable: {why}"), url_fix.clone()));
        }
    }
    if let Some(s) = &config.server {
        r.runtime_token = match &sf.runtime {
            None => TokenState::Unchecked,
            Some(TokenCheck::Accepted) => TokenState::Accepted,
            Some(TokenCheck::Rejected(why)) => {
                r.detail.push(why.clone());
                c.server(Finding::new(
                    format!(
                        "the server rejected the runtime token from {} ({why})",
                        r.runtime_token_from.clone().unwrap_or_default()
                    ),
                    token_origin_fix(&s.origin, &s.url),
                ));
                TokenState::Rejected
            }
            Some(TokenCheck::Unknown(why)) => {
                r.detail.push(why.clone());
                c.server(Finding::new(
                    format!("server {url}: the runtime token check failed ({why})"),
                    url_fix.clone(),
                ));
                TokenState::Unchecked
            }
        };
    }
    match &config.user_token {
        None => c.warn(Finding::new(
            format!("no user token: notes and sessions commands cannot reach {url}"),
            format!("printf %s \"$API_KEY\" | preloop-hooks login --user --url {url}"),
        )),
        Some((_, origin)) => {
            r.user_token = match &sf.user {
                None => TokenState::Unchecked,
                Some(TokenCheck::Accepted) => TokenState::Accepted,
                Some(TokenCheck::Rejected(why)) => {
                    r.detail.push(why.clone());
                    let fix = match origin {
                        TokenOrigin::Env => {
                            "unset PRELOOP_USER_TOKEN, or set it to a valid personal API key or JWT".to_string()
                        }
                        TokenOrigin::ConfigFile(_) => format!(
                            "store a valid personal API key: printf %s \"$API_KEY\" | preloop-hooks login --user --url {url}"
                        ),
                    };
                    c.server(Finding::new(
                        format!(
                            "the server rejected the user token from {} ({why})",
                            r.user_token_from.clone().unwrap_or_default()
                        ),
                        fix,
                    ));
                    TokenState::Rejected
                }
                Some(TokenCheck::Unknown(why)) => {
                    r.detail.push(why.clone());
                    TokenState::Unchecked
                }
            };
        }
    }
    if config.server.is_none() && !config.mode_unknown {
        c.warn(Finding::new(
            format!("a server URL ({url}) is set but no runtime token: the hooks on this machine use the local inbox (fine when the agents run elsewhere)"),
            format!("on an agent's machine: printf %s \"$AGT_TOKEN\" | preloop-hooks login --url {url}"),
        ));
    }
    r
}

#[cfg(test)]
mod tests {
    //! Verdicts on constructed facts: no file, program or server is read.
    use super::*;
    use crate::dialect::{Trust, TrustState};
    use crate::install;
    use crate::probe::Health;
    use preloop_shared::config::{Env, ServerConfig, Settings};
    use serde_json::{Value, json};

    fn ctx() -> Ctx {
        Ctx {
            env: Env::of(&[("HOME", "/h")]),
            home: "/h".into(),
            cwd: "/p".into(),
            bin_dir: "/h/bin".into(),
            settings: Settings::default(),
            preloop_home: "/h/.preloop".into(),
        }
    }

    fn config() -> Config {
        Config {
            home: "/h/.preloop".into(),
            server: None,
            url: None,
            user_token: None,
            settings: Settings::default(),
            warnings: Vec::new(),
            notices: Vec::new(),
            problems: Vec::new(),
            mode_unknown: false,
        }
    }

    /// The hook file install would write for `h` (every entry in `/h/bin`).
    fn installed_doc(h: Harness) -> Value {
        let ctx = ctx();
        let owner = Owner::new(h, Path::new("/h/bin"));
        let text = match dialect::of(h).layout() {
            dialect::Layout::Grouped => {
                edit::edit_grouped("", &owner, &install::desired(&ctx, h), dialect::of(h).syntax()).unwrap()
            }
            dialect::Layout::Flat => {
                edit::edit_flat("", &owner, &install::desired(&ctx, h), dialect::of(h).syntax()).unwrap()
            }
            dialect::Layout::OwnFile => dialect::of(h).own_file(&ctx, &install::desired(&ctx, h)),
        };
        edit::parse_config(&text, dialect::of(h).syntax()).unwrap()
    }

    fn programs(doc: &Value, h: Harness, state: ProgramState) -> Vec<(String, ProgramState)> {
        edit::our_entries(doc, &Owner::new(h, Path::new("/h/bin"))).into_iter().map(|e| (e.command, state)).collect()
    }

    fn scope_facts(h: Harness, scope: Scope, doc: Value, state: ProgramState) -> ScopeFacts {
        ScopeFacts {
            scope,
            path: dialect::of(h).hooks_file(&ctx(), scope),
            state: ConfigState::Ok,
            writable_by_others: false,
            programs: programs(&doc, h, state),
            doc,
            trust: None,
            folder: if scope == Scope::Project { FolderTrust::Trusted } else { FolderTrust::NotNeeded },
            switches: Vec::new(),
            companions: Vec::new(),
        }
    }

    fn harness_facts(h: Harness, scopes: Vec<ScopeFacts>, program: bool) -> HarnessFacts {
        HarnessFacts {
            harness: h,
            program: program.then(|| PathBuf::from(format!("/usr/bin/{}", h.def().program))),
            version: None,
            scopes,
            env: None,
        }
    }

    /// Facts of a machine where only `h` is hooked up, in the user scope.
    fn facts_with(h: Harness, sf: ScopeFacts) -> Facts {
        let mut f = Facts { hook_dir: "/h/bin".into(), hook_exe_exists: true, ..Default::default() };
        for d in dialect::all() {
            let scopes = if d.harness() == h {
                vec![sf.clone()]
            } else {
                vec![ScopeFacts {
                    doc: Value::Null,
                    state: ConfigState::Missing,
                    ..scope_facts(d.harness(), Scope::User, Value::Null, ProgramState::Ok)
                }]
            };
            f.harnesses.push(harness_facts(d.harness(), scopes, false));
        }
        f
    }

    fn whats(v: &[Finding]) -> Vec<&str> {
        v.iter().map(|f| f.what.as_str()).collect()
    }

    #[test]
    fn nothing_installed_is_exit_5_with_the_install_fix_first() {
        let mut f = facts_with(
            Harness::ClaudeCode,
            scope_facts(Harness::ClaudeCode, Scope::User, Value::Null, ProgramState::Ok),
        );
        f.harnesses[0].scopes[0].state = ConfigState::Missing;
        let r = judge(&ctx(), &config(), &f);
        assert_eq!((r.outcome, r.exit_code, r.exit, r.healthy), (Exit::NotInstalled, 5, "not_installed", false));
        assert_eq!(r.problems[0], Finding::new("our hooks are installed in no harness", "preloop-hooks install"));
    }

    /// D-1: notes the server recorded delivered that no output carried
    /// before their session ended are one warning each session, named.
    #[test]
    fn uncarried_notes_of_a_recent_session_are_a_warning() {
        let h = Harness::ClaudeCode;
        let mut f = facts_with(h, scope_facts(h, Scope::User, installed_doc(h), ProgramState::Ok));
        f.state.uncarried = vec![super::super::Uncarried {
            session: "s-1".into(),
            note_ids: vec!["aaaa1111".into(), "bbbb2222".into()],
        }];
        let r = judge(&ctx(), &config(), &f);
        assert!(r.healthy, "history is not a problem: {:?}", r.problems);
        let w = whats(&r.warnings);
        assert!(
            w.iter().any(|w| w.contains("session s-1 ended before 2 notes") && w.contains("aaaa1111, bbbb2222")),
            "{w:?}"
        );
    }

    #[test]
    fn every_harness_installed_as_install_writes_it_is_healthy() {
        for d in dialect::all() {
            let h = d.harness();
            let doc = installed_doc(h);
            let r = judge(&ctx(), &config(), &facts_with(h, scope_facts(h, Scope::User, doc, ProgramState::Ok)));
            assert!(r.healthy && r.problems.is_empty(), "{}: {:?}", h.slug(), r.problems);
            let hr = &r.harnesses.iter().find(|x| x.harness == h).unwrap();
            assert_eq!(hr.hooks_present, hr.hooks_expected, "{}", h.slug());
            assert!(hr.scopes[0].entries.iter().all(|e| e.program == Some(ProgramState::Ok)));
        }
    }

    #[test]
    fn a_missing_program_is_an_install_problem_with_the_install_fix() {
        let h = Harness::Cursor;
        let doc = installed_doc(h);
        let mut sf = scope_facts(h, Scope::User, doc, ProgramState::Ok);
        sf.programs[0].1 = ProgramState::Missing;
        let r = judge(&ctx(), &config(), &facts_with(h, sf));
        assert_eq!(r.outcome, Exit::InstallProblem);
        assert!(
            r.problems[0].what.starts_with("cursor: ~/bin/preloop-cursor-")
                && r.problems[0].what.ends_with("missing or not executable"),
            "{:?}",
            r.problems
        );
        assert!(r.problems[0].fix.starts_with("preloop-hooks install --harness cursor"), "{:?}", r.problems);
    }

    #[test]
    fn harnesses_whose_binaries_all_moved_share_one_line() {
        let mut f = facts_with(
            Harness::ClaudeCode,
            scope_facts(Harness::ClaudeCode, Scope::User, Value::Null, ProgramState::Ok),
        );
        for h in [Harness::ClaudeCode, Harness::Gemini] {
            let ctx = Ctx { bin_dir: "/old".into(), ..ctx() };
            let text = edit::edit_grouped(
                "",
                &Owner::new(h, Path::new("/old")),
                &install::desired(&ctx, h),
                dialect::of(h).syntax(),
            )
            .unwrap();
            let doc = edit::parse_config(&text, dialect::of(h).syntax()).unwrap();
            let mut sf = scope_facts(h, Scope::User, doc, ProgramState::Missing);
            sf.programs = edit::our_entries(&sf.doc, &Owner::new(h, Path::new("/h/bin")))
                .into_iter()
                .map(|e| (e.command, ProgramState::Missing))
                .collect();
            let i = f.harnesses.iter().position(|x| x.harness == h).unwrap();
            f.harnesses[i].scopes = vec![sf];
        }
        let r = judge(&ctx(), &config(), &f);
        assert_eq!(
            whats(&r.problems),
            ["claude-code, gemini: the hooks point at /old, which no longer holds the binaries; they are in ~/bin now"]
        );
        assert_eq!(r.problems[0].fix, "preloop-hooks install");
    }

    #[test]
    fn timeouts_and_loop_limits_are_checked_against_the_settings() {
        let h = Harness::Cursor;
        let mut doc = installed_doc(h);
        doc["hooks"]["stop"][0]["loop_limit"] = json!(9);
        doc["hooks"]["sessionStart"][0]["timeout"] = json!(1);
        let r = judge(&ctx(), &config(), &facts_with(h, scope_facts(h, Scope::User, doc, ProgramState::Ok)));
        assert_eq!(
            whats(&r.problems),
            [
                "cursor stop: loop_limit 9, expected 5 (the adapter checks loop_count against it)",
                "cursor: timeouts differ from the settings (sessionStart 1 s, expected 20 s)"
            ]
        );
        assert_eq!(r.outcome, Exit::InstallProblem);
    }

    #[test]
    fn untrusted_codex_entries_are_a_problem_unless_the_folder_is_untrusted() {
        let h = Harness::Codex;
        let doc = installed_doc(h);
        let mut sf = scope_facts(h, Scope::User, doc, ProgramState::Ok);
        let entries = edit::our_entries(&sf.doc, &Owner::new(h, Path::new("/h/bin")));
        let states = entries
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let s = if i == 0 { TrustState::Modified } else { TrustState::Trusted };
                (e.command.clone(), codex_trust::snake(&e.event), s)
            })
            .collect();
        sf.trust = Some(Trust { source: "derived from config.toml".into(), asked: None, states, reported: Vec::new() });
        let r = judge(&ctx(), &config(), &facts_with(h, sf.clone()));
        assert_eq!(whats(&r.problems), ["codex: 1 hook not trusted: SessionStart (modified); Codex skips it silently"]);
        assert_eq!(r.harnesses[1].scopes[0].trust_source.as_deref(), Some("derived from config.toml"));
        // In an untrusted project the folder is the one problem to fix.
        sf.scope = Scope::Project;
        sf.path = "/p/.codex/hooks.json".into();
        sf.folder = FolderTrust::Untrusted;
        let mut f = facts_with(h, sf);
        f.harnesses[1].scopes.insert(
            0,
            ScopeFacts {
                state: ConfigState::Missing,
                doc: Value::Null,
                trust: None,
                ..scope_facts(h, Scope::User, Value::Null, ProgramState::Ok)
            },
        );
        let r = judge(&ctx(), &config(), &f);
        assert_eq!(
            whats(&r.problems),
            ["codex: /p is not a trusted project, so Codex does not load /p/.codex/hooks.json"]
        );
        assert_eq!(r.harnesses[1].scopes[1].folder_trusted, Some(false));
    }

    #[test]
    fn an_unparsable_config_is_an_install_problem() {
        let h = Harness::ClaudeCode;
        let mut sf = scope_facts(h, Scope::User, Value::Null, ProgramState::Ok);
        sf.state = ConfigState::Unparsable("line 1, column 2: EOF".into());
        let mut f = facts_with(
            Harness::Gemini,
            scope_facts(Harness::Gemini, Scope::User, installed_doc(Harness::Gemini), ProgramState::Ok),
        );
        f.harnesses[0].scopes = vec![sf];
        let r = judge(&ctx(), &config(), &f);
        assert_eq!(r.outcome, Exit::InstallProblem);
        assert_eq!(
            whats(&r.problems),
            [
                "claude-code: ~/.claude/settings.json does not parse (line 1, column 2: EOF); the harness may ignore it, and install refuses to touch it"
            ]
        );
        assert_eq!(
            serde_json::to_value(&r.harnesses[0].scopes[0].config_state).unwrap(),
            json!("does not parse: line 1, column 2: EOF")
        );
    }

    #[test]
    fn server_problems_are_exit_7_and_install_problems_win() {
        let h = Harness::ClaudeCode;
        let mut f = facts_with(h, scope_facts(h, Scope::User, installed_doc(h), ProgramState::Ok));
        f.server = Some(ServerFacts {
            url: "http://s".into(),
            url_origin: Origin::Env,
            health: Health::Unreachable("connection refused".into()),
            runtime: None,
            user: None,
        });
        let mut cfg = config();
        cfg.url = Some(("http://s".into(), Origin::Env));
        cfg.server = Some(ServerConfig {
            url: "http://s".into(),
            token: preloop_shared::config::Secret::new("agt_x"),
            origin: Origin::Env,
        });
        let r = judge(&ctx(), &cfg, &f);
        assert_eq!((r.outcome, r.mode), (Exit::ServerProblem, HookMode::Server));
        assert_eq!(
            (r.server.health, r.server.runtime_token, r.server.user_token),
            (HealthState::Unreachable, TokenState::Unchecked, TokenState::NotConfigured)
        );
        assert_eq!(whats(&r.problems), ["server http://s unreachable: connection refused"]);
        let v = serde_json::to_value(&r.server).unwrap();
        assert_eq!(
            (v["health"].as_str(), v["runtime_token"].as_str(), v["user_token"].as_str()),
            (Some("unreachable"), Some("unchecked"), Some("not configured"))
        );
        f.harnesses[0].scopes[0].programs[0].1 = ProgramState::NotExecutable;
        assert_eq!(judge(&ctx(), &cfg, &f).outcome, Exit::InstallProblem);
    }

    #[test]
    fn switched_off_hooks_and_untrusted_folders_come_from_the_dialect() {
        let h = Harness::Copilot;
        let mut sf = scope_facts(h, Scope::User, installed_doc(h), ProgramState::Ok);
        sf.switches = vec![("~/.copilot/config.json".into(), json!({"disableAllHooks": true}))];
        let r = judge(&ctx(), &config(), &facts_with(h, sf.clone()));
        assert_eq!(
            whats(&r.problems),
            ["copilot: ~/.copilot/config.json sets \"disableAllHooks\": true, so Copilot CLI runs no hooks"]
        );
        // Copilot decides folder trust per session: a warning, not a problem.
        sf.switches.clear();
        sf.scope = Scope::Project;
        sf.path = "/p/.github/hooks/preloop.json".into();
        sf.folder = FolderTrust::PerSession;
        let r = judge(&ctx(), &config(), &facts_with(h, sf));
        assert!(r.healthy, "{:?}", r.problems);
        assert_eq!(
            whats(&r.warnings),
            ["copilot: /p/.github/hooks/preloop.json is loaded only in a trusted folder (decided per session)"]
        );
        assert_eq!(r.harnesses[4].scopes[0].folder_trusted, None);
    }

    #[test]
    fn the_fix_for_a_broken_program_is_the_one_that_restores_it() {
        let h = Harness::Gemini;
        let broken = |state: ProgramState, exe: bool| {
            let mut sf = scope_facts(h, Scope::User, installed_doc(h), ProgramState::Ok);
            sf.programs[0].1 = state;
            let mut f = facts_with(h, sf);
            f.hook_exe_exists = exe;
            f.install_method = Some(crate::context::InstallMethod::Prefix("/h/.local".into()));
            judge(&ctx(), &config(), &f).problems.remove(0)
        };
        let p = broken(ProgramState::NotExecutable, true);
        assert_eq!(
            (p.what.as_str(), p.fix.as_str()),
            (
                "gemini: ~/bin/preloop-gemini-session-start not executable",
                "chmod +x ~/bin/preloop-gemini-session-start"
            )
        );
        let p = broken(ProgramState::Missing, true);
        assert_eq!(p.fix, "preloop-hooks install --harness gemini (it links the hook commands again)");
        let p = broken(ProgramState::Missing, false);
        assert_eq!(
            p.fix,
            "re-run scripts/install from your checkout (or unpack the release tarball into ~/.local again)"
        );
    }

    #[test]
    fn asking_the_harness_is_information_not_a_warning() {
        let h = Harness::Codex;
        let mut sf = scope_facts(h, Scope::User, installed_doc(h), ProgramState::Ok);
        let states = edit::our_entries(&sf.doc, &Owner::new(h, Path::new("/h/bin")))
            .into_iter()
            .map(|e| (e.command, codex_trust::snake(&e.event), TrustState::Trusted))
            .collect();
        sf.trust = Some(Trust {
            source: "codex app-server hooks/list".into(),
            asked: Some("codex trust was read from `codex app-server` (1.0 s)".into()),
            states,
            reported: Vec::new(),
        });
        let r = judge(&ctx(), &config(), &facts_with(h, sf));
        assert!(r.healthy && r.warnings.is_empty(), "{:?}", r.warnings);
        assert_eq!(r.info, ["codex trust was read from `codex app-server` (1.0 s)"]);
    }

    #[test]
    fn an_unreadable_config_is_not_also_not_hooked_up_nor_not_installed() {
        let h = Harness::ClaudeCode;
        let mut sf = scope_facts(h, Scope::User, Value::Null, ProgramState::Ok);
        sf.state = ConfigState::Unparsable("line 9, column 1: trailing characters".into());
        let mut f = facts_with(h, sf);
        f.harnesses[0].program = Some("/usr/bin/claude".into());
        let r = judge(&ctx(), &config(), &f);
        assert_eq!(r.outcome, Exit::InstallProblem);
        assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    }

    #[test]
    fn a_harness_config_others_can_write_is_a_problem() {
        let h = Harness::Cursor;
        let mut sf = scope_facts(h, Scope::User, installed_doc(h), ProgramState::Ok);
        sf.writable_by_others = true;
        let r = judge(&ctx(), &config(), &facts_with(h, sf));
        assert_eq!(r.outcome, Exit::InstallProblem);
        assert_eq!(r.problems[0].fix, "chmod go-w ~/.cursor/hooks.json");
    }
}
