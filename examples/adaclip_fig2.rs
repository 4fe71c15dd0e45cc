//! Figure 2 of Pichapati, Suresh, Yu, Reddi and Kumar, "AdaCliP: Adaptive Clipping for Private
//! SGD" (arXiv:1908.07643, Sec. 6, "Regression error vs dimension size"): ℓ₂² regression on
//! x¹, …, x¹⁰⁰⁰ ∈ ℝᵈ with xⁱ = (yᵢ, 0, …, 0), yᵢ = 1 for i ≤ 500 and −1 otherwise, minimising
//! F(θ) = (1/n) Σᵢ ‖θ − xⁱ‖² (θ* = 0, F(θ) − F(θ*) = ‖θ‖²). Both methods at clip threshold 1.0
//! and noise multiplier σ = 0.1, 10 epochs of batches of one example (a fresh permutation each
//! epoch, the same for every arm of a seed), learning rate 0.01. The paper's claim: DP-SGD's
//! error is much higher and grows with d; AdaCliP adds no noise to the coordinates ≠ 1, so its
//! error does not depend on d. The paper gives no numbers, no d range and no h2.
//!
//! ```text
//! cargo run --release --example adaclip_fig2 -- results/adaclip_synthetic
//! python3 scripts/adaclip_fig2_plot.py results/adaclip_synthetic
//! ```
//!
//! Both releases are dpx's own: [`privatize_flat`] (DP-SGD, flat clipping at C = 1) and
//! [`AdaClipParams::step`] (AdaCliP's transform, clip at 1 in w-space, noise, inverse transform,
//! statistics from the release) on the one-row per-sample gradient 2(θ − xⁱ). Arms: DP-SGD, and
//! AdaCliP with the paper's β1 = 0.99, β2 = 0.9, h1 = 1e-12, γ = 1 over h2 ∈ {1e-3, …, 10} and
//! s₀ ∈ {√(h1·h2) (Alg. 1 as printed), √h2}. d ∈ {1, 10, 30, 100, 300, 1000}, θ₀ = 0 and
//! θ₀ ~ N(0, I), seeds 0..5.
//!
//! Writes into the given folder (default `results/adaclip_synthetic`):
//! - `fig2_runs.csv`: one row per (arm, d, θ₀, seed): the final error ‖θ_T‖², its mean over the
//!   last epoch's iterates, the mean ‖g̃ − g‖ between the released and the raw gradient over all
//!   steps, and the noise std the last step added to coordinate 1 and (RMS) to the others;
//! - `fig2_summary.csv`: mean and std over the seeds of each column;
//! - `fig2_summary.md`: the tables of results/adaclip_synthetic/README.md.

use std::fmt::Write as _;
use std::path::PathBuf;

use dpx::privacy::clip::StepContext;
use dpx::privacy::clip::adaclip::{AdaClipParams, InitialStd, VarianceScale};
use dpx::privacy::clip::explicit::ExplicitGradients;
use dpx::privacy::clip::flat::privatize_flat;
use ndarray::{Array1, Array2};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha12Rng;
use rand_distr::{Distribution, StandardNormal};

const N: usize = 1000;
const EPOCHS: usize = 10;
const LEARNING_RATE: f64 = 0.01;
const CLIP_NORM: f64 = 1.0;
const NOISE_MULTIPLIER: f64 = 0.1;
const DIMS: [usize; 6] = [1, 10, 30, 100, 300, 1000];
const SEEDS: u64 = 5;
const H2S: [f64; 5] = [1e-3, 1e-2, 1e-1, 1.0, 10.0];

#[derive(Clone, Copy)]
enum Arm {
    DpSgd,
    AdaClip(AdaClipParams),
}

impl Arm {
    fn label(&self) -> String {
        match self {
            Arm::DpSgd => "dp_sgd".into(),
            Arm::AdaClip(p) => format!(
                "adaclip_h2_{}_{}",
                p.h2,
                match p.initial_std {
                    InitialStd::Paper => "s0_paper",
                    InitialStd::SqrtH2 => "s0_sqrt_h2",
                }
            ),
        }
    }
}

fn arms() -> Vec<Arm> {
    let mut out = vec![Arm::DpSgd];
    for initial_std in [InitialStd::Paper, InitialStd::SqrtH2] {
        for h2 in H2S {
            out.push(Arm::AdaClip(AdaClipParams {
                gamma: 1.0,
                beta1: 0.99,
                beta2: 0.9,
                h1: 1e-12,
                h2,
                initial_std,
                variance_scale: VarianceScale::PerExample,
            }));
        }
    }
    out
}

/// What one run measured.
struct RunResult {
    final_error: f64,
    last_epoch_error: f64,
    mean_release_distance: f64,
    noise_std_coord1: f64,
    noise_rms_other: f64,
}

fn labels() -> Vec<f64> {
    (0..N).map(|i| if i < N / 2 { 1.0 } else { -1.0 }).collect()
}

