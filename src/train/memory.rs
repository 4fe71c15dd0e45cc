//! An estimate of a run's peak memory, made before anything is deleted, written or trained.
//!
//! The estimate adds what a run holds at its peak: the prepared data, the plan's per-step vectors,
//! and for every seed training at the same time its parameters and optimiser state, one step's
//! activations and deltas (the kept forward pass, the backward pass and their temporaries: three
//! times the activations of the largest batch a step is likely to draw), the per-sample convolution
//! cache, a materialised `[B, P]` matrix for policies that form one, one evaluation chunk of
//! 1024 examples and the `[P]` partial sums of a step's data-parallel shards. With
//! `[train.augmentation]` a step's activations hold K views of each example, and forming each
//! example's mean gradient takes two `[P]` buffers per worker thread (no convolution cache then);
//! with `train.ema_decay`, one more parameter vector; with `noise.mechanism = "bandmf"`, b vectors
//! of f64 noise (the b − 1 remembered and the step's fresh draw); with Poisson or fixed-size
//! batches taken as they are on a machine of two or more cores, the next step's input rows,
//! gathered during the step (`train/look_ahead.rs`). It is meant to catch a configuration that
//! cannot run (hundreds of GB) with a clear message, not to predict the resident size to the
//! megabyte: small allocations (scratch buffers, the rows written) are left out.

use super::prepare::{Experiment, PreparedData};
use crate::config::spec::Sampler;

/// Rows per evaluation chunk (`Model::evaluate`).
const EVAL_CHUNK: u64 = 1024;

/// The limit when neither `--max-memory` nor the machine says otherwise.
pub const FALLBACK_LIMIT_BYTES: u64 = 16 << 30;

/// One part of the estimate.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    pub what: &'static str,
    pub bytes: u64,
}

/// A run's estimated peak memory, by part.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryEstimate {
    pub parts: Vec<Part>,
}

impl MemoryEstimate {
    /// The total in bytes (saturating).
    pub fn total(&self) -> u64 {
        self.parts
            .iter()
            .fold(0u64, |acc, p| acc.saturating_add(p.bytes))
    }

    /// The largest part.
    pub fn largest(&self) -> Option<&Part> {
        self.parts.iter().max_by_key(|p| p.bytes)
    }
}

/// Bytes in GiB (2^30 bytes) with one decimal.
pub fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

fn mul(a: u64, b: u64) -> u64 {
    a.saturating_mul(b)
}

/// The largest batch a step is likely to draw: B for fixed-size and shuffled batches; for a
/// Poisson batch of expected size B, B + 6√B + 6 (more than that has probability below 10^-8);
/// the same for balls-in-bins batches (Binomial(n, 1/⌈n/B⌉), mean at most B).
fn step_batch(sampler: Sampler) -> u64 {
    let b = sampler.batch_size() as u64;
    match sampler {
        Sampler::Poisson { .. } | Sampler::BallsInBins { .. } => {
            b + (6.0 * (b as f64).sqrt()).ceil() as u64 + 6
        }
        Sampler::Shuffle { .. } | Sampler::FixedSize { .. } | Sampler::FixedOrder { .. } => b,
    }
}

/// The bytes the prepared splits hold (f32 features and usize labels).
pub fn data_bytes(d: &PreparedData) -> u64 {
    [
        Some(&d.train),
        Some(&d.test),
        d.validation.as_ref(),
        d.train_mirrored.as_ref(),
    ]
    .into_iter()
    .flatten()
    .map(|s| mul(s.features.len() as u64, 4) + mul(s.labels.len() as u64, 8))
    .fold(0u64, u64::saturating_add)
}

