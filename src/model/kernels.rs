//! Element-level kernels of the model room: im2col/col2im, pooling, layout permutations and
//! activations, each forward with its backward.
//!
//! Part of the model room; knows nothing of privacy. Images inside a model are stored
//! channels-last (NHWC): example `b` of an activation matrix `[B, H·W·C]` holds pixel `(h, w)`,
//! channel `c` at column `(h·W + w)·C + c`. Channels-last makes a convolution one matrix product
//! `[B·L, K] × [K, C_out]` whose output is again channels-last, with no transpose. The data room's
//! channel-major (CHW) order is converted on entry ([`chw_to_hwc`]) and restored by `Flatten`
//! ([`hwc_to_chw`]), so a flattened vector has PyTorch's order.
//!
//! Every kernel works example by example (no cross-example operation exists), in parallel over
//! examples; each example's result is computed the same way whatever the thread count.

use ndarray::{Array2, ArrayView2, ArrayViewMut2, Axis};
use rayon::prelude::*;

use super::spec::Activation;

/// Geometry of a 2-D window operation (convolution or pooling) on a channels-last image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub channels: usize,
    pub height: usize,
    pub width: usize,
    pub kernel: usize,
    pub stride: usize,
    pub padding: usize,
    pub out_height: usize,
    pub out_width: usize,
}

impl Window {
    /// Output positions per example, L = out_height · out_width.
    pub fn positions(&self) -> usize {
        self.out_height * self.out_width
    }

    /// Columns of an im2col row, K = kernel² · channels, ordered (ki, kj, c).
    pub fn patch_len(&self) -> usize {
        self.kernel * self.kernel * self.channels
    }

    /// The kernel columns `kj0..kj1` whose input column `ow·stride + kj − padding` lies inside
    /// the image, for output column `ow`.
    pub fn valid_taps(&self, ow: usize) -> (usize, usize) {
        let start = ow * self.stride;
        let kj0 = self.padding.saturating_sub(start).min(self.kernel);
        let kj1 = (self.width + self.padding)
            .saturating_sub(start)
            .min(self.kernel);
        (kj0, kj1.max(kj0))
    }

    /// Input features per example, H · W · C.
    pub fn in_len(&self) -> usize {
        self.height * self.width * self.channels
    }
}

/// Lay the receptive fields of every output position out as rows (im2col), zero-padded.
///
/// # Shapes
/// `x`: `[B, H·W·C]` channels-last; returns `[B·L, K]` with row `b·L + oh·W_out + ow` and column
/// `(ki·kernel + kj)·C + c`.
pub fn im2col(x: ArrayView2<'_, f32>, g: &Window) -> Array2<f32> {
    let batch = x.nrows();
    let (l, k, c) = (g.positions(), g.patch_len(), g.channels);
    let mut cols = Array2::<f32>::zeros((batch * l, k));
    let Some(cols_slice) = cols.as_slice_mut() else {
        unreachable!("a freshly allocated array is contiguous")
    };
    cols_slice
        .par_chunks_mut(l * k)
        .zip(x.axis_iter(Axis(0)).into_par_iter())
        .for_each(|(out, xi)| {
            let xi = xi
                .to_slice()
                .map(std::borrow::Cow::Borrowed)
                .unwrap_or_else(|| std::borrow::Cow::Owned(xi.to_vec()));
            for oh in 0..g.out_height {
                for ow in 0..g.out_width {
                    let row = &mut out[(oh * g.out_width + ow) * k..][..k];
                    let (kj0, kj1) = g.valid_taps(ow);
                    for ki in 0..g.kernel {
                        let ih = (oh * g.stride + ki) as isize - g.padding as isize;
                        if ih < 0 || ih >= g.height as isize || kj0 >= kj1 {
                            continue;
                        }
                        // Taps kj0..kj1 of this kernel row read one contiguous run of the input.
                        let iw0 = ow * g.stride + kj0 - g.padding;
                        let src = (ih as usize * g.width + iw0) * c;
                        let dst = (ki * g.kernel + kj0) * c;
                        let len = (kj1 - kj0) * c;
                        copy_short(&mut row[dst..dst + len], &xi[src..src + len]);
                    }
                }
            }
        });
    cols
}

