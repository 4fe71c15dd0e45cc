//! [`RdpAccountant`] (room: `privacy::accountant::rdp`): flattens events into per-step kernels
//! (applying the neighbouring relation's distance), accumulates them with cached per-order totals,
//! and converts; the search over orders is in `search.rs`.

use std::sync::Mutex;

use super::*;
use crate::privacy::accountant::checks::{
    check_gaussians, check_noise_multiplier, check_rate, check_scale, describe,
    effective_gaussian_noise_multiplier, round_down_to_grid, sigma_grid_ln_step,
};
use crate::privacy::accountant::{
    Accountant, AccountantKind, AccountingError, PrivacyReport, RdpConversion,
};
use crate::privacy::event::{DpEvent, NeighbouringRelation};

/// The flattened form of an event tree: per-step kernels with multiplicities, or non-private.
#[derive(Debug, Default)]
pub(super) struct Flat {
    kernels: Vec<(RdpKernel, u64)>,
    non_private: bool,
}

/// Segments per parallel chunk when summing a long history at one order.
pub(super) const PARALLEL_CHUNK: usize = 4096;

/// Cached running total of one order: segments summed so far and their total.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct OrderTotal {
    pub(super) upto: usize,
    pub(super) total: f64,
}

/// The RDP accountant: accumulates per-step kernels and converts with the chosen conversion.
#[derive(Debug)]
pub struct RdpAccountant {
    pub(super) relation: NeighbouringRelation,
    pub(super) orders: Vec<f64>,
    pub(super) conversion: RdpConversion,
    pub(super) segments: Vec<(RdpKernel, u64)>,
    pub(super) non_private: bool,
    pub(super) all_exact: bool,
    pub(super) cache: Mutex<Vec<OrderTotal>>,
    /// `ln(1 + step)` of the optional noise-multiplier grid ([`RdpAccountant::with_sigma_grid`]).
    pub(super) sigma_grid: Option<f64>,
    /// With a grid: where each distinct kernel's segment is, so equal kernels share one segment.
    pub(super) kernel_index: std::collections::HashMap<[u64; 3], usize>,
    /// Pending segments from which the minimisation bounds orders by binning σ first
    /// ([`BIN_MIN_SEGMENTS`]; smaller in tests).
    pub(super) bin_min_segments: usize,
}

impl RdpAccountant {
    /// A new accountant. `orders` must be non-empty, finite and each > 1 (use [`default_orders`]).
    pub fn new(
        relation: NeighbouringRelation,
        orders: Vec<f64>,
        conversion: RdpConversion,
    ) -> Result<Self, AccountingError> {
        if orders.is_empty() {
            return Err(AccountingError::InvalidParameter {
                name: "orders",
                value: 0.0,
                expected: "at least one order",
            });
        }
        for &a in &orders {
            if !a.is_finite() || a <= 1.0 {
                return Err(AccountingError::InvalidParameter {
                    name: "orders",
                    value: a,
                    expected: "finite orders > 1",
                });
            }
        }
        let mut orders = orders;
        orders.sort_by(f64::total_cmp);
        orders.dedup();
        let n = orders.len();
        Ok(Self {
            relation,
            orders,
            conversion,
            segments: Vec::new(),
            non_private: false,
            all_exact: true,
            cache: Mutex::new(vec![OrderTotal::default(); n]),
            sigma_grid: None,
            kernel_index: Default::default(),
            bin_min_segments: BIN_MIN_SEGMENTS,
        })
    }

    /// The accountant with dp_accounting's default orders and the Balle et al. conversion.
    pub fn with_defaults(relation: NeighbouringRelation) -> Self {
        Self {
            relation,
            orders: default_orders(),
            conversion: RdpConversion::Improved,
            segments: Vec::new(),
            non_private: false,
            all_exact: true,
            cache: Mutex::new(vec![OrderTotal::default(); default_orders().len()]),
            sigma_grid: None,
            kernel_index: Default::default(),
            bin_min_segments: BIN_MIN_SEGMENTS,
        }
    }

