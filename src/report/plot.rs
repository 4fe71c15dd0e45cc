//! Plots of `dpx report`: one figure per metric (test accuracy, train loss, σ_t, ε) against
//! epochs, one line per point (the mean over seeds) with a band of ± one sample standard
//! deviation, as SVG and PNG.
//!
//! Report room: reads `metrics.csv` files and draws; computes no model or privacy quantity.
//!
//! Text needs no system fonts: SVG files carry `<text>` elements (the viewer's font), and PNG
//! text is drawn by [`Font8x8`], a wrapper around plotters' bitmap backend that paints the
//! public-domain 8×8 glyphs of the `font8x8` crate (ASCII, Latin-1 and Greek), scaled to the
//! requested size. So the build needs neither fontconfig nor FreeType nor a font file.

use std::collections::BTreeMap;
use std::path::Path;

use font8x8::UnicodeFonts;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind, FontTransform,
    text_anchor::{HPos, VPos},
};
use serde::Deserialize;

use super::summary::stats;

/// Figure size in pixels.
pub const SIZE: (u32, u32) = (960, 600);

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

/// The plotted metrics: (column, axis label, file stem).
pub const METRICS: [(&str, &str, &str); 4] = [
    ("test_accuracy", "test accuracy", "test_accuracy"),
    ("train_loss", "train loss", "train_loss"),
    (
        "noise_multiplier",
        "noise multiplier σ_t",
        "noise_multiplier",
    ),
    ("epsilon", "ε spent", "epsilon"),
];