/// A seed's stream for one purpose (0: θ₀, 1: the order, 2 + k: arm k's noise).
fn stream(seed: u64, d: usize, normal_init: bool, purpose: u64) -> ChaCha12Rng {
    let key = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add((d as u64) << 20)
        .wrapping_add(u64::from(normal_init) << 40)
        .wrapping_add(purpose << 48);
    ChaCha12Rng::seed_from_u64(key)
}

fn run(arm: Arm, arm_index: u64, d: usize, normal_init: bool, seed: u64) -> RunResult {
    let y = labels();
    let mut theta = Array1::<f64>::zeros(d);
    if normal_init {
        let mut rng = stream(seed, d, normal_init, 0);
        for v in theta.iter_mut() {
            *v = StandardNormal.sample(&mut rng);
        }
    }
    let mut order_rng = stream(seed, d, normal_init, 1);
    let mut noise_rng = stream(seed, d, normal_init, 2 + arm_index);
    let mut state = match arm {
        Arm::AdaClip(p) => Some(p.init_state(d)),
        Arm::DpSgd => None,
    };
    let mut order: Vec<usize> = (0..N).collect();
    let mut distance_sum = 0.0;
    let mut last_epoch_sum = 0.0;
    let mut steps = 0usize;
    let mut noise_std_coord1 = 0.0;
    let mut noise_rms_other = 0.0;
    for epoch in 0..EPOCHS {
        order.shuffle(&mut order_rng);
        for &i in &order {
            // Per-example gradient of ‖θ − xⁱ‖²: 2(θ − xⁱ).
            let mut g = theta.mapv(|v| 2.0 * v);
            g[0] -= 2.0 * y[i];
            let matrix = Array2::from_shape_fn((1, d), |(_, j)| g[j] as f32);
            let grads = ExplicitGradients::new(matrix);
            let released = match (&arm, state.as_mut()) {
                (Arm::DpSgd, _) => {
                    noise_std_coord1 = NOISE_MULTIPLIER * CLIP_NORM;
                    noise_rms_other = NOISE_MULTIPLIER * CLIP_NORM;
                    privatize_flat(&grads, CLIP_NORM, NOISE_MULTIPLIER, &mut noise_rng)
                        .expect("valid flat clipping parameters")
                        .sum
                }
                (Arm::AdaClip(p), Some(st)) => {
                    let b = p.scales(&st.std);
                    noise_std_coord1 = NOISE_MULTIPLIER * b[0];
                    noise_rms_other = if d > 1 {
                        (b.iter().skip(1).map(|x| x * x).sum::<f64>() / (d - 1) as f64).sqrt()
                            * NOISE_MULTIPLIER
                    } else {
                        0.0
                    };
                    let ctx = StepContext {
                        step: steps as u64,
                        noise_multiplier: NOISE_MULTIPLIER,
                        expected_batch_size: 1.0,
                    };
                    p.step(st, &grads, &ctx, &mut noise_rng)
                        .expect("finite AdaCliP step")
                        .release
                        .sum
                }
                (Arm::AdaClip(_), None) => unreachable!("AdaCliP arms carry their state"),
            };
            // Batch of one: the released gradient is the released sum.
            distance_sum += (&released - &g).mapv(|v| v * v).sum().sqrt();
            theta.scaled_add(-LEARNING_RATE, &released);
            steps += 1;
            if epoch + 1 == EPOCHS {
                last_epoch_sum += theta.mapv(|v| v * v).sum();
            }
        }
    }
    RunResult {
        final_error: theta.mapv(|v| v * v).sum(),
        last_epoch_error: last_epoch_sum / N as f64,
        mean_release_distance: distance_sum / steps as f64,
        noise_std_coord1,
        noise_rms_other,
    }
}

fn mean_std(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    (mean, var.sqrt())
}

const COLUMNS: [&str; 5] = [
    "final_error",
    "last_epoch_error",
    "mean_release_distance",
    "noise_std_coord1",
    "noise_rms_other",
];

fn values(r: &RunResult) -> [f64; 5] {
    [
        r.final_error,
        r.last_epoch_error,
        r.mean_release_distance,
        r.noise_std_coord1,
        r.noise_rms_other,
    ]
}

