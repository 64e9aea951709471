//! The regression gate's re-measurement: a hook against its own floor in
//! time blocks, until a sign test is sure which side of its limit the hook
//! is on.
//!
//! Why blocks and not strict alternation: on these VMs the first starts of
//! an executable after a different one pay more (issue 34 measured ~2 ms),
//! and a hook straight after itself starts ~0.1 ms faster; in a block of runs
//! of one program, the first [`BLOCK_WARM`] are thrown away and the rest run
//! warm, for the floor as for the hook. Blocks alternate in the order floor,
//! hook, hook, floor, floor, hook, ... so a drift in the machine's load hits
//! both alike.
//!
//! What is timed: each run's wall time less the time its process spent
//! runnable but waiting for a CPU (the kernel's `run_delay`, read from
//! /proc/<pid>/schedstat after it exits and before it is reaped). A hook
//! uses more CPU than its floor (whose time is mostly the server's answer),
//! so on a machine short of CPU its wall time stretches more than the
//! floor's: measured beside a cold `cargo build` and four other builds (load
//! average 23 on the 2 cores), Claude Code's SessionStart read 2.13× its
//! floor against 1.47× with the waits taken out, which no fixed margin over a
//! baseline can tell from a regression. With the waits out, what remains is
//! what the hook costs when it has a CPU: its own work and its waits for the
//! server, which is what a regression changes. (The server's threads wait for
//! a CPU too; that adds alike to a hook and its floor, which make the same
//! calls.)
//!
//! Why a sequential test: each pair of blocks gives one ratio, hook ÷
//! floor, and how much they scatter depends on the load from elsewhere (the
//! log ratios' standard deviation was 0.04 in one run on this 2-core machine
//! and 0.17 in the next, beside four other builds). After each pair (from
//! [`MIN_PAIRS`] on) a t-test on the logarithms of the ratios asks whether
//! their mean is over the limit: the hook fails only when a hook right at
//! its limit would read that far over it with probability at most
//! [`ALPHA_FAIL`], and passes as soon as it would read that far under it with
//! probability at most [`ALPHA_PASS`]. So a quiet machine decides in a few
//! pairs, and a loaded one measures longer instead of guessing. Undecided
//! after [`MAX_PAIRS`] pairs (the hook sits within the noise of its limit):
//! it passes, and the table says so.

use crate::{Case, ms};
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Runs thrown away at the start of each block.
pub const BLOCK_WARM: usize = 3;
/// Runs measured per block.
pub const BLOCK_RUNS: usize = 12;
/// Fewest pairs of blocks before a verdict.
pub const MIN_PAIRS: usize = 6;
/// Most pairs of blocks per hook.
pub const MAX_PAIRS: usize = 40;
/// A hook fails when a hook right at its limit would read so far over it
/// with probability at most this (one-sided t-test on the log pair ratios).
pub const ALPHA_FAIL: f64 = 0.001;
/// A hook passes when a hook right at its limit would read so far under it
/// with probability at most this.
pub const ALPHA_PASS: f64 = 0.05;
/// Which quantile of a block's runs stands for the block: its second-fastest
/// of 12 runs. Load from elsewhere on the machine only ever adds time, and
/// adds it to some runs and not others: the fast end of a block is the
/// hook's own cost. Measured under load (load average 21 on the 2 cores),
/// the pair ratios of this quantile varied by 4.5% (median coefficient of
/// variation over the hooks) against 26% for the block medians. A
/// regression that adds work to every run moves it as it moves the median;
/// one that strikes only now and then (an occasional sync) is not what this
/// gate looks for.
pub const QUANTILE: f64 = 0.1;

/// What a re-measurement found.
pub struct Remeasured {
    /// Hook ÷ floor, per pair of blocks, in the order measured.
    pub ratios: Vec<f64>,
    /// Pairs over the limit.
    pub over: usize,
    /// `Some(true)`: surely over the limit; `Some(false)`: surely not;
    /// `None`: undecided after [`MAX_PAIRS`].
    pub over_limit: Option<bool>,
}

impl Remeasured {
    /// The geometric mean of the pair ratios (what the test is on).
    pub fn ratio(&self) -> f64 {
        (self.ratios.iter().map(|r| r.ln()).sum::<f64>() / self.ratios.len() as f64).exp()
    }
}

