//! The minimisation of ε over the orders (room: `privacy::accountant::rdp`): branch and bound
//! over exact orders, and the binned best-first search for long histories of distinct σ (rigorous
//! lower bounds from σ cells; see the module doc of `rdp`).

use super::*;

/// Pending segments from which the minimisation first bounds each order by binning σ (below this,
/// evaluating an order exactly is cheap enough).
pub(super) const BIN_MIN_SEGMENTS: usize = 4096;

/// Relative widths of the σ cells of the successive bound levels (the first: one cell per
/// mechanism and sampling rate).
pub(super) const BIN_WIDTHS: [f64; 6] = [f64::INFINITY, 0.05, 0.0125, 3e-3, 8e-4, 2e-4];

/// A level is skipped (the order is evaluated exactly instead) when it has more cells than this
/// fraction of the steps' segments.
pub(super) const BIN_MAX_FRACTION: f64 = 0.4;

/// Before any order is exact, the cell budget of a level (as a fraction of the segments).
pub(super) const BIN_FIRST_EXACT_FRACTION: f64 = 0.1;

/// Cells (per bound evaluation) per parallel chunk.
pub(super) const BIN_CHUNK: usize = 256;

/// The pending segments of the history (from `start`), prepared for rigorous lower bounds on the
/// total RDP at any order: Gaussian and Poisson-subsampled Gaussian steps sorted by (mechanism,
/// q, σ), everything else kept as is.
#[derive(Debug)]
pub(super) struct Binned {
    start: usize,
    /// (mechanism, q bits, σ, steps), sorted; mechanism 0 is the full-batch Gaussian.
    noisy: Vec<(u8, u64, f64, u64)>,
    others: Vec<(RdpKernel, u64)>,
    /// Steps in the pending segments.
    steps: f64,
    /// Per level: (kernel at the cell's largest σ, steps in the cell); `None` until built.
    cells: Vec<Option<Vec<(RdpKernel, f64)>>>,
}

impl Binned {
    fn new(segments: &[(RdpKernel, u64)], start: usize) -> Self {
        let mut noisy = Vec::with_capacity(segments.len() - start);
        let mut others = Vec::new();
        let mut steps = 0.0;
        for &(kernel, count) in &segments[start..] {
            steps += count as f64;
            match kernel {
                RdpKernel::Gaussian { sigma } => noisy.push((0u8, 0u64, sigma, count)),
                RdpKernel::PoissonGaussian { q, sigma } => {
                    noisy.push((1u8, q.to_bits(), sigma, count))
                }
                other => others.push((other, count)),
            }
        }
        // Schedules are often monotone already; the sort then costs one pass.
        noisy.sort_unstable_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)).then(a.2.total_cmp(&b.2)));
        Self {
            start,
            noisy,
            others,
            steps,
            cells: vec![None; BIN_WIDTHS.len()],
        }
    }

    /// The cells of `level`: consecutive (sorted) steps of one mechanism and q whose σ lie within
    /// a factor 1 + width of the cell's smallest, each represented by its largest σ.
    fn cells(&mut self, level: usize) -> &[(RdpKernel, f64)] {
        if self.cells[level].is_none() {
            let factor = 1.0 + BIN_WIDTHS[level];
            let mut cells: Vec<(RdpKernel, f64)> = Vec::new();
            let mut open: Option<(u8, u64, f64, f64, f64)> = None; // key, first σ, last σ, steps
            let kernel = |kind: u8, q_bits: u64, sigma: f64| {
                if kind == 0 {
                    RdpKernel::Gaussian { sigma }
                } else {
                    RdpKernel::PoissonGaussian {
                        q: f64::from_bits(q_bits),
                        sigma,
                    }
                }
            };
            for &(kind, q_bits, sigma, count) in &self.noisy {
                match open.as_mut() {
                    Some((k, q, first, last, n))
                        if *k == kind && *q == q_bits && sigma <= *first * factor =>
                    {
                        *last = sigma;
                        *n += count as f64;
                    }
                    _ => {
                        if let Some((k, q, _, last, n)) = open {
                            cells.push((kernel(k, q, last), n));
                        }
                        open = Some((kind, q_bits, sigma, sigma, count as f64));
                    }
                }
            }
            if let Some((k, q, _, last, n)) = open {
                cells.push((kernel(k, q, last), n));
            }
            self.cells[level] = Some(cells);
        }
        self.cells[level].as_deref().unwrap_or(&[])
    }

    /// A lower bound on the total RDP of the pending segments at `alpha` from the cells of
    /// `level`: RDP is non-increasing in σ (a Gaussian of larger variance is a post-processing of
    /// one of smaller variance, and Rényi divergence obeys data processing; van Erven & Harremoës
    /// 2014, Thm. 9), so a step's RDP is at least that at its cell's largest σ. The slack covers
    /// the rounding of both this sum and the exact one (relative 1e-9, plus 4e-15 absolute on
    /// each step's ln A).
    fn lower_bound(&mut self, level: usize, alpha: f64) -> f64 {
        let steps = self.steps;
        let others: f64 = self
            .others
            .iter()
            .map(|(kernel, count)| kernel.rdp(alpha) * *count as f64)
            .sum();
        let cells = self.cells(level);
        let sum_cells = |chunk: &[(RdpKernel, f64)]| -> f64 {
            chunk.iter().map(|(kernel, n)| kernel.rdp(alpha) * n).sum()
        };
        let binned = if cells.len() >= 2 * BIN_CHUNK {
            use rayon::prelude::*;
            let partial: Vec<f64> = cells.par_chunks(BIN_CHUNK).map(sum_cells).collect();
            partial.iter().sum()
        } else {
            sum_cells(cells)
        };
        let total = binned + others;
        if total.is_nan() {
            return 0.0;
        }
        (total * (1.0 - 1e-9) - steps * 4e-15 / (alpha - 1.0)).max(0.0)
    }
}