fn main() -> std::io::Result<()> {
    let out = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "results/adaclip_synthetic".into()),
    );
    std::fs::create_dir_all(&out)?;
    let arms = arms();
    let mut runs = String::from("arm,d,theta0,seed");
    let mut summary = String::from("arm,d,theta0,seeds");
    for c in COLUMNS {
        write!(runs, ",{c}").ok();
        write!(summary, ",{c}_mean,{c}_std").ok();
    }
    runs.push('\n');
    summary.push('\n');
    let mut means: Vec<Cell> = Vec::new();
    for (k, arm) in arms.iter().enumerate() {
        for &d in &DIMS {
            for (init_name, normal_init) in [("zeros", false), ("normal", true)] {
                let results: Vec<[f64; 5]> = (0..SEEDS)
                    .map(|seed| values(&run(*arm, k as u64, d, normal_init, seed)))
                    .collect();
                for (seed, v) in results.iter().enumerate() {
                    write!(runs, "{},{d},{init_name},{seed}", arm.label()).ok();
                    for x in v {
                        write!(runs, ",{x:.6e}").ok();
                    }
                    runs.push('\n');
                }
                let mut stats = [(0.0, 0.0); 5];
                write!(summary, "{},{d},{init_name},{SEEDS}", arm.label()).ok();
                for (c, stat) in stats.iter_mut().enumerate() {
                    let column: Vec<f64> = results.iter().map(|v| v[c]).collect();
                    *stat = mean_std(&column);
                    write!(summary, ",{:.6e},{:.6e}", stat.0, stat.1).ok();
                }
                summary.push('\n');
                means.push(Cell {
                    arm: arm.label(),
                    d,
                    init: init_name,
                    stats,
                });
            }
        }
        eprintln!("arm {} done", arm.label());
    }
    std::fs::write(out.join("fig2_runs.csv"), runs)?;
    std::fs::write(out.join("fig2_summary.csv"), summary)?;
    std::fs::write(out.join("fig2_summary.md"), tables(&arms, &means))?;
    eprintln!("wrote {}", out.display());
    Ok(())
}

/// One (arm, d, θ₀) cell: (mean, std) over the seeds of each column.
struct Cell {
    arm: String,
    d: usize,
    init: &'static str,
    stats: [(f64, f64); 5],
}

type Means = [Cell];

fn lookup<'a>(means: &'a Means, arm: &str, d: usize, init: &str) -> Option<&'a [(f64, f64); 5]> {
    means
        .iter()
        .find(|c| c.arm == arm && c.d == d && c.init == init)
        .map(|c| &c.stats)
}

fn header(md: &mut String) {
    write!(md, "| arm |").ok();
    for d in DIMS {
        write!(md, " d = {d} |").ok();
    }
    md.push('\n');
    md.push_str(&"|---".repeat(DIMS.len() + 1));
    md.push_str("|\n");
}

/// One table of column `c` (mean ± std over the seeds) with a last row of the best AdaCliP arm
/// at each d (selected on the same runs: optimistic for AdaCliP).
fn error_table(md: &mut String, arms: &[Arm], means: &Means, init: &str, c: usize, title: &str) {
    writeln!(
        md,
        "\n### θ₀ = {init}: {title}, mean ± std over {SEEDS} seeds\n"
    )
    .ok();
    header(md);
    for arm in arms {
        let label = arm.label();
        write!(md, "| {label} |").ok();
        for d in DIMS {
            match lookup(means, &label, d, init) {
                Some(s) => write!(md, " {:.2e} ± {:.1e} |", s[c].0, s[c].1).ok(),
                None => write!(md, " |").ok(),
            };
        }
        md.push('\n');
    }
    write!(md, "| best AdaCliP (h2, s₀ chosen per d) |").ok();
    for d in DIMS {
        let best = arms
            .iter()
            .skip(1)
            .filter_map(|a| lookup(means, &a.label(), d, init).map(|s| (a.label(), s[c].0)))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        match best {
            Some((label, v)) => write!(md, " {v:.2e} ({}) |", &label["adaclip_".len()..]).ok(),
            None => write!(md, " |").ok(),
        };
    }
    md.push('\n');
}

/// A table of one cell format per (arm, d): `cell` formats the cell's (mean, std) columns.
fn value_table(
    md: &mut String,
    arms: &[Arm],
    means: &Means,
    init: &str,
    title: &str,
    cell: impl Fn(&[(f64, f64); 5]) -> String,
) {
    writeln!(md, "\n### θ₀ = {init}: {title}, mean over seeds\n").ok();
    header(md);
    for arm in arms {
        let label = arm.label();
        write!(md, "| {label} |").ok();
        for d in DIMS {
            let text = lookup(means, &label, d, init)
                .map(&cell)
                .unwrap_or_default();
            write!(md, " {text} |").ok();
        }
        md.push('\n');
    }
}

fn tables(arms: &[Arm], means: &Means) -> String {
    let mut md = String::new();
    for init in ["zeros", "normal"] {
        error_table(&mut md, arms, means, init, 0, "final error ‖θ_T − θ*‖²");
        error_table(
            &mut md,
            arms,
            means,
            init,
            1,
            "error ‖θ_t − θ*‖² averaged over the last epoch's iterates",
        );
        value_table(
            &mut md,
            arms,
            means,
            init,
            "noise std on coordinate 1 / RMS on the others at the last step",
            |s| format!("{:.1e} / {:.1e}", s[3].0, s[4].0),
        );
        value_table(
            &mut md,
            arms,
            means,
            init,
            "mean ‖g̃ − g‖ (released against raw gradient) over all steps",
            |s| format!("{:.3}", s[2].0),
        );
    }
    md
}