fn quantile(times: &[Duration], q: f64) -> Option<f64> {
    let mut t: Vec<f64> = times.iter().map(|d| ms(*d)).collect();
    if t.is_empty() {
        return None;
    }
    t.sort_by(f64::total_cmp);
    Some(t[((t.len() - 1) as f64 * q).round() as usize])
}

/// The one-sided `alpha` quantile of Student's t with `df` degrees of
/// freedom (Cornish-Fisher from the normal quantile; within 1% of the tables
/// for df ≥ 5 at the levels used here).
pub fn t_quantile(alpha: f64, df: usize) -> f64 {
    // The normal quantile by Acklam's rational approximation (upper tail).
    let p = 1.0 - alpha;
    let q = (-2.0 * (1.0 - p).ln()).sqrt();
    let (c, d) = (
        [-7.784_894_002_430_293e-3, -3.223_964_580_411_365e-1, -2.400_758_277_161_838, -2.549_732_539_343_734, 4.374_664_141_464_968, 2.938_163_982_698_783],
        [7.784_695_709_041_462e-3, 3.224_671_290_700_398e-1, 2.445_134_137_142_996, 3.754_408_661_907_416],
    );
    let z = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5])
        / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
    let n = df as f64;
    z + (z.powi(3) + z) / (4.0 * n)
        + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * n * n)
        + (3.0 * z.powi(7) + 19.0 * z.powi(5) + 17.0 * z.powi(3) - 15.0 * z) / (384.0 * n * n * n)
}

/// The test's verdict on the pair ratios so far against `limit`: the mean
/// of their logarithms, and its one-sided confidence bounds.
pub fn verdict(ratios: &[f64], limit: f64) -> Option<bool> {
    let n = ratios.len();
    if n < MIN_PAIRS {
        return None;
    }
    let logs: Vec<f64> = ratios.iter().map(|r| r.ln()).collect();
    let mean = logs.iter().sum::<f64>() / n as f64;
    let var = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let se = (var / n as f64).sqrt();
    let t = (mean - limit.ln()) / se.max(1e-9);
    if t > t_quantile(ALPHA_FAIL, n - 1) {
        Some(true)
    } else if -t > t_quantile(ALPHA_PASS, n - 1) {
        Some(false)
    } else {
        None
    }
}

/// `--trace FILE`: every run of every block, as
/// `case<TAB>block<TAB>position<TAB>ms less waits<TAB>wall ms`.
pub static TRACE: Mutex<Option<std::fs::File>> = Mutex::new(None);
static BLOCKS: AtomicUsize = AtomicUsize::new(0);

/// One block: [`BLOCK_WARM`] runs thrown away, then [`BLOCK_RUNS`] measured.
fn block(case: &mut Case, next_run: &mut usize) -> Vec<Duration> {
    let mut v = Vec::with_capacity(BLOCK_RUNS);
    let b = BLOCKS.fetch_add(1, Ordering::Relaxed);
    for r in 0..BLOCK_WARM + BLOCK_RUNS {
        let wall = case.run_once(*next_run);
        let d = wall.map(|w| w.saturating_sub(case.waited));
        if let (Some(w), Some(f)) = (wall, TRACE.lock().unwrap_or_else(|e| e.into_inner()).as_mut()) {
            let _ = writeln!(f, "{}\t{b}\t{r}\t{:.4}\t{:.4}", case.name, ms(w - case.waited.min(w)), ms(w));
        }
        if let Some(d) = d
            && r >= BLOCK_WARM
        {
            v.push(d);
        }
        *next_run += 1;
    }
    v
}

/// One pair of blocks (floor first in even pairs, hook first in odd ones):
/// the hook's block quantile ÷ the floor's.
fn pair(cases: &mut [Case], hook: usize, floor: usize, p: usize, next_run: &mut usize) -> Option<f64> {
    let order = if p % 2 == 0 { [floor, hook] } else { [hook, floor] };
    let mut q = [None, None];
    for (slot, &j) in order.iter().enumerate() {
        q[slot] = quantile(&block(&mut cases[j], next_run), QUANTILE);
    }
    let (f, h) = if p % 2 == 0 { (q[0]?, q[1]?) } else { (q[1]?, q[0]?) };
    Some(h / f)
}

