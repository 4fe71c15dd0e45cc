//! The forward product of 3×3, stride-1, padding-1 convolutions by Winograd's minimal filtering
//! algorithm F(2×2, 3×3) (Lavin & Gray 2016, "Fast algorithms for convolutional neural
//! networks", §4): 16 multiplies per 2×2 output tile and channel pair instead of 36.
//!
//! Part of the model room; used by the forward pass only (the per-example weight gradients and the
//! input gradient stay on im2col). With channels-last input `d` (a 4×4 tile, zero outside the
//! image) and the kernel `g`:
//!
//! - U = G g Gᵀ per (output, input) channel pair, computed once per call;
//! - V = Bᵀ d B per tile and input channel;
//! - M_p = V_p U_p for each of the 16 positions p of the 4×4 transform (16 matrix products with
//!   the input channels as their inner dimension);
//! - Y = Aᵀ M A gives the 2×2 outputs, plus the bias.
//!
//! with Bᵀ = \[\[1,0,−1,0\],\[0,1,1,0\],\[0,−1,1,0\],\[0,1,0,−1\]\], G = \[\[1,0,0\],\[½,½,½\],\[½,−½,½\],\[0,0,1\]\],
//! Aᵀ = \[\[1,1,1,0\],\[0,1,−1,−1\]\] (cross-correlation, as PyTorch's `Conv2d`). In f32 the result
//! differs from the direct sum by rounding only (a few ulps of the larger terms; tested against
//! im2col). Work is cut into chunks of examples that depend only on the layer's shape, so results
//! do not depend on the thread count.

use ndarray::{Array2, ArrayView1, ArrayView2, ArrayViewMut2, Axis};
use rayon::prelude::*;

use super::kernels::{Window, with_scratch};
use super::linalg::gemm_serial;

/// Whether [`conv_forward`] applies: 3×3 kernel, stride 1, padding 1, even height and width, and
/// enough input channels for the 16 products to pay (fewer go through im2col).
pub fn applies(g: &Window) -> bool {
    g.kernel == 3
        && g.stride == 1
        && g.padding == 1
        && g.height.is_multiple_of(2)
        && g.width.is_multiple_of(2)
        && g.height >= 2
        && g.width >= 2
        && g.channels >= 8
}

/// The convolution's output `[B, H·W·C_out]` (channels-last) for input `x` `[B, H·W·C_in]`,
/// weights `w` `[C_out, 9·C_in]` (columns `(ki·3 + kj)·C_in + c`) and bias `b` `[C_out]`.
pub fn conv_forward(
    x: ArrayView2<'_, f32>,
    g: &Window,
    w: ArrayView2<'_, f32>,
    b: ArrayView1<'_, f32>,
) -> Array2<f32> {
    assert!(applies(g), "winograd: not a 3x3 stride-1 padding-1 layer");
    let (batch, ci, co) = (x.nrows(), g.channels, w.nrows());
    assert_eq!(w.ncols(), 9 * ci, "winograd: weight shape");
    assert_eq!(b.len(), co, "winograd: one bias per output channel");
    let (th, tw) = (g.height / 2, g.width / 2);
    let tiles = th * tw;
    let u = weight_transform(w, ci, co);
    let bias = b.to_vec();
    let per = chunk_examples(tiles, ci, co);
    let mut out = Array2::<f32>::zeros((batch, g.height * g.width * co));
    out.axis_chunks_iter_mut(Axis(0), per)
        .into_par_iter()
        .zip(x.axis_chunks_iter(Axis(0), per).into_par_iter())
        .for_each(|(mut oc, xc)| {
            let nb = xc.nrows();
            let rows = nb * tiles;
            with_scratch(16 * rows * (ci + co), |buf| {
                let (v, m) = buf.split_at_mut(16 * rows * ci);
                for (e, xe) in xc.rows().into_iter().enumerate() {
                    let xe = xe
                        .as_slice()
                        .map_or_else(|| xe.to_vec().into(), std::borrow::Cow::Borrowed);
                    input_transform(&xe, g, &mut v[..], e * tiles, rows);
                }
                for p in 0..16 {
                    let vp = ArrayView2::from_shape((rows, ci), &v[p * rows * ci..][..rows * ci])
                        .unwrap_or_else(|_| unreachable!("rows·C_in entries"));
                    let up = ArrayView2::from_shape((ci, co), &u[p * ci * co..][..ci * co])
                        .unwrap_or_else(|_| unreachable!("C_in·C_out entries"));
                    let mp =
                        ArrayViewMut2::from_shape((rows, co), &mut m[p * rows * co..][..rows * co])
                            .unwrap_or_else(|_| unreachable!("rows·C_out entries"));
                    gemm_serial(vp, up, 0.0, mp);
                }
                for (e, mut oe) in oc.rows_mut().into_iter().enumerate() {
                    let Some(oe) = oe.as_slice_mut() else {
                        unreachable!("rows of a fresh array are contiguous")
                    };
                    output_transform(m, g, &bias, oe, e * tiles, rows);
                }
            });
        });
    out
}

