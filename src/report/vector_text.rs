//! Text for the PNG figures of `dpx report` without system fonts: DejaVu Sans (Bitstream Vera
//! licence, in `assets/fonts/`) compiled into the binary, and [`VectorText`], a wrapper around a
//! plotters bitmap backend that draws text from the font's outlines with `ab_glyph`
//! (antialiased, kerned, each glyph at its own side bearing; rotated for the y axis) and
//! delegates everything else to the wrapped backend.
//!
//! Report room. Must not: choose what a figure shows (that is `plot`).

use ab_glyph::{Font, FontRef, PxScale, ScaleFont, point};
use plotters::prelude::*;
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind,
    text_anchor::{HPos, VPos},
};

/// DejaVu Sans, drawn for every text of every figure.
const FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// The embedded font, parsed once (None if it does not parse, which a test rules out).
pub(super) fn font() -> Option<&'static FontRef<'static>> {
    static PARSED: std::sync::OnceLock<Option<FontRef<'static>>> = std::sync::OnceLock::new();
    PARSED
        .get_or_init(|| FontRef::try_from_slice(FONT).ok())
        .as_ref()
}

/// A drawing backend that draws text with the embedded vector font and delegates everything
/// else to the wrapped backend.
pub struct VectorText<B>(pub B);

/// Glyphs of `text` at `size` pixels: (glyph, pen position), the advance width and the line
/// height (ascent − descent), with kerning.
fn layout(
    font: &FontRef<'static>,
    size: f64,
    text: &str,
) -> (Vec<(ab_glyph::GlyphId, f32)>, f32, f32) {
    let scaled = font.as_scaled(PxScale::from(size as f32));
    let mut caret = 0.0f32;
    let mut prev = None;
    let mut glyphs = Vec::with_capacity(text.len());
    for c in text.chars() {
        let id = scaled.glyph_id(c);
        if let Some(p) = prev {
            caret += scaled.kern(p, id);
        }
        glyphs.push((id, caret));
        caret += scaled.h_advance(id);
        prev = Some(id);
    }
    (glyphs, caret, scaled.ascent() - scaled.descent())
}

fn font_error<E: std::error::Error + Send + Sync>() -> DrawingErrorKind<E> {
    DrawingErrorKind::FontError(Box::new(std::io::Error::other(
        "the embedded font could not be parsed",
    )))
}

impl<B: DrawingBackend> DrawingBackend for VectorText<B> {
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
        let font = font().ok_or_else(font_error)?;
        let (_, width, height) = layout(font, style.size(), text);
        Ok((width.ceil() as u32, height.ceil() as u32))
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
        let font = font().ok_or_else(font_error)?;
        let scale = PxScale::from(style.size() as f32);
        let ascent = font.as_scaled(scale).ascent();
        let (glyphs, width, height) = layout(font, style.size(), text);
        // Offsets of the text box's top-left corner from the anchor point, before rotation.
        let dx = match style.anchor().h_pos {
            HPos::Left => 0.0,
            HPos::Right => -width,
            HPos::Center => -width / 2.0,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0.0,
            VPos::Center => -height / 2.0,
            VPos::Bottom => -height,
        };
        let trans = style.transform();
        let (w, h) = self.get_size();
        for (id, x) in glyphs {
            let glyph = id.with_scale_and_position(scale, point(dx + x, dy + ascent));
            let Some(outlined) = font.outline_glyph(glyph) else {
                continue;
            };
            let bounds = outlined.px_bounds();
            let mut pixels = Vec::new();
            outlined.draw(|gx, gy, coverage| {
                if coverage > 0.0 {
                    pixels.push((
                        bounds.min.x as i32 + gx as i32,
                        bounds.min.y as i32 + gy as i32,
                        coverage,
                    ));
                }
            });
            for (x, y, coverage) in pixels {
                let (x, y) = trans.transform(x, y);
                let (x, y) = (pos.0 + x, pos.1 + y);
                if x >= 0 && x < w as i32 && y >= 0 && y < h as i32 {
                    let c = BackendColor {
                        alpha: color.alpha * f64::from(coverage.min(1.0)),
                        rgb: color.rgb,
                    };
                    self.0.draw_pixel((x, y), c)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_font_parses_and_measures_text() {
        let font = font().expect("DejaVu Sans parses");
        let (glyphs, width, height) = layout(font, 20.0, "ε = 1");
        assert_eq!(glyphs.len(), 5);
        assert!(width > 30.0 && width < 80.0, "{width}");
        assert!(height > 15.0 && height < 30.0, "{height}");
    }
}
