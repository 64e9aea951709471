//! Render a [`Report`] for people: the modes, a table of harnesses and
//! scopes, the server, the state, then warnings and problems as bullets
//! wrapped to the terminal.

use super::model::{ConfigState, ProgramState, Report};
use crate::context::Ctx;
use crate::dialect::TrustState;
use crate::util::{self, print_table};
use std::path::Path;

/// The report for people.
pub fn human(ctx: &Ctx, r: &Report, verbose: bool) {
    human_at(ctx, r, verbose, terminal_width())
}

/// Where the executable is and where the hooks run it from, as it is: a
/// hard link or a copy in `$PRELOOP_HOME/bin`, and why (newcomer 4, P11).
fn binaries_line(ctx: &Ctx, r: &Report) -> String {
    let t = |p: &str| util::tilde(&ctx.env, Path::new(p));
    if r.bin_dir == r.hook_dir {
        return t(&r.bin_dir);
    }
    let (exe, hook_exe) = (ctx.exe(), ctx.hook_exe());
    let why = ctx.unstable_reason().unwrap_or_else(|| t(&r.bin_dir));
    if crate::links::is_link_to(&hook_exe, &exe) {
        format!("{} (a hard link to the preloop-hooks in {why})", t(&r.hook_dir))
    } else if hook_exe.exists() {
        format!("{} (a copy of the preloop-hooks in {why})", t(&r.hook_dir))
    } else {
        format!(
            "{} (it is in {why}: install hard-links it, or copies it, to {} and the hooks run it there)",
            t(&r.bin_dir),
            t(&r.hook_dir)
        )
    }
}

/// The report for people, prose wrapped to `width` (None: one line per item).
pub fn human_at(ctx: &Ctx, r: &Report, verbose: bool, width: Option<usize>) {
    let t = |p: &str| util::tilde(&ctx.env, Path::new(p));
    // A labelled line: the label's column, then the text, continued under it.
    let labelled = |label: &str, text: &str| wrap(&format!("{label:<11}"), text, 11, width);
    crate::outln!("{}", labelled("hooks", &format!("{}: {}", r.modes.hooks, r.modes.hooks_why)));
    crate::outln!("{}", labelled("notes", &format!("{}: {}", r.modes.operator, r.modes.operator_why)));
    let binaries = binaries_line(ctx, r);
    crate::outln!("{}", labelled("binaries", &binaries));
    crate::outln!();
    // Four columns, so the table fits 80 (newcomer 4, N11): INSTALLED is
    // the version (or yes/no when it cannot be told), a user's config is
    // named from ~ and a project's from the current directory, marked
    // (project), and "6/6 trusted" says all at once.
    let mut rows: Vec<Vec<String>> = Vec::new();
    for h in &r.harnesses {
        let installed = match (&h.version, h.installed) {
            (Some(v), true) => v.clone(),
            (None, true) => "yes".into(),
            (_, false) => "no".into(),
        };
        let base = vec![h.harness.slug().to_string(), installed];
        for (i, s) in h.scopes.iter().enumerate() {
            let trusted = s.entries.iter().filter(|e| e.trust == Some(TrustState::Trusted)).count();
            let broken = s.entries.iter().filter(|e| e.program.is_some_and(ProgramState::broken)).count();
            let mut row = if i == 0 { base.clone() } else { vec![String::new(), String::new()] };
            // A user's config is under ~; a project's is marked.
            row.push(match Path::new(&s.config).strip_prefix(&ctx.cwd) {
                Ok(rel) if s.scope == "project" => format!("./{} (project)", rel.display()),
                _ if s.scope == "project" => format!("{} (project)", t(&s.config)),
                _ => t(&s.config),
            });
            row.push(if matches!(s.config_state, ConfigState::Ok | ConfigState::Missing) {
                let mut v = format!("{}/{}", s.hooks_present, s.hooks_expected);
                if broken > 0 {
                    v.push_str(&format!(", {broken} broken"));
                }
                if s.trust_source.is_some() && s.hooks_present > 0 {
                    if trusted == s.hooks_present && broken == 0 {
                        v.push_str(" trusted");
                    } else {
                        v.push_str(&format!(", {trusted} trusted"));
                    }
                }
                if s.folder_trusted == Some(false) {
                    v.push_str(", folder not trusted");
                }
                v
            } else {
                "config does not parse".into()
            });
            rows.push(row);
        }
    }
    // Without a terminal (a pipe, a log) the table keeps to 80 columns.
    for l in util::table_lines(&["HARNESS", "INSTALLED", "CONFIG", "OUR HOOKS"], &rows, Some(width.unwrap_or(80))) {
        crate::outln!("{l}");
    }
    if verbose {
        for h in &r.harnesses {
            for s in h.scopes.iter().filter(|s| s.hooks_present > 0) {
                crate::outln!();
                crate::outln!(
                    "{} hooks in {}{}",
                    h.harness.slug(),
                    t(&s.config),
                    s.trust_source.as_deref().map(|x| format!(" (trust: {x})")).unwrap_or_default()
                );
                let trust = s.trust_source.is_some();
                let rows: Vec<Vec<String>> = s
                    .entries
                    .iter()
                    .map(|e| {
                        let mut v = vec![
                            format!("  {}", e.event),
                            if e.present { "present".into() } else { "MISSING".into() },
                            e.timeout.map(|x| x.to_string()).unwrap_or_else(|| "-".into()),
                            e.program.map(ProgramState::as_str).unwrap_or("-").replace('_', " "),
                        ];
                        if trust {
                            v.push(e.trust.map(TrustState::as_str).unwrap_or("-").into());
                        }
                        v.push(
                            e.command
                                .as_deref()
                                .map(|c| util::tilde(&ctx.env, Path::new(c)))
                                .unwrap_or_else(|| e.binary.clone()),
                        );
                        v
                    })
                    .collect();
                if trust {
                    print_table(&["  EVENT", "ENTRY", "TIMEOUT", "BINARY", "TRUST", "COMMAND"], &rows);
                } else {
                    print_table(&["  EVENT", "ENTRY", "TIMEOUT", "BINARY", "COMMAND"], &rows);
                }
            }
        }
    }
    if r.server.configured {
        crate::outln!();
        let server = format!(
            "{}: {}; runtime token {}; user token {}",
            r.server.url.as_deref().unwrap_or(""),
            r.server.health.describe(),
            r.server.runtime_token,
            r.server.user_token
        );
        crate::outln!("{}", labelled("server", &server));
    }
    crate::outln!();
    let st = &r.state;
    let sessions = format!(
        "{} live, {} ended; spool: {}{}; owed acks: {}{}",
        st.sessions_live,
        st.sessions_ended,
        preloop_shared::words::count(st.spooled_notes, "note"),
        if st.sessions_with_spool.is_empty() {
            String::new()
        } else {
            format!(" in {}", st.sessions_with_spool.join(", "))
        },
        st.owed_acks,
        st.inbox_pending.map(|n| format!("; inbox: {n} pending")).unwrap_or_default()
    );
    crate::outln!("{}", labelled("sessions", &sessions));
    if !r.last_errors.is_empty() {
        crate::outln!();
        crate::outln!("last errors ({})", t(&format!("{}/log/hooks.log", r.preloop_home)));
        for e in &r.last_errors {
            crate::outln!("{}", wrap("  ", e, 4, width));
        }
    }
    if verbose && !r.limits.is_empty() {
        crate::outln!();
        crate::outln!("known limits");
        for l in &r.limits {
            crate::outln!("{}", bullet(l, width));
        }
    }
    if verbose && !r.info.is_empty() {
        crate::outln!();
        crate::outln!("notes (informational)");
        for i in &r.info {
            crate::outln!("{}", bullet(i, width));
        }
    }
    // Problems first: what must be fixed, then what is worth knowing.
    if !r.problems.is_empty() {
        crate::outln!();
        crate::outln!("problems");
        for p in &r.problems {
            crate::outln!("{}", bullet(&p.line(), width));
        }
    }
    if !r.warnings.is_empty() {
        crate::outln!();
        crate::outln!("warnings");
        for w in &r.warnings {
            crate::outln!("{}", bullet(&w.line(), width));
        }
    }
    crate::outln!();
    if r.healthy {
        crate::outln!("healthy{}", if verbose { "" } else { " (known limits and every hook: --verbose)" });
    } else {
        crate::outln!(
            "not healthy (exit {} {}){}",
            r.exit_code,
            r.exit,
            if verbose { "" } else { "; every hook: --verbose" }
        );
    }
}