/// im2col of one example into `out` (`[L, K]` row-major, every entry written exactly once,
/// padding as zeros): the per-example building block of [`im2col`], used with reused buffers so a
/// convolution's patches are formed a few examples at a time while they are still in cache.
pub fn im2col_example(xi: &[f32], g: &Window, out: &mut [f32]) {
    let (k, c) = (g.patch_len(), g.channels);
    let out = &mut out[..g.positions() * k];
    let span = g.kernel * c;
    for oh in 0..g.out_height {
        for ow in 0..g.out_width {
            let row = &mut out[(oh * g.out_width + ow) * k..][..k];
            let (kj0, kj1) = g.valid_taps(ow);
            for (ki, seg) in row.chunks_exact_mut(span).enumerate() {
                let ih = (oh * g.stride + ki) as isize - g.padding as isize;
                if ih < 0 || ih >= g.height as isize || kj0 >= kj1 {
                    fill_zero_short(seg);
                    continue;
                }
                let iw0 = ow * g.stride + kj0 - g.padding;
                let src = (ih as usize * g.width + iw0) * c;
                let (left, rest) = seg.split_at_mut(kj0 * c);
                let (mid, right) = rest.split_at_mut((kj1 - kj0) * c);
                fill_zero_short(left);
                copy_short(mid, &xi[src..src + mid.len()]);
                fill_zero_short(right);
            }
        }
    }
}

/// Zeros for the short runs of im2col's padding, inline (no `memset` call per run).
#[inline(always)]
fn fill_zero_short(dst: &mut [f32]) {
    for v in dst.iter_mut() {
        *v = 0.0;
    }
}

/// Runs `f` on a scratch buffer of `len` f32 kept per thread between calls, so the im2col and
/// column buffers of every step are neither reallocated nor zero-filled (callers overwrite what
/// they read; the contents on entry are unspecified). A nested call on the same thread gets a
/// fresh buffer instead of the one in use.
pub fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    thread_local! {
        static SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let mut buf = SCRATCH.with(|s| s.take());
    if buf.len() < len {
        buf.resize(len, 0.0);
    }
    let out = f(&mut buf[..len]);
    SCRATCH.with(|s| {
        // Keep the larger buffer if a nested call left one behind.
        if s.borrow().len() < buf.len() {
            s.replace(buf);
        }
    });
    out
}

/// The adjoint of [`im2col_example`]: add the rows of `cols` (`[L, K]`) onto the pixels of one
/// example `xi` (`[H·W·C]`) they came from.
pub fn col2im_example_add(cols: &[f32], g: &Window, xi: &mut [f32]) {
    let (k, c) = (g.patch_len(), g.channels);
    for oh in 0..g.out_height {
        for ow in 0..g.out_width {
            let row = &cols[(oh * g.out_width + ow) * k..][..k];
            let (kj0, kj1) = g.valid_taps(ow);
            for ki in 0..g.kernel {
                let ih = (oh * g.stride + ki) as isize - g.padding as isize;
                if ih < 0 || ih >= g.height as isize || kj0 >= kj1 {
                    continue;
                }
                let iw0 = ow * g.stride + kj0 - g.padding;
                let dst = (ih as usize * g.width + iw0) * c;
                let src = (ki * g.kernel + kj0) * c;
                let len = (kj1 - kj0) * c;
                for (d, s) in xi[dst..dst + len].iter_mut().zip(&row[src..src + len]) {
                    *d += *s;
                }
            }
        }
    }
}

/// Examples per chunk when a convolution forms its patches a chunk at a time: enough for about
/// 2 MiB of im2col rows (at least one), so layers with few positions still multiply a few hundred
/// rows at once. Depends only on the layer's shape, never on the thread count, so chunked sums
/// are reproducible.
pub fn conv_chunk_examples(g: &Window) -> usize {
    const TARGET_BYTES: usize = 2 * 1024 * 1024;
    (TARGET_BYTES / (g.positions() * g.patch_len() * 4).max(1)).max(1)
}

