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
//! `/proc/<pid>/schedstat` after it exits and before it is reaped). A hook
//! uses more CPU than its floor (whose time is mostly the server's answer),
//! so on a machine short of CPU its wall time stretches more than the
//! floor's: in a run beside a cold `cargo build` and four other builds (load
//! average 23 on the 2 cores), Claude Code's SessionStart read 2.13× its
//! floor in wall time, where runs timed without the waits read 1.43-1.53×:
//! no fixed margin over a baseline tells that from a regression. With the waits out, what remains is
//! what the hook costs when it has a CPU: its own work and its waits for the
//! server, which is what a regression changes. (The server's threads wait for
//! a CPU too; that adds alike to a hook and its floor, which make the same
//! calls.)
//!
//! Why a sequential rank test: each pair of blocks gives one ratio, hook ÷
//! floor, and how much they scatter depends on the load from elsewhere: a
//! burst of it throws a pair far off now and then. After each pair (from
//! [`MIN_PAIRS`] on) a Wilcoxon signed-rank test asks whether the ratios lie
//! over the limit; ranks, so a wild pair counts as one pair, not as a wide
//! spread; the sign test beside it counts pairs over and under only (where
//! a whole floor block ran slow, its pair ranks far under). The hook fails
//! when either is sure that a hook right at its limit would not read that
//! far over it (probability at most [`ALPHA_FAIL`] each; every pair over: 10
//! pairs at least), and passes as soon as either is as sure of the other
//! way (at most [`ALPHA_PASS`]). So a quiet machine decides in a few pairs,
//! and a loaded one measures longer instead of guessing.
//! Undecided after [`MAX_PAIRS`] pairs (the hook sits within the noise of its
//! limit): it passes, and the table says so.

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
/// Most pairs of blocks per hook. 40 left the 1.2x slower twin of Claude
/// Code's SessionEnd undecided in one of five A/B runs beside a cold build
/// (25 of 40 pairs over a 1.1x limit, median 1.18x); a pair costs ~0.1 s of
/// the run, and only an undecided hook takes more.
pub const MAX_PAIRS: usize = 80;
/// A hook fails when a hook right at its limit would rank so far over it
/// with probability at most this (one-sided signed-rank test).
pub const ALPHA_FAIL: f64 = 0.001;
/// A hook passes when a hook right at its limit would rank so far under it
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
    /// The median pair ratio.
    pub fn ratio(&self) -> f64 {
        median(&self.ratios)
    }
}

pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
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

/// The upper `alpha` quantile of the standard normal distribution (Acklam's
/// rational approximation, relative error under 1.2e-9).
pub fn z_quantile(alpha: f64) -> f64 {
    let q = (-2.0 * alpha.ln()).sqrt();
    let c = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    let d = [7.784_695_709_041_462e-3, 3.224_671_290_700_398e-1, 2.445_134_137_142_996, 3.754_408_661_907_416];
    -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5])
        / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0)
}

/// Wilcoxon's signed-rank statistic of the pair ratios' logarithms less the
/// limit's, as a z-score (normal approximation, ties ranked by their mean
/// rank): positive when the ratios lie over the limit.
pub fn signed_rank_z(ratios: &[f64], limit: f64) -> f64 {
    let mut d: Vec<f64> = ratios.iter().map(|r| r.ln() - limit.ln()).filter(|x| *x != 0.0).collect();
    let n = d.len();
    if n == 0 {
        return 0.0;
    }
    d.sort_by(|a, b| a.abs().total_cmp(&b.abs()));
    let mut w = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && d[j + 1].abs() == d[i].abs() {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        w += d[i..=j].iter().filter(|x| **x > 0.0).count() as f64 * rank;
        i = j + 1;
    }
    let n = n as f64;
    (w - n * (n + 1.0) / 4.0) / (n * (n + 1.0) * (2.0 * n + 1.0) / 24.0).sqrt()
}