impl RdpAccountant {
    /// Minimise `objective(α, total RDP at α)` over the grid; `objective` is non-decreasing in the
    /// RDP. Returns (minimum, order index). Uses branch and bound when every kernel is exact.
    pub(super) fn minimise(&self, objective: impl Fn(f64, f64) -> f64) -> (f64, usize) {
        let n = self.orders.len();
        let mut cache = self.lock_cache();
        if !self.all_exact || n <= 8 {
            let mut best = (f64::INFINITY, 0);
            for k in 0..n {
                let v = objective(self.orders[k], self.total_at(&mut cache, k));
                if v < best.0 {
                    best = (v, k);
                }
            }
            return best;
        }
        // Binned bounds when no order has a recent cached total (a fresh long history). Once some
        // orders are cached, the neighbour bounds below keep each later query incremental.
        let pending = cache
            .iter()
            .map(|e| self.segments.len() - e.upto)
            .min()
            .unwrap_or(0);
        if pending >= self.bin_min_segments {
            return self.minimise_binned(&mut cache, &objective);
        }
        let mut known: Vec<Option<f64>> = vec![None; n];
        let mut best = (f64::INFINITY, 0usize);
        let mut evaluate = |k: usize, known: &mut Vec<Option<f64>>, best: &mut (f64, usize)| {
            let r = self.total_at(&mut cache, k);
            known[k] = Some(r);
            let v = objective(self.orders[k], r);
            if v < best.0 || (v == best.0 && k < best.1) {
                *best = (v, k);
            }
        };
        // Seeds: the cheap integer orders 2, 4, …, 64 where the grid has them (integer orders
        // cost a few dozen terms; fractional ones a series each); else ~8 spread over the grid.
        let seeds: Vec<usize> = (0..n)
            .filter(|&k| {
                let a = self.orders[k];
                a.fract() == 0.0 && a <= 64.0 && (a as u64).is_power_of_two()
            })
            .collect();
        if seeds.len() >= 3 {
            for k in seeds {
                evaluate(k, &mut known, &mut best);
            }
        } else {
            for k in (0..n).step_by(n.div_ceil(8)) {
                evaluate(k, &mut known, &mut best);
            }
        }
        loop {
            let mut candidate: Option<(f64, usize)> = None;
            for k in 0..n {
                if known[k].is_some() {
                    continue;
                }
                let lb = objective(self.orders[k], self.rdp_lower_bound(k, &known));
                if candidate.is_none_or(|(c, _)| lb < c) {
                    candidate = Some((lb, k));
                }
            }
            match candidate {
                Some((lb, k)) if lb <= best.0 => evaluate(k, &mut known, &mut best),
                _ => break,
            }
        }
        best
    }