/// `dst.copy_from_slice(src)` for the short runs of im2col (a kernel row of a few channels):
/// eight lanes at a time inline, instead of a call to `memcpy` per run (10% of a `cnn_mnist` step).
#[inline(always)]
fn copy_short(dst: &mut [f32], src: &[f32]) {
    let mut d = dst.chunks_exact_mut(8);
    let mut s = src.chunks_exact(8);
    for (d, s) in (&mut d).zip(&mut s) {
        let s: &[f32; 8] = s.try_into().unwrap_or_else(|_| unreachable!("chunks of 8"));
        d.copy_from_slice(s);
    }
    for (d, s) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *d = *s;
    }
}

/// The adjoint of [`im2col`]: add every row's entries back onto the input pixels they came from.
///
/// # Shapes
/// `cols`: `[B·L, K]`; returns `[B, H·W·C]` channels-last.
pub fn col2im(cols: ArrayView2<'_, f32>, g: &Window, batch: usize) -> Array2<f32> {
    let (l, k, c) = (g.positions(), g.patch_len(), g.channels);
    let mut x = Array2::<f32>::zeros((batch, g.in_len()));
    x.axis_iter_mut(Axis(0))
        .into_par_iter()
        .enumerate()
        .for_each(|(b, mut xi)| {
            let Some(xi) = xi.as_slice_mut() else {
                unreachable!("rows of a fresh array are contiguous")
            };
            let block = cols.slice(ndarray::s![b * l..(b + 1) * l, ..]);
            for oh in 0..g.out_height {
                for ow in 0..g.out_width {
                    let row = block.row(oh * g.out_width + ow);
                    let row = row
                        .as_slice()
                        .map(std::borrow::Cow::Borrowed)
                        .unwrap_or_else(|| std::borrow::Cow::Owned(row.to_vec()));
                    let (kj0, kj1) = g.valid_taps(ow);
                    for ki in 0..g.kernel {
                        let ih = (oh * g.stride + ki) as isize - g.padding as isize;
                        if ih < 0 || ih >= g.height as isize || kj0 >= kj1 {
                            continue;
                        }
                        let iw0 = ow * g.stride + kj0 - g.padding;
                        let dst = (ih as usize * g.width + iw0) * c;
                        let src = (ki * g.kernel + kj0) * c;
                        let len = (kj1 - kj0) * c;
                        for (d, s) in xi[dst..dst + len].iter_mut().zip(&row[src..src + len]) {
                            *d += *s;
                        }
                    }
                }
            }
            debug_assert_eq!(k, g.patch_len());
        });
    x
}