/// Examples per chunk: about 2 MiB of transformed inputs and products (at least one).
fn chunk_examples(tiles: usize, ci: usize, co: usize) -> usize {
    const TARGET_BYTES: usize = 2 * 1024 * 1024;
    (TARGET_BYTES / (16 * tiles * (ci + co) * 4).max(1)).max(1)
}

/// U_p `[C_in, C_out]` for the 16 positions p = 4ξ + ν: U = G g Gᵀ of each channel pair.
fn weight_transform(w: ArrayView2<'_, f32>, ci: usize, co: usize) -> Vec<f32> {
    let mut u = vec![0.0f32; 16 * ci * co];
    for o in 0..co {
        for c in 0..ci {
            let g = |ki: usize, kj: usize| w[[o, (ki * 3 + kj) * ci + c]];
            // T = G g (4×3), then U = T Gᵀ (4×4).
            let mut t = [[0.0f32; 3]; 4];
            for (j, col) in (0..3).map(|j| (j, [g(0, j), g(1, j), g(2, j)])) {
                t[0][j] = col[0];
                t[1][j] = 0.5 * (col[0] + col[1] + col[2]);
                t[2][j] = 0.5 * (col[0] - col[1] + col[2]);
                t[3][j] = col[2];
            }
            for (xi, row) in t.iter().enumerate() {
                let uu = [
                    row[0],
                    0.5 * (row[0] + row[1] + row[2]),
                    0.5 * (row[0] - row[1] + row[2]),
                    row[2],
                ];
                for (nu, &val) in uu.iter().enumerate() {
                    u[((4 * xi + nu) * ci + c) * co + o] = val;
                }
            }
        }
    }
    u
}

/// V_p rows `first..first + tiles` of one example (channels-last `[H·W·C_in]`): row
/// `first + ty·(W/2) + tx`, column c, for each of the 16 positions p (blocks of `rows` rows).
fn input_transform(x: &[f32], g: &Window, v: &mut [f32], first: usize, rows: usize) {
    let (h, wd, ci) = (g.height, g.width, g.channels);
    let tw = wd / 2;
    let zeros = vec![0.0f32; ci];
    let mut d: [&[f32]; 16] = [&zeros[..]; 16];
    let mut tmp = vec![0.0f32; 16 * ci];
    for ty in 0..h / 2 {
        for tx in 0..tw {
            for i in 0..4 {
                for j in 0..4 {
                    let (r, col) = ((2 * ty + i) as isize - 1, (2 * tx + j) as isize - 1);
                    d[4 * i + j] = if r < 0 || col < 0 || r >= h as isize || col >= wd as isize {
                        &zeros[..]
                    } else {
                        let at = (r as usize * wd + col as usize) * ci;
                        &x[at..at + ci]
                    };
                }
            }
            // Bᵀ d (rows), then (·) B (columns), each channel independent.
            let t_out = &mut tmp[..];
            for c in 0..ci {
                let dd = |i: usize, j: usize| d[4 * i + j][c];
                let bd: [[f32; 4]; 4] = [
                    std::array::from_fn(|j| dd(0, j) - dd(2, j)),
                    std::array::from_fn(|j| dd(1, j) + dd(2, j)),
                    std::array::from_fn(|j| dd(2, j) - dd(1, j)),
                    std::array::from_fn(|j| dd(1, j) - dd(3, j)),
                ];
                for (i, row) in bd.iter().enumerate() {
                    t_out[(4 * i) * ci + c] = row[0] - row[2];
                    t_out[(4 * i + 1) * ci + c] = row[1] + row[2];
                    t_out[(4 * i + 2) * ci + c] = row[2] - row[1];
                    t_out[(4 * i + 3) * ci + c] = row[1] - row[3];
                }
            }
            let row = first + ty * tw + tx;
            for p in 0..16 {
                v[(p * rows + row) * ci..][..ci].copy_from_slice(&tmp[p * ci..(p + 1) * ci]);
            }
        }
    }
}

