//! `dpx report DIR`: tables, a pivot, plots and the tuning privacy cost of a `dpx run` output
//! directory or a `dpx sweep` directory.
//!
//! Orchestration only: reading and formatting are [`crate::report::summary`], the tuning cost
//! [`crate::report::tuning`], the plots [`crate::report::plot`]. Writes, atomically, into DIR:
//! `report.csv`, `report.md`, `report.json` and `plots/<metric>.svg|png` (for a sweep over the
//! budget also `plots/privacy_utility.svg|png`). Prints the Markdown report, or with
//! `--format json` the JSON document (docs/outputs.md lists its fields).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use serde_json::{Value, json};

use super::bad_input;
use crate::report::atomic::write_atomic;
use crate::report::plot::{self, LogScale, PlotOptions, Series};
use crate::report::summary::{PointSummary, Stats, pivot, points_table, read_summary, report_csv};
use crate::report::tuning::{RdpCurve, TuningCost, tuning_cost};
use crate::sweep::layout::{PointDir, SweepDir, read_table};

/// Arguments of `dpx report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// A `dpx run` output directory or a `dpx sweep` directory.
    pub dir: PathBuf,
    /// The swept key whose values are the pivot's rows (default `privacy.epsilon` when swept,
    /// else the first swept key).
    #[arg(long)]
    pub rows: Option<String>,
    /// The swept key whose values are the pivot's columns (default: the first other swept key).
    #[arg(long)]
    pub cols: Option<String>,
    /// Skip the plots.
    #[arg(long)]
    pub no_plots: bool,
    /// Log scale for the axes of σ_t and ε (ε is the privacy-utility curve's x axis): `auto`
    /// when all values are positive and span at least a factor of 10.
    #[arg(long, value_enum, default_value_t = LogScale::Auto)]
    pub log_scale: LogScale,
    /// What to print: the Markdown report, or one JSON document for scripts (the same as
    /// report.json).
    #[arg(long, value_enum, default_value_t = ReportFormat::Markdown)]
    pub format: ReportFormat,
    /// Print nothing on success.
    #[arg(long, short)]
    pub quiet: bool,
}

/// What `dpx report` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    /// The Markdown report (as written to report.md).
    Markdown,
    /// A JSON document: points, summaries, tuning cost, files (as written to report.json).
    Json,
}

fn stats_json(s: Option<Stats>) -> Value {
    match s {
        None => Value::Null,
        Some(s) => json!({"n": s.n, "mean": s.mean, "std": s.std, "max": s.max}),
    }
}

fn point_json(p: &PointSummary) -> Value {
    let keys: serde_json::Map<String, Value> = p
        .keys
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    json!({
        "id": p.id,
        "name": p.name,
        "keys": keys,
        "seeds": p.seeds,
        "diverged": p.diverged,
        "best_test_accuracy": stats_json(p.best_test_accuracy),
        "final_test_accuracy": stats_json(p.final_test_accuracy),
        "final_train_loss": stats_json(p.final_train_loss),
        "epsilon": stats_json(p.epsilon),
        "delta": p.delta,
    })
}

fn tuning_json(t: &TuningCost) -> Value {
    json!({
        "points": t.points,
        "delta": t.delta,
        "composed_rdp_epsilon": t.composed_rdp,
        "basic_composition_epsilon": t.basic,
        "basic_composition_delta": t.basic_delta,
        "poisson_repetition_epsilon": t.poisson_repetition,
        "largest_single_epsilon": t.single_max,
    })
}

/// One point to report: its directory and its place in the sweep.
struct Entry {
    id: String,
    name: String,
    keys: Vec<(String, String)>,
    dir: PointDir,
}

fn entries(dir: &Path) -> anyhow::Result<(Vec<String>, Vec<Entry>, bool)> {
    if SweepDir::is_sweep(dir) {
        let d = SweepDir {
            root: dir.to_path_buf(),
        };
        // The aggregates are rebuilt at the end of each `dpx sweep`: rebuild them from the
        // per-seed files first, so that the seeds a sweep in progress (or an interrupted one)
        // has finished are reported (idempotent, atomic writes).
        d.rebuild().map_err(bad_input)?;
        let (header, rows) = d.read_points().map_err(bad_input)?;
        let keys: Vec<String> = header.iter().skip(3).cloned().collect();
        let mut out = Vec::new();
        for r in rows {
            if r.len() != header.len() {
                return Err(crate::bad_input!(
                    "{}: malformed row",
                    d.points_csv().display()
                ));
            }
            out.push(Entry {
                id: r[1].clone(),
                name: r[2].clone(),
                keys: keys.iter().cloned().zip(r[3..].iter().cloned()).collect(),
                dir: d.point(&r[1]),
            });
        }
        return Ok((keys, out, true));
    }
    let p = PointDir {
        root: dir.to_path_buf(),
    };
    if !p.summary().is_file() {
        return Err(crate::bad_input!(
            "{}: neither a sweep directory (points.csv) nor a run directory (summary.csv)",
            dir.display()
        ));
    }
    let name = dir
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "run".into());
    Ok((
        Vec::new(),
        vec![Entry {
            id: name.clone(),
            name,
            keys: Vec::new(),
            dir: p,
        }],
        false,
    ))
}

