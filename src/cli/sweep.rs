//! `dpx sweep FILE`: expand a sweep file into points, run every (point × seed) job over one
//! rayon pool, resume completed jobs, run one shard of the jobs, or write a Slurm array script.
//!
//! Orchestration only: expansion, the directory layout and merging live in [`crate::sweep`];
//! training is [`crate::train::train_seed`]. Data is prepared once per distinct `[data]`
//! spec and shared by every point and seed that uses it.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;

use super::bad_input;
use super::output_dir::csv_bytes;
use crate::report::atomic::write_atomic;
use crate::sweep::layout::{PointDir, SweepDir};
use crate::sweep::{Job, Shard, Sweep};
use crate::train::TrainError;
use crate::train::artifact::model_files;
use crate::train::metrics::SeedStatus;
use crate::train::plan::TrainingPlan;
use crate::train::prepare::{
    Experiment, PreparedData, load_init_from, plan_and_model, prepare_data,
};
use crate::train::{SeedEnd, Silent, train_seed};

/// Arguments of `dpx sweep`.
#[derive(Debug, clap::Args)]
pub struct SweepArgs {
    /// The sweep file (TOML): `base`, `[grid]`, `[[zip]]`, optional `seeds` and `out`.
    pub file: PathBuf,
    /// Output directory (default: `out` of the sweep file, else `results/sweeps/<file stem>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Worker threads shared by all jobs (default: all cores). Results do not depend on it.
    #[arg(long, value_parser = super::parse_threads)]
    pub threads: Option<usize>,
    /// List the points and jobs, run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Run only share i of N of the jobs (job k belongs to shard k mod N), e.g. `--shard 0/4`.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
    /// Write a Slurm array script (one array task per shard) instead of running.
    #[arg(long)]
    pub slurm: bool,
    /// Slurm partition (`--slurm`).
    #[arg(long, requires = "slurm")]
    pub partition: Option<String>,
    /// Slurm time limit per array task, `HH:MM:SS` or `D-HH:MM:SS` (`--slurm`).
    #[arg(long, requires = "slurm", default_value = "01:00:00")]
    pub time: String,
    /// CPUs per array task; each task runs with this many threads (`--slurm`).
    #[arg(long, requires = "slurm", default_value_t = 2)]
    pub cpus: usize,
    /// Number of shards = array tasks (`--slurm`).
    #[arg(long, requires = "slurm", default_value_t = 4)]
    pub shards: usize,
    /// The data directory (default: `$DPX_DATA_DIR`, else `data`).
    #[arg(long, env = "DPX_DATA_DIR", value_parser = super::parse_data_dir)]
    pub data_dir: Option<PathBuf>,
    /// Refuse a point whose estimated peak memory is over this many GiB (default: three quarters
    /// of the physical memory), as a failure of that point before it trains. Points that share
    /// their `[data]` settings share one copy of the data; once the distinct settings prepared so
    /// far hold more than the limit, the points of the remaining ones fail unprepared.
    #[arg(long, value_name = "GIB", value_parser = super::parse_max_memory)]
    pub max_memory: Option<f64>,
    /// No progress output (errors and the failure summary are still printed).
    #[arg(long, short)]
    pub quiet: bool,
}

/// Load and expand the sweep file (errors are bad input).
pub fn load_sweep(file: &Path) -> anyhow::Result<Sweep> {
    crate::sweep::load(file).map_err(bad_input)
}

/// Run `dpx sweep`.
pub fn run(args: SweepArgs) -> anyhow::Result<ExitCode> {
    let shard = args
        .shard
        .as_deref()
        .map(Shard::parse)
        .transpose()
        .map_err(|e| bad_input(anyhow::anyhow!("--shard: {e}")))?;
    if args.threads == Some(0) {
        return Err(crate::bad_input!("--threads must be at least 1"));
    }
    let sweep = load_sweep(&args.file)?;
    let out = args.out.clone().unwrap_or_else(|| sweep.default_out());
    let jobs: Vec<Job> = sweep
        .jobs()
        .into_iter()
        .filter(|j| shard.is_none_or(|s| s.contains(j.index)))
        .collect();

    if args.slurm {
        return write_slurm(&args, &sweep, &out);
    }
    if args.dry_run {
        print_dry_run(&sweep, &jobs, &out, shard);
        return Ok(ExitCode::SUCCESS);
    }
    execute(&args, &sweep, &jobs, &out)
}

