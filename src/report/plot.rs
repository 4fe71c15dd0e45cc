//! Plots of `dpx report`: one figure per metric (test accuracy in %, train loss, σ_t, ε) against
//! epochs, one line per point (the mean over seeds) with a band of ± one sample standard
//! deviation; and for a sweep over the privacy budget the privacy–utility curve (final test
//! accuracy against ε, one line per combination of the other swept keys, ± std bands). Each
//! figure is written as SVG and PNG.
//!
//! Report room: reads `metrics.csv` files and point summaries and draws; computes no model or
//! privacy quantity.
//!
//! Text needs no system fonts: PNG text is drawn from the embedded DejaVu Sans by
//! [`VectorText`] (`vector_text`); SVG files carry `<text>` elements in the `sans-serif` family.
//! The build needs neither fontconfig nor FreeType.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, Ranged, ValueFormatter};
use plotters::prelude::*;
use serde::Deserialize;

use super::summary::{PointSummary, stats};
pub use super::vector_text::VectorText;
use super::vector_text::font;

/// Figure size in pixels.
pub const SIZE: (u32, u32) = (960, 600);

/// The font family every text asks for.
const FAMILY: &str = "sans-serif";

/// Errors drawing or writing a plot.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("{path}: {message}")]
    Draw { path: String, message: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

fn ensure_font() -> Result<(), PlotError> {
    match font() {
        Some(_) => Ok(()),
        None => Err(PlotError::Draw {
            path: "assets/fonts/DejaVuSans.ttf".into(),
            message: "the embedded font could not be parsed".into(),
        }),
    }
}

/// When an axis whose values may span decades (σ_t, ε) is drawn on a log scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogScale {
    /// Log scale when every value is positive and the largest is at least 10× the smallest.
    #[default]
    Auto,
    /// Always log scale (falls back to linear when a value is not positive).
    Always,
    /// Never.
    Never,
}

impl LogScale {
    /// Whether an axis with these values is drawn on a log scale. Values ≤ 0 (ε = 0 before the
    /// first step) cannot be placed on a log axis and are left out of the decision and of the
    /// figure; a negative value keeps the axis linear.
    pub fn applies(self, values: impl IntoIterator<Item = f64>) -> bool {
        if self == LogScale::Never {
            return false;
        }
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values {
            if !v.is_finite() || v < 0.0 {
                return false;
            }
            if v > 0.0 {
                lo = lo.min(v);
                hi = hi.max(v);
            }
        }
        if !(lo.is_finite() && hi.is_finite()) {
            return false;
        }
        self == LogScale::Always || hi >= 10.0 * lo
    }
}

/// The metrics-file columns that are plotted.
#[derive(Debug, Deserialize)]
struct Row {
    step: u64,
    epoch: f64,
    noise_multiplier: Option<f64>,
    epsilon: Option<f64>,
    train_loss: Option<f64>,
    test_accuracy: f64,
}

/// The plotted metrics: (column, axis label, file stem, may use a log scale).
pub const METRICS: [(&str, &str, &str, bool); 4] = [
    ("test_accuracy", "test accuracy (%)", "test_accuracy", false),
    ("train_loss", "train loss", "train_loss", false),
    (
        "noise_multiplier",
        "noise multiplier σ_t",
        "noise_multiplier",
        true,
    ),
    ("epsilon", "ε spent", "epsilon", true),
];

/// One point's curves: for each evaluation step, (epoch, mean, std) of each metric over seeds.
/// Test accuracy is in percent (as in the tables), the other metrics in their CSV units.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    /// metric column → (epoch, mean, std) points, by step.
    pub curves: BTreeMap<&'static str, Vec<(f64, f64, f64)>>,
}

