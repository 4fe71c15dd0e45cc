//! Residual connections (room: `model`): the skip source of a block and its parameter-free
//! shortcut (He et al. 2016, "Deep Residual Learning for Image Recognition", eq. 1 and option A
//! of §4.1, the shortcut of their CIFAR-10 networks in §4.2).
//!
//! **Design.** A residual block `y = F(a) + S(a)` is written in a spec as
//! `ResidualSave, <the layers of F>, ResidualAdd`. Every trainable layer of F stays an ordinary
//! sequential layer, so its per-sample gradient is still its own input ⊗ delta, unchanged; only
//! the delta it receives is now the sum of the two paths. The two entries are parameter-free:
//!
//! - `ResidualSave` builds no layer. The registry ([`super::build`]) pushes the current
//!   activation — the input of the next built layer, `acts[a]` in the network's trace — on the
//!   stack of open blocks in [`super::BuildContext`]. Blocks nest as a stack (a save closes at
//!   the next unmatched add). No copy is made: the network keeps `acts[a]` alive until the
//!   last add that reads it (it is neither overwritten by an in-place layer nor dropped by a
//!   forward pass that keeps nothing).
//! - `ResidualAdd` pops the innermost open block and builds [`Add`]: the identity on its input
//!   `x = F(a)` plus the shortcut [`Shortcut`] of the source, `y = x + S(a)`. The network adds
//!   S(a) (it alone holds `acts[a]`; [`super::Layer::shortcut`] tells it where to read).
//!
//! **Option A.** When F changes the shape, S subsamples the positions by the integer stride s
//! (`S(a)[y, x, c] = a[s·y, s·x, c]`, PyTorch's `a[:, :, ::s, ::s]`) and zero-pads the channels
//! that F added (`S(a)[., ., c] = 0` for `c ≥ C_a`; the new channels come last). On vectors S
//! zero-pads the new features. S is linear, with adjoint `Sᵀ(d)[s·y, s·x, c] = d[y, x, c]` for
//! `c < C_a` and 0 on every other entry, so the backward pass is `∂L/∂a = (∂L/∂a through F) +
//! Sᵀ(∂L/∂y)`: the network pushes `Sᵀ(∂L/∂y)` at the add and adds it where the gradient with
//! respect to `acts[a]` has been formed. The alternative, option B's 1×1 projection, would add
//! a trainable layer off the sequential path; option A keeps every parameter on it.
//!
//! **Build-time refusals**: an add without an open save, a save never closed, a block that turns
//! an image into a vector (or back), channels that shrink, and a spatial change that is not one
//! integer stride on both axes (e.g. 7×7 → 4×4) — each a one-line error naming the entry.
//!
//! S and Sᵀ map example b's row to example b's row only, in a fixed order of element-wise f32
//! additions, so no layer mixes examples and every bit is the same on any thread count.

use ndarray::{Array2, ArrayView1, ArrayView2, ArrayViewMut1, Axis, Zip};
use rayon::prelude::*;

use super::{Backward, BackwardContext, Forward, Layer, Shape};

/// A block opened by `ResidualSave` and not yet closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenBlock {
    /// The index of the save entry in the spec (for error messages).
    pub spec_index: usize,
    /// The activation the block starts from: `acts[source]`, the input of the next built layer.
    pub source: usize,
    /// Its shape.
    pub shape: Shape,
}

/// The parameter-free shortcut S of a block (option A), from `acts[source]` of shape `from` to
/// the block's output shape `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shortcut {
    /// The index in the network's trace of the activation the block started from.
    pub source: usize,
    from: Shape,
    to: Shape,
    /// The spatial subsampling factor s (1 on vectors).
    stride: usize,
}

/// `(c, h, w)` of a shape, a vector being one position with `d` channels.
fn chw(shape: Shape) -> (usize, usize, usize) {
    match shape {
        Shape::Flat(d) => (d, 1, 1),
        Shape::Image { c, h, w } => (c, h, w),
    }
}