fn print_dry_run(sweep: &Sweep, jobs: &[Job], out: &Path, shard: Option<Shard>) {
    let total: usize = sweep.points.iter().map(|p| p.spec.seeds.len()).sum();
    println!(
        "{}: {} points x seeds = {} jobs{}; output {}",
        sweep.file.display(),
        sweep.points.len(),
        total,
        shard
            .map(|s| format!(" ({} in shard {}/{})", jobs.len(), s.index, s.count))
            .unwrap_or_default(),
        out.display()
    );
    let d = SweepDir {
        root: out.to_path_buf(),
    };
    for p in &sweep.points {
        println!("point {} {}  seeds {:?}", p.id, p.name, p.spec.seeds);
    }
    for j in jobs {
        let p = &sweep.points[j.point];
        let done = d.point(&p.id).is_complete(j.seed);
        println!(
            "job {:>5}  point {}  seed {:>4}  {}{}",
            j.index,
            p.id,
            j.seed,
            p.name,
            if done { "  (complete)" } else { "" }
        );
    }
}

/// Validate a Slurm time limit: `MM`, `HH:MM:SS` or `D-HH:MM:SS` style digits and separators.
fn valid_time(t: &str) -> bool {
    let (days, rest) = match t.split_once('-') {
        Some((d, r)) => (Some(d), r),
        None => (None, t),
    };
    let parts: Vec<&str> = rest.split(':').collect();
    days.is_none_or(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
        && (1..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 3 && p.chars().all(|c| c.is_ascii_digit()))
}

fn shell_quote(p: &Path) -> String {
    let s = p.to_string_lossy();
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn absolute(p: &Path) -> anyhow::Result<PathBuf> {
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    Ok(std::env::current_dir()
        .context("current directory")?
        .join(p))
}

fn write_slurm(args: &SweepArgs, sweep: &Sweep, out: &Path) -> anyhow::Result<ExitCode> {
    if !valid_time(&args.time) {
        return Err(crate::bad_input!(
            "--time `{}`: expected HH:MM:SS or D-HH:MM:SS",
            args.time
        ));
    }
    if args.cpus == 0 {
        return Err(crate::bad_input!("--cpus must be at least 1"));
    }
    if args.shards == 0 {
        return Err(crate::bad_input!("--shards must be at least 1"));
    }
    if let Some(p) = &args.partition
        && (p.is_empty()
            || !p
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c)))
    {
        return Err(crate::bad_input!(
            "--partition `{p}`: letters, digits, _ - . only"
        ));
    }
    let exe = std::env::current_exe().context("locating the dpx binary")?;
    let file = absolute(&args.file)?;
    let out_abs = absolute(out)?;
    let cwd = std::env::current_dir().context("current directory")?;
    let n = args.shards;
    let stem = sweep
        .file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "sweep".into())
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect::<String>();
    let mut s = String::new();
    s.push_str("#!/bin/bash\n");
    s.push_str(&format!(
        "# Written by `dpx sweep {} --slurm`.\n",
        args.file.display()
    ));
    s.push_str(&format!(
        "# One array task per shard; each writes {}/shards/<task>. After all tasks finish:\n#   dpx collect --out {} {}/shards/*\n",
        out_abs.display(),
        out_abs.display(),
        out_abs.display()
    ));
    s.push_str(&format!("#SBATCH --job-name=dpx-{stem}\n"));
    s.push_str(&format!("#SBATCH --array=0-{}\n", n - 1));
    s.push_str(&format!("#SBATCH --cpus-per-task={}\n", args.cpus));
    s.push_str("#SBATCH --ntasks=1\n");
    s.push_str(&format!("#SBATCH --time={}\n", args.time));
    if let Some(p) = &args.partition {
        s.push_str(&format!("#SBATCH --partition={p}\n"));
    }
    s.push_str(&format!(
        "#SBATCH --output={}/slurm/%A_%a.out\n",
        out_abs.display()
    ));
    s.push_str("set -euo pipefail\n");
    s.push_str(&format!("cd {}\n", shell_quote(&cwd)));
    let data = match args.data_dir.as_ref().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => format!(" --data-dir {}", shell_quote(&absolute(d)?)),
        None => String::new(),
    };
    s.push_str(&format!(
        "exec {} sweep {} --out {}/shards/\"$SLURM_ARRAY_TASK_ID\" --shard \"$SLURM_ARRAY_TASK_ID\"/{n} --threads {} --quiet{data}\n",
        shell_quote(&exe),
        shell_quote(&file),
        shell_quote(&out_abs),
        args.cpus
    ));
    std::fs::create_dir_all(out_abs.join("slurm"))
        .map_err(|e| bad_input(anyhow::anyhow!("output directory {}: {e}", out.display())))?;
    let script = out_abs.join("sweep.sbatch");
    write_atomic(&script, s.as_bytes())?;
    let total = sweep.jobs().len();
    println!(
        "wrote {} ({} points, {total} jobs in {n} array tasks)",
        script.display(),
        sweep.points.len()
    );
    println!("submit: sbatch {}", script.display());
    println!(
        "then:   dpx collect --out {} {}/shards/*",
        out_abs.display(),
        out_abs.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn map_train(e: TrainError) -> anyhow::Error {
    if e.is_bad_input() {
        bad_input(e)
    } else {
        e.into()
    }
}

/// Write `points.csv` (or check it matches the one already there).
fn write_points(d: &SweepDir, sweep: &Sweep) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header = vec!["index".to_string(), "id".into(), "name".into()];
    header.extend(sweep.keys.iter().cloned());
    w.write_record(&header)?;
    for p in &sweep.points {
        let mut row = vec![p.index.to_string(), p.id.clone(), p.name.clone()];
        for k in &sweep.keys {
            row.push(
                p.overrides
                    .iter()
                    .find(|(o, _)| o == k)
                    .map(|(_, v)| crate::sweep::value_label(v))
                    .unwrap_or_default(),
            );
        }
        w.write_record(&row)?;
    }
    let bytes = w.into_inner().map_err(|e| anyhow::anyhow!("{e}"))?;
    let path = d.points_csv();
    if path.exists() {
        let old = crate::text_file::read_bytes_capped(
            &path,
            crate::text_file::MAX_TEXT_BYTES,
            "points.csv",
        )
        .map_err(bad_input)?;
        if old != bytes {
            return Err(crate::bad_input!(
                "{} holds a different sweep (its points.csv differs); use another --out",
                d.root.display()
            ));
        }
        return Ok(());
    }
    write_atomic(&path, &bytes)?;
    Ok(())
}