fn read_curve(path: &Path) -> Option<RdpCurve> {
    let (_, rows) = read_table(path).ok()?;
    let mut orders = Vec::new();
    let mut rdp = Vec::new();
    for r in rows {
        orders.push(r.first()?.parse().ok()?);
        rdp.push(r.get(1)?.parse().ok()?);
    }
    Some(RdpCurve { orders, rdp })
}

fn tuning_section(t: &TuningCost, non_private: usize) -> String {
    let mut s = String::new();
    s.push_str("## Privacy cost of choosing the best point\n\n");
    s.push_str(&format!(
        "Picking the best of these {} points by test (or validation) accuracy and releasing it is itself a \
         release: it depends on the data through every run. The ε of one run (largest: {:.4}) is \
         not the guarantee of the chosen model.\n\n",
        t.points, t.single_max
    ));
    if non_private > 0 {
        s.push_str(&format!(
            "{non_private} point(s) are non-private (ε = ∞), so the choice has no finite guarantee.\n\n"
        ));
        return s;
    }
    s.push_str("| bound | ε | δ |\n|---|---|---|\n");
    if let Some(e) = t.composed_rdp {
        s.push_str(&format!(
            "| composition of the {} runs (RDP accountant; Mironov 2017, Prop. 1) | {e:.4} | {:.2e} |\n",
            t.points, t.delta
        ));
    }
    s.push_str(&format!(
        "| basic composition Σ ε (Dwork & Roth 2014, Thm. 3.16) | {:.4} | {:.2e} |\n",
        t.basic, t.basic_delta
    ));
    if let Some(e) = t.poisson_repetition {
        s.push_str(&format!(
            "| random-count repetition, K ~ Poisson({}) (Papernot & Steinke 2022, Thm. 6) | {e:.4} | {:.2e} |\n",
            t.points, t.delta
        ));
    }
    s.push_str(
        "\nThe Papernot–Steinke bound (as dp_accounting's `RepeatAndSelectDpEvent` with a Poisson \
         count) assumes the tuner runs a random number K ~ Poisson(G) of trainings, each with a \
         point drawn at random from the G points, and releases only the best one; it does not \
         cover running the fixed grid once each (use the composition row for that).\n",
    );
    if t.composed_rdp.is_none() {
        s.push_str(
            "\nRDP curves were not available for every point (an accountant other than RDP, or \
             a run directory), so only basic composition is shown.\n",
        );
    }
    s
}

