//! `dpx bench`: step throughput of the reference workloads of `docs/benchmarks.md`
//! (logreg_mnist, mlp_mnist, cnn_mnist, cnn_cifar10, and the accuracy techniques on CIFAR-10:
//! cnn_cifar10_gn_ws with group normalisation and weight standardisation, cnn_cifar10_augmult4
//! with 4 augmented views per example, cnn_cifar10_bandmf8, whose DP step adds BandMF's noise
//! correlated over 8 bands; and resnet20_gn_cifar10, the residual network with group
//! normalisation), each as a non-private SGD step and a DP-SGD step, at one thread and
//! at all threads.
//!
//! With views, a step runs K·B rows; the DP step clips each example's mean over its views
//! (`Model::per_sample_views`), the non-private step takes the gradient of the mean loss over
//! the K·B rows (the same update direction without clipping); `examples/s` counts examples, not
//! rows.
//!
//! Orchestration only: a step is `Model::loss_and_gradient` (non-private) or `Model::per_sample`
//! then `privacy::clip::flat::privatize_flat` (per-sample clipping to 1, noise multiplier 1),
//! then `optim::Optimizer::Sgd`'s update with η / B (the rule a run applies). Inputs are random
//! arrays of the workload's shape (throughput does not depend on pixel values). Also reports the
//! backend's single-thread sgemm rate on 2048x2048, the ceiling for the achieved GFLOP/s.
//! GFLOP/s counts a direct convolution's products (`Model::step_flops`); layers whose forward
//! product runs by Winograd's F(2×2, 3×3) do fewer multiplies, so theirs is an effective rate.

use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use ndarray::{Array1, Array2};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use serde::Serialize;

use crate::bad_input;
use crate::grad::PerSampleGradients;
use crate::model::{LayerSpec, Model, ModelSpec, with_threads};
use crate::optim::{Optimizer, OptimizerState};
use crate::privacy::bandmf::{self, Correlated, CorrelatedNoise};
use crate::privacy::clip::flat::{flat_clip_weights, privatize_flat};
use crate::privacy::mechanism::{GaussianSource, add_gaussian_noise};
use crate::train::update::apply_release;

/// Arguments of `dpx bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Workload to run (repeatable): logreg_mnist, mlp_mnist, cnn_mnist, cnn_cifar10, cnn_cifar10_gn_ws, cnn_cifar10_augmult4, cnn_cifar10_bandmf8, resnet20_gn_cifar10. Default: all.
    #[arg(long = "workload", value_name = "NAME")]
    pub workloads: Vec<String>,
    /// Timed steps per (workload, mode, threads), after 3 warm-up steps. Default: at least 20
    /// steps and at least one second of them (sub-millisecond steps need thousands for a stable
    /// mean).
    #[arg(long)]
    pub steps: Option<usize>,
    /// Run at this many threads only (default: one thread, then all available cores).
    #[arg(long, value_parser = super::parse_threads)]
    pub threads: Option<usize>,
    /// Override the workloads' batch sizes (e.g. to measure peak memory at another batch).
    #[arg(long)]
    pub batch: Option<usize>,
    /// Run only this mode: nonprivate or dp (default: both).
    #[arg(long, value_name = "MODE")]
    pub mode: Option<String>,
    /// Print one JSON object per line instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Skip the sgemm reference measurement.
    #[arg(long)]
    pub no_sgemm: bool,
    /// Also time each phase of the DP step (forward and backward, per-example norms, clipped
    /// sum, noise, update) and print where the step's time goes.
    #[arg(long)]
    pub phases: bool,
}