/// Measure each `(hook, floor, limit)` of `jobs` until the test decides
/// whether it is over its limit (at most [`MAX_PAIRS`] pairs each), in
/// rounds: one pair of blocks of every undecided hook, then the next. So a
/// hook's pairs are spread over the whole measurement, not taken within a
/// second or two of each other: the load on a shared machine changes over
/// seconds (another build's compile, then its link), and pairs taken in one
/// stretch of it share its bias, which the test would take for certainty.
/// `next_run` numbers the runs (a SessionEnd registers a fresh session per
/// run index).
pub fn remeasure(cases: &mut [Case], jobs: &[(usize, usize, f64)], next_run: &mut usize) -> Vec<Remeasured> {
    let mut out: Vec<Remeasured> =
        jobs.iter().map(|_| Remeasured { ratios: Vec::new(), over: 0, over_limit: None }).collect();
    for p in 0..MAX_PAIRS {
        for (m, &(hook, floor, limit)) in out.iter_mut().zip(jobs) {
            if m.over_limit.is_some() {
                continue;
            }
            let Some(r) = pair(cases, hook, floor, p, next_run) else { continue };
            m.ratios.push(r);
            m.over += usize::from(r > limit);
            m.over_limit = verdict(&m.ratios, limit);
        }
        if out.iter().all(|m| m.over_limit.is_some()) {
            break;
        }
    }
    out
}

/// `pairs` pairs of blocks of each `(hook, floor)`, in rounds as
/// [`remeasure`] takes them, for a baseline: the pair ratios per hook.
pub fn measure(cases: &mut [Case], jobs: &[(usize, usize)], pairs: usize, next_run: &mut usize) -> Vec<Vec<f64>> {
    let mut out = vec![Vec::new(); jobs.len()];
    for p in 0..pairs {
        for (v, &(hook, floor)) in out.iter_mut().zip(jobs) {
            v.extend(pair(cases, hook, floor, p, next_run));
        }
    }
    out
}

/// The baselines in `text` (bench/gate-baseline.txt): `<hook command> <ratio>`
/// per line, `#` comments.
pub fn parse_baseline(text: &str) -> Result<Vec<(String, f64)>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let (Some(hook), Some(ratio), None) = (words.next(), words.next(), words.next()) else {
            return Err(format!("line {}: expected `<hook command> <ratio>`", n + 1));
        };
        let ratio: f64 = ratio
            .parse()
            .ok()
            .filter(|r: &f64| r.is_finite() && *r > 0.0)
            .ok_or_else(|| format!("line {}: {ratio:?} is not a positive ratio", n + 1))?;
        out.push((hook.to_string(), ratio));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the tables: t(0.001) is 5.893 at 5 df, 3.646 at 17, 3.307 at 40;
    /// t(0.01) is 3.365 at 5, 2.457 at 30.
    #[test]
    fn t_quantiles_match_the_tables() {
        for (alpha, df, want) in [(0.001, 5, 5.893), (0.001, 17, 3.646), (0.001, 40, 3.307), (0.01, 5, 3.365), (0.01, 30, 2.457)] {
            let got = t_quantile(alpha, df);
            assert!((got - want).abs() / want < 0.02, "t({alpha}, {df}) = {got}, tables {want}");
        }
    }

    /// No verdict before MIN_PAIRS; a hook clearly under passes, clearly
    /// over fails; one that straddles its limit stays undecided.
    #[test]
    fn the_test_decides_only_when_sure() {
        assert_eq!(verdict(&[1.0; 5], 1.1), None);
        assert_eq!(verdict(&[1.0, 1.01, 0.99, 1.02, 0.98, 1.0], 1.1), Some(false));
        assert_eq!(verdict(&[1.3, 1.31, 1.29, 1.32, 1.28, 1.3], 1.1), Some(true));
        assert_eq!(verdict(&[0.9, 1.3, 1.0, 1.2, 1.1, 1.15, 1.05], 1.1), None);
        assert_eq!(verdict(&[1.3, 1.0, 1.25, 1.05, 1.3, 1.1], 1.1), None);
    }

    #[test]
    fn baselines_parse_and_reject_garbage() {
        let b = parse_baseline("# c\n\npreloop-a 1.50  # note\npreloop-b 2\n").unwrap();
        assert_eq!(b, vec![("preloop-a".to_string(), 1.5), ("preloop-b".to_string(), 2.0)]);
        assert!(parse_baseline("preloop-a").is_err());
        assert!(parse_baseline("preloop-a x").is_err());
        assert!(parse_baseline("preloop-a -1").is_err());
        assert!(parse_baseline("preloop-a 1 2").is_err());
    }
}