    /// A conservative approximation for long schedules with many distinct noise multipliers:
    /// every full-batch or Poisson-subsampled Gaussian step's noise multiplier σ is rounded DOWN to the geometric grid {(1 + relative_step)^k : k ∈ ℤ}, and
    /// steps with equal kernels share one segment, so a schedule costs one RDP evaluation per
    /// distinct grid value instead of per step.
    ///
    /// Conservative: both RDP curves are exact Rényi divergences, non-increasing in σ (a Gaussian
    /// of larger variance is a post-processing — adding independent noise — of one of smaller
    /// variance, and Rényi divergence obeys data processing; van Erven & Harremoës 2014, Thm. 9), so rounding σ down never lowers any step's RDP and the
    /// reported ε can only grow. It exceeds the exact ε by at most the effect of dividing every σ
    /// by (1 + relative_step) (tested). Laplace steps and sampling without replacement (whose
    /// RDP here is a bound, not a divergence) are unchanged. Must be set before composing;
    /// `relative_step` must lie in [1e-9, 0.1].
    pub fn with_sigma_grid(mut self, relative_step: f64) -> Result<Self, AccountingError> {
        self.sigma_grid = Some(sigma_grid_ln_step("relative_step", relative_step)?);
        Ok(self)
    }

    /// `kernel` with its noise multiplier rounded down to the grid (identity without a grid).
    pub(super) fn on_grid(&self, kernel: RdpKernel) -> RdpKernel {
        let Some(ln_step) = self.sigma_grid else {
            return kernel;
        };
        let down = |sigma: f64| round_down_to_grid(sigma, ln_step);
        match kernel {
            RdpKernel::Gaussian { sigma } => RdpKernel::Gaussian { sigma: down(sigma) },
            RdpKernel::PoissonGaussian { q, sigma } => RdpKernel::PoissonGaussian {
                q,
                sigma: down(sigma),
            },
            other => other,
        }
    }

    /// Add `n` steps of `kernel` to segment `index`, updating cached totals that include it.
    pub(super) fn add_to_segment(&mut self, index: usize, kernel: RdpKernel, n: u64) {
        self.segments[index].1 += n;
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        for (entry, &alpha) in cache.iter_mut().zip(&self.orders) {
            if entry.upto > index {
                entry.total += kernel.rdp(alpha) * n as f64;
            }
        }
    }

    /// The orders of the grid (ascending).
    pub fn orders(&self) -> &[f64] {
        &self.orders
    }

    /// The run-length history of per-step kernels composed so far.
    pub fn segments(&self) -> &[(RdpKernel, u64)] {
        &self.segments
    }

    pub(super) fn unsupported(&self, event: &DpEvent, why: &str) -> AccountingError {
        AccountingError::Unsupported {
            accountant: AccountantKind::Rdp,
            event: format!("{} ({why})", describe(event)),
        }
    }