impl Shortcut {
    /// The shortcut from `block`'s source to `output`, or why option A cannot match them.
    pub fn build(block: OpenBlock, output: Shape) -> Result<Self, String> {
        let opened = format!(
            "the block opened by residual_save at layer {}",
            block.spec_index
        );
        let stride = match (block.shape, output) {
            (Shape::Flat(d0), Shape::Flat(d)) => {
                if d < d0 {
                    return Err(format!(
                        "{opened} shrinks {d0} features to {d}; the shortcut can only zero-pad new features"
                    ));
                }
                1
            }
            (
                Shape::Image {
                    c: c0,
                    h: h0,
                    w: w0,
                },
                Shape::Image { c, h, w },
            ) => {
                if c < c0 {
                    return Err(format!(
                        "{opened} shrinks {c0} channels to {c}; the parameter-free shortcut (option A) can only zero-pad new channels"
                    ));
                }
                let s = h0 / h;
                if h0 % h != 0 || w0 % w != 0 || w0 / w != s {
                    return Err(format!(
                        "{opened} maps {h0}x{w0} positions to {h}x{w}, which is not a subsampling by one integer stride on both axes"
                    ));
                }
                s
            }
            (from, to) => {
                let name = |s: Shape| match s {
                    Shape::Flat(_) => "a vector",
                    Shape::Image { .. } => "an image",
                };
                return Err(format!(
                    "{opened} starts from {} and ends with {}; both ends of a skip connection must be images or both vectors",
                    name(from),
                    name(to)
                ));
            }
        };
        Ok(Shortcut {
            source: block.source,
            from: block.shape,
            to: output,
            stride,
        })
    }

    /// Whether S is the identity (same shape).
    fn is_identity(&self) -> bool {
        self.from == self.to
    }

    /// For each entry of one source row that S keeps, `(source offset, output offset)` runs of
    /// `C_a` consecutive floats: calls `f(src_start, out_start, len)` per output position.
    fn for_each_run(&self, mut f: impl FnMut(usize, usize, usize)) {
        let (c0, _, w0) = chw(self.from);
        let (c, h, w) = chw(self.to);
        let s = self.stride;
        for y in 0..h {
            for x in 0..w {
                f(((s * y) * w0 + s * x) * c0, (y * w + x) * c, c0);
            }
        }
    }

    /// `out ← out + S(source)`, row by row. Shapes: `out` `[B, len(to)]`, `source`
    /// `[B, len(from)]`.
    pub fn add_to(&self, out: &mut Array2<f32>, source: ArrayView2<'_, f32>) {
        if self.is_identity() {
            Zip::from(out).and(source).par_for_each(|o, &a| *o += a);
            return;
        }
        out.axis_iter_mut(Axis(0))
            .into_par_iter()
            .zip(source.axis_iter(Axis(0)))
            .for_each(|(mut o, a)| self.add_row(o.view_mut(), a));
    }

    fn add_row(&self, mut out: ArrayViewMut1<'_, f32>, source: ArrayView1<'_, f32>) {
        self.for_each_run(|from, to, len| {
            for k in 0..len {
                out[to + k] += source[from + k];
            }
        });
    }

    /// `Sᵀ(d)`: the gradient with respect to the source from `d` = ∂L/∂output `[B, len(to)]`;
    /// returns `[B, len(from)]`.
    pub fn adjoint(&self, d: ArrayView2<'_, f32>) -> Array2<f32> {
        if self.is_identity() {
            return d.to_owned();
        }
        let mut g = Array2::<f32>::zeros((d.nrows(), self.from.len()));
        g.axis_iter_mut(Axis(0))
            .into_par_iter()
            .zip(d.axis_iter(Axis(0)))
            .for_each(|(mut g, d)| {
                self.for_each_run(|from, to, len| {
                    for k in 0..len {
                        g[from + k] = d[to + k];
                    }
                });
            });
        g
    }
}

/// The add that closes a residual block: the identity on its input; the network adds the
/// shortcut of the block's source (see the module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct Add {
    pub shortcut: Shortcut,
}

impl Add {
    /// Close `block` on an input (the output of the block's last layer) of shape `input`.
    pub fn build(block: Option<OpenBlock>, input: Shape) -> Result<Self, String> {
        let block = block.ok_or_else(|| {
            "residual_add without an open residual_save before it (blocks nest: each add closes the latest unclosed save)".to_string()
        })?;
        Ok(Add {
            shortcut: Shortcut::build(block, input)?,
        })
    }
}

