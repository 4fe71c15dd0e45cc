//! Summaries across seeds: mean ± std (and max) per point, the CSV and Markdown tables of
//! `dpx report`, and the pivot table in the papers' layout (rows ε, columns another key).
//!
//! This file (report room) reads `summary.csv` files and formats; it computes no privacy or
//! model quantity. The standard deviation is the sample standard deviation (divisor n − 1, as
//! numpy's `std(ddof=1)` and the papers' "± std over seeds"); it is 0 for a single seed.

use std::path::Path;

use serde::Deserialize;

/// Mean, sample standard deviation and maximum of some values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    pub n: usize,
    pub mean: f64,
    pub std: f64,
    pub max: f64,
}

/// [`Stats`] of the finite values of `xs` (None when there are none).
pub fn stats(xs: &[f64]) -> Option<Stats> {
    let v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    let n = v.len();
    let mean = v.iter().sum::<f64>() / n as f64;
    let std = if n > 1 {
        (v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64).sqrt()
    } else {
        0.0
    };
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some(Stats { n, mean, std, max })
}

/// The columns of a per-seed `summary.csv` that reports use.
#[derive(Debug, Clone, Deserialize)]
pub struct SeedSummary {
    pub seed: u64,
    pub status: String,
    pub final_test_accuracy: f64,
    pub best_test_accuracy: f64,
    pub final_train_loss: Option<f64>,
    pub epsilon: Option<f64>,
    pub delta: Option<f64>,
}

/// Read a `summary.csv`.
pub fn read_summary(path: &Path) -> Result<Vec<SeedSummary>, csv::Error> {
    let text = crate::text_file::read_bytes_capped(
        path,
        crate::text_file::MAX_TEXT_BYTES,
        "a summary file",
    )
    .map_err(|e| csv::Error::from(e.into_io()))?;
    let mut r = csv::Reader::from_reader(text.as_slice());
    r.deserialize().collect()
}

/// One point's summary over its seeds.
#[derive(Debug, Clone, PartialEq)]
pub struct PointSummary {
    pub id: String,
    pub name: String,
    /// (swept key, value) in the sweep's key order.
    pub keys: Vec<(String, String)>,
    pub seeds: usize,
    pub diverged: usize,
    pub best_test_accuracy: Option<Stats>,
    pub final_test_accuracy: Option<Stats>,
    pub final_train_loss: Option<Stats>,
    /// None for a non-private point (ε = ∞).
    pub epsilon: Option<Stats>,
    pub delta: Option<f64>,
}

impl PointSummary {
    /// Summarise the seeds of one point.
    pub fn new(id: &str, name: &str, keys: Vec<(String, String)>, rows: &[SeedSummary]) -> Self {
        let col = |f: &dyn Fn(&SeedSummary) -> Option<f64>| -> Option<Stats> {
            let v: Vec<f64> = rows.iter().filter_map(f).collect();
            if v.len() < rows.len() {
                None
            } else {
                stats(&v)
            }
        };
        PointSummary {
            id: id.to_string(),
            name: name.to_string(),
            keys,
            seeds: rows.len(),
            diverged: rows.iter().filter(|r| r.status != "completed").count(),
            best_test_accuracy: col(&|r| Some(r.best_test_accuracy)),
            final_test_accuracy: col(&|r| Some(r.final_test_accuracy)),
            final_train_loss: col(&|r| r.final_train_loss),
            epsilon: col(&|r| r.epsilon),
            delta: rows.iter().filter_map(|r| r.delta).reduce(f64::max),
        }
    }