/// The reference workloads: (name, model, batch size), as in `docs/benchmarks.md`.
pub fn workloads() -> Vec<Workload> {
    let named = |n: &str| {
        ModelSpec::named(n).unwrap_or_else(|| unreachable!("{n} is a named architecture"))
    };
    let w = |name, spec, batch, views| Workload {
        name,
        spec,
        batch,
        views,
        bands: 1,
    };
    vec![
        w("logreg_mnist", named("logreg_mnist"), 256, 1),
        w("mlp_mnist", named("mlp_mnist"), 256, 1),
        w("cnn_mnist", named("mnist_cnn"), 256, 1),
        w("cnn_cifar10", named("cifar_cnn"), 128, 1),
        w("cnn_cifar10_gn_ws", cifar_cnn_gn_ws(), 128, 1),
        w("cnn_cifar10_augmult4", named("cifar_cnn"), 32, 4),
        Workload {
            bands: 8,
            ..w("cnn_cifar10_bandmf8", named("cifar_cnn"), 128, 1)
        },
        w("resnet20_gn_cifar10", named("resnet20_gn"), 128, 1),
    ]
}

/// One reference workload: a model, its batch (examples), views per example, and the bands of
/// its noise (1: DP-SGD's independent noise; b > 1: BandMF's, correlated over b steps).
#[derive(Debug, Clone)]
pub struct Workload {
    pub name: &'static str,
    pub spec: ModelSpec,
    pub batch: usize,
    pub views: usize,
    pub bands: usize,
}

/// `cifar_cnn` with every convolution weight-standardised and followed by group normalisation
/// (8 groups) before its tanh: the normalisation De et al. 2022 (arXiv:2204.13650) use for DP.
fn cifar_cnn_gn_ws() -> ModelSpec {
    let mut spec = ModelSpec::cifar_cnn();
    let mut layers = Vec::new();
    for layer in spec.layers {
        match layer {
            LayerSpec::Conv2d {
                channels,
                kernel,
                stride,
                padding,
                ..
            } => {
                layers.push(LayerSpec::conv_ws(channels, kernel, stride, padding));
                layers.push(LayerSpec::GroupNorm { groups: 8 });
            }
            other => layers.push(other),
        }
    }
    spec.layers = layers;
    spec
}

/// One measured (workload, mode, threads).
#[derive(Debug, Clone, Serialize)]
pub struct BenchRecord {
    pub workload: String,
    pub mode: &'static str,
    pub threads: usize,
    pub batch: usize,
    pub params: usize,
    pub step_ms: f64,
    pub examples_per_s: f64,
    pub gflops: f64,
    /// Milliseconds per step in each phase of the DP step (`--phases`, DP mode only), in step
    /// order; they sum to `step_ms` up to the timer's own cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phases_ms: Option<Phases>,
}

/// Where one DP step's time goes, in milliseconds per step, phase by phase in step order.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Phases {
    /// `Model::per_sample_views`: each shard's forward and backward pass (the layers' inputs and
    /// deltas kept for the norms and the sum).
    pub forward_backward: f64,
    /// The per-example norm pass and the clip weights min(1, C/‖g_i‖).
    pub norms: f64,
    /// The clipped sum Σ_i w_i g_i (the weight-gradient products), widened to f64.
    pub clipped_sum: f64,
    /// The Gaussian noise added to the sum.
    pub noise: f64,
    /// The SGD update of the parameters.
    pub update: f64,
}

const WARMUP_STEPS: usize = 3;
/// The run length BandMF workloads optimise their strategy for.
const BANDMF_STRATEGY_STEPS: u64 = 1000;
/// Without `--steps`: at least this many timed steps…
const DEFAULT_MIN_STEPS: usize = 20;
/// …and at least this long in total (estimated from the warm-up steps)…
const DEFAULT_MIN_SECONDS: f64 = 1.0;
/// …but never more steps than this.
const MAX_DEFAULT_STEPS: usize = 100_000;
const LEARNING_RATE: f64 = 0.1;
const CLIP_NORM: f64 = 1.0;
const NOISE_MULTIPLIER: f64 = 1.0;

