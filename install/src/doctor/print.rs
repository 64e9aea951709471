//! Render a [`Report`] for people: the modes, a table of harnesses and
//! scopes, the server, the state, then warnings and problems as bullets
//! wrapped to the terminal.

use super::{ConfigState, ProgramState, Report, TrustState};
use crate::install::Ctx;
use crate::util::{self, print_table};
use std::path::Path;

/// The report for people.
pub fn human(ctx: &Ctx, r: &Report, verbose: bool) {
    let t = |p: &str| util::tilde(&ctx.env, Path::new(p));
    crate::outln!("hooks      {}: {}", r.modes.hooks, r.modes.hooks_why);
    crate::outln!("notes      {}: {}", r.modes.operator, r.modes.operator_why);
    if r.bin_dir == r.hook_dir {
        crate::outln!("binaries   {}", t(&r.bin_dir));
    } else if Path::new(&r.hook_dir).exists() {
        crate::outln!("binaries   {} (copied from {})", t(&r.hook_dir), t(&r.bin_dir));
    } else {
        crate::outln!(
            "binaries   {} (install copies them to {}: `cargo clean` deletes target/)",
            t(&r.bin_dir),
            t(&r.hook_dir)
        );
    }
    crate::outln!();
    let mut rows: Vec<Vec<String>> = Vec::new();
    for h in &r.harnesses {
        let base = vec![
            h.harness.clone(),
            if h.installed { "yes".into() } else { "no".into() },
            h.version.clone().unwrap_or_else(|| "-".into()),
        ];
        for (i, s) in h.scopes.iter().enumerate() {
            let trusted = s.entries.iter().filter(|e| e.trust == Some(TrustState::Trusted)).count();
            let broken = s.entries.iter().filter(|e| e.program.is_some_and(ProgramState::broken)).count();
            let mut row = if i == 0 { base.clone() } else { vec![String::new(), String::new(), String::new()] };
            row.push(format!("{} ({})", t(&s.config), s.scope));
            row.push(if matches!(s.config_state, ConfigState::Ok | ConfigState::Missing) {
                let mut v = format!("{}/{}", s.hooks_present, s.hooks_expected);
                if broken > 0 {
                    v.push_str(&format!(", {broken} broken"));
                }
                if s.trust_source.is_some() && s.hooks_present > 0 {
                    v.push_str(&format!(", {trusted} trusted"));
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
    print_table(&["HARNESS", "INSTALLED", "VERSION", "CONFIG", "OUR HOOKS"], &rows);
    if verbose {
        for h in &r.harnesses {
            for s in h.scopes.iter().filter(|s| s.hooks_present > 0) {
                crate::outln!();
                crate::outln!(
                    "{} hooks in {}{}",
                    h.harness,
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
        crate::outln!(
            "server     {}: {}; runtime token {}; user token {}",
            r.server.url.as_deref().unwrap_or(""),
            r.server.health.describe(),
            r.server.runtime_token,
            r.server.user_token
        );
    }
    crate::outln!();
    let st = &r.state;
    crate::outln!(
        "sessions   {} live, {} ended; spool: {} note(s){}; owed acks: {}{}",
        st.sessions_live,
        st.sessions_ended,
        st.spooled_notes,
        if st.sessions_with_spool.is_empty() {
            String::new()
        } else {
            format!(" in {}", st.sessions_with_spool.join(", "))
        },
        st.owed_acks,
        st.inbox_pending.map(|n| format!("; inbox: {n} pending")).unwrap_or_default()
    );
    if !r.last_errors.is_empty() {
        crate::outln!();
        crate::outln!("last errors ({})", t(&format!("{}/log/hooks.log", r.preloop_home)));
        for e in &r.last_errors {
            crate::outln!("  {e}");
        }
    }
    if verbose && !r.limits.is_empty() {
        crate::outln!();
        crate::outln!("known limits");
        for l in &r.limits {
            crate::outln!("  - {l}");
        }
    }
    let width = terminal_width();
    if !r.warnings.is_empty() {
        crate::outln!();
        crate::outln!("warnings");
        for w in &r.warnings {
            crate::outln!("{}", bullet(&w.line(), width));
        }
    }
    if !r.problems.is_empty() {
        crate::outln!();
        crate::outln!("problems");
        for p in &r.problems {
            crate::outln!("{}", bullet(&p.line(), width));
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

/// The terminal's width when stdout is one (`COLUMNS`, else the tty's),
/// else None: piped output keeps one line per item.
fn terminal_width() -> Option<usize> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    if let Some(c) = std::env::var("COLUMNS").ok().and_then(|c| c.parse::<usize>().ok()) {
        return Some(c);
    }
    let mut ws = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCGWINSZ writes one winsize through a valid pointer to ours.
    let ok = unsafe { libc::ioctl(1, libc::TIOCGWINSZ, &mut ws) } == 0;
    (ok && ws.ws_col > 0).then_some(ws.ws_col as usize)
}

/// `  - text`, wrapped at word boundaries to `width` with a hanging indent.
fn bullet(text: &str, width: Option<usize>) -> String {
    let Some(width) = width.filter(|w| *w >= 40) else { return format!("  - {text}") };
    let mut out = String::from("  -");
    let mut col = 3;
    for word in text.split(' ') {
        let n = word.chars().count();
        if col > 4 && col + 1 + n > width {
            out.push_str("\n    ");
            col = 4;
            out.push_str(word);
        } else {
            out.push(' ');
            out.push_str(word);
            col += 1;
        }
        col += n;
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
}