    pub(super) fn flatten(
        &self,
        event: &DpEvent,
        mult: u64,
        out: &mut Flat,
    ) -> Result<(), AccountingError> {
        let k = self.relation.sensitivity_factor();
        match event {
            DpEvent::NoOp => Ok(()),
            DpEvent::NonPrivate => {
                out.non_private = true;
                Ok(())
            }
            // Unsampled releases: the query moves by `k` times its add/remove sensitivity
            // (2 under replace-one), so the mechanism is analysed at σ/k (Laplace: ε = k/b).
            DpEvent::Gaussian { noise_multiplier } => {
                check_noise_multiplier(*noise_multiplier)?;
                if *noise_multiplier == 0.0 {
                    out.non_private = true;
                } else if mult > 0 {
                    out.kernels.push((
                        RdpKernel::Gaussian {
                            sigma: *noise_multiplier / k,
                        },
                        mult,
                    ));
                }
                Ok(())
            }
            DpEvent::Laplace { scale } => {
                check_scale(*scale)?;
                if *scale == 0.0 {
                    out.non_private = true;
                } else if mult > 0 {
                    out.kernels
                        .push((RdpKernel::Laplace { eps: k / scale }, mult));
                }
                Ok(())
            }
            DpEvent::PoissonSampled {
                sample_rate,
                event: inner,
            } => {
                check_rate(*sample_rate)?;
                check_gaussians(inner)?;
                if self.relation != NeighbouringRelation::AddOrRemoveOne {
                    return Err(self.unsupported(
                        event,
                        "Poisson sampling is analysed under add/remove-one neighbours only",
                    ));
                }
                // Laplace keeps the subsampled bound even at q = 1 (as before the unification).
                self.sampled(
                    inner,
                    *sample_rate,
                    mult,
                    out,
                    |q, eps| RdpKernel::PoissonLaplace { q, eps },
                    |q, sigma| {
                        if q == 1.0 {
                            RdpKernel::Gaussian { sigma }
                        } else {
                            RdpKernel::PoissonGaussian { q, sigma }
                        }
                    },
                    "PoissonSampled",
                )
            }
            DpEvent::SampledWithoutReplacement {
                dataset_size,
                batch_size,
                event: inner,
            } => {
                check_gaussians(inner)?;
                if *dataset_size == 0 || batch_size > dataset_size {
                    return Err(AccountingError::InvalidParameter {
                        name: "batch_size",
                        value: *batch_size as f64,
                        expected: "a batch size no larger than a non-empty dataset",
                    });
                }
                if self.relation != NeighbouringRelation::ReplaceOne {
                    return Err(self.unsupported(
                        event,
                        "sampling without replacement is analysed under replace-one neighbours only",
                    ));
                }
                // The base mechanism of Wang et al.'s theorem is the release on the batch under
                // replace-one: distance 2 in units of the add/remove sensitivity (σ/2, ε = 2/b).
                self.sampled(
                    inner,
                    *batch_size as f64 / *dataset_size as f64,
                    mult,
                    out,
                    |q, eps| {
                        if q == 1.0 {
                            RdpKernel::Laplace { eps }
                        } else {
                            RdpKernel::WorLaplace { q, eps }
                        }
                    },
                    |q, sigma| {
                        if q == 1.0 {
                            RdpKernel::Gaussian { sigma }
                        } else {
                            RdpKernel::WorGaussian { q, sigma }
                        }
                    },
                    "SampledWithoutReplacement",
                )
            }
            DpEvent::RandomAllocation {
                steps,
                event: inner,
            } => {
                check_gaussians(inner)?;
                if *steps == 0 {
                    return Err(AccountingError::InvalidParameter {
                        name: "steps",
                        value: 0.0,
                        expected: "at least one step per random allocation",
                    });
                }
                if self.relation != NeighbouringRelation::AddOrRemoveOne {
                    return Err(self.unsupported(
                        event,
                        "random allocation is analysed under add/remove-one neighbours only",
                    ));
                }
                match effective_gaussian_noise_multiplier(inner) {
                    Ok(None) => Ok(()),
                    Ok(Some(sigma)) => {
                        if mult == 0 {
                        } else if sigma == 0.0 {
                            out.non_private = true;
                        } else {
                            out.kernels.push((
                                RdpKernel::RandomAllocationGaussian {
                                    steps: *steps,
                                    sigma,
                                },
                                mult,
                            ));
                        }
                        Ok(())
                    }
                    Err(bad) => Err(self.unsupported(
                        bad,
                        "only Gaussian releases (one, or several on the same batch) are analysed under random allocation",
                    )),
                }
            }
            DpEvent::SelfComposed { event, count } => {
                self.flatten(event, mult.saturating_mul(*count), out)
            }
            DpEvent::Composed(events) => {
                for e in events {
                    self.flatten(e, mult, out)?;
                }
                Ok(())
            }
        }
    }