/// Run `dpx bench`.
pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let all = workloads();
    let selected: Vec<_> = if args.workloads.is_empty() {
        all
    } else {
        let mut chosen = Vec::new();
        for name in &args.workloads {
            let Some(w) = all.iter().find(|w| w.name == name) else {
                let names: Vec<_> = all.iter().map(|w| w.name).collect();
                return Err(bad_input!(
                    "--workload: unknown workload {name:?}; expected one of {}",
                    names.join(", ")
                ));
            };
            chosen.push(w.clone());
        }
        chosen
    };
    if args.steps == Some(0) {
        return Err(bad_input!("--steps: must be at least 1"));
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let thread_counts = match args.threads {
        Some(t) => vec![t],
        None if cores > 1 => vec![1, cores],
        None => vec![1],
    };
    if args.batch == Some(0) {
        return Err(bad_input!("--batch: must be at least 1"));
    }
    let modes: Vec<bool> = match args.mode.as_deref() {
        None => vec![false, true],
        Some("nonprivate") => vec![false],
        Some("dp") => vec![true],
        Some(other) => {
            return Err(bad_input!(
                "--mode: unknown mode {other:?}; expected nonprivate or dp"
            ));
        }
    };
    let mut out = std::io::stdout().lock();
    if !args.json {
        writeln!(
            out,
            "{:<13} {:<10} {:>7} {:>6} {:>9} {:>10} {:>12} {:>8}",
            "workload", "mode", "threads", "batch", "params", "step_ms", "examples/s", "GFLOP/s"
        )?;
    }
    // The machine every figure below was taken on, since only ratios from one machine compare.
    let cpu = host_cpu();
    if !args.json {
        writeln!(out, "# cpu: {cpu}")?;
    }
    if !args.no_sgemm {
        let rate = sgemm_rate(2048)?;
        if args.json {
            writeln!(
                out,
                "{}",
                serde_json::json!({"workload": "sgemm_2048", "mode": "sgemm", "threads": 1, "gflops": round3(rate), "cpu": cpu})
            )?;
        } else {
            writeln!(
                out,
                "# backend sgemm 2048x2048, one thread: {rate:.1} GFLOP/s"
            )?;
        }
    }
    for w in &selected {
        let (name, views, bands) = (w.name, w.views, w.bands);
        let batch = args.batch.unwrap_or(w.batch);
        let model = w.spec.build().context("building a reference workload")?;
        for &threads in &thread_counts {
            for &dp in &modes {
                let record = with_threads(threads, || {
                    measure(
                        name,
                        &model,
                        (batch, views, bands),
                        dp,
                        threads,
                        args.steps,
                        args.phases && dp,
                    )
                })??;
                if args.json {
                    writeln!(out, "{}", serde_json::to_string(&record)?)?;
                } else {
                    writeln!(
                        out,
                        "{:<13} {:<10} {:>7} {:>6} {:>9} {:>10.3} {:>12.1} {:>8.1}",
                        record.workload,
                        record.mode,
                        record.threads,
                        record.batch,
                        record.params,
                        record.step_ms,
                        record.examples_per_s,
                        record.gflops
                    )?;
                    if let Some(p) = record.phases_ms {
                        writeln!(
                            out,
                            "  phases (ms): forward_backward {:.3}, norms {:.3}, clipped_sum {:.3}, noise {:.3}, update {:.3}",
                            p.forward_backward, p.norms, p.clipped_sum, p.noise, p.update
                        )?;
                    }
                }
                out.flush()?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A workload's DP noise: the seeded generator's draws, turned into BandMF's correlated noise when
/// the workload has more than one band (as `train::run` does with [`Correlated`]).
struct BenchNoise {
    rng: rand_chacha::ChaCha12Rng,
    correlated: Option<CorrelatedNoise>,
}

impl GaussianSource for BenchNoise {
    fn standard_normal(&mut self) -> f64 {
        self.rng.standard_normal()
    }

    fn add_scaled_normals(&mut self, out: &mut [f64], scale: f64) {
        match &mut self.correlated {
            Some(noise) => Correlated {
                inner: &mut self.rng,
                noise,
            }
            .add_scaled_normals(out, scale),
            None => self.rng.add_scaled_normals(out, scale),
        }
    }
}

/// The update of a step: a run's own ([`crate::train::update::apply_release`]: the sum over the
/// batch size, the finiteness check, the optimizer) with the SGD rule.
fn sgd_update(model: &Model, params: &mut Array1<f32>, sum: Array1<f64>, batch: usize) {
    let mut state = OptimizerState::default();
    // A diverged step leaves the parameters as they were; the timing is the same.
    apply_release(
        model,
        params,
        sum,
        (batch as f64, LEARNING_RATE),
        &Optimizer::Sgd,
        &mut state,
        None,
    );
}

/// Time `model`'s step on `batch` examples of `views` views each (rows = batch · views).
fn measure(
    name: &str,
    model: &Model,
    (batch, views, bands): (usize, usize, usize),
    dp: bool,
    threads: usize,
    steps: Option<usize>,
    phases: bool,
) -> anyhow::Result<BenchRecord> {
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let rows = batch * views;
    let x = Array2::from_shape_fn((rows, model.input_size()), |_| {
        rng.sample::<f32, _>(StandardNormal)
    });
    let labels: Vec<usize> = (0..batch)
        .flat_map(|_| std::iter::repeat_n(rng.random_range(0..model.num_classes()), views))
        .collect();
    let mut params = model.init_params(0);
    // BandMF: the strategy for a run of BANDMF_STRATEGY_STEPS (the step's cost does not depend on
    // the run's length, only on the bands), and its noise state.
    let mut noise = BenchNoise {
        rng: rand_chacha::ChaCha12Rng::seed_from_u64(1),
        correlated: match bands {
            1 => None,
            b => Some(CorrelatedNoise::new(
                &bandmf::optimize(BANDMF_STRATEGY_STEPS, b, bandmf::Workload::PrefixSum)
                    .context("optimising the BandMF strategy of a workload")?
                    .strategy,
            )),
        },
    };
    let mut step = |params: &mut Array1<f32>| -> anyhow::Result<()> {
        let sum = if dp {
            let grads = model.per_sample_views(params.view(), x.view(), &labels, views)?;
            privatize_flat(&grads, CLIP_NORM, NOISE_MULTIPLIER, &mut noise)?.sum
        } else {
            let g = model.loss_and_gradient(params.view(), x.view(), &labels)?.1;
            g / views as f64
        };
        sgd_update(model, params, sum, batch);
        Ok(())
    };
    // At least `bands` warm-up steps, so BandMF's history is full when the timing starts.
    let warmup = WARMUP_STEPS.max(bands);
    let warm = Instant::now();
    for _ in 0..warmup {
        step(&mut params)?;
    }
    let steps = steps.unwrap_or_else(|| {
        let per_step = warm.elapsed().as_secs_f64() / warmup as f64;
        let for_min_time = (DEFAULT_MIN_SECONDS / per_step.max(1e-9)).ceil();
        (for_min_time.min(MAX_DEFAULT_STEPS as f64) as usize).max(DEFAULT_MIN_STEPS)
    });
    let start = Instant::now();
    for _ in 0..steps {
        step(&mut params)?;
    }
    let seconds = start.elapsed().as_secs_f64() / steps as f64;
    // The same DP step cut at its phase boundaries (`privatize_flat` is `flat_clip_weights` of
    // the norms, the weighted sum, then the noise), timed over as many steps again.
    let phases_ms = if phases {
        let mut total = Phases::default();
        for _ in 0..steps {
            let t0 = Instant::now();
            let grads = model.per_sample_views(params.view(), x.view(), &labels, views)?;
            let t1 = Instant::now();
            let weights = flat_clip_weights(&grads.norms(), CLIP_NORM)?;
            let t2 = Instant::now();
            let mut sum = grads.weighted_sum(&weights);
            let t3 = Instant::now();
            add_gaussian_noise(sum.view_mut(), NOISE_MULTIPLIER, CLIP_NORM, &mut noise)?;
            let t4 = Instant::now();
            sgd_update(model, &mut params, sum, batch);
            let t5 = Instant::now();
            total.forward_backward += (t1 - t0).as_secs_f64();
            total.norms += (t2 - t1).as_secs_f64();
            total.clipped_sum += (t3 - t2).as_secs_f64();
            total.noise += (t4 - t3).as_secs_f64();
            total.update += (t5 - t4).as_secs_f64();
        }
        let ms = |v: f64| round3(v * 1e3 / steps as f64);
        Some(Phases {
            forward_backward: ms(total.forward_backward),
            norms: ms(total.norms),
            clipped_sum: ms(total.clipped_sum),
            noise: ms(total.noise),
            update: ms(total.update),
        })
    } else {
        None
    };
    let flops = model.step_flops(rows, dp);
    Ok(BenchRecord {
        workload: name.to_string(),
        mode: if dp { "dp" } else { "nonprivate" },
        threads,
        batch,
        params: model.num_params(),
        step_ms: round3(seconds * 1e3),
        examples_per_s: (batch as f64 / seconds * 10.0).round() / 10.0,
        gflops: round3(flops / seconds / 1e9),
        phases_ms,
    })
}

/// Single-thread GFLOP/s of the backend's f32 matrix product on `n × n` matrices (best of 3).
fn sgemm_rate(n: usize) -> anyhow::Result<f64> {
    let a = Array2::<f32>::from_elem((n, n), 0.5);
    let b = Array2::<f32>::from_elem((n, n), 0.25);
    let mut c = Array2::<f32>::zeros((n, n));
    let best = with_threads(1, || {
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            let t = Instant::now();
            crate::model::linalg::gemm_serial(a.view(), b.view(), 0.0, c.view_mut());
            best = best.min(t.elapsed().as_secs_f64());
        }
        best
    })?;
    Ok(2.0 * (n as f64).powi(3) / best / 1e9)
}

/// This machine's CPU as `dpx bench` records it beside the sgemm rate: the model name, family
/// and model from `/proc/cpuinfo` (Linux), the logical CPUs and the widest vector extension the
/// kernels use.
fn host_cpu() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| describe_cpuinfo(&text))
        .unwrap_or_else(|| format!("unknown {} CPU", std::env::consts::ARCH));
    let logical = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{model}, {logical} logical CPUs, {}", vector_extension())
}

/// "model name (family F, model M)" from the first processor of a `/proc/cpuinfo` text.
fn describe_cpuinfo(text: &str) -> Option<String> {
    let field = |key: &str| {
        text.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_string())
        })
    };
    let name = field("model name")?;
    Some(match (field("cpu family"), field("model")) {
        (Some(family), Some(model)) => format!("{name} (family {family}, model {model})"),
        _ => name,
    })
}

/// The widest vector extension this CPU offers the kernels (they choose at run time).
fn vector_extension() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::cpu::avx512_available() {
            return "AVX-512F";
        }
        if crate::cpu::avx2_available() {
            return "AVX2";
        }
        "SSE2"
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        "portable kernels"
    }
}

fn round3(v: f64) -> f64 {
    (v * 1e3).round() / 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_is_described_from_cpuinfo() {
        let text = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n\
                    model name\t: AMD EPYC\nflags\t\t: fpu\n\nprocessor\t: 1\nmodel name\t: other\n";
        assert_eq!(
            describe_cpuinfo(text).as_deref(),
            Some("AMD EPYC (family 25, model 17)")
        );
        assert_eq!(
            describe_cpuinfo("model name : Some CPU\n").as_deref(),
            Some("Some CPU")
        );
        assert_eq!(describe_cpuinfo("processor : 0\n"), None);
        assert!(host_cpu().contains("logical CPUs"));
    }
}