/// One point's curves: for each evaluation step, (epoch, mean, std) of each metric over seeds.
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
            for (col, _, _) in METRICS {
                let v: Vec<f64> = group
                    .iter()
                    .filter_map(|r| match col {
                        "test_accuracy" => Some(r.test_accuracy),
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
const LEGEND_WIDTH: u32 = 300;

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

fn draw_metric<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    series: &[Series],
    col: &str,
    label: &str,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    // The legend gets its own column on the right, so long point names never cover curves.
    let (plot_area, legend) =
        root.split_horizontally(root.dim_in_pixel().0.saturating_sub(LEGEND_WIDTH));
    let pts: Vec<(f64, f64, f64)> = series
        .iter()
        .flat_map(|s| s.curves.get(col).into_iter().flatten().copied())
        .collect();
    let (mut x0, mut x1) = (f64::INFINITY, f64::NEG_INFINITY);
    let (mut y0, mut y1) = (f64::INFINITY, f64::NEG_INFINITY);
    for &(x, m, s) in &pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(m - s);
        y1 = y1.max(m + s);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if y1 <= y0 {
        y1 = y0 + 1.0;
        y0 -= 1.0;
    }
    let pad = (y1 - y0) * 0.05;
    let mut chart = ChartBuilder::on(&plot_area)
        .caption(
            format!("{label} (mean ± std over seeds)"),
            ("sans-serif", 24),
        )
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(x0..x1, (y0 - pad)..(y1 + pad))?;
    chart
        .configure_mesh()
        .x_desc("epoch")
        .y_desc(label)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    for (i, s) in series.iter().enumerate() {
        let Some(c) = s.curves.get(col) else { continue };
        let (r, g, b) = COLORS[i % COLORS.len()];
        let color = RGBColor(r, g, b);
        let band: Vec<(f64, f64)> = c
            .iter()
            .map(|&(x, m, sd)| (x, m + sd))
            .chain(c.iter().rev().map(|&(x, m, sd)| (x, m - sd)))
            .collect();
        chart.draw_series(std::iter::once(Polygon::new(
            band,
            color.mix(0.18).filled(),
        )))?;
        chart.draw_series(LineSeries::new(
            c.iter().map(|&(x, m, _)| (x, m)),
            Color::stroke_width(&color, 2),
        ))?;
    }
    let font = ("sans-serif", 14).into_font();
    for (i, s) in series.iter().enumerate() {
        let (r, g, b) = COLORS[i % COLORS.len()];
        let color = RGBColor(r, g, b);
        let y = 60 + 22 * i as i32;
        legend.draw(&PathElement::new(
            vec![(6, y), (30, y)],
            Color::stroke_width(&color, 3),
        ))?;
        legend.draw(&Text::new(
            legend_label(&s.name),
            (36, y - 6),
            font.clone().color(&BLACK),
        ))?;
    }
    root.present()?;
    Ok(())
}

/// Draw every metric that some series has, as `<dir>/<metric>.svg` and `.png`. Returns
/// (metric label, SVG file name) of the figures written.
pub fn write_all(series: &[Series], dir: &Path) -> Result<Vec<(String, String)>, PlotError> {
    let mut written = Vec::new();
    for (col, label, stem) in METRICS {
        if !series.iter().any(|s| s.curves.contains_key(col)) {
            continue;
        }
        let svg = dir.join(format!("{stem}.svg"));
        let png = dir.join(format!("{stem}.png"));
        let err = |p: &Path| {
            let path = p.display().to_string();
            move |e: String| PlotError::Draw { path, message: e }
        };
        // Draw into temporaries, then rename: a reader never sees a half-written figure.
        let tmp_svg = crate::report::atomic::temp_path(&svg).map_err(|e| PlotError::Draw {
            path: svg.display().to_string(),
            message: e.to_string(),
        })?;
        let tmp_png = dir.join(format!(".{stem}.{}.tmp.png", std::process::id()));
        draw_metric(
            SVGBackend::new(&tmp_svg, SIZE).into_drawing_area(),
            series,
            col,
            label,
        )
        .map_err(|e| err(&svg)(e.to_string()))?;
        draw_metric(
            Font8x8(BitMapBackend::new(&tmp_png, SIZE)).into_drawing_area(),
            series,
            col,
            label,
        )
        .map_err(|e| err(&png)(e.to_string()))?;
        for (t, f) in [(&tmp_svg, &svg), (&tmp_png, &png)] {
            std::fs::rename(t, f).map_err(|source| PlotError::Io {
                path: f.display().to_string(),
                source,
            })?;
        }
        written.push((label.to_string(), format!("{stem}.svg")));
    }
    Ok(written)
}

/// A drawing backend that draws text with built-in 8×8 bitmap glyphs and delegates everything
/// else to the wrapped backend.
pub struct Font8x8<B>(pub B);

fn glyph(c: char) -> [u8; 8] {
    font8x8::BASIC_FONTS
        .get(c)
        .or_else(|| font8x8::LATIN_FONTS.get(c))
        .or_else(|| font8x8::GREEK_FONTS.get(c))
        .or_else(|| font8x8::BASIC_FONTS.get('?'))
        .unwrap_or([0; 8])
}

/// Integer scale of the 8-pixel glyphs for a font size in points.
fn scale(size: f64) -> i32 {
    ((size / 11.0).round() as i32).max(1)
}

impl<B: DrawingBackend> DrawingBackend for Font8x8<B> {
    type ErrorType = B::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.0.get_size()
    }
    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.ensure_prepared()
    }
    fn present(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.present()
    }
    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_pixel(point, color)
    }
    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_line(from, to, style)
    }
    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_rect(upper_left, bottom_right, style, fill)
    }
    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_path(path, style)
    }
    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_circle(center, radius, style, fill)
    }
    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.fill_polygon(vert, style)
    }
    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.blit_bitmap(pos, size, src)
    }

    fn estimate_text_size<TStyle: BackendTextStyle>(
        &self,
        text: &str,
        style: &TStyle,
    ) -> Result<(u32, u32), DrawingErrorKind<Self::ErrorType>> {
        let s = scale(style.size()) as u32;
        Ok((8 * s * text.chars().count() as u32, 8 * s))
    }

    fn draw_text<TStyle: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &TStyle,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let s = scale(style.size());
        let width = 8 * s * text.chars().count() as i32;
        let height = 8 * s;
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Right => -width,
            HPos::Center => -width / 2,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -height / 2,
            VPos::Bottom => -height,
        };
        let trans: FontTransform = style.transform();
        let (w, h) = self.get_size();
        for (i, c) in text.chars().enumerate() {
            let g = glyph(c);
            for (row, bits) in g.iter().enumerate() {
                for col in 0..8 {
                    if bits & (1 << col) == 0 {
                        continue;
                    }
                    for sy in 0..s {
                        for sx in 0..s {
                            let x = i as i32 * 8 * s + col * s + sx + dx;
                            let y = row as i32 * s + sy + dy;
                            let (x, y) = trans.transform(x, y);
                            let (x, y) = (pos.0 + x, pos.1 + y);
                            if x >= 0 && x < w as i32 && y >= 0 && y < h as i32 {
                                self.0.draw_pixel((x, y), color)?;
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