    /// The value of a swept key at this point.
    pub fn key(&self, key: &str) -> Option<&str> {
        self.keys
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

const METRICS: [&str; 4] = [
    "best_test_accuracy",
    "final_test_accuracy",
    "final_train_loss",
    "epsilon",
];

fn metric(p: &PointSummary, m: &str) -> Option<Stats> {
    match m {
        "best_test_accuracy" => p.best_test_accuracy,
        "final_test_accuracy" => p.final_test_accuracy,
        "final_train_loss" => p.final_train_loss,
        "epsilon" => p.epsilon,
        _ => None,
    }
}

/// `report.csv`: one row per point, `<metric>_mean`, `_std`, `_max` for each metric (empty when
/// not available, e.g. ε of a non-private point).
pub fn report_csv(keys: &[String], points: &[PointSummary]) -> Result<Vec<u8>, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header = vec!["point_id".to_string(), "point_name".into()];
    header.extend(keys.iter().cloned());
    header.push("seeds".into());
    header.push("diverged".into());
    for m in METRICS {
        for s in ["mean", "std", "max"] {
            header.push(format!("{m}_{s}"));
        }
    }
    w.write_record(&header)?;
    for p in points {
        let mut row = vec![p.id.clone(), p.name.clone()];
        for k in keys {
            row.push(p.key(k).unwrap_or_default().to_string());
        }
        row.push(p.seeds.to_string());
        row.push(p.diverged.to_string());
        for m in METRICS {
            match metric(p, m) {
                Some(s) => {
                    row.push(s.mean.to_string());
                    row.push(s.std.to_string());
                    row.push(s.max.to_string());
                }
                None => row.extend([String::new(), String::new(), String::new()]),
            }
        }
        w.write_record(&row)?;
    }
    w.into_inner().map_err(|e| csv::Error::from(e.into_error()))
}

/// `mean ± std` with `digits` decimals (accuracies as percentages when `percent`).
pub fn pm(s: Option<Stats>, digits: usize, percent: bool) -> String {
    match s {
        None => "–".into(),
        Some(s) => {
            let k = if percent { 100.0 } else { 1.0 };
            format!("{:.digits$} ± {:.digits$}", s.mean * k, s.std * k)
        }
    }
}

/// The per-point Markdown table.
pub fn points_table(keys: &[String], points: &[PointSummary]) -> String {
    let mut s = String::new();
    let mut head = vec!["point".to_string()];
    head.extend(keys.iter().map(|k| format!("`{k}`")));
    head.extend(
        [
            "seeds",
            "best test acc % (max)",
            "final test acc % (max)",
            "final train loss",
            "ε",
        ]
        .map(String::from),
    );
    s.push_str(&format!("| {} |\n", head.join(" | ")));
    s.push_str(&format!("|{}\n", "---|".repeat(head.len())));
    for p in points {
        let mut row = vec![format!("`{}`", p.id)];
        row.extend(keys.iter().map(|k| p.key(k).unwrap_or("").to_string()));
        row.push(if p.diverged > 0 {
            format!("{} ({} diverged)", p.seeds, p.diverged)
        } else {
            p.seeds.to_string()
        });
        for m in ["best_test_accuracy", "final_test_accuracy"] {
            let st = metric(p, m);
            row.push(format!(
                "{} ({})",
                pm(st, 2, true),
                st.map(|x| format!("{:.2}", x.max * 100.0))
                    .unwrap_or_else(|| "–".into())
            ));
        }
        row.push(pm(p.final_train_loss, 4, false));
        row.push(match p.epsilon {
            Some(e) => pm(Some(e), 3, false),
            None => "∞".into(),
        });
        s.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    s
}

/// Sort labels numerically when they all parse as numbers, else as text (first-seen order kept
/// for ties).
fn sort_labels(v: &mut [String]) {
    if v.iter().all(|x| x.parse::<f64>().is_ok()) {
        v.sort_by(|a, b| {
            a.parse::<f64>()
                .unwrap_or(0.0)
                .total_cmp(&b.parse::<f64>().unwrap_or(0.0))
        });
    }
}

/// The pivot table: rows = values of `rows`, columns = values of `cols` (or one column when
/// `cols` is None), cells = mean ± std of final test accuracy (%) over the points that match
/// (pooled over their seeds when several points share a cell, e.g. a third swept key).
pub fn pivot(points: &[PointSummary], rows: &str, cols: Option<&str>) -> String {
    let mut rv: Vec<String> = Vec::new();
    let mut cv: Vec<String> = Vec::new();
    for p in points {
        let r = p.key(rows).unwrap_or("").to_string();
        if !rv.contains(&r) {
            rv.push(r);
        }
        let c = cols.and_then(|c| p.key(c)).unwrap_or("").to_string();
        if !cv.contains(&c) {
            cv.push(c);
        }
    }
    sort_labels(&mut rv);
    sort_labels(&mut cv);
    let mut s = String::new();
    let head: Vec<String> = std::iter::once(format!("`{rows}` \\ `{}`", cols.unwrap_or("")))
        .chain(cv.iter().map(|c| {
            if c.is_empty() {
                "final test acc %".to_string()
            } else {
                c.clone()
            }
        }))
        .collect();
    s.push_str(&format!("| {} |\n", head.join(" | ")));
    s.push_str(&format!("|{}\n", "---|".repeat(head.len())));
    for r in &rv {
        let mut row = vec![r.clone()];
        for c in &cv {
            let cell: Vec<&PointSummary> = points
                .iter()
                .filter(|p| {
                    p.key(rows).unwrap_or("") == r && cols.and_then(|k| p.key(k)).unwrap_or("") == c
                })
                .collect();
            row.push(match cell.len() {
                0 => "".into(),
                1 => pm(cell[0].final_test_accuracy, 2, true),
                _ => {
                    // Pool the per-point means (each point weighted by its seed count).
                    let mut means = Vec::new();
                    for p in &cell {
                        if let Some(st) = p.final_test_accuracy {
                            means.extend(std::iter::repeat_n(st.mean, st.n));
                        }
                    }
                    format!(
                        "{} (pooled over {} points)",
                        pm(stats(&means), 2, true),
                        cell.len()
                    )
                }
            });
        }
        s.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_against_hand_computation() {
        // Hand: mean(0.90, 0.92, 0.94) = 0.92; sample variance ((0.02)² + 0 + (0.02)²)/2 = 4e-4,
        // std = 0.02; max 0.94.
        let s = stats(&[0.90, 0.92, 0.94]).unwrap();
        assert_eq!(s.n, 3);
        assert!((s.mean - 0.92).abs() < 1e-15);
        assert!((s.std - 0.02).abs() < 1e-15);
        assert_eq!(s.max, 0.94);
        let one = stats(&[0.5]).unwrap();
        assert_eq!((one.mean, one.std, one.max), (0.5, 0.0, 0.5));
        assert!(stats(&[]).is_none());
        assert!(stats(&[f64::NAN]).is_none());
    }

    fn row(seed: u64, acc: f64, eps: Option<f64>) -> SeedSummary {
        SeedSummary {
            seed,
            status: "completed".into(),
            final_test_accuracy: acc,
            best_test_accuracy: acc + 0.01,
            final_train_loss: Some(1.0 - acc),
            epsilon: eps,
            delta: Some(1e-5),
        }
    }

    #[test]
    fn pivot_puts_points_in_cells() {
        let mk = |e: &str, m: &str, acc: f64| {
            PointSummary::new(
                e,
                e,
                vec![
                    ("privacy.epsilon".into(), e.into()),
                    ("train.epochs".into(), m.into()),
                ],
                &[row(0, acc, Some(1.0)), row(1, acc, Some(1.0))],
            )
        };
        let pts = vec![mk("4", "5", 0.8), mk("1", "5", 0.6), mk("1", "10", 0.7)];
        let t = pivot(&pts, "privacy.epsilon", Some("train.epochs"));
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "| `privacy.epsilon` \\ `train.epochs` | 5 | 10 |");
        assert_eq!(lines[2], "| 1 | 60.00 ± 0.00 | 70.00 ± 0.00 |");
        assert_eq!(lines[3], "| 4 | 80.00 ± 0.00 |  |");
    }

    #[test]
    fn non_private_point_has_no_epsilon() {
        let p = PointSummary::new("a", "a", vec![], &[row(0, 0.9, None), row(1, 0.8, None)]);
        assert!(p.epsilon.is_none());
        let csv = String::from_utf8(report_csv(&[], &[p]).unwrap()).unwrap();
        let line = csv.lines().nth(1).unwrap();
        assert!(line.ends_with(",,,"), "{line}");
    }
}