impl Layer for Add {
    fn output_shape(&self) -> Shape {
        self.shortcut.to
    }

    fn shortcut(&self) -> Option<&Shortcut> {
        Some(&self.shortcut)
    }

    fn forward(
        &self,
        _params: ArrayView1<'_, f32>,
        input: ArrayView2<'_, f32>,
        _keep: bool,
    ) -> Forward {
        Forward::plain(input.to_owned())
    }

    fn forward_in_place(&self, _x: &mut Array2<f32>) -> bool {
        true
    }

    fn backward(
        &self,
        _ctx: BackwardContext<'_>,
        d: Array2<f32>,
        _input_gradient: bool,
    ) -> Backward {
        Backward {
            input_gradient: Some(d),
            delta: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(shape: Shape) -> OpenBlock {
        OpenBlock {
            spec_index: 3,
            source: 1,
            shape,
        }
    }

    fn img(c: usize, h: usize, w: usize) -> Shape {
        Shape::Image { c, h, w }
    }

    #[test]
    fn refusals_say_what_cannot_be_matched() {
        let err = |from: Shape, to: Shape| Shortcut::build(block(from), to).unwrap_err();
        let e = err(img(8, 4, 4), img(4, 4, 4));
        assert!(e.contains("shrinks 8 channels to 4"), "{e}");
        assert!(e.contains("residual_save at layer 3"), "{e}");
        let e = err(img(4, 7, 7), img(8, 4, 4));
        assert!(e.contains("7x7 positions to 4x4"), "{e}");
        let e = err(img(4, 8, 8), img(4, 4, 2));
        assert!(e.contains("one integer stride"), "{e}");
        let e = err(img(4, 2, 2), Shape::Flat(16));
        assert!(e.contains("both ends"), "{e}");
        let e = err(Shape::Flat(6), Shape::Flat(5));
        assert!(e.contains("shrinks 6 features to 5"), "{e}");
        let e = Add::build(None, Shape::Flat(3)).unwrap_err();
        assert!(e.contains("without an open residual_save"), "{e}");
        assert!(Shortcut::build(block(img(2, 8, 6)), img(5, 4, 3)).is_ok());
        assert!(Shortcut::build(block(Shape::Flat(3)), Shape::Flat(5)).is_ok());
    }

    #[test]
    fn option_a_subsamples_pads_and_its_adjoint_is_the_transpose() {
        // [B = 2, 2 channels, 4x4] → [3 channels, 2x2], stride 2, channels-last rows.
        let sc = Shortcut::build(block(img(2, 4, 4)), img(3, 2, 2)).unwrap();
        let a = Array2::from_shape_fn((2, 32), |(b, j)| (b * 100 + j) as f32);
        let mut out = Array2::<f32>::zeros((2, 12));
        sc.add_to(&mut out, a.view());
        for b in 0..2 {
            for y in 0..2 {
                for x in 0..2 {
                    for c in 0..3 {
                        let want = if c < 2 {
                            a[[b, ((2 * y) * 4 + 2 * x) * 2 + c]]
                        } else {
                            0.0
                        };
                        assert_eq!(out[[b, (y * 2 + x) * 3 + c]], want);
                    }
                }
            }
        }
        // ⟨S a, d⟩ = ⟨a, Sᵀ d⟩ exactly (small integers).
        let d = Array2::from_shape_fn((2, 12), |(b, j)| (3 * b + j % 5) as f32 - 2.0);
        let st = sc.adjoint(d.view());
        assert_eq!(st.dim(), (2, 32));
        let lhs: f32 = (&out * &d).sum();
        let rhs: f32 = (&a * &st).sum();
        assert_eq!(lhs, rhs);
        // The identity shortcut adds the source as it is.
        let id = Shortcut::build(block(Shape::Flat(4)), Shape::Flat(4)).unwrap();
        let mut y = Array2::<f32>::ones((2, 4));
        id.add_to(&mut y, a.slice(ndarray::s![.., ..4]));
        assert_eq!(y[[1, 3]], 104.0);
        assert_eq!(id.adjoint(y.view()), y);
    }
}