/// The planned RDP curve of one run as `order,rdp` CSV (None for a non-private run or an
/// accountant that cannot compose the plan's events under RDP).
fn rdp_csv(plan: &TrainingPlan) -> Option<Vec<u8>> {
    use crate::privacy::accountant::Accountant;
    use crate::privacy::accountant::rdp::RdpAccountant;
    let p = plan.privacy.as_ref()?;
    let mut acc = RdpAccountant::new(
        p.options.relation,
        p.options.rdp_orders.clone(),
        p.options.rdp_conversion,
    )
    .ok()?;
    acc.compose(&plan.planned_ledger(plan.steps).to_event(), 1)
        .ok()?;
    let mut s = String::from("order,rdp\n");
    for (o, r) in acc.orders().iter().zip(acc.rdp_curve()) {
        s.push_str(&format!("{o},{r}\n"));
    }
    Some(s.into_bytes())
}

/// Prepare every point that has work: data once per distinct `[data]` spec, then model and plan.
fn build_points(
    sweep: &Sweep,
    needed: &[usize],
    data_dir: &Path,
    concurrent_jobs: usize,
    max_memory: Option<f64>,
) -> Vec<(usize, anyhow::Result<Experiment>)> {
    // Distinct data specs, in first-use order.
    let mut keys: Vec<String> = Vec::new();
    let mut key_of: HashMap<usize, usize> = HashMap::new();
    for &i in needed {
        let k = format!("{:?}", sweep.points[i].spec.data);
        let pos = keys.iter().position(|x| *x == k).unwrap_or_else(|| {
            keys.push(k);
            keys.len() - 1
        });
        key_of.insert(i, pos);
    }
    let first_of: Vec<usize> = (0..keys.len())
        .map(|k| {
            needed
                .iter()
                .copied()
                .find(|i| key_of[i] == k)
                .unwrap_or_default()
        })
        .collect();
    // One distinct dataset at a time (each prepares in parallel), all of them held until the
    // points are built: refuse the rest once together they pass the memory limit, instead of
    // holding them all (a sweep over a data key of CIFAR-10 scattering features holds 3.7 GB per
    // value).
    let (limit, why) = super::memory_limit(max_memory);
    let mut held = 0u64;
    let mut data: Vec<Result<Arc<PreparedData>, String>> = Vec::with_capacity(first_of.len());
    for (k, &i) in first_of.iter().enumerate() {
        if held > limit {
            data.push(Err(format!(
                "the sweep's first {k} distinct [data] settings already hold {} of data, over the limit of {} ({why}); run the points of each [data] setting as a sweep of their own",
                crate::train::memory::gib(held),
                crate::train::memory::gib(limit)
            )));
            continue;
        }
        let d = prepare_data(&sweep.points[i].spec, data_dir).map_err(|e| format!("{e}"));
        if let Ok(d) = &d {
            held = held.saturating_add(crate::train::memory::data_bytes(d));
        }
        data.push(d.map(Arc::new));
    }
    needed
        .par_iter()
        .map(|&i| {
            let r = (|| -> anyhow::Result<Experiment> {
                let spec = sweep.points[i].spec.clone();
                // One copy of each prepared dataset for all its points (a CIFAR-10 scattering
                // set is 3.7 GB: a copy per point of an 8-point sweep did not fit in 24 GiB).
                let d = match &data[key_of[&i]] {
                    Ok(d) => Arc::clone(d),
                    Err(e) => return Err(bad_input(anyhow::anyhow!("{e}"))),
                };
                let (model, plan) = plan_and_model(&spec, &d, d.train.len()).map_err(map_train)?;
                let accelerated = match &spec.accelerated {
                    Some(acc) => Some(
                        crate::train::accelerated::AcceleratedExperiment::build(
                            &spec, acc, &d, data_dir,
                        )
                        .map_err(map_train)?,
                    ),
                    None => None,
                };
                let init_from = load_init_from(&spec, &model).map_err(map_train)?;
                let exp = Experiment {
                    spec,
                    data: d,
                    model,
                    init_from,
                    plan,
                    accelerated,
                };
                super::check_memory(&exp, concurrent_jobs, max_memory)?;
                Ok(exp)
            })();
            (i, r)
        })
        .collect()
}