    /// The kernel of `inner` released on a sampled batch (rate or fraction `q`), taken `mult`
    /// times: a single Laplace or Gaussians composed on the batch (one effective σ), analysed at
    /// the relation's distance (`NeighbouringRelation::sensitivity_factor`: σ/k, ε = k/b).
    #[allow(clippy::too_many_arguments)]
    fn sampled(
        &self,
        inner: &DpEvent,
        q: f64,
        mult: u64,
        out: &mut Flat,
        laplace: impl Fn(f64, f64) -> RdpKernel,
        gaussian: impl Fn(f64, f64) -> RdpKernel,
        sampling: &str,
    ) -> Result<(), AccountingError> {
        let k = self.relation.sensitivity_factor();
        if let DpEvent::Laplace { scale } = *inner {
            if q == 0.0 || mult == 0 {
            } else if scale == 0.0 {
                out.non_private = true;
            } else {
                out.kernels.push((laplace(q, k / scale), mult));
            }
            return Ok(());
        }
        match effective_gaussian_noise_multiplier(inner) {
            Ok(None) => Ok(()),
            Ok(Some(sigma)) => {
                if q == 0.0 || mult == 0 {
                } else if sigma == 0.0 {
                    out.non_private = true;
                } else {
                    out.kernels.push((gaussian(q, sigma / k), mult));
                }
                Ok(())
            }
            Err(bad) => Err(self.unsupported(
                bad,
                &format!(
                    "inside {sampling} only Gaussians (possibly composed) or a single Laplace are supported"
                ),
            )),
        }
    }

    /// Total RDP of the history at order index `k`, extending the cached running sum.
    pub(super) fn total_at(&self, cache: &mut [OrderTotal], k: usize) -> f64 {
        let entry = &mut cache[k];
        let alpha = self.orders[k];
        let new = &self.segments[entry.upto..];
        let sum_chunk = |chunk: &[(RdpKernel, u64)]| -> f64 {
            chunk
                .iter()
                .map(|(kernel, count)| kernel.rdp(alpha) * *count as f64)
                .sum()
        };
        // Long histories (schedules with many distinct σ) are summed in fixed chunks on the rayon
        // pool; the chunk sums are added in order, so the result does not depend on the number of
        // threads.
        let total = if new.len() >= 2 * PARALLEL_CHUNK {
            use rayon::prelude::*;
            let partial: Vec<f64> = new.par_chunks(PARALLEL_CHUNK).map(sum_chunk).collect();
            partial.iter().fold(entry.total, |acc, x| acc + x)
        } else {
            new.iter().fold(entry.total, |acc, (kernel, count)| {
                acc + kernel.rdp(alpha) * *count as f64
            })
        };
        entry.total = total;
        entry.upto = self.segments.len();
        total
    }

    /// Total RDP at every order of the grid.
    pub fn rdp_curve(&self) -> Vec<f64> {
        if self.non_private {
            return vec![f64::INFINITY; self.orders.len()];
        }
        let mut cache = self.lock_cache();
        (0..self.orders.len())
            .map(|k| self.total_at(&mut cache, k))
            .collect()
    }

    pub(super) fn lock_cache(&self) -> std::sync::MutexGuard<'_, Vec<OrderTotal>> {
        // A poisoned cache only means a panic elsewhere; its values are still valid sums.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn edge_note(&self, k: usize) -> Option<String> {
        let n = self.orders.len();
        if n > 1 && (k == 0 || k == n - 1) {
            Some(format!(
                "the optimal order {} is at the edge of the order grid [{}, {}]; a wider grid may give a smaller epsilon",
                self.orders[k],
                self.orders[0],
                self.orders[n - 1]
            ))
        } else {
            None
        }
    }
}

impl Accountant for RdpAccountant {
    fn kind(&self) -> AccountantKind {
        AccountantKind::Rdp
    }

    fn check(&self, event: &DpEvent) -> Result<(), AccountingError> {
        self.flatten(event, 1, &mut Flat::default())
    }