/// Max pooling; returns the output and, per output entry, the tap `ki·kernel + kj` of the window
/// whose input won (the first maximum in window order, as PyTorch; a NaN wins and propagates).
///
/// The winning tap is the same for a whole channel run, so the channel loop is a branch-free
/// select against loop-invariant values and vectorises (storing the input index instead, formed
/// per channel in 64-bit arithmetic, kept it scalar: 3.5–8 ns per output entry).
///
/// # Shapes
/// `x`: `[B, H·W·C]`; output `[B, H_out·W_out·C]` and the same shape of taps.
pub fn max_pool(x: ArrayView2<'_, f32>, g: &Window) -> (Array2<f32>, Array2<u32>) {
    let batch = x.nrows();
    let c = g.channels;
    let out_len = g.positions() * c;
    let mut out = Array2::<f32>::zeros((batch, out_len));
    let mut arg = Array2::<u32>::zeros((batch, out_len));
    out.axis_iter_mut(Axis(0))
        .into_par_iter()
        .zip(arg.axis_iter_mut(Axis(0)).into_par_iter())
        .zip(x.axis_iter(Axis(0)).into_par_iter())
        .for_each(|((mut oi, mut ai), xi)| {
            let (Some(oi), Some(ai)) = (oi.as_slice_mut(), ai.as_slice_mut()) else {
                unreachable!("rows of a fresh array are contiguous")
            };
            let xi = row_slice(xi);
            for (o, (oo, aa)) in oi
                .chunks_exact_mut(c)
                .zip(ai.chunks_exact_mut(c))
                .enumerate()
            {
                let (oh, ow) = (o / g.out_width, o % g.out_width);
                let first = (oh * g.stride * g.width + ow * g.stride) * c;
                oo.copy_from_slice(&xi[first..first + c]);
                aa.fill(0);
                for ki in 0..g.kernel {
                    for kj in 0..g.kernel {
                        if ki == 0 && kj == 0 {
                            continue;
                        }
                        let tap = (ki * g.kernel + kj) as u32;
                        let src = ((oh * g.stride + ki) * g.width + ow * g.stride + kj) * c;
                        for ((cur, a), &v) in
                            oo.iter_mut().zip(aa.iter_mut()).zip(&xi[src..src + c])
                        {
                            // All-ones where v wins; blended with bit operations, which
                            // vectorise on the baseline target (selects became per-lane stores).
                            let take = 0u32.wrapping_sub(((v > *cur) | v.is_nan()) as u32);
                            *cur = f32::from_bits((cur.to_bits() & !take) | (v.to_bits() & take));
                            *a = (*a & !take) | (tap & take);
                        }
                    }
                }
            }
        });
    (out, arg)
}

/// A row as a slice (borrowed when contiguous).
fn row_slice<'a>(xi: ndarray::ArrayView1<'a, f32>) -> std::borrow::Cow<'a, [f32]> {
    match xi.to_slice() {
        Some(s) => std::borrow::Cow::Borrowed(s),
        None => std::borrow::Cow::Owned(xi.to_vec()),
    }
}

/// Backward of [`max_pool`]: route each output gradient to its winning input entry.
pub fn max_pool_backward(dout: ArrayView2<'_, f32>, arg: &Array2<u32>, g: &Window) -> Array2<f32> {
    let batch = dout.nrows();
    let c = g.channels;
    let mut dx = Array2::<f32>::zeros((batch, g.in_len()));
    // Each tap's offset from the window's corner, so the loop below divides nothing.
    let offsets: Vec<usize> = (0..g.kernel * g.kernel)
        .map(|t| ((t / g.kernel) * g.width + t % g.kernel) * c)
        .collect();
    dx.axis_iter_mut(Axis(0))
        .into_par_iter()
        .zip(dout.axis_iter(Axis(0)).into_par_iter())
        .zip(arg.axis_iter(Axis(0)).into_par_iter())
        .for_each(|((mut dxi, di), ai)| {
            let Some(dxi) = dxi.as_slice_mut() else {
                unreachable!("rows of a fresh array are contiguous")
            };
            let di = row_slice(di);
            let ai = ai
                .as_slice()
                .map_or_else(|| ai.to_vec().into(), std::borrow::Cow::Borrowed);
            for (o, (ds, taps)) in di.chunks_exact(c).zip(ai.chunks_exact(c)).enumerate() {
                let (oh, ow) = (o / g.out_width, o % g.out_width);
                let corner = (oh * g.stride * g.width + ow * g.stride) * c;
                for (ch, (&d, &tap)) in ds.iter().zip(taps).enumerate() {
                    dxi[corner + offsets[tap as usize] + ch] += d;
                }
            }
        });
    dx
}

