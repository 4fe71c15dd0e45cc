//! `dpx run CONFIG`: train every seed of one experiment in parallel and write its CSVs.
//!
//! Orchestration only: load and validate the config, build the experiment (data, model, plan,
//! calibration), train the seeds on a rayon pool, show progress, write outputs atomically.
//!
//! Output layout under the output directory:
//! - `config.toml`: the resolved config (every default explicit);
//! - `seeds/<seed>.metrics.csv` and `seeds/<seed>.summary.csv`: written when a seed finishes (the
//!   summary last, so its presence marks the seed complete);
//! - `metrics.csv` and `summary.csv`: every finished seed, in the config's seed order, rebuilt
//!   from the per-seed files after the run;
//! - `seeds/<seed>.checkpoint` (`--checkpoint-every`): an unfinished seed's whole state
//!   ([`crate::train::checkpoint`]), owner-only, deleted when the seed finishes.
//!
//! `--resume` skips seeds already complete (files that parse whole; a damaged seed runs again)
//! and continues each unfinished seed from its checkpoint, if it has one. Ctrl-C (or SIGTERM)
//! stops the seeds in flight (writing their checkpoints with `--checkpoint-every`), keeps the
//! finished ones, and exits with code 130.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;

use super::bad_input;
use super::output_dir::{OutputDir, Replaced, check_writable, csv_bytes};
use crate::config::spec::Threads;
use crate::report::atomic::{write_atomic, write_atomic_private};
use crate::sweep::layout::concat_csv;
use crate::train::artifact::model_files;
use crate::train::checkpoint::{self, CheckpointError, CheckpointSink, Checkpointing, SeedState};
use crate::train::metrics::{MetricsRow, SeedStatus};
use crate::train::prepare::{Experiment, PlannedExperiment};
use crate::train::{Observer, SeedEnd, train_seed_checkpointed};

/// Arguments of `dpx run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The experiment file (TOML).
    pub config: PathBuf,
    /// Output directory (default: `output.dir` of the config, `results/<experiment.name>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Worker threads (default: `train.threads` of the config). Results do not depend on it.
    #[arg(long, value_parser = super::parse_threads)]
    pub threads: Option<usize>,
    /// Continue an earlier run in the same output directory: skip seeds already complete.
    #[arg(long, conflicts_with = "overwrite")]
    pub resume: bool,
    /// Replace the results already in the output directory.
    #[arg(long)]
    pub overwrite: bool,
    /// Write each unfinished seed's whole state to `seeds/<seed>.checkpoint` every STEPS steps
    /// and when interrupted (Ctrl-C, SIGTERM); `--resume` continues the seed from there, with
    /// the same results as an uninterrupted run. Default: off. The file holds the noise stream:
    /// it is owner-only and deleted when the seed finishes.
    #[arg(long, value_name = "STEPS", value_parser = clap::value_parser!(u64).range(1..))]
    pub checkpoint_every: Option<u64>,
    /// The data directory (default: `$DPX_DATA_DIR`, else `data`).
    #[arg(long, env = "DPX_DATA_DIR", value_parser = super::parse_data_dir)]
    pub data_dir: Option<PathBuf>,
    /// Refuse the run when its estimated peak memory is over this many GiB (default: three
    /// quarters of the physical memory). Checked before anything is written or deleted.
    #[arg(long, value_name = "GIB", value_parser = super::parse_max_memory)]
    pub max_memory: Option<f64>,
    /// No progress output.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Prints progress: bars on a terminal, plain lines otherwise, nothing with `--quiet`.
struct Progress {
    bars: Option<(MultiProgress, Vec<(u64, ProgressBar)>)>,
    plain: bool,
}