/// The verdict on the pair ratios so far against `limit`: a Wilcoxon
/// signed-rank test of their median against it, one-sided each way, and the
/// sign test beside it. Ranks, not values: a pair that a burst of load threw
/// far off counts as one pair, not as a wide spread; and where a few such
/// pairs fall the other way (a whole floor block slowed to ~4 ms, ranked
/// highest), the sign test, which counts pairs only, still sees that nearly
/// all of them are over. Either being sure decides (so each direction's
/// error is at most twice its alpha).
pub fn verdict(ratios: &[f64], limit: f64) -> Option<bool> {
    let n = ratios.len();
    if n < MIN_PAIRS {
        return None;
    }
    let z = signed_rank_z(ratios, limit);
    let over = ratios.iter().filter(|r| **r > limit).count();
    let under = ratios.iter().filter(|r| **r < limit).count();
    if z > z_quantile(ALPHA_FAIL) || sign_tail(n, over) <= ALPHA_FAIL {
        Some(true)
    } else if -z > z_quantile(ALPHA_PASS) || sign_tail(n, under) <= ALPHA_PASS {
        Some(false)
    } else {
        None
    }
}

/// The sign test: P(X ≥ k) for X ~ Binomial(n, 1/2), the chance that a hook
/// right at its limit reads over it in at least `k` of `n` pairs.
pub fn sign_tail(n: usize, k: usize) -> f64 {
    let mut c = 1.0f64; // C(n, i)
    let mut sum = 0.0;
    for i in 0..=n {
        if i >= k {
            sum += c;
        }
        c = c * (n - i) as f64 / (i + 1) as f64;
    }
    sum / 2f64.powi(n as i32)
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
    let floor_first = p.is_multiple_of(2);
    let order = if floor_first { [floor, hook] } else { [hook, floor] };
    let mut q = [None, None];
    for (slot, &j) in order.iter().enumerate() {
        q[slot] = quantile(&block(&mut cases[j], next_run), QUANTILE);
    }
    let (f, h) = if floor_first { (q[0]?, q[1]?) } else { (q[1]?, q[0]?) };
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

/// Why a hook was re-measured in blocks, from its round-robin ratio to its
/// reference and its limit: every hook is, but one over its limit in the
/// round-robin pass is so for that, and the others because a round-robin
/// ratio under load strays by up to 40% either way and so clears nothing.
pub fn remeasure_reason(round_robin: Option<f64>, limit: Option<f64>) -> String {
    match (round_robin, limit) {
        (Some(r), Some(l)) if r > l => format!("over its limit round-robin ({r:.2} > {l:.2})"),
        (Some(r), Some(l)) => format!("under its limit round-robin ({r:.2} ≤ {l:.2}), which clears nothing"),
        (None, _) => "no round-robin ratio".to_string(),
        (Some(_), None) => "no limit".to_string(),
    }
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

    #[test]
    fn sign_tails() {
        assert_eq!(sign_tail(10, 0), 1.0);
        assert!((sign_tail(10, 10) - 1.0 / 1024.0).abs() < 1e-12);
        assert!((sign_tail(4, 3) - 5.0 / 16.0).abs() < 1e-12);
    }

    /// 32 of 40 pairs over, the 8 under the farthest off (a whole floor block
    /// slowed): the ranks are not sure, the count is (measured so, a 1.5x
    /// slower Stop beside a cold build).
    #[test]
    fn a_few_wild_pairs_under_do_not_hide_a_slow_hook() {
        let mut r = vec![2.1; 32];
        r.extend([0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.78, 0.8]);
        assert!(signed_rank_z(&r, 1.65) < z_quantile(ALPHA_FAIL));
        assert_eq!(verdict(&r, 1.65), Some(true));
    }

    #[test]
    fn normal_quantiles_match_the_tables() {
        for (alpha, want) in [(0.001, 3.0902), (0.01, 2.3263), (0.05, 1.6449)] {
            assert!((z_quantile(alpha) - want).abs() < 1e-3, "z({alpha}) = {}", z_quantile(alpha));
        }
    }

    /// Six pairs all over the limit: W+ = 21 of 21, z = (21 - 10.5) / 4.77.
    #[test]
    fn signed_ranks() {
        assert!((signed_rank_z(&[2.0; 6], 1.0) - 10.5 / 22.75f64.sqrt()).abs() < 1e-9);
        assert!((signed_rank_z(&[0.5; 6], 1.0) + 10.5 / 22.75f64.sqrt()).abs() < 1e-9);
        // One wild pair weighs as one rank.
        let z1 = signed_rank_z(&[1.2, 1.2, 1.2, 1.2, 1.2, 0.9], 1.1);
        let z2 = signed_rank_z(&[1.2, 1.2, 1.2, 1.2, 1.2, 0.01], 1.1);
        assert!(z1 > 0.0 && (z1 - z2).abs() < 1e-9, "{z1} {z2}");
    }

    /// No verdict before MIN_PAIRS; a hook clearly under passes, clearly
    /// over fails; one that straddles its limit stays undecided.
    #[test]
    fn the_test_decides_only_when_sure() {
        assert_eq!(verdict(&[1.0; 5], 1.1), None);
        assert_eq!(verdict(&[1.0, 1.01, 0.99, 1.02, 0.98, 1.0], 1.1), Some(false));
        // Over in every pair: sure from 10 pairs on (the sign test: 1/1024).
        assert_eq!(verdict(&[1.3; 9], 1.1), None);
        assert_eq!(verdict(&[1.3; 10], 1.1), Some(true));
        assert_eq!(verdict(&[0.9, 1.3, 1.0, 1.2, 1.1, 1.15, 1.05], 1.1), None);
        assert_eq!(verdict(&[1.3, 1.0, 1.25, 1.05, 1.3, 1.12], 1.1), None);
    }

    #[test]
    fn the_reason_for_a_remeasurement_is_stated() {
        assert_eq!(remeasure_reason(Some(1.234), Some(1.1)), "over its limit round-robin (1.23 > 1.10)");
        assert!(remeasure_reason(Some(1.0), Some(1.1)).starts_with("under its limit round-robin (1.00 ≤ 1.10)"));
        assert_eq!(remeasure_reason(None, Some(1.1)), "no round-robin ratio");
    }

    /// A small deterministic generator (xorshift) for the simulations below.
    fn noise(seed: &mut u64) -> f64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        (*seed >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Pair ratios as an A/B run reads them: `true_ratio` times a log-normal
    /// scatter of about `cv` (a sum of uniforms), and now and then (1 in
    /// `wild_every`) a pair thrown far off either way, as a burst of load
    /// does. Fed pair by pair to `verdict` until it decides, as `remeasure`
    /// does: (the verdict, the pairs it took).
    fn sequential(true_ratio: f64, cv: f64, wild_every: u64, limit: f64, seed: &mut u64) -> (Option<bool>, usize) {
        let mut r = Vec::new();
        for _ in 0..MAX_PAIRS {
            let u: f64 = (0..4).map(|_| noise(seed) - 0.5).sum::<f64>() * (3.0f64).sqrt();
            let mut x = true_ratio * (cv * u).exp();
            if (*seed).is_multiple_of(wild_every) {
                x *= if noise(seed) < 0.5 { 0.5 } else { 2.0 };
            }
            r.push(x);
            if let Some(v) = verdict(&r, limit) {
                return (Some(v), r.len());
            }
        }
        (None, r.len())
    }

    /// The A/B gate's settings (limit 1.1, twins 1.2x): with the pair
    /// scatter an A/B run measured (a few percent) and a wild pair in ten,
    /// a hook as fast as the base never fails and a 1.2x slower one always
    /// does, over 1,000 simulated runs each.
    #[test]
    fn ab_limits_catch_a_fifth_slower_and_pass_an_unchanged_hook() {
        let mut seed = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..1000 {
            let (v, _) = sequential(1.0, 0.04, 10, 1.1, &mut seed);
            assert_ne!(v, Some(true), "an unchanged hook failed");
            let (v, n) = sequential(1.2, 0.04, 10, 1.1, &mut seed);
            assert_eq!(v, Some(true), "a 1.2x slower hook was not caught after {n} pairs");
        }
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