/// Average pooling (windows inside the image; no padding).
pub fn avg_pool(x: ArrayView2<'_, f32>, g: &Window) -> Array2<f32> {
    let batch = x.nrows();
    let c = g.channels;
    let scale = 1.0 / (g.kernel * g.kernel) as f32;
    let mut out = Array2::<f32>::zeros((batch, g.positions() * c));
    out.axis_iter_mut(Axis(0))
        .into_par_iter()
        .zip(x.axis_iter(Axis(0)).into_par_iter())
        .for_each(|(mut oi, xi)| {
            let Some(oi) = oi.as_slice_mut() else {
                unreachable!("rows of a fresh array are contiguous")
            };
            let xi = row_slice(xi);
            for oh in 0..g.out_height {
                for ow in 0..g.out_width {
                    let o = (oh * g.out_width + ow) * c;
                    let oo = &mut oi[o..o + c];
                    for ki in 0..g.kernel {
                        for kj in 0..g.kernel {
                            let src = ((oh * g.stride + ki) * g.width + ow * g.stride + kj) * c;
                            for (d, s) in oo.iter_mut().zip(&xi[src..src + c]) {
                                *d += *s;
                            }
                        }
                    }
                    oo.iter_mut().for_each(|v| *v *= scale);
                }
            }
        });
    out
}

/// Backward of [`avg_pool`].
pub fn avg_pool_backward(dout: ArrayView2<'_, f32>, g: &Window) -> Array2<f32> {
    let batch = dout.nrows();
    let c = g.channels;
    let scale = 1.0 / (g.kernel * g.kernel) as f32;
    let mut dx = Array2::<f32>::zeros((batch, g.in_len()));
    dx.axis_iter_mut(Axis(0))
        .into_par_iter()
        .zip(dout.axis_iter(Axis(0)).into_par_iter())
        .for_each(|(mut dxi, di)| {
            let Some(dxi) = dxi.as_slice_mut() else {
                unreachable!("rows of a fresh array are contiguous")
            };
            let di = row_slice(di);
            for oh in 0..g.out_height {
                for ow in 0..g.out_width {
                    let o = (oh * g.out_width + ow) * c;
                    let dd = &di[o..o + c];
                    for ki in 0..g.kernel {
                        for kj in 0..g.kernel {
                            let dst = ((oh * g.stride + ki) * g.width + ow * g.stride + kj) * c;
                            for (x, d) in dxi[dst..dst + c].iter_mut().zip(dd) {
                                *x += *d * scale;
                            }
                        }
                    }
                }
            }
        });
    dx
}

/// Channel-major `[C, H, W]` rows to channels-last `[H, W, C]` rows.
pub fn chw_to_hwc(x: ArrayView2<'_, f32>, c: usize, h: usize, w: usize) -> Array2<f32> {
    let mut out = Array2::<f32>::zeros(x.raw_dim());
    permute_rows(x, out.view_mut(), |src| {
        // src indexes CHW; return the HWC index.
        let ch = src / (h * w);
        let pix = src % (h * w);
        pix * c + ch
    });
    out
}

/// Channels-last `[H, W, C]` rows to channel-major `[C, H, W]` rows (PyTorch's flatten order).
pub fn hwc_to_chw(x: ArrayView2<'_, f32>, c: usize, h: usize, w: usize) -> Array2<f32> {
    let mut out = Array2::<f32>::zeros(x.raw_dim());
    permute_rows(x, out.view_mut(), |src| {
        // src indexes HWC; return the CHW index.
        let pix = src / c;
        let ch = src % c;
        ch * (h * w) + pix
    });
    out
}

fn permute_rows(
    x: ArrayView2<'_, f32>,
    mut out: ArrayViewMut2<'_, f32>,
    dst_of: impl Fn(usize) -> usize + Sync,
) {
    out.axis_iter_mut(Axis(0))
        .into_par_iter()
        .zip(x.axis_iter(Axis(0)).into_par_iter())
        .for_each(|(mut oi, xi)| {
            let Some(oi) = oi.as_slice_mut() else {
                unreachable!("rows of a fresh array are contiguous")
            };
            for (src, v) in row_slice(xi).iter().enumerate() {
                oi[dst_of(src)] = *v;
            }
        });
}

/// Apply an activation in place.
pub fn activate(f: Activation, x: &mut Array2<f32>) {
    match f {
        Activation::Relu => map_inplace(x, |v| v.max(0.0)),
        Activation::Tanh => map_inplace(x, fast_tanh),
        Activation::Sigmoid => map_inplace(x, sigmoid),
    }
}