/// Run `dpx report`.
pub fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let dir = &args.dir;
    let (keys, entries, is_sweep) = entries(dir)?;
    for k in args.rows.iter().chain(args.cols.iter()) {
        if !keys.contains(k) {
            let hint = crate::config::suggest::nearest(k, keys.iter().map(String::as_str))
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
            return Err(crate::bad_input!(
                "--rows/--cols `{k}` is not a swept key of {}{hint}; swept keys: {}",
                dir.display(),
                if keys.is_empty() {
                    "none".into()
                } else {
                    keys.join(", ")
                }
            ));
        }
    }
    let mut points = Vec::new();
    let mut series = Vec::new();
    let mut curves = Vec::new();
    let mut missing = 0;
    for e in &entries {
        if !e.dir.summary().is_file() {
            missing += 1;
            continue;
        }
        let rows = read_summary(&e.dir.summary())
            .map_err(|err| bad_input(anyhow::anyhow!("{}: {err}", e.dir.summary().display())))?;
        points.push(PointSummary::new(&e.id, &e.name, e.keys.clone(), &rows));
        curves.push(read_curve(&e.dir.rdp()));
        if !args.no_plots && e.dir.metrics().is_file() {
            let s = Series::read(&e.name, &e.dir.metrics()).map_err(|err| {
                bad_input(anyhow::anyhow!("{}: {err}", e.dir.metrics().display()))
            })?;
            series.push(s);
        }
    }
    if points.is_empty() {
        return Err(crate::bad_input!(
            "{}: no point has results yet",
            dir.display()
        ));
    }

    let mut md = String::new();
    md.push_str(&format!("# Report: {}\n\n", dir.display()));
    md.push_str(&format!(
        "{} point(s) with results{}. Accuracies are percentages; `a ± b` is the mean ± sample standard deviation over seeds, (max) the best seed.\n\n",
        points.len(),
        if missing > 0 { format!(", {missing} without results yet") } else { String::new() }
    ));
    md.push_str("## Points\n\n");
    md.push_str(&points_table(&keys, &points));
    if !keys.is_empty() {
        let rows_key = args.rows.clone().unwrap_or_else(|| {
            if keys.iter().any(|k| k == "privacy.epsilon") {
                "privacy.epsilon".into()
            } else {
                keys[0].clone()
            }
        });
        let cols_key = args
            .cols
            .clone()
            .or_else(|| keys.iter().find(|k| **k != rows_key).cloned());
        md.push_str("\n## Final test accuracy (%)\n\n");
        md.push_str(&pivot(&points, &rows_key, cols_key.as_deref()));
    }
    let mut tuning = Value::Null;
    if is_sweep && points.len() > 1 {
        let non_private = points.iter().filter(|p| p.epsilon.is_none()).count();
        let eps: Vec<f64> = points
            .iter()
            .map(|p| p.epsilon.map(|s| s.max).unwrap_or(f64::INFINITY))
            .collect();
        let delta = points.iter().filter_map(|p| p.delta).fold(0.0, f64::max);
        let cs: Option<Vec<RdpCurve>> = curves.into_iter().collect();
        let t = tuning_cost(&eps, delta, cs.as_deref());
        md.push('\n');
        md.push_str(&tuning_section(&t, non_private));
        if non_private == 0 {
            tuning = tuning_json(&t);
        }
    }
    let mut plots: Vec<String> = Vec::new();
    if !args.no_plots {
        let opts = PlotOptions {
            log_scale: args.log_scale,
        };
        let pdir = dir.join("plots");
        let utility = if is_sweep {
            plot::utility_curves(&keys, &points)
        } else {
            None
        };
        if !series.is_empty() || utility.is_some() {
            std::fs::create_dir_all(&pdir).with_context(|| pdir.display().to_string())?;
        }
        if let Some(curves) = utility {
            let delta = points.iter().filter_map(|p| p.delta).reduce(f64::max);
            let file = plot::write_privacy_utility(&curves, delta, &pdir, opts)?;
            md.push_str(
                "\n## Privacy–utility curve\n\nFinal test accuracy (mean ± std over seeds) \
                 against each point's ε, one line per combination of the other swept keys.\n\n",
            );
            md.push_str(&format!("![final test accuracy vs ε](plots/{file})\n"));
            plots.push(format!("plots/{file}"));
        }
        if !series.is_empty() {
            let written = plot::write_all(&series, &pdir, opts)?;
            md.push_str("\n## Plots\n\nMean over seeds with a ± std band, per point.\n\n");
            for (metric, file) in written {
                md.push_str(&format!("![{metric}](plots/{file})\n"));
                plots.push(format!("plots/{file}"));
            }
        }
    }

    let csv = report_csv(&keys, &points).context("formatting report.csv")?;
    let doc = json!({
        "dir": dir.display().to_string(),
        "sweep": is_sweep,
        "swept_keys": keys,
        "points_without_results": missing,
        "points": points.iter().map(point_json).collect::<Vec<_>>(),
        "tuning_cost": tuning,
        "plots": plots,
        "files": ["report.csv", "report.md", "report.json"],
    });
    let mut json_text = serde_json::to_string_pretty(&doc).context("formatting report.json")?;
    json_text.push('\n');
    write_atomic(&dir.join("report.csv"), &csv)?;
    write_atomic(&dir.join("report.md"), md.as_bytes())?;
    write_atomic(&dir.join("report.json"), json_text.as_bytes())?;
    if !args.quiet {
        match args.format {
            ReportFormat::Json => print!("{json_text}"),
            ReportFormat::Markdown => {
                println!("{md}");
                println!(
                    "wrote {}, {} and {}",
                    dir.join("report.csv").display(),
                    dir.join("report.md").display(),
                    dir.join("report.json").display()
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