impl Progress {
    fn new(seeds: &[u64], total: u64, quiet: bool) -> Self {
        if quiet {
            return Progress {
                bars: None,
                plain: false,
            };
        }
        if !std::io::stderr().is_terminal() {
            return Progress {
                bars: None,
                plain: true,
            };
        }
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(
            "seed {prefix:>4} [{bar:30}] {pos}/{len} steps  eta {eta:>4}  {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        let bars = seeds
            .iter()
            .map(|&s| {
                let b = multi.add(ProgressBar::new(total));
                b.set_style(style.clone());
                b.set_prefix(s.to_string());
                (s, b)
            })
            .collect();
        Progress {
            bars: Some((multi, bars)),
            plain: false,
        }
    }

    fn bar(&self, seed: u64) -> Option<&ProgressBar> {
        self.bars
            .as_ref()?
            .1
            .iter()
            .find(|(s, _)| *s == seed)
            .map(|(_, b)| b)
    }

    fn finish(&self) {
        if let Some((_, bars)) = &self.bars {
            for (_, b) in bars {
                b.finish();
            }
        }
    }
}

fn describe(row: &MetricsRow) -> String {
    let mut s = format!("acc {:.4}  loss {:.4}", row.test_accuracy, row.test_loss);
    if let Some(e) = row.epsilon {
        s.push_str(&format!("  eps {e:.3}"));
    }
    s
}

impl Observer for Progress {
    fn on_step(&self, seed: u64, steps_done: u64, _total: u64) {
        if let Some(b) = self.bar(seed) {
            b.set_position(steps_done);
        }
    }
    fn on_eval(&self, seed: u64, row: &MetricsRow, total: u64) {
        if let Some(b) = self.bar(seed) {
            b.set_message(describe(row));
        } else if self.plain {
            eprintln!(
                "seed {seed} step {}/{total} epoch {:.2}  {}",
                row.step,
                row.epoch,
                describe(row)
            );
        }
    }
}

/// Writes a seed's checkpoints to `seeds/<seed>.checkpoint`, atomically and owner-only.
struct CheckpointFiles<'a>(&'a OutputDir);

impl CheckpointSink for CheckpointFiles<'_> {
    fn save(&self, seed: u64, bytes: &[u8]) -> Result<(), String> {
        write_atomic_private(&self.0.seed_checkpoint(seed), bytes).map_err(|e| e.to_string())
    }
}

/// Seed `seed`'s checkpoint in `out`, if it has a usable one. One written for another run or by
/// another build is refused (bad input, naming the file); a damaged one is noted on stderr and
/// the seed starts again from step 0.
fn load_checkpoint(
    exp: &Experiment,
    out: &OutputDir,
    resolved: &str,
    seed: u64,
) -> anyhow::Result<Option<SeedState>> {
    let path = out.seed_checkpoint(seed);
    if !path.exists() {
        return Ok(None);
    }
    // Bounded by what this experiment's state can take: parameters and optimizer/clipping
    // vectors (or an accelerated run's iterates), a permutation of the data, the rows, plus room
    // for the ledger.
    let p = (exp.model.num_params() as u64).max(exp.data.train.num_features() as u64 + 1);
    let n = exp.data.train.len() as u64;
    let rows = exp.plan.eval_steps().len() as u64;
    let limit = (64u64 << 20)
        .saturating_add(p.saturating_mul(48))
        .saturating_add(n.saturating_mul(16))
        .saturating_add(rows.saturating_mul(1024));
    let damaged = |why: String| {
        eprintln!(
            "note: {}: {why}; seed {seed} starts again from step 0",
            path.display()
        );
        Ok(None)
    };
    let bytes = match crate::text_file::read_bytes_capped(&path, limit, "a checkpoint") {
        Ok(b) => b,
        Err(e @ crate::text_file::TextReadError::TooLarge { .. }) => {
            return damaged(format!("damaged: {}", e.into_io()));
        }
        Err(e) => return Err(bad_input(e)),
    };
    let state = checkpoint::decode(&bytes, resolved, seed)
        .and_then(|s| checkpoint::validate(exp, seed, &s).map(|()| s));
    match state {
        Ok(s) => Ok(Some(s)),
        Err(CheckpointError::Damaged(why)) => damaged(format!("damaged checkpoint: {why}")),
        Err(CheckpointError::Foreign(why)) => Err(bad_input(anyhow::anyhow!(
            "{}: checkpoint refused: {why}; delete it to train seed {seed} from step 0",
            path.display()
        ))),
    }
}