impl Series {
    /// Read a `metrics.csv` (rows of every seed) and average over seeds at each step.
    pub fn read(name: &str, path: &Path) -> Result<Series, csv::Error> {
        let text = crate::text_file::read_bytes_capped(
            path,
            crate::text_file::MAX_TEXT_BYTES,
            "a metrics file",
        )
        .map_err(|e| csv::Error::from(e.into_io()))?;
        let mut r = csv::Reader::from_reader(text.as_slice());
        let rows: Vec<Row> = r.deserialize().collect::<Result<_, _>>()?;
        let mut by_step: BTreeMap<u64, Vec<&Row>> = BTreeMap::new();
        for row in &rows {
            by_step.entry(row.step).or_default().push(row);
        }
        let mut curves: BTreeMap<&'static str, Vec<(f64, f64, f64)>> = BTreeMap::new();
        for group in by_step.values() {
            let epoch = group[0].epoch;
            for (col, _, _, _) in METRICS {
                let v: Vec<f64> = group
                    .iter()
                    .filter_map(|r| match col {
                        "test_accuracy" => Some(100.0 * r.test_accuracy),
                        "train_loss" => r.train_loss,
                        "noise_multiplier" => r.noise_multiplier,
                        _ => r.epsilon,
                    })
                    .collect();
                // A step where only some seeds have a value (none should) is left out.
                if v.len() == group.len()
                    && let Some(s) = stats(&v)
                {
                    curves.entry(col).or_default().push((epoch, s.mean, s.std));
                }
            }
        }
        Ok(Series {
            name: name.to_string(),
            curves,
        })
    }
}

/// Width in pixels of the legend column.
const LEGEND_WIDTH: u32 = 250;

/// A point's legend label: the last component of each dotted key (`epsilon=2,learning_rate=0.5`),
/// cut to 32 characters.
pub fn legend_label(name: &str) -> String {
    let short: Vec<String> = name
        .split(',')
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) => format!("{}={v}", k.rsplit('.').next().unwrap_or(k)),
            None => kv.to_string(),
        })
        .collect();
    let s = short.join(",");
    if s.chars().count() > 32 {
        let mut t: String = s.chars().take(31).collect();
        t.push('~');
        t
    } else {
        s
    }
}

/// Colours for up to 10 points (Tableau 10), then cycled.
const COLORS: [(u8, u8, u8); 10] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
];

/// Options of every figure.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlotOptions {
    /// Log scale for the axes of σ_t and ε.
    pub log_scale: LogScale,
}

/// One line of a figure: (x, mean, std) points in x order, drawn as the mean with a ± std band.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    pub label: String,
    pub points: Vec<(f64, f64, f64)>,
}

/// What one figure shows.
struct Figure<'a> {
    title: String,
    x_label: &'a str,
    y_label: &'a str,
    curves: &'a [Curve],
    log_x: bool,
    log_y: bool,
    /// Mark each point with a dot (for curves over a few sweep points).
    markers: bool,
}