/// Multiply `d` in place by the activation's derivative, written in terms of its output `y`:
/// relu' = \[y > 0\], tanh' = 1 − y², sigmoid' = y (1 − y).
pub fn activation_backward(f: Activation, y: ArrayView2<'_, f32>, d: &mut Array2<f32>) {
    match f {
        Activation::Relu => zip_inplace(d, y, |d, y| if y > 0.0 { d } else { 0.0 }),
        Activation::Tanh => zip_inplace(d, y, |d, y| d * (1.0 - y * y)),
        Activation::Sigmoid => zip_inplace(d, y, |d, y| d * y * (1.0 - y)),
    }
}

/// Elements per parallel task of the element-wise kernels (independent of the thread count; the
/// result does not depend on it either, each element being computed alone).
const ELEMENTWISE_CHUNK: usize = 1 << 14;

/// `x[i] ← op(x[i])`, over contiguous chunks in parallel, vectorised for the widest registers the
/// CPU has.
fn map_inplace(x: &mut Array2<f32>, op: impl Fn(f32) -> f32 + Send + Sync + Copy) {
    #[inline(always)]
    fn run(v: &mut [f32], op: impl Fn(f32) -> f32) {
        v.iter_mut().for_each(|e| *e = op(*e));
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn run_avx512(v: &mut [f32], op: impl Fn(f32) -> f32) {
        run(v, op)
    }
    let Some(v) = x.as_slice_memory_order_mut() else {
        x.par_mapv_inplace(op);
        return;
    };
    v.par_chunks_mut(ELEMENTWISE_CHUNK).for_each(|c| {
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::avx512_available() {
            // SAFETY: the CPU supports AVX-512F (checked just above).
            unsafe { run_avx512(c, op) };
            return;
        }
        run(c, op)
    });
}

/// `d[i] ← op(d[i], y[i])` (same shapes), as [`map_inplace`].
fn zip_inplace(
    d: &mut Array2<f32>,
    y: ArrayView2<'_, f32>,
    op: impl Fn(f32, f32) -> f32 + Send + Sync + Copy,
) {
    #[inline(always)]
    fn run(d: &mut [f32], y: &[f32], op: impl Fn(f32, f32) -> f32) {
        d.iter_mut().zip(y).for_each(|(a, &b)| *a = op(*a, b));
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn run_avx512(d: &mut [f32], y: &[f32], op: impl Fn(f32, f32) -> f32) {
        run(d, y, op)
    }
    assert_eq!(d.dim(), y.dim(), "activation_backward: shapes differ");
    let (Some(dv), Some(yv)) = (d.as_slice_mut(), y.as_slice()) else {
        d.zip_mut_with(&y, |a, &b| *a = op(*a, b));
        return;
    };
    dv.par_chunks_mut(ELEMENTWISE_CHUNK)
        .zip(yv.par_chunks(ELEMENTWISE_CHUNK))
        .for_each(|(dc, yc)| {
            #[cfg(target_arch = "x86_64")]
            if crate::cpu::avx512_available() {
                // SAFETY: the CPU supports AVX-512F (checked just above).
                unsafe { run_avx512(dc, yc, op) };
                return;
            }
            run(dc, yc, op)
        });
}

/// tanh in f32 by the odd rational approximation p(x)/q(x) of degrees 13/6 used by Eigen
/// (`generic_fast_tanh_float`), with the input clamped to ±7.9053 (where tanh rounds to ±1 in
/// f32) and tanh(x) = x below |x| < 4e-4. Branch-free, so it vectorises; max absolute error
/// about 4e-7, i.e. a few f32 ulps near ±1 (tested against f64 `tanh` on a grid in this file). NaN propagates.
pub fn fast_tanh(x: f32) -> f32 {
    const CLAMP: f32 = 7.905_311;
    const A: [f32; 7] = [
        4.893_524_6e-3,
        6.372_619_3e-4,
        1.485_722_4e-5,
        5.122_297e-8,
        -8.604_672e-11,
        2.000_188e-13,
        -2.760_768_5e-16,
    ];
    const B: [f32; 4] = [4.893_525e-3, 2.268_434_6e-3, 1.185_347_1e-4, 1.198_258_4e-6];
    let c = x.clamp(-CLAMP, CLAMP);
    let x2 = c * c;
    let mut p = A[6];
    for &a in A[..6].iter().rev() {
        p = p * x2 + a;
    }
    p *= c;
    let mut q = B[3];
    for &b in B[..3].iter().rev() {
        q = q * x2 + b;
    }
    if x.abs() < 4e-4 { x } else { p / q }
}

/// The logistic function, stable for large |x|.
pub fn sigmoid(x: f32) -> f32 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_builds_of_the_activations_give_the_portable_bits() {
        // 40,000 values over the range the kernels see, plus the special ones; enough for several
        // parallel chunks and a ragged last one.
        let mut vals: Vec<f32> = (0..40_000)
            .map(|i| ((i as f32) * 0.000_37 - 7.4) * if i % 3 == 0 { 3.0 } else { 1.0 })
            .collect();
        vals.extend([0.0, -0.0, 1e-30, -3e-4, 5e-4, 7.9, -8.0, 40.0, f32::NAN]);
        let n = vals.len();
        let x = Array2::from_shape_vec((1, n), vals.clone()).unwrap();
        let y = x.mapv(|v| 0.9 * fast_tanh(v));
        let same =
            |a: &Array2<f32>, b: &[f32]| a.iter().zip(b).all(|(p, q)| p.to_bits() == q.to_bits());
        for f in [Activation::Relu, Activation::Tanh, Activation::Sigmoid] {
            let op = |v: f32| match f {
                Activation::Relu => v.max(0.0),
                Activation::Tanh => fast_tanh(v),
                Activation::Sigmoid => sigmoid(v),
            };
            let mut got = x.clone();
            activate(f, &mut got);
            let want: Vec<f32> = vals.iter().map(|&v| op(v)).collect();
            assert!(same(&got, &want), "{f:?} forward");
            let dop = |d: f32, y: f32| match f {
                Activation::Relu => {
                    if y > 0.0 {
                        d
                    } else {
                        0.0
                    }
                }
                Activation::Tanh => d * (1.0 - y * y),
                Activation::Sigmoid => d * y * (1.0 - y),
            };
            let mut d = x.clone();
            activation_backward(f, y.view(), &mut d);
            let want: Vec<f32> = vals
                .iter()
                .zip(y.iter())
                .map(|(&d, &y)| dop(d, y))
                .collect();
            assert!(same(&d, &want), "{f:?} backward");
        }
    }

    #[test]
    fn fast_tanh_is_within_5e7_of_tanh() {
        // Reference: f64 tanh. numpy (f32 arithmetic, no FMA) measured 3.9e-7 on a similar grid;
        // 5e-7 allows for FMA contraction (about 4 ulps of f32 near ±1).
        let mut worst = 0.0f64;
        for i in -200_000..=200_000 {
            let x = i as f32 * 4.5e-5;
            worst = worst.max((fast_tanh(x) as f64 - (x as f64).tanh()).abs());
        }
        for x in [-1e30f32, -20.0, 20.0, 1e30] {
            worst = worst.max((fast_tanh(x) as f64 - (x as f64).tanh()).abs());
        }
        assert!(worst < 5e-7, "max error {worst}");
        assert!(fast_tanh(f32::NAN).is_nan());
    }

    #[test]
    fn valid_taps_clip_to_the_image() {
        // width 5, kernel 3, padding 1, stride 1: output column 0 reads input −1..2 → taps 1..3;
        // column 4 reads 3..6 → taps 0..2.
        let g = Window {
            channels: 1,
            height: 5,
            width: 5,
            kernel: 3,
            stride: 1,
            padding: 1,
            out_height: 5,
            out_width: 5,
        };
        assert_eq!(g.valid_taps(0), (1, 3));
        assert_eq!(g.valid_taps(2), (0, 3));
        assert_eq!(g.valid_taps(4), (0, 2));
    }
}