/// Per-job lines: through the bar on a terminal, plain on stderr otherwise, none when quiet.
struct Lines {
    bar: Option<ProgressBar>,
    quiet: bool,
}

impl Lines {
    fn line(&self, s: &str) {
        if self.quiet {
            return;
        }
        match &self.bar {
            Some(b) => b.println(s),
            None => eprintln!("{s}"),
        }
    }
    fn inc(&self) {
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }
}

fn execute(args: &SweepArgs, sweep: &Sweep, jobs: &[Job], out: &Path) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let d = SweepDir {
        root: out.to_path_buf(),
    };
    std::fs::create_dir_all(out)
        .map_err(|e| bad_input(anyhow::anyhow!("output directory {}: {e}", out.display())))?;
    write_points(&d, sweep)?;

    let todo: Vec<Job> = jobs
        .iter()
        .copied()
        .filter(|j| {
            let p = &sweep.points[j.point];
            let pd = d.point(&p.id);
            if !pd.seed_summary(j.seed).exists() {
                return true;
            }
            match pd.check_seed(j.seed) {
                Ok(()) => false,
                Err(e) => {
                    // A damaged seed (cut short, garbage) runs again instead of counting as done.
                    eprintln!(
                        "note: point {} seed {} is not complete ({e}); running it again",
                        p.name, j.seed
                    );
                    true
                }
            }
        })
        .collect();
    let skipped = jobs.len() - todo.len();
    let mut needed: Vec<usize> = todo.iter().map(|j| j.point).collect();
    needed.dedup();
    // Every point of this share gets its config.toml, even when all its jobs are done.
    let mut share_points: Vec<usize> = jobs.iter().map(|j| j.point).collect();
    share_points.dedup();
    for &i in &share_points {
        let p = &sweep.points[i];
        let pd = d.point(&p.id);
        std::fs::create_dir_all(pd.seeds()).with_context(|| pd.seeds().display().to_string())?;
        if pd.config().exists() {
            let old = crate::text_file::read_text_capped(
                &pd.config(),
                crate::config::MAX_FILE_BYTES,
                "a point's config.toml",
            )
            .map_err(bad_input)?;
            if old != p.resolved {
                return Err(crate::bad_input!(
                    "{} holds a different experiment for point {}; use another --out",
                    pd.root.display(),
                    p.name
                ));
            }
        } else {
            write_atomic(&pd.config(), p.resolved.as_bytes())?;
        }
    }
    if !args.quiet {
        eprintln!(
            "{}: {} points, {} jobs{} ({} already complete), output {}",
            sweep.file.display(),
            sweep.points.len(),
            jobs.len(),
            args.shard
                .as_deref()
                .map(|s| format!(" in shard {s}"))
                .unwrap_or_default(),
            skipped,
            out.display()
        );
    }

    let pool = super::thread_pool(args.threads)?;
    let data_dir = super::data_dir_or_default(args.data_dir.as_deref());

    let cancel = Arc::new(AtomicBool::new(false));
    {
        let cancel = Arc::clone(&cancel);
        let _ = ctrlc::set_handler(move || cancel.store(true, Ordering::SeqCst));
    }

    let concurrent = pool.current_num_threads().min(todo.len());
    let built =
        pool.install(|| build_points(sweep, &needed, &data_dir, concurrent, args.max_memory));
    let mut exps: HashMap<usize, Experiment> = HashMap::new();
    // (point name, seed or None for the whole point, message)
    let failures: Mutex<Vec<(String, Option<u64>, String)>> = Mutex::new(Vec::new());
    let mut warned = std::collections::BTreeSet::new();
    for (i, r) in built {
        let p = &sweep.points[i];
        match r {
            Ok(e) => {
                if let Some(bytes) = rdp_csv(&e.plan) {
                    write_atomic(&d.point(&p.id).rdp(), &bytes)?;
                }
                for w in e.plan.privacy.iter().flat_map(|pp| &pp.warnings) {
                    if warned.insert(w.clone()) {
                        eprintln!("warning: {w}");
                    }
                }
                exps.insert(i, e);
            }
            Err(e) => failures.lock().unwrap_or_else(|p| p.into_inner()).push((
                p.name.clone(),
                None,
                super::error_line(&e),
            )),
        }
    }

    let bar = if !args.quiet && std::io::stderr().is_terminal() {
        let b =
            ProgressBar::with_draw_target(Some(todo.len() as u64), ProgressDrawTarget::stderr());
        b.set_style(
            ProgressStyle::with_template(
                "jobs [{bar:40}] {pos}/{len}  elapsed {elapsed}  eta {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        Some(b)
    } else {
        None
    };
    let lines = Lines {
        bar,
        quiet: args.quiet,
    };
    let interrupted = AtomicBool::new(false);
    pool.install(|| {
        todo.par_iter().for_each(|j| {
            let p = &sweep.points[j.point];
            let Some(exp) = exps.get(&j.point) else {
                lines.inc();
                return;
            };
            let pd: PointDir = d.point(&p.id);
            let r = (|| -> anyhow::Result<Option<(SeedStatus, f64, Option<f64>)>> {
                match train_seed(exp, j.seed, &Silent, &cancel)? {
                    SeedEnd::Interrupted => Ok(None),
                    SeedEnd::Finished(res) => {
                        write_atomic(&pd.seed_metrics(j.seed), &csv_bytes(&res.rows)?)?;
                        for (name, bytes) in model_files(exp, &res)? {
                            write_atomic(&pd.seeds().join(name), &bytes)?;
                        }
                        write_atomic(
                            &pd.seed_summary(j.seed),
                            &csv_bytes(std::slice::from_ref(&res.summary))?,
                        )?;
                        Ok(Some((
                            res.summary.status,
                            res.summary.final_test_accuracy,
                            res.summary.epsilon,
                        )))
                    }
                }
            })();
            lines.inc();
            match r {
                Ok(Some((status, acc, eps))) => lines.line(&format!(
                    "done  {} seed {}: {}  acc {acc:.4}  eps {}",
                    p.name,
                    j.seed,
                    match status {
                        SeedStatus::Completed => "completed",
                        SeedStatus::Diverged => "diverged",
                    },
                    eps.map(|e| format!("{e:.3}"))
                        .unwrap_or_else(|| "inf".into())
                )),
                Ok(None) => interrupted.store(true, Ordering::SeqCst),
                Err(e) => {
                    lines.line(&format!(
                        "FAIL  {} seed {}: {}",
                        p.name,
                        j.seed,
                        super::error_line(&e)
                    ));
                    failures.lock().unwrap_or_else(|p| p.into_inner()).push((
                        p.name.clone(),
                        Some(j.seed),
                        super::error_line(&e),
                    ));
                }
            }
        })
    });
    if let Some(b) = &lines.bar {
        b.finish_and_clear();
    }
    d.rebuild()?;

    let failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
    let complete = jobs
        .iter()
        .filter(|j| d.point(&sweep.points[j.point].id).is_complete(j.seed))
        .count();
    if !args.quiet {
        eprintln!(
            "{complete}/{} jobs complete in {} ({:.1} s)",
            jobs.len(),
            out.display(),
            started.elapsed().as_secs_f64()
        );
    }
    if interrupted.load(Ordering::SeqCst) {
        eprintln!("interrupted: run the same command again to resume");
        return Ok(ExitCode::from(130));
    }
    if !failures.is_empty() {
        eprintln!("{} failure(s):", failures.len());
        for (name, seed, msg) in &failures {
            match seed {
                Some(s) => eprintln!("  {name} seed {s}: {msg}"),
                None => eprintln!("  {name} (every seed): {msg}"),
            }
        }
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_with_the_same_data_share_one_copy() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("base.toml"),
            r#"
[experiment]
name = "share"
seeds = [0]

[data]
dataset = "gaussian_mixture"

[data.synthetic]
n_train = 200
n_test = 50
n_features = 4
n_classes = 2
separation = 2.0
seed = 1

[model]
architecture = "logistic"

[train]
steps = 2
expected_batch_size = 20
learning_rate = 0.1

[clip]
clip_norm = 1.0

[privacy]
epsilon = 1.0
delta = 1e-5
"#,
        )
        .unwrap();
        let path = dir.path().join("s.toml");
        std::fs::write(
            &path,
            "base = \"base.toml\"\n[grid]\n\"privacy.epsilon\" = [1.0, 2.0]\n\"data.max_norm\" = [1.0, 2.0]\n",
        )
        .unwrap();
        let sweep = crate::sweep::load(&path).unwrap();
        let needed: Vec<usize> = (0..sweep.points.len()).collect();
        let built: Vec<Experiment> = build_points(&sweep, &needed, dir.path(), 1, None)
            .into_iter()
            .map(|(_, e)| e.unwrap())
            .collect();
        assert_eq!(built.len(), 4);
        for a in &built {
            for b in &built {
                let same_data = a.spec.data == b.spec.data;
                assert_eq!(Arc::ptr_eq(&a.data, &b.data), same_data);
            }
        }

        // A memory limit below one dataset: the first [data] setting is prepared (and passes
        // it), the second is refused before it is prepared, with a message that says why.
        let one = crate::train::memory::data_bytes(&built[0].data);
        let limit_gib = (one as f64 * 0.5) / (1u64 << 30) as f64;
        let results = build_points(&sweep, &needed, dir.path(), 1, Some(limit_gib));
        let first = &sweep.points[needed[0]].spec.data;
        for (i, r) in results {
            let msg = r.err().map(|e| e.to_string()).unwrap_or_default();
            let refused = msg.contains("distinct [data] settings");
            assert_eq!(
                refused,
                sweep.points[i].spec.data != *first,
                "point {i}: {msg}"
            );
        }
    }
}