/// A tick label: at most 4 significant digits, scientific notation outside [1e-3, 1e5).
fn tick_label(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    if !(1e-3..1e5).contains(&a) {
        let s = format!("{v:.1e}");
        return s.replace(".0e", "e");
    }
    let digits = (3 - a.log10().floor() as i32).clamp(0, 6) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// The data range of the curves, the band included, padded; positive for a log axis.
fn data_range(values: impl Iterator<Item = (f64, f64)>, log: bool, pad: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for (a, b) in values {
        if log {
            if a > 0.0 {
                lo = lo.min(a);
            }
            if b > 0.0 {
                hi = hi.max(b);
            }
        } else {
            lo = lo.min(a);
            hi = hi.max(b);
        }
    }
    if !(lo.is_finite() && hi.is_finite()) {
        return if log { (0.1, 10.0) } else { (0.0, 1.0) };
    }
    if log {
        if hi <= lo {
            return (lo / 2.0, hi * 2.0);
        }
        let k = if pad { (hi / lo).powf(0.05) } else { 1.0 };
        let (lo, hi) = (lo / k, hi * k);
        // plotters places log key points from the first power of ten up: start at the power of
        // ten below when it is close, so the lowest decade gets its 1-2-5 labels too
        let below = 10f64.powf(lo.log10().floor());
        // (a hair below it, so rounding in plotters' ln(start)/ln(10) cannot skip that decade).
        (
            if lo < 3.0 * below {
                below * (1.0 - 1e-9)
            } else {
                lo
            },
            hi,
        )
    } else {
        if hi <= lo {
            return (lo - 1.0, hi + 1.0);
        }
        let p = if pad { (hi - lo) * 0.05 } else { 0.0 };
        (lo - p, hi + p)
    }
}

fn draw_figure<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    fig: &Figure,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    // The legend gets its own column on the right, so long point names never cover curves.
    let (plot_area, legend) =
        root.split_horizontally(root.dim_in_pixel().0.saturating_sub(LEGEND_WIDTH));
    let pts = || fig.curves.iter().flat_map(|c| c.points.iter().copied());
    let (x0, x1) = data_range(pts().map(|(x, _, _)| (x, x)), fig.log_x, fig.markers);
    let (y0, y1) = data_range(pts().map(|(_, m, s)| (m - s, m + s)), fig.log_y, true);
    let decades = |log: bool, lo: f64, hi: f64| log.then(|| (hi / lo).log10());
    let axes = (decades(fig.log_x, x0, x1), decades(fig.log_y, y0, y1));
    match (fig.log_x, fig.log_y) {
        (false, false) => draw_chart(&plot_area, fig, axes, x0..x1, y0..y1)?,
        (false, true) => draw_chart(&plot_area, fig, axes, x0..x1, (y0..y1).log_scale())?,
        (true, false) => draw_chart(&plot_area, fig, axes, (x0..x1).log_scale(), y0..y1)?,
        (true, true) => draw_chart(
            &plot_area,
            fig,
            axes,
            (x0..x1).log_scale(),
            (y0..y1).log_scale(),
        )?,
    }
    let font = (FAMILY, 15).into_font();
    for (i, c) in fig.curves.iter().enumerate() {
        let color = color(i);
        let y = 64 + 24 * i as i32;
        legend.draw(&PathElement::new(
            vec![(6, y), (30, y)],
            Color::stroke_width(&color, 3),
        ))?;
        if fig.markers {
            legend.draw(&Circle::new((18, y), 4, color.filled()))?;
        }
        legend.draw(&Text::new(
            legend_label(&c.label),
            (38, y - 9),
            font.clone().color(&BLACK),
        ))?;
    }
    root.present()?;
    Ok(())
}

fn color(i: usize) -> RGBColor {
    let (r, g, b) = COLORS[i % COLORS.len()];
    RGBColor(r, g, b)
}

/// The number of key points to ask a log axis spanning `decades` for, so that plotters offers
/// every 1…9 × 10^k (it spaces them by a tenth of a decade's multiplier only when asked for about
/// ten points per decade).
fn log_key_points(decades: f64) -> usize {
    10 * (decades.floor().max(1.0) as usize) + 1
}

/// A log axis' tick label: 1, 2 and 5 times a power of ten (only powers of ten beyond four
/// decades), blank for the other key points, which still get a grid line.
fn log_tick_label(v: f64, decades: f64) -> String {
    if v <= 0.0 {
        return String::new();
    }
    let mantissa = v / 10f64.powf(v.log10().floor());
    let shown: &[f64] = if decades > 4.0 {
        &[1.0]
    } else {
        &[1.0, 2.0, 5.0]
    };
    if shown
        .iter()
        .any(|m| (mantissa - m).abs() < 1e-6 || (mantissa - 10.0 * m).abs() < 1e-5)
    {
        tick_label(v)
    } else {
        String::new()
    }
}