    fn compose(&mut self, event: &DpEvent, count: u64) -> Result<(), AccountingError> {
        let mut flat = Flat::default();
        self.flatten(event, count, &mut flat)?;
        self.non_private |= flat.non_private;
        for (kernel, n) in flat.kernels {
            self.all_exact &= kernel.is_exact();
            if self.sigma_grid.is_some() {
                let kernel = self.on_grid(kernel);
                let key = kernel_key(&kernel);
                match self.kernel_index.get(&key) {
                    Some(&index) => self.add_to_segment(index, kernel, n),
                    None => {
                        self.kernel_index.insert(key, self.segments.len());
                        self.segments.push((kernel, n));
                    }
                }
                continue;
            }
            match self.segments.last_mut() {
                Some((last, m)) if *last == kernel => {
                    // The merged segment may already be summed into cached totals: add the
                    // new steps there too.
                    *m += n;
                    let len = self.segments.len();
                    let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
                    for (entry, &alpha) in cache.iter_mut().zip(&self.orders) {
                        if entry.upto == len {
                            entry.total += kernel.rdp(alpha) * n as f64;
                        }
                    }
                }
                _ => self.segments.push((kernel, n)),
            }
        }
        Ok(())
    }

    fn epsilon(&self, delta: f64) -> Result<PrivacyReport, AccountingError> {
        if delta.is_nan() || !(0.0..=1.0).contains(&delta) {
            return Err(AccountingError::InvalidParameter {
                name: "delta",
                value: delta,
                expected: "a number in [0, 1]",
            });
        }
        let mut report = PrivacyReport {
            epsilon: 0.0,
            delta,
            accountant: AccountantKind::Rdp,
            order: None,
            notes: Vec::new(),
            upper_bound: true,
        };
        if self.non_private {
            report.epsilon = f64::INFINITY;
            report
                .notes
                .push("a non-private release was composed".into());
            return Ok(report);
        }
        if self.segments.is_empty() {
            return Ok(report);
        }
        if delta == 0.0 {
            // Only the trivial RDP curve gives δ = 0 (dp_accounting `compute_epsilon`).
            report.epsilon = f64::INFINITY;
            return Ok(report);
        }
        let conversion = self.conversion;
        let (eps, k) = self.minimise(|a, r| epsilon_at_order(a, r, delta, conversion));
        report.epsilon = eps.max(0.0);
        report.order = Some(self.orders[k]);
        if conversion == RdpConversion::Classic {
            report
                .notes
                .push("classic conversion (Mironov 2017), looser than Balle et al. 2020".into());
        }
        if !self.all_exact {
            let random_allocation = self
                .segments
                .iter()
                .any(|(k, _)| matches!(k, RdpKernel::RandomAllocationGaussian { .. }));
            let bounded = self.segments.iter().any(|(k, _)| {
                !k.is_exact() && !matches!(k, RdpKernel::RandomAllocationGaussian { .. })
            });
            if bounded {
                report.notes.push(
                    "uses an upper bound on the RDP of subsampled Laplace or sampling without replacement"
                        .into(),
                );
            }
            if random_allocation {
                report.notes.push(
                    "balls-in-bins epochs: the random-allocation RDP of both directions (Chua et al. 2025 dominating pair), exact at integer orders, a fractional order at the next integer, orders above 128 unamplified"
                        .into(),
                );
            }
        }
        if report.epsilon > 0.0
            && let Some(note) = self.edge_note(k)
        {
            report.notes.push(note);
        }
        Ok(report)
    }

    fn delta(&self, epsilon: f64) -> Result<f64, AccountingError> {
        if epsilon.is_nan() || epsilon < 0.0 {
            return Err(AccountingError::InvalidParameter {
                name: "epsilon",
                value: epsilon,
                expected: "a number >= 0",
            });
        }
        if self.non_private {
            return Ok(1.0);
        }
        if self.segments.is_empty() {
            return Ok(0.0);
        }
        let conversion = self.conversion;
        let (log_delta, _) = self.minimise(|a, r| log_delta_at_order(a, r, epsilon, conversion));
        Ok(log_delta.exp().min(1.0))
    }
}