/// The width to wrap to when stdout is a terminal ([`crate::term::width`]).
/// None when stdout is not a terminal: piped output keeps one line per item.
fn terminal_width() -> Option<usize> {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal().then(crate::term::width)
}

/// `  - text`, wrapped at word boundaries to `width` with a hanging indent.
fn bullet(text: &str, width: Option<usize>) -> String {
    wrap("  - ", text, 4, width)
}

/// `first` then `text`, wrapped at word boundaries to `width`, each
/// continuation line indented by `indent` spaces. A word longer than the
/// line (a path, a URL) stays whole. Below 40 columns, or without a width,
/// nothing is wrapped.
fn wrap(first: &str, text: &str, indent: usize, width: Option<usize>) -> String {
    let Some(width) = width.filter(|w| *w >= 40) else { return format!("{first}{text}") };
    let mut out = String::from(first);
    let mut col = first.chars().count();
    // Nothing of `text` on this line yet.
    let mut fresh = true;
    for word in text.split(' ') {
        let n = word.chars().count();
        if !fresh && col + 1 + n > width {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            col = indent;
            fresh = true;
        }
        if !fresh {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += n;
        fresh = false;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bullets_wrap_only_on_a_terminal() {
        let t = "the hooks point at /tmp/dd/bin, which no longer holds the binaries (fix: preloop-hooks install)";
        assert_eq!(bullet(t, None), format!("  - {t}"));
        let w = bullet(t, Some(40));
        assert!(w.lines().all(|l| l.chars().count() <= 40), "{w}");
        assert!(w.lines().skip(1).all(|l| l.starts_with("    ")), "{w}");
        assert_eq!(w.split_whitespace().filter(|x| *x != "-").collect::<Vec<_>>().join(" "), t);
    }

    #[test]
    fn labelled_lines_continue_under_their_text() {
        let t =
            "server: http://127.0.0.1:8765 (URL from ~/.preloop/config.json), user token from ~/.preloop/config.json";
        let w = wrap("notes      ", t, 11, Some(80));
        assert!(w.lines().all(|l| l.chars().count() <= 80), "{w}");
        assert!(w.starts_with("notes      server:"), "{w}");
        assert!(w.lines().skip(1).all(|l| l.starts_with(&" ".repeat(11)) && !l.starts_with(&" ".repeat(12))), "{w}");
        assert_eq!(w.split_whitespace().skip(1).collect::<Vec<_>>().join(" "), t);
        // A word longer than the line stays whole, on a line of its own.
        let long = format!("see {}", "x".repeat(100));
        assert_eq!(wrap("  - ", &long, 4, Some(80)), format!("  - see\n    {}", "x".repeat(100)));
        assert_eq!(wrap("  - ", &long, 4, None), format!("  - {long}"));
    }
}