fn draw_chart<DB, X, Y>(
    area: &DrawingArea<DB, Shift>,
    fig: &Figure,
    (x_decades, y_decades): (Option<f64>, Option<f64>),
    x: X,
    y: Y,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>
where
    DB: DrawingBackend,
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .caption(&fig.title, (FAMILY, 24))
        .margin(18)
        .x_label_area_size(52)
        .y_label_area_size(78)
        .build_cartesian_2d(x, y)?;
    let y_lo = chart.y_range().start;
    let x_fmt = |v: &f64| match x_decades {
        Some(d) => log_tick_label(*v, d),
        None => tick_label(*v),
    };
    let y_fmt = |v: &f64| match y_decades {
        Some(d) => log_tick_label(*v, d),
        None => tick_label(*v),
    };
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(fig.x_label)
        .y_desc(fig.y_label)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .label_style((FAMILY, 15))
        .axis_desc_style((FAMILY, 17))
        .light_line_style(RGBColor(244, 244, 244))
        .bold_line_style(RGBColor(222, 222, 222));
    // On a log axis every key point gets a grid line and the finer lines are left out (plotters
    // spaces them linearly, which crowds the top of each decade).
    if let Some(d) = x_decades {
        mesh.x_labels(log_key_points(d)).x_max_light_lines(0);
    }
    if let Some(d) = y_decades {
        mesh.y_labels(log_key_points(d)).y_max_light_lines(0);
    }
    mesh.draw()?;
    // On a log axis the band's lower edge is kept above the axis' lower end.
    let floor = |v: f64| if fig.log_y { v.max(y_lo) } else { v };
    for (i, c) in fig.curves.iter().enumerate() {
        let color = color(i);
        let band: Vec<(f64, f64)> = c
            .points
            .iter()
            .map(|&(x, m, sd)| (x, m + sd))
            .chain(c.points.iter().rev().map(|&(x, m, sd)| (x, floor(m - sd))))
            .collect();
        chart.draw_series(std::iter::once(Polygon::new(
            band,
            color.mix(0.18).filled(),
        )))?;
        chart.draw_series(LineSeries::new(
            c.points.iter().map(|&(x, m, _)| (x, m)),
            Color::stroke_width(&color, 2),
        ))?;
        if fig.markers {
            chart.draw_series(
                c.points
                    .iter()
                    .map(|&(x, m, _)| Circle::new((x, m), 4, color.filled())),
            )?;
        }
    }
    Ok(())
}

/// Draw one figure as `<dir>/<stem>.svg` and `.png`, each into a temporary file renamed into
/// place, so a reader never sees a half-written figure.
fn write_figure(dir: &Path, stem: &str, fig: &Figure) -> Result<(), PlotError> {
    ensure_font()?;
    let svg = dir.join(format!("{stem}.svg"));
    let png = dir.join(format!("{stem}.png"));
    let err = |p: &Path| {
        let path = p.display().to_string();
        move |e: String| PlotError::Draw { path, message: e }
    };
    let tmp_svg = crate::report::atomic::temp_path(&svg).map_err(|e| PlotError::Draw {
        path: svg.display().to_string(),
        message: e.to_string(),
    })?;
    let tmp_png = dir.join(format!(".{stem}.{}.tmp.png", std::process::id()));
    draw_figure(SVGBackend::new(&tmp_svg, SIZE).into_drawing_area(), fig)
        .map_err(|e| err(&svg)(e.to_string()))?;
    draw_figure(
        VectorText(BitMapBackend::new(&tmp_png, SIZE)).into_drawing_area(),
        fig,
    )
    .map_err(|e| err(&png)(e.to_string()))?;
    for (t, f) in [(&tmp_svg, &svg), (&tmp_png, &png)] {
        std::fs::rename(t, f).map_err(|source| PlotError::Io {
            path: f.display().to_string(),
            source,
        })?;
    }
    Ok(())
}

/// Draw every metric that some series has, as `<dir>/<metric>.svg` and `.png`. Returns
/// (metric label, SVG file name) of the figures written.
pub fn write_all(
    series: &[Series],
    dir: &Path,
    opts: PlotOptions,
) -> Result<Vec<(String, String)>, PlotError> {
    let mut written = Vec::new();
    for (col, label, stem, may_log) in METRICS {
        if !series.iter().any(|s| s.curves.contains_key(col)) {
            continue;
        }
        let curves: Vec<Curve> = series
            .iter()
            .map(|s| Curve {
                label: s.name.clone(),
                points: s.curves.get(col).cloned().unwrap_or_default(),
            })
            .collect();
        let log_y = may_log
            && opts
                .log_scale
                .applies(curves.iter().flat_map(|c| c.points.iter().map(|p| p.1)));
        let curves: Vec<Curve> = if log_y {
            curves
                .into_iter()
                .map(|mut c| {
                    c.points.retain(|p| p.1 > 0.0);
                    c
                })
                .collect()
        } else {
            curves
        };
        let fig = Figure {
            title: format!("{label} (mean ± std over seeds)"),
            x_label: "epoch",
            y_label: label,
            curves: &curves,
            log_x: false,
            log_y,
            markers: false,
        };
        write_figure(dir, stem, &fig)?;
        written.push((label.to_string(), format!("{stem}.svg")));
    }
    Ok(written)
}