/// Build the experiment of a config file, mapping input errors to exit code 2.
pub fn build_experiment(config: &Path, data_dir: Option<&Path>) -> anyhow::Result<Experiment> {
    let spec = crate::config::load(config).map_err(bad_input)?;
    let data_dir = super::data_dir_or_default(data_dir);
    Experiment::build(spec, &data_dir).map_err(train_error)
}

/// [`build_experiment`]'s model and plan alone ([`Experiment::plan_only`]), for `dpx account
/// --config`; `[accelerated]` configs get the whole experiment (their plan needs the data's
/// optimum).
pub fn plan_experiment(
    config: &Path,
    data_dir: Option<&Path>,
) -> anyhow::Result<Result<PlannedExperiment, Box<Experiment>>> {
    let spec = crate::config::load(config).map_err(bad_input)?;
    let data_dir = super::data_dir_or_default(data_dir);
    if spec.accelerated.is_some() {
        let exp = Experiment::build(spec, &data_dir).map_err(train_error)?;
        return Ok(Err(Box::new(exp)));
    }
    Ok(Ok(
        Experiment::plan_only(spec, &data_dir).map_err(train_error)?
    ))
}

/// A training error as the CLI reports it: bad input (exit code 2) when it is the user's.
fn train_error(e: crate::train::TrainError) -> anyhow::Error {
    if e.is_bad_input() {
        bad_input(e)
    } else {
        e.into()
    }
}