    /// Best-first branch and bound for long pending histories (every kernel exact). Each order
    /// has a lower bound on its total RDP: the larger of the binned bound of its current level
    /// ([`Binned::lower_bound`]), the binned bounds of smaller orders (RDP is non-decreasing in α)
    /// and the monotonicity/convexity bound from exactly evaluated orders
    /// ([`Self::rdp_lower_bound`]). The order with the smallest objective bound (ties: smaller
    /// order) is refined — next level, or the exact total when the next level would cost too
    /// much — until that order is exact: its exact value is then ≤ every other order's bound, so
    /// it is the minimum over the full grid.
    pub(super) fn minimise_binned(
        &self,
        cache: &mut [OrderTotal],
        objective: &impl Fn(f64, f64) -> f64,
    ) -> (f64, usize) {
        let n = self.orders.len();
        let len = self.segments.len();
        let mut binned: Vec<Binned> = Vec::new();
        let mut level: Vec<Option<usize>> = vec![None; n];
        let mut binned_lb = vec![0.0f64; n];
        let mut known: Vec<Option<f64>> = vec![None; n];
        let mut convex_lb = vec![0.0f64; n];
        loop {
            // The order with the smallest bound on the objective.
            let mut pick = (f64::INFINITY, usize::MAX);
            let mut left_max = 0.0f64;
            for k in 0..n {
                left_max = left_max.max(binned_lb[k]);
                let v = match known[k] {
                    Some(r) => objective(self.orders[k], r),
                    None => objective(self.orders[k], left_max.max(convex_lb[k])),
                };
                if pick.1 == usize::MAX || v < pick.0 {
                    pick = (v, k);
                }
            }
            let (value, k) = pick;
            if known[k].is_some() || k == usize::MAX {
                return (value, k);
            }
            let start = cache[k].upto;
            let pending = len - start;
            let next = match level[k] {
                None => Some(0),
                Some(l) if l + 1 < BIN_WIDTHS.len() => Some(l + 1),
                Some(_) => None,
            };
            let index = if pending >= self.bin_min_segments && next.is_some() {
                Some(match binned.iter().position(|b| b.start == start) {
                    Some(i) => i,
                    None => {
                        binned.push(Binned::new(&self.segments, start));
                        binned.len() - 1
                    }
                })
            } else {
                None
            };
            let refined = match (index, next) {
                (Some(i), Some(l)) => {
                    let bins = &mut binned[i];
                    // Finer levels only have more cells: past the budget, evaluate exactly. Until
                    // some order is exact, the order with the smallest bound is probably the
                    // optimum, which needs its exact value anyway: a costly level is skipped.
                    let fraction = if known.iter().any(Option::is_some) {
                        BIN_MAX_FRACTION
                    } else {
                        BIN_FIRST_EXACT_FRACTION
                    };
                    let limit = fraction * bins.noisy.len() as f64;
                    if l > 0 && bins.cells(l).len() as f64 > limit {
                        None
                    } else {
                        let bound = cache[k].total + bins.lower_bound(l, self.orders[k]);
                        binned_lb[k] = binned_lb[k].max(bound);
                        level[k] = Some(l);
                        Some(())
                    }
                }
                _ => None,
            };
            if refined.is_none() {
                known[k] = Some(self.total_at(cache, k));
                for (j, lb) in convex_lb.iter_mut().enumerate() {
                    if known[j].is_none() {
                        *lb = self.rdp_lower_bound(j, &known);
                    }
                }
            }
        }
    }

    /// A lower bound on the total RDP at order index `k` from the computed orders, using that RDP is
    /// non-decreasing in α and f(α) = (α−1)·RDP(α) is convex with f(1) = 0.
    pub(super) fn rdp_lower_bound(&self, k: usize, known: &[Option<f64>]) -> f64 {
        let alpha = self.orders[k];
        let point = |i: usize| known[i].map(|r| (self.orders[i], (self.orders[i] - 1.0) * r));
        let mut left: Vec<(f64, f64)> = Vec::with_capacity(2);
        for i in (0..k).rev() {
            if let Some(p) = point(i) {
                left.push(p);
                if left.len() == 2 {
                    break;
                }
            }
        }
        if left.len() < 2 {
            left.push((1.0, 0.0));
        }
        let mut right: Vec<(f64, f64)> = Vec::with_capacity(2);
        for i in k + 1..known.len() {
            if let Some(p) = point(i) {
                right.push(p);
                if right.len() == 2 {
                    break;
                }
            }
        }
        let mut f_lb = 0.0f64;
        let mut r_lb = 0.0f64;
        // Monotone: RDP(α) ≥ RDP(nearest computed order below).
        if let Some(&(a, f)) = left.first()
            && a > 1.0
        {
            r_lb = f / (a - 1.0);
        }
        // Convex: extend the chord of the two nearest points on each side.
        if left.len() == 2 {
            let (a2, f2) = left[0];
            let (a1, f1) = left[1];
            if f1.is_finite() && f2.is_finite() && a2 > a1 {
                f_lb = f_lb.max(f2 + (alpha - a2) * (f2 - f1) / (a2 - a1));
            }
        }
        if right.len() == 2 {
            let (a3, f3) = right[0];
            let (a4, f4) = right[1];
            if f3.is_finite() && f4.is_finite() && a4 > a3 {
                f_lb = f_lb.max(f3 - (a3 - alpha) * (f4 - f3) / (a4 - a3));
            }
        }
        let bound = r_lb.max(f_lb / (alpha - 1.0));
        // Slack for rounding in the computed totals.
        (bound * (1.0 - 1e-9)).max(0.0)
    }
}