/// Estimate the peak memory of `exp` with `concurrent_seeds` seeds training at once.
pub fn estimate(exp: &Experiment, concurrent_seeds: usize) -> MemoryEstimate {
    let seeds = concurrent_seeds.max(1) as u64;
    let d = &exp.data;
    let features = data_bytes(d);
    let p = exp.model.num_params() as u64;
    let acts = exp.model.activation_lens();
    let per_example: u64 = acts.iter().map(|&a| a as u64).fold(0, u64::saturating_add);
    let widest_pair: u64 = acts
        .windows(2)
        .map(|w| (w[0] + w[1]) as u64)
        .max()
        .unwrap_or(acts.first().copied().unwrap_or(0) as u64);
    let examples = step_batch(exp.spec.train.sampler);
    let views = exp
        .spec
        .train
        .augmentation
        .map_or(1, |a| a.multiplicity as u64);
    // Rows of a step's forward and backward passes: K views of each example.
    let batch = mul(examples, views);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    let eval_rows = [Some(&d.test), d.validation.as_ref(), Some(&d.train)]
        .into_iter()
        .flatten()
        .map(|s| s.len() as u64)
        .max()
        .unwrap_or(0)
        .min(EVAL_CHUNK);
    let conv_cache = if views > 1 {
        // The examples' mean rows, kept for the weighted sum when they fit the cache limit.
        let means = mul(mul(examples, p), 4);
        if means <= crate::model::per_sample::CONV_CACHE_LIMIT_BYTES {
            means
        } else {
            0
        }
    } else {
        mul(mul(batch, exp.model.conv_patch_lens() as u64), 4)
            .min(crate::model::per_sample::CONV_CACHE_LIMIT_BYTES)
    };
    let materialized = if exp.plan.clip.materializes() {
        mul(mul(examples, p), 4)
    } else {
        0
    };
    let view_means = if views > 1 {
        mul(workers, mul(p, 8))
    } else {
        0
    };
    // The shards' partial sums of the clipped gradient, `[P]` f64 each (at most 256 MiB).
    let shards = crate::model::per_sample::shard_ranges(
        usize::try_from(examples).unwrap_or(usize::MAX),
        usize::try_from(views).unwrap_or(usize::MAX),
        exp.model.num_params(),
        exp.model
            .step_flops(usize::try_from(batch).unwrap_or(usize::MAX), true),
    )
    .len() as u64;
    let partial_sums = if shards > 1 {
        mul(shards, mul(p, 8))
    } else {
        0
    };
    let ema = if exp.spec.train.ema_decay.is_some() {
        mul(p, 4)
    } else {
        0
    };
    let look_ahead = match exp.spec.train.sampler {
        Sampler::Poisson { .. } | Sampler::FixedSize { .. } if views == 1 && workers > 1 => {
            mul(mul(examples, d.train.num_features() as u64), 4)
        }
        _ => 0,
    };
    let mut parts = vec![
        Part {
            what: "the prepared data",
            bytes: features,
        },
        Part {
            what: "the plan's per-step values",
            bytes: mul(exp.plan.planned_steps, 16),
        },
        Part {
            what: "parameters, gradients and optimiser state",
            bytes: mul(seeds, mul(p, 40)),
        },
        Part {
            what: "one training step's activations and deltas",
            bytes: mul(seeds, mul(mul(batch, per_example), 12)),
        },
        Part {
            what: "the per-sample convolution cache",
            bytes: mul(seeds, conv_cache),
        },
        Part {
            what: "the materialised per-sample gradients",
            bytes: mul(seeds, materialized),
        },
        Part {
            what: "the augmented views' mean gradients",
            bytes: mul(seeds, view_means),
        },
        Part {
            what: "the data-parallel shards' partial sums",
            bytes: mul(seeds, partial_sums),
        },
        Part {
            what: "the parameters' moving average",
            bytes: mul(seeds, ema),
        },
        Part {
            what: "the correlated noise state (noise.bands − 1 vectors of P values, and one step's draw)",
            bytes: mul(
                seeds,
                exp.plan.bandmf.as_ref().map_or(0, |m| {
                    crate::privacy::bandmf::CorrelatedNoise::history_bytes(
                        m.bands as usize + 1,
                        p as usize,
                    )
                }),
            ),
        },
        Part {
            what: "the next step's rows, gathered during the step",
            bytes: mul(seeds, look_ahead),
        },
        Part {
            what: "one evaluation chunk",
            bytes: mul(seeds, mul(mul(eval_rows, widest_pair), 4)),
        },
    ];
    parts.retain(|p| p.bytes > 0);
    MemoryEstimate { parts }
}

/// The default memory limit: three quarters of the physical memory when the system reports it,
/// else [`FALLBACK_LIMIT_BYTES`].
pub fn default_limit_bytes() -> u64 {
    physical_memory_bytes()
        .map(|m| m / 4 * 3)
        .unwrap_or(FALLBACK_LIMIT_BYTES)
}

#[cfg(unix)]
fn physical_memory_bytes() -> Option<u64> {
    // SAFETY: sysconf reads a system constant; it has no preconditions.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages > 0 && page > 0).then(|| (pages as u64).saturating_mul(page as u64))
}

#[cfg(not(unix))]
fn physical_memory_bytes() -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_batches_get_a_margin() {
        let b = step_batch(Sampler::Poisson {
            expected_batch_size: 100,
        });
        assert!((160..=170).contains(&b), "{b}");
    }

    /// A logistic model on synthetic data with Poisson batches of `batch`.
    fn experiment(batch: usize) -> Experiment {
        let text = format!(
            "[experiment]\nname = \"m\"\n[data]\ndataset = \"gaussian_mixture\"\n\
             [data.synthetic]\nn_train = 2000\nn_test = 100\nn_features = 8\nn_classes = 3\n\
             [model]\narchitecture = \"logistic\"\n[train]\nsteps = 2\n\
             expected_batch_size = {batch}\nlearning_rate = 0.1\n[clip]\nclip_norm = 1.0\n\
             [noise]\nnoise_multiplier = 1.0\n[privacy]\ndelta = 1e-5\n"
        );
        let spec = crate::config::load_str(&text, std::path::Path::new("m.toml")).expect("valid");
        Experiment::build(spec, std::path::Path::new("unused")).expect("built")
    }

    #[test]
    fn the_shards_partial_sums_are_counted() {
        let shards_part = |exp: &Experiment| {
            estimate(exp, 1)
                .parts
                .into_iter()
                .find(|p| p.what.contains("shards"))
                .map(|p| p.bytes)
        };
        // A large batch is cut into several shards, each with a [P] f64 partial sum.
        let large = experiment(1500);
        let p = large.model.num_params() as u64;
        let bytes = shards_part(&large).expect("counted");
        assert!(bytes >= 2 * 8 * p && bytes.is_multiple_of(8 * p), "{bytes}");
        // One shard adds nothing: its sum is the step's gradient.
        assert_eq!(shards_part(&experiment(40)), None);
    }

    #[test]
    fn the_rows_gathered_ahead_are_counted_on_several_cores() {
        let exp = experiment(40);
        let part = estimate(&exp, 2)
            .parts
            .into_iter()
            .find(|p| p.what.contains("gathered"))
            .map(|p| p.bytes);
        if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
            // Two seeds, each with the largest likely Poisson batch of 8 features in f32.
            let rows = step_batch(exp.spec.train.sampler);
            assert_eq!(part, Some(2 * rows * 8 * 4));
        } else {
            assert_eq!(part, None);
        }
    }

    #[test]
    fn the_default_limit_is_positive() {
        assert!(default_limit_bytes() > 0);
    }
}