/// One example's outputs from the products M_p (rows `first..first + tiles`): Y = Aᵀ M A per
/// tile and output channel, plus the bias.
fn output_transform(
    m: &[f32],
    g: &Window,
    bias: &[f32],
    out: &mut [f32],
    first: usize,
    rows: usize,
) {
    let (wd, co) = (g.width, bias.len());
    let tw = wd / 2;
    for ty in 0..g.height / 2 {
        for tx in 0..tw {
            let row = first + ty * tw + tx;
            let mp = |p: usize| &m[(p * rows + row) * co..][..co];
            let at = |a: usize, b: usize| ((2 * ty + a) * wd + 2 * tx + b) * co;
            let (o00, o01, o10, o11) = (at(0, 0), at(0, 1), at(1, 0), at(1, 1));
            for o in 0..co {
                let v = |i: usize, j: usize| mp(4 * i + j)[o];
                // M A (rows i): s_i0 = m_i0 + m_i1 + m_i2, s_i1 = m_i1 − m_i2 − m_i3.
                let mut s = [[0.0f32; 2]; 4];
                for (i, si) in s.iter_mut().enumerate() {
                    si[0] = v(i, 0) + v(i, 1) + v(i, 2);
                    si[1] = v(i, 1) - v(i, 2) - v(i, 3);
                }
                out[o00 + o] = bias[o] + (s[0][0] + s[1][0] + s[2][0]);
                out[o01 + o] = bias[o] + (s[0][1] + s[1][1] + s[2][1]);
                out[o10 + o] = bias[o] + (s[1][0] - s[2][0] - s[3][0]);
                out[o11 + o] = bias[o] + (s[1][1] - s[2][1] - s[3][1]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array1;

    /// The direct cross-correlation in f64 (the oracle).
    fn direct(x: &Array2<f32>, g: &Window, w: &Array2<f32>, b: &Array1<f32>) -> Array2<f64> {
        let (ci, co) = (g.channels, w.nrows());
        let (h, wd) = (g.height, g.width);
        let mut out = Array2::<f64>::zeros((x.nrows(), h * wd * co));
        for e in 0..x.nrows() {
            for oh in 0..h {
                for ow in 0..wd {
                    for o in 0..co {
                        let mut s = b[o] as f64;
                        for ki in 0..3 {
                            for kj in 0..3 {
                                let (r, c) =
                                    (oh as isize + ki as isize - 1, ow as isize + kj as isize - 1);
                                if r < 0 || c < 0 || r >= h as isize || c >= wd as isize {
                                    continue;
                                }
                                for ch in 0..ci {
                                    s += w[[o, (ki * 3 + kj) * ci + ch]] as f64
                                        * x[[e, (r as usize * wd + c as usize) * ci + ch]] as f64;
                                }
                            }
                        }
                        out[[e, (oh * wd + ow) * co + o]] = s;
                    }
                }
            }
        }
        out
    }

    #[test]
    fn matches_the_direct_convolution() {
        for &(h, wd, ci, co, batch) in &[
            (2, 2, 8, 3, 1),
            (4, 6, 8, 5, 3),
            (8, 8, 16, 12, 5),
            (16, 10, 9, 7, 2),
        ] {
            let g = Window {
                channels: ci,
                height: h,
                width: wd,
                kernel: 3,
                stride: 1,
                padding: 1,
                out_height: h,
                out_width: wd,
            };
            let x = Array2::from_shape_fn((batch, h * wd * ci), |(i, j)| {
                (((i * 131 + j * 71) % 97) as f32 - 48.0) / 30.0
            });
            let w = Array2::from_shape_fn((co, 9 * ci), |(i, j)| {
                (((i * 17 + j * 29) % 41) as f32 - 20.0) / 25.0
            });
            let b = Array1::from_shape_fn(co, |o| o as f32 * 0.1 - 0.2);
            let got = conv_forward(x.view(), &g, w.view(), b.view());
            let want = direct(&x, &g, &w, &b);
            let scale = want.iter().fold(1.0f64, |a, v| a.max(v.abs()));
            for (gv, wv) in got.iter().zip(want.iter()) {
                assert!(
                    (*gv as f64 - wv).abs() <= 1e-5 * scale,
                    "{h}x{wd} ci {ci} co {co}: {gv} vs {wv}"
                );
            }
        }
    }
}