/// Run `dpx run`.
pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let exp = build_experiment(&args.config, args.data_dir.as_deref())?;
    let out = OutputDir {
        root: args
            .out
            .clone()
            .unwrap_or_else(|| exp.spec.output.dir.clone()),
    };
    let resolved = exp.spec.with_absolute_paths().to_resolved_toml();
    let threads = match (args.threads, exp.spec.train.threads) {
        (Some(t), _) | (None, Threads::Count(t)) => Some(t),
        (None, Threads::Auto) => None,
    };
    let concurrent = threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .min(exp.spec.seeds.len());
    super::check_memory(&exp, concurrent, args.max_memory)?;
    let pool = super::thread_pool(threads)?;

    if out.has_results() && !args.resume && !args.overwrite {
        return Err(bad_input(anyhow::anyhow!(
            "{} already holds results: pass --resume to continue them or --overwrite to replace them",
            out.root.display()
        )));
    }
    check_writable(&out.root)?;
    if args.resume && out.config().exists() {
        let old = crate::text_file::read_text_capped(
            &out.config(),
            crate::config::MAX_FILE_BYTES,
            "the saved config.toml",
        )
        .map_err(bad_input)?;
        if old != resolved {
            return Err(bad_input(anyhow::anyhow!(
                "--resume: {} holds a different experiment (its config.toml differs from {}); use another --out",
                out.root.display(),
                args.config.display()
            )));
        }
    }
    // --overwrite sets the old results aside only now, once every check above has passed; they
    // are deleted when every new seed has finished, and put back if the new run fails or is
    // interrupted, so nothing already written is lost.
    let replaced = if args.overwrite && out.has_results() {
        Some(Replaced::set_aside(&out)?)
    } else {
        None
    };
    // From the moment the output exists, Ctrl-C and SIGTERM interrupt between steps (each seed
    // in flight checkpoints when asked to) instead of killing the process mid-write.
    let cancel = Arc::new(AtomicBool::new(false));
    {
        let cancel = Arc::clone(&cancel);
        // A second handler cannot be installed (e.g. a library caller already set one): then
        // Ctrl-C keeps its default behaviour, and completed seeds are still on disk.
        let _ = ctrlc::set_handler(move || cancel.store(true, Ordering::SeqCst));
    }
    std::fs::create_dir_all(out.seeds()).with_context(|| out.seeds().display().to_string())?;
    write_atomic(&out.config(), resolved.as_bytes())?;

    let plan = &exp.plan;
    if !args.quiet {
        print_plan(&exp, &out.root);
    }
    // Caveats about the guarantee are printed even with --quiet.
    for w in plan.privacy.iter().flat_map(|p| &p.warnings) {
        eprintln!("warning: {w}");
    }
    for n in &exp.data.notes {
        eprintln!("note: {n}");
    }
    // With --resume a seed is skipped only when its files parse whole; a damaged one runs again.
    let todo: Vec<u64> = exp
        .spec
        .seeds
        .iter()
        .copied()
        .filter(|&s| {
            if !(args.resume && out.seed_summary(s).exists()) {
                return true;
            }
            match out.check_seed(s) {
                Ok(()) => false,
                Err(e) => {
                    eprintln!("note: seed {s} is not complete ({e}); running it again");
                    true
                }
            }
        })
        .collect();
    let skipped = exp.spec.seeds.len() - todo.len();
    if skipped > 0 && !args.quiet {
        eprintln!("resuming: {skipped} seed(s) already complete");
    }
    // A finished seed's checkpoint (left by a kill between its summary and the deletion) goes.
    for &s in &exp.spec.seeds {
        if !todo.contains(&s) {
            out.remove_checkpoint(s)?;
        }
    }
    // An accelerated run may stop at T' < train.steps (the noise-dividing step choice).
    let total_steps = exp
        .accelerated
        .as_ref()
        .map_or(plan.steps, |a| a.plan.steps);
    // Every unfinished seed's checkpoint is read and checked before any seed trains.
    let mut jobs: Vec<(u64, Option<SeedState>)> = Vec::with_capacity(todo.len());
    for &s in &todo {
        let state = if args.resume {
            load_checkpoint(&exp, &out, &resolved, s)?
        } else {
            None
        };
        if let Some(st) = &state
            && !args.quiet
        {
            let fresh = matches!(st.noise, checkpoint::NoiseState::Secure);
            eprintln!(
                "resuming: seed {s} from its checkpoint at step {} of {}{}",
                st.step,
                total_steps,
                if fresh {
                    " (secure noise: fresh noise from here on)"
                } else {
                    ""
                }
            );
        }
        jobs.push((s, state));
    }
    let sink = CheckpointFiles(&out);
    let checkpointing = args.checkpoint_every.map(|every| Checkpointing {
        every: Some(every),
        on_interrupt: true,
        resolved_config: &resolved,
        sink: &sink,
    });

    let progress = Progress::new(&todo, total_steps, args.quiet);
    let results: Vec<(u64, anyhow::Result<Option<SeedStatus>>)> = pool.install(|| {
        jobs.into_par_iter()
            .map(|(seed, state)| {
                let r = (|| -> anyhow::Result<Option<SeedStatus>> {
                    match train_seed_checkpointed(
                        &exp,
                        seed,
                        &progress,
                        &cancel,
                        checkpointing.as_ref(),
                        state,
                    )? {
                        SeedEnd::Interrupted => Ok(None),
                        SeedEnd::Finished(res) => {
                            write_atomic(&out.seed_metrics(seed), &csv_bytes(&res.rows)?)?;
                            for (name, bytes) in model_files(&exp, &res)? {
                                write_atomic(&out.seeds().join(name), &bytes)?;
                            }
                            write_atomic(
                                &out.seed_summary(seed),
                                &csv_bytes(std::slice::from_ref(&res.summary))?,
                            )?;
                            out.remove_checkpoint(seed)?;
                            Ok(Some(res.summary.status))
                        }
                    }
                })();
                (seed, r)
            })
            .collect()
    });
    progress.finish();

    // Rebuild the experiment-level files from every complete seed, in the config's order.
    let complete: Vec<u64> = exp
        .spec
        .seeds
        .iter()
        .copied()
        .filter(|&s| out.seed_summary(s).exists() && out.check_seed(s).is_ok())
        .collect();
    if !complete.is_empty() {
        let metrics: Vec<PathBuf> = complete.iter().map(|&s| out.seed_metrics(s)).collect();
        let summaries: Vec<PathBuf> = complete.iter().map(|&s| out.seed_summary(s)).collect();
        write_atomic(&out.metrics(), &concat_csv(&metrics)?)?;
        write_atomic(&out.summary(), &concat_csv(&summaries)?)?;
    }

    let mut failed = 0;
    let mut interrupted = 0;
    for (seed, r) in &results {
        // A seed this run finished whose files do not read back whole is a failure, never a
        // silent gap in metrics.csv.
        if let Ok(Some(_)) = r
            && !complete.contains(seed)
        {
            failed += 1;
            let why = out
                .check_seed(*seed)
                .err()
                .map_or_else(|| "its files are missing".to_string(), |e| e.to_string());
            eprintln!("error: seed {seed}: its files do not read back: {why}");
            continue;
        }
        match r {
            Ok(Some(SeedStatus::Completed)) => {}
            Ok(Some(SeedStatus::Diverged)) => {
                eprintln!("warning: seed {seed} diverged (NaN or infinite loss); see summary.csv")
            }
            Ok(None) => interrupted += 1,
            Err(e) => {
                failed += 1;
                eprintln!("error: seed {seed}: {}", super::error_line(e));
            }
        }
    }
    if !args.quiet {
        print_summary(&out);
    }
    if let Some(replaced) = replaced {
        if interrupted == 0 && failed == 0 {
            replaced.discard()?;
        } else {
            replaced.restore(&out)?;
            eprintln!(
                "the previous results in {} were put back: the --overwrite run did not finish",
                out.root.display()
            );
            return Ok(ExitCode::from(if interrupted > 0 { 130 } else { 1 }));
        }
    }
    if interrupted > 0 {
        eprintln!(
            "interrupted: {} of {} seeds complete in {}; run the same command with --resume to finish{}",
            complete.len(),
            exp.spec.seeds.len(),
            out.root.display(),
            if checkpointing.is_some() {
                " (unfinished seeds continue from their checkpoints)"
            } else {
                ""
            }
        );
        return Ok(ExitCode::from(130));
    }
    if failed > 0 {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn print_plan(exp: &Experiment, out: &Path) {
    let p = &exp.plan;
    let d = &exp.data;
    println!(
        "{}: {} train / {} test examples{}, {} features; model {} parameters",
        exp.spec.name,
        d.train.len(),
        d.test.len(),
        d.validation
            .as_ref()
            .map(|v| format!(" / {} validation", v.len()))
            .unwrap_or_default(),
        d.train.num_features(),
        exp.model.num_params()
    );
    println!(
        "plan: {} steps ({:.2} epochs), sample_rate {:.6}, expected_batch_size {}, seeds {:?}",
        p.steps,
        p.steps as f64 / p.steps_per_epoch,
        p.sample_rate,
        p.expected_batch_size,
        exp.spec.seeds
    );
    if let Some(acc) = &exp.accelerated {
        let ap = &acc.plan;
        println!(
            "accelerated: {:?}, L {:.6}, mu {}, steps {} of {}, batch {} of {}, S1 {}; {}",
            ap.method,
            ap.constants.smoothness,
            ap.constants.strong_convexity,
            ap.steps,
            ap.planned_steps,
            ap.batch_size,
            ap.dataset_size,
            ap.l1_sensitivity,
            acc.optimum_note
        );
        println!(
            "privacy: pure epsilon {} (Laplace, delta 0), laplace_scale first {:.6}, last {:.6}",
            ap.epsilon,
            ap.laplace_scale_at(0),
            ap.laplace_scale_at(ap.scales.len().saturating_sub(1))
        );
        for w in &ap.warnings {
            eprintln!("warning: {w}");
        }
        println!("output: {}", out.display());
        return;
    }
    match &p.privacy {
        Some(pp) => {
            let how = if pp.calibrated { "calibrated" } else { "given" };
            let target = pp
                .target_epsilon
                .map(|e| format!(" for epsilon {e}"))
                .unwrap_or_default();
            println!(
                "privacy: noise_multiplier {:.6} ({how}{target}), clip_norm {}, delta {}, accountant {}, {}",
                pp.noise_multiplier,
                p.clip_norm.map(|c| c.to_string()).unwrap_or_default(),
                pp.delta,
                pp.accountant,
                if exp.spec.privacy.as_ref().is_some_and(|s| s.secure_noise) {
                    "noise secure (OS-seeded ChaCha20; not reproducible)"
                } else {
                    "noise seeded (reproducible; not for deployment)"
                }
            );
        }
        None => println!("privacy: disabled (non-private baseline; epsilon is infinite)"),
    }
    if let Some(m) = &p.bandmf {
        println!(
            "noise: banded matrix factorization, {} bands ({} workload): expected squared error {:.4} of DP-SGD's at the same noise multiplier; {}, accounted as {} rounds",
            m.bands,
            match m.workload {
                crate::privacy::bandmf::Workload::PrefixSum => "prefix-sum".to_string(),
                crate::privacy::bandmf::Workload::Momentum { momentum } =>
                    format!("momentum {momentum}"),
            },
            m.error_ratio,
            match m.group_sample_rate {
                Some(rate) => format!(
                    "sampling b-min-separated Poisson, rate {rate:.6} within each of {} groups",
                    m.bands
                ),
                None => "fixed-order batches (no amplification)".to_string(),
            },
            p.rounds.map_or(p.steps, |r| r.count(p.steps))
        );
    } else if let Some(r) = p.rounds {
        match r {
            crate::train::plan::Rounds::BallsInBins { .. } => println!(
                "sampling: balls in bins, {} batches per epoch (each example in one, uniformly): accounted as one random allocation per epoch, {} in all",
                r.period(),
                r.count(p.steps)
            ),
            _ => println!(
                "sampling: fixed-order batches, {} per epoch, the same order every epoch (no amplification): accounted as one release per epoch, {} in all",
                r.period(),
                r.count(p.steps)
            ),
        }
    }
    if let Some((statistic, stat_sigma)) = p.clip.statistic() {
        println!(
            "clip policy {}: each step also releases a {statistic} (noise_multiplier {stat_sigma}), split from the noise_multiplier above",
            p.clip.name()
        );
    } else if !matches!(p.clip, crate::privacy::clip::ClipPolicy::Flat { .. }) {
        println!("clip policy {}", p.clip.name());
    }
    let t = &exp.spec.train;
    if let Some(a) = t.augmentation {
        let views = if exp.data.train_mirrored.is_some() {
            "each the scattering features of the image or of its left-right mirror".to_string()
        } else {
            format!(
                "mirror-padded random crop {}, horizontal flip {}",
                a.crop_padding,
                if a.horizontal_flip { "on" } else { "off" }
            )
        };
        println!(
            "augmentation: {} views per example ({views}), their gradients averaged before clipping: the sensitivity and epsilon are unchanged",
            a.multiplicity,
        );
    }
    if let Some(d) = t.ema_decay {
        println!(
            "ema: moving average of the parameters with decay {d} (post-processing), scored in the ema_* columns and saved as seeds/<seed>.ema.model.safetensors"
        );
    }
    println!("output: {}", out.display());
}

fn print_summary(out: &OutputDir) {
    let Ok(text) = crate::text_file::read_bytes_capped(
        &out.summary(),
        crate::text_file::MAX_TEXT_BYTES,
        "summary.csv",
    ) else {
        return;
    };
    let mut r = csv::Reader::from_reader(text.as_slice());
    let rows: Vec<SummaryRowView> = r.deserialize().filter_map(Result::ok).collect();
    for s in rows {
        println!(
            "seed {:>4}: {}  final acc {:.4}  best {:.4}  epsilon {}  ({:.1} s)",
            s.seed,
            s.status,
            s.final_test_accuracy,
            s.best_test_accuracy,
            s.epsilon
                .map(|e| format!("{e:.4}"))
                .unwrap_or_else(|| "inf".into()),
            s.seconds
        );
    }
}

/// The columns of summary.csv the run prints back.
#[derive(serde::Deserialize)]
struct SummaryRowView {
    seed: u64,
    status: String,
    final_test_accuracy: f64,
    best_test_accuracy: f64,
    epsilon: Option<f64>,
    seconds: f64,
}