/// The swept keys that set the privacy budget (the x axis of the privacy–utility curve).
pub const BUDGET_KEYS: [&str; 3] = [
    "privacy.epsilon",
    "noise.noise_multiplier",
    "accelerated.epsilon",
];

/// The privacy–utility curves of a sweep: for each combination of the swept keys other than
/// the budget's ([`BUDGET_KEYS`]), the points' final test accuracy (%, mean ± std over seeds)
/// against their mean ε, in ε order. Non-private points (no ε) are left out. `None` when fewer
/// than two distinct ε values remain.
pub fn utility_curves(keys: &[String], points: &[PointSummary]) -> Option<Vec<Curve>> {
    let group_keys: Vec<&String> = keys
        .iter()
        .filter(|k| !BUDGET_KEYS.contains(&k.as_str()))
        .collect();
    let mut groups: Vec<Curve> = Vec::new();
    let mut eps_values: Vec<f64> = Vec::new();
    for p in points {
        let (Some(e), Some(a)) = (p.epsilon, p.final_test_accuracy) else {
            continue;
        };
        if !e.mean.is_finite() {
            continue;
        }
        if !eps_values
            .iter()
            .any(|&v| (v - e.mean).abs() <= 1e-9 * v.abs().max(1.0))
        {
            eps_values.push(e.mean);
        }
        let label = group_keys
            .iter()
            .map(|k| format!("{k}={}", p.key(k).unwrap_or("")))
            .collect::<Vec<_>>()
            .join(",");
        let point = (e.mean, 100.0 * a.mean, 100.0 * a.std);
        match groups.iter_mut().find(|g| g.label == label) {
            Some(g) => g.points.push(point),
            None => groups.push(Curve {
                label,
                points: vec![point],
            }),
        }
    }
    if eps_values.len() < 2 {
        return None;
    }
    for g in &mut groups {
        g.points.sort_by(|a, b| a.0.total_cmp(&b.0));
        if g.label.is_empty() {
            g.label = "all points".into();
        }
    }
    Some(groups)
}

/// Draw the privacy–utility figure `<dir>/privacy_utility.svg|png`: final test accuracy (%)
/// against ε at the points' δ, one line per group with its ± std band and a dot per point. ε is
/// on a log axis under [`LogScale::applies`]. Returns the SVG file name.
pub fn write_privacy_utility(
    curves: &[Curve],
    delta: Option<f64>,
    dir: &Path,
    opts: PlotOptions,
) -> Result<String, PlotError> {
    let log_x = opts
        .log_scale
        .applies(curves.iter().flat_map(|c| c.points.iter().map(|p| p.0)));
    let x_label = match delta {
        Some(d) if d > 0.0 => format!("ε (at δ = {})", tick_label(d)),
        _ => "ε".to_string(),
    };
    let fig = Figure {
        title: "final test accuracy vs ε (mean ± std over seeds)".into(),
        x_label: &x_label,
        y_label: "final test accuracy (%)",
        curves,
        log_x,
        log_y: false,
        markers: true,
    };
    write_figure(dir, "privacy_utility", &fig)?;
    Ok("privacy_utility.svg".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_scale_only_over_a_decade_of_positive_values() {
        assert!(LogScale::Auto.applies([0.5, 8.0]));
        assert!(!LogScale::Auto.applies([1.0, 8.0]));
        assert!(LogScale::Auto.applies([0.0, 0.5, 80.0]));
        assert!(!LogScale::Auto.applies([0.0, 8.0]));
        assert!(!LogScale::Auto.applies([-1.0, 0.5, 80.0]));
        assert!(LogScale::Always.applies([1.0, 2.0]));
        assert!(!LogScale::Always.applies([-1.0, 2.0]));
        assert!(!LogScale::Never.applies([0.01, 100.0]));
    }

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(tick_label(0.5), "0.5");
        assert_eq!(tick_label(2.0), "2");
        assert_eq!(tick_label(94.25), "94.25");
        assert_eq!(tick_label(1e-5), "1e-5");
        assert_eq!(tick_label(0.0), "0");
        assert_eq!(log_tick_label(20.0, 2.0), "20");
        assert_eq!(log_tick_label(0.05, 2.0), "0.05");
        assert_eq!(log_tick_label(30.0, 2.0), "");
        assert_eq!(log_tick_label(20.0, 5.0), "");
    }
}
