//! The reductions of per-sample gradients (room: `model`): sums of squares, weighted sums of
//! rows, bias sums, and the widening of f32 results to f64.
//!
//! Numerics: squared norms are accumulated in f64 (32 lanes, f32 within blocks of 256 values,
//! summed at the end by a fixed pairwise tree); weighted sums are f32 products (weights rounded
//! toward zero to f32 so no example's weight grows) returned as f64. Every function performs the
//! same operations in the same order whatever the thread count, and its AVX-512 build the same
//! operations as its portable form, so results are the same bits on every machine.

use std::mem::MaybeUninit;
use std::ops::Range;

use ndarray::{Array1, Array2, ArrayView2, Axis};
use rayon::prelude::*;

#[cfg(target_arch = "x86_64")]
use crate::cpu::avx512_available;

/// Fewest elements (`[B, units]`) of a layer's output or delta for which its row passes run on the
/// pool: the row scaling of the clipped sum here, and a dense layer's bias rows and bias sum. Below
/// it (a logistic regression's `256 × 10`) the hand-offs cost more than the work (measured on
/// logreg_mnist, 2026-11-29).
pub(crate) const PAR_MIN_OUTPUTS: usize = 1 << 16;

/// out[range] ← Σ_i w_i rows[i] (f64, examples in order), split over output blocks only; every
/// element of `out[range]` is written (zeros for no rows), none is read before.
pub(crate) fn weighted_rows_sum(
    out: &mut [MaybeUninit<f64>],
    range: &Range<usize>,
    rows: ArrayView2<'_, f32>,
    w: &[f32],
) {
    let out = &mut out[range.clone()];
    const BLOCK: usize = 4096;
    out.par_chunks_mut(BLOCK)
        .enumerate()
        .for_each(|(b, chunk)| {
            #[cfg(target_arch = "x86_64")]
            if avx512_available() {
                // SAFETY: the CPU supports AVX-512F (checked just above).
                unsafe { block_sum_avx512(chunk, b * BLOCK, rows, w) };
                return;
            }
            block_sum(chunk, b * BLOCK, rows, w)
        });
}

/// One output block of [`weighted_rows_sum`] (columns `start..start + chunk.len()`): f32 partial
/// sums over 16 examples at a time, widened to f64 between blocks. The first block's sums are
/// written as `0.0 + a` (what adding them to a zeroed output gave), the later ones added.
#[inline(always)]
fn block_sum(chunk: &mut [MaybeUninit<f64>], start: usize, rows: ArrayView2<'_, f32>, w: &[f32]) {
    if rows.nrows() == 0 {
        chunk.fill(MaybeUninit::new(0.0));
        return;
    }
    let mut acc = vec![0.0f32; chunk.len()];
    for (block_index, block) in rows.axis_chunks_iter(Axis(0), 16).enumerate() {
        acc.iter_mut().for_each(|a| *a = 0.0);
        for (j, row) in block.rows().into_iter().enumerate() {
            let wi = w[block_index * 16 + j];
            let src = row.slice(ndarray::s![start..start + chunk.len()]);
            let Some(src) = src.as_slice() else {
                unreachable!("rows of a fresh array are contiguous")
            };
            for (a, &v) in acc.iter_mut().zip(src) {
                *a += wi * v;
            }
        }
        if block_index == 0 {
            for (o, &a) in chunk.iter_mut().zip(&acc) {
                *o = MaybeUninit::new(0.0 + a as f64);
            }
        } else {
            for (o, &a) in chunk.iter_mut().zip(&acc) {
                // SAFETY: the first block wrote every element of `chunk`.
                let v = unsafe { o.assume_init() };
                *o = MaybeUninit::new(v + a as f64);
            }
        }
    }
}

/// [`block_sum`] compiled for AVX-512F (same operations, same bits).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn block_sum_avx512(
    chunk: &mut [MaybeUninit<f64>],
    start: usize,
    rows: ArrayView2<'_, f32>,
    w: &[f32],
) {
    block_sum(chunk, start, rows, w)
}

/// Σ v² with f32 partial sums over blocks of 256, accumulated in f64 (vectorisable; relative
/// error ~1e-7·√256 per block).
///
/// 32 independent lanes (enough accumulator chains to hide the add latency on the baseline x86-64
/// target): lane j holds the squares of positions ≡ j mod 32, in f32 within a block and in f64
/// across blocks; the 32 lanes are summed once at the end by a fixed pairwise tree. The order
/// depends only on the length, never on the thread count. (Summing the lanes into one f64 chain
/// after every block was latency-bound: 14% of a logreg_mnist DP step.)
pub(crate) fn sum_squares_slice(v: &[f32]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512_available() {
            // SAFETY: the CPU supports AVX-512F (checked at run time just above).
            return unsafe { sum_squares_avx512(v) };
        }
    }
    sum_squares_lanes(v)
}

/// [`sum_squares_lanes`] with AVX-512F intrinsics: the same lanes, the same operations in the
/// same order (a multiply then an add, never fused), so the same bits; the 32 f32 lanes are two
/// registers and the 32 f64 lanes four. (LLVM does not vectorise the portable form well: it
/// spills the lanes.)
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn sum_squares_avx512(v: &[f32]) -> f64 {
    use std::arch::x86_64::*;
    let mut wide = [_mm512_setzero_pd(); 4];
    for block in v.chunks(256) {
        let (mut a0, mut a1) = (_mm512_setzero_ps(), _mm512_setzero_ps());
        let mut it = block.chunks_exact(32);
        for c in &mut it {
            // SAFETY: `c` holds exactly 32 f32, read as two unaligned 16-lane loads.
            let (x0, x1) = unsafe {
                (
                    _mm512_loadu_ps(c.as_ptr()),
                    _mm512_loadu_ps(c.as_ptr().add(16)),
                )
            };
            a0 = _mm512_add_ps(a0, _mm512_mul_ps(x0, x0));
            a1 = _mm512_add_ps(a1, _mm512_mul_ps(x1, x1));
        }
        let rest = it.remainder();
        if !rest.is_empty() {
            // Masked-off lanes load +0.0, and adding +0.0 to a sum of squares changes no bit.
            // (Copying the tail to a padded buffer stalled on store forwarding.)
            let n = rest.len();
            let m0: __mmask16 = if n >= 16 { 0xffff } else { (1u16 << n) - 1 };
            // SAFETY: the mask covers only the first min(n, 16) elements of `rest`.
            let x0 = unsafe { _mm512_maskz_loadu_ps(m0, rest.as_ptr()) };
            a0 = _mm512_add_ps(a0, _mm512_mul_ps(x0, x0));
            if n > 16 {
                let m1: __mmask16 = (1u16 << (n - 16)) - 1;
                // SAFETY: n − 16 < 16 elements follow rest[16].
                let x1 = unsafe { _mm512_maskz_loadu_ps(m1, rest.as_ptr().add(16)) };
                a1 = _mm512_add_ps(a1, _mm512_mul_ps(x1, x1));
            }
        }
        for (j, a) in [a0, a1].into_iter().enumerate() {
            let lo = _mm512_castps512_ps256(a);
            let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));
            wide[2 * j] = _mm512_add_pd(wide[2 * j], _mm512_cvtps_pd(lo));
            wide[2 * j + 1] = _mm512_add_pd(wide[2 * j + 1], _mm512_cvtps_pd(hi));
        }
    }
    let mut lanes = [0.0f64; 32];
    for (j, w) in wide.into_iter().enumerate() {
        // SAFETY: `lanes[8j..8j + 8]` holds 8 f64.
        unsafe { _mm512_storeu_pd(lanes.as_mut_ptr().add(8 * j), w) };
    }
    pairwise_sum_32(lanes)
}

/// Σ of 32 lanes by a fixed pairwise tree (lane j + lane j + 16, then + 8, + 4, + 2, + 1).
#[inline(always)]
fn pairwise_sum_32(mut wide: [f64; 32]) -> f64 {
    let mut width = 16;
    while width > 0 {
        let (lo, hi) = wide.split_at_mut(width);
        for (a, &b) in lo.iter_mut().zip(&hi[..width]) {
            *a += b;
        }
        width /= 2;
    }
    wide[0]
}

/// The portable form of [`sum_squares_slice`] (the reference every faster path must equal).
fn sum_squares_lanes(v: &[f32]) -> f64 {
    const LANES: usize = 32;
    let mut wide = [0.0f64; LANES];
    for block in v.chunks(256) {
        let mut lanes = [0.0f32; LANES];
        let mut it = block.chunks_exact(LANES);
        for c in &mut it {
            for (l, &x) in lanes.iter_mut().zip(c) {
                *l += x * x;
            }
        }
        for (l, &x) in lanes.iter_mut().zip(it.remainder()) {
            *l += x * x;
        }
        for (w, &l) in wide.iter_mut().zip(&lanes) {
            *w += l as f64;
        }
    }
    pairwise_sum_32(wide)
}

pub(crate) fn sum_squares(it: impl Iterator<Item = f32>) -> f64 {
    it.map(|v| (v as f64) * (v as f64)).sum()
}

/// Rows of `delta` times their example's weight (`rows_per_example` rows per example);
/// `None` when there are no weights (all ones).
pub(crate) fn scale_rows(
    delta: ArrayView2<'_, f32>,
    weights: Option<&[f32]>,
    rows_per_example: usize,
) -> Option<Array2<f32>> {
    let w = weights?;
    if delta.len() < PAR_MIN_OUTPUTS {
        // Small (a logistic regression's `[256, 10]`): a copy, then the products, on this thread
        // (a hand-off to the pool cost more than the 2,560 products: 7.7 against 3.1 µs on two
        // AMD EPYC cores).
        let mut out = delta.to_owned();
        out.axis_chunks_iter_mut(Axis(0), rows_per_example)
            .zip(w)
            .for_each(|(mut block, &wi)| block.mapv_inplace(|v| v * wi));
        return Some(out);
    }
    // One pass on the pool: each row block written as v · w_i straight from `delta` (no serial
    // copy first; the same products, so the same bits).
    let mut out = Array2::<f32>::uninit(delta.dim());
    out.axis_chunks_iter_mut(Axis(0), rows_per_example)
        .into_par_iter()
        .zip(
            delta
                .axis_chunks_iter(Axis(0), rows_per_example)
                .into_par_iter(),
        )
        .zip(w.par_iter())
        .for_each(|((mut block, src), &wi)| {
            block.zip_mut_with(&src, |o, &v| *o = std::mem::MaybeUninit::new(v * wi));
        });
    // SAFETY: the row blocks cover every row and each element of a block was written above.
    Some(unsafe { out.assume_init() })
}

/// out[range] ← g (flattened row-major), widened to f64, in blocks over the current pool (an
/// elementwise copy, so the same bits on any thread count); writes every element of the range.
pub(crate) fn write_f64(out: &mut [MaybeUninit<f64>], range: &Range<usize>, g: &Array2<f32>) {
    #[inline(always)]
    fn widen(out: &mut [MaybeUninit<f64>], g: &[f32]) {
        out.iter_mut()
            .zip(g)
            .for_each(|(o, &v)| *o = MaybeUninit::new(v as f64));
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn widen_avx512(out: &mut [MaybeUninit<f64>], g: &[f32]) {
        widen(out, g)
    }
    let o = &mut out[range.clone()];
    assert_eq!(o.len(), g.len(), "a layer writes exactly its own range");
    let Some(g) = g.as_slice() else {
        for (o, &v) in o.iter_mut().zip(g.iter()) {
            *o = MaybeUninit::new(v as f64);
        }
        return;
    };
    const BLOCK: usize = 1 << 15;
    o.par_chunks_mut(BLOCK)
        .zip(g.par_chunks(BLOCK))
        .for_each(|(o, g)| {
            #[cfg(target_arch = "x86_64")]
            if avx512_available() {
                // SAFETY: the CPU supports AVX-512F (checked just above).
                unsafe { widen_avx512(o, g) };
                return;
            }
            widen(o, g)
        });
}

/// `slice` as the f64 values it now holds.
///
/// # Safety
/// Every element of `slice` has been written.
pub(crate) unsafe fn assume_written(slice: &mut [MaybeUninit<f64>]) -> &mut [f64] {
    // SAFETY: `MaybeUninit<f64>` has the layout of `f64`, and the caller guarantees every element
    // is initialised.
    unsafe { &mut *(slice as *mut [MaybeUninit<f64>] as *mut [f64]) }
}

/// out[range] ← values (as many as the range is long).
pub(crate) fn assign(out: &mut [MaybeUninit<f64>], range: &Range<usize>, values: &[f64]) {
    let o = &mut out[range.clone()];
    assert_eq!(
        o.len(),
        values.len(),
        "a layer writes exactly its own range"
    );
    for (o, &v) in o.iter_mut().zip(values) {
        *o = MaybeUninit::new(v);
    }
}

/// A `[n]` f64 array whose `covered` ranges `write` fills (each element of them written once, as
/// the layers' weighted sums do, none read before) and whose other elements are zero. The covered
/// part is never zero-filled first: for a dense network that is the whole `[P]` sum, a 2% memset
/// of the MLP's step.
///
/// Debug builds fill the covered part with a NaN of a payload no arithmetic produces and check
/// afterwards that `write` left none of it, so a layer that skips part of its range fails the
/// tests instead of reading uninitialised memory.
pub(crate) fn written_sum(
    n: usize,
    covered: &[Range<usize>],
    write: impl FnOnce(&mut [MaybeUninit<f64>]),
) -> Array1<f64> {
    let mut out = Array1::<f64>::uninit(n);
    let Some(slice) = out.as_slice_mut() else {
        unreachable!("a fresh array is contiguous")
    };
    let mut sorted = covered.to_vec();
    sorted.sort_by_key(|r| r.start);
    let mut next = 0;
    for r in &sorted {
        assert!(
            r.start >= next && r.end <= n,
            "covered ranges overlap or overrun"
        );
        zero_f64(&mut slice[next..r.start]);
        next = r.end;
    }
    zero_f64(&mut slice[next..]);
    if cfg!(debug_assertions) {
        for r in &sorted {
            slice[r.clone()].fill(MaybeUninit::new(f64::from_bits(UNWRITTEN)));
        }
    }
    write(slice);
    if cfg!(debug_assertions) {
        for r in &sorted {
            for (i, v) in slice[r.clone()].iter().enumerate() {
                // SAFETY: debug builds initialised every covered element above.
                let bits = unsafe { v.assume_init() }.to_bits();
                assert!(
                    bits != UNWRITTEN,
                    "element {} of the sum was not written",
                    r.start + i
                );
            }
        }
    }
    // SAFETY: the uncovered elements were zeroed above and `write` wrote every covered one (its
    // contract, checked in debug builds).
    unsafe { out.assume_init() }
}

/// The debug fill of [`written_sum`]: a quiet NaN with a payload no operation here produces.
const UNWRITTEN: u64 = 0x7ff8_dead_beef_0001;

/// Zeros, in blocks over the current pool.
fn zero_f64(slice: &mut [MaybeUninit<f64>]) {
    slice
        .par_chunks_mut(1 << 15)
        .for_each(|c| c.fill(MaybeUninit::new(0.0)));
}

/// out[bias] ← Σ_i w_i Σ_{rows of i} δ (f64): [`bias_acc`] written into `range`.
pub(crate) fn bias_sum(
    out: &mut [MaybeUninit<f64>],
    range: &Range<usize>,
    delta: ArrayView2<'_, f32>,
    rows_per_example: usize,
    weights: Option<&[f64]>,
) {
    assign(out, range, &bias_acc(delta, rows_per_example, weights));
}

/// Σ_i w_i Σ_{rows of i} δ in f64, rows in order on the calling thread (`[C]`, all weights 1
/// when `None`).
pub(crate) fn bias_acc(
    delta: ArrayView2<'_, f32>,
    rows_per_example: usize,
    weights: Option<&[f64]>,
) -> Vec<f64> {
    let c = delta.ncols();
    let mut acc = vec![0.0f64; c];
    for (i, block) in delta
        .axis_chunks_iter(Axis(0), rows_per_example.max(1))
        .enumerate()
    {
        let wi = weights.map_or(1.0, |w| w[i]);
        match block.as_slice() {
            Some(rows) => accumulate_rows(&mut acc, rows, wi),
            None => {
                for r in block.rows() {
                    for (a, &v) in acc.iter_mut().zip(r.iter()) {
                        *a += wi * v as f64;
                    }
                }
            }
        }
    }
    acc
}

/// out[bias] ← Σ_i w_i b_i from the per-example bias gradients `b` `[B, C_out]` (f64, examples in
/// order; all weights 1 when `None`).
pub(crate) fn weighted_bias_sum(
    out: &mut [MaybeUninit<f64>],
    range: &Range<usize>,
    b: ArrayView2<'_, f64>,
    weights: Option<&[f64]>,
) {
    let mut acc = vec![0.0f64; b.ncols()];
    for (i, row) in b.rows().into_iter().enumerate() {
        let wi = weights.map_or(1.0, |w| w[i]);
        for (a, &v) in acc.iter_mut().zip(row.iter()) {
            *a += wi * v;
        }
    }
    assign(out, range, &acc);
}

/// acc[j] += w · rows[r·C + j] over the rows of a row-major `[R, C]` slice (C = acc.len()), rows
/// in order, in f64: the bias gradients' sums. Vectorised across j (AVX-512 where the CPU has it;
/// the same operations in the same order, so the same bits).
pub(crate) fn accumulate_rows(acc: &mut [f64], rows: &[f32], w: f64) {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512_available() {
            // SAFETY: the CPU supports AVX-512F (checked at run time just above).
            unsafe { accumulate_rows_avx512(acc, rows, w) };
            return;
        }
    }
    accumulate_rows_portable(acc, rows, w);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn accumulate_rows_avx512(acc: &mut [f64], rows: &[f32], w: f64) {
    accumulate_rows_portable(acc, rows, w);
}

#[inline(always)]
fn accumulate_rows_portable(acc: &mut [f64], rows: &[f32], w: f64) {
    if acc.is_empty() {
        return;
    }
    for r in rows.chunks_exact(acc.len()) {
        for (a, &v) in acc.iter_mut().zip(r) {
            *a += w * v as f64;
        }
    }
}

/// `w` as f32, rounded toward zero so |result| ≤ |w| (a clipping weight never grows).
pub(crate) fn toward_zero_f32(w: f64) -> f32 {
    let v = w as f32;
    if v != 0.0 && (v as f64).abs() > w.abs() {
        f32::from_bits(v.to_bits() - 1)
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaled_rows_are_the_elementwise_products_on_both_paths() {
        for (rows, cols, per) in [(256, 10, 1), (256, 512, 1), (64, 2048, 4)] {
            let delta = Array2::from_shape_fn((rows, cols), |(i, j)| {
                ((i * 31 + j * 17) % 29) as f32 * 0.1 - 1.4
            });
            let w: Vec<f32> = (0..rows / per).map(|i| 0.25 + i as f32 * 0.01).collect();
            let scaled = scale_rows(delta.view(), Some(&w), per).expect("weights were given");
            let expected = Array2::from_shape_fn((rows, cols), |(i, j)| delta[[i, j]] * w[i / per]);
            assert_eq!(scaled, expected, "{rows}x{cols}, {per} rows per example");
        }
        assert!(scale_rows(Array2::<f32>::zeros((3, 3)).view(), None, 1).is_none());
    }

    #[test]
    fn a_written_sum_zeroes_what_no_layer_covers() {
        let sum = written_sum(10, &[5..8, 1..3], |out| {
            assign(out, &(1..3), &[1.0, 2.0]);
            assign(out, &(5..8), &[5.0, 6.0, 7.0]);
        });
        assert_eq!(
            sum.to_vec(),
            [0.0, 1.0, 2.0, 0.0, 0.0, 5.0, 6.0, 7.0, 0.0, 0.0]
        );
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "element 6 of the sum was not written")]
    fn a_layer_that_skips_part_of_its_range_fails_in_debug_builds() {
        written_sum(10, &[5..8, 9..10], |out| {
            out[5] = MaybeUninit::new(1.0);
            out[7] = MaybeUninit::new(1.0);
            out[9] = MaybeUninit::new(1.0);
        });
    }

    #[test]
    fn vector_builds_of_the_sums_give_the_portable_bits() {
        let rows = Array2::from_shape_fn((37, 1000), |(i, j)| {
            (((i * 7919 + j * 104_729) % 2003) as f32 - 1001.0) * 1e-3 * (1.0 + (j % 5) as f32)
        });
        let w: Vec<f32> = (0..37).map(|i| 1.0 / (1.0 + i as f32 * 0.3)).collect();
        let mut out = vec![MaybeUninit::new(f64::NAN); 700];
        block_sum(&mut out, 300, rows.view(), &w);
        // SAFETY: `block_sum` writes every element.
        let portable: Vec<f64> = out.iter().map(|v| unsafe { v.assume_init() }).collect();
        // What adding into a zeroed output gave: f32 sums over blocks of 16 examples, each block
        // added in f64 from 0.
        for (c, &got) in portable.iter().enumerate() {
            let mut total = 0.0f64;
            for block in 0..37usize.div_ceil(16) {
                let mut acc = 0.0f32;
                for i in block * 16..(block * 16 + 16).min(37) {
                    acc += w[i] * rows[[i, 300 + c]];
                }
                total += acc as f64;
            }
            assert_eq!(got.to_bits(), total.to_bits(), "column {c}");
        }
        let mut empty = vec![MaybeUninit::new(f64::NAN); 5];
        block_sum(&mut empty, 0, rows.slice(ndarray::s![..0, ..]), &[]);
        // SAFETY: `block_sum` writes every element.
        assert!(empty.iter().all(|v| unsafe { v.assume_init() } == 0.0));
        let mut acc_portable = vec![0.25f64; 40];
        let flat = rows.as_slice().unwrap();
        accumulate_rows_portable(&mut acc_portable, &flat[..40 * 900], 0.75);
        let mut acc = vec![0.25f64; 40];
        accumulate_rows(&mut acc, &flat[..40 * 900], 0.75);
        assert!(
            acc.iter()
                .zip(&acc_portable)
                .all(|(a, b)| a.to_bits() == b.to_bits())
        );
        #[cfg(target_arch = "x86_64")]
        if avx512_available() {
            let mut out = vec![MaybeUninit::new(f64::NAN); 700];
            // SAFETY: AVX-512F was detected.
            unsafe { block_sum_avx512(&mut out, 300, rows.view(), &w) };
            // SAFETY: `block_sum_avx512` writes every element.
            let fast: Vec<f64> = out.iter().map(|v| unsafe { v.assume_init() }).collect();
            assert!(
                fast.iter()
                    .zip(&portable)
                    .all(|(a, b)| a.to_bits() == b.to_bits())
            );
            let mut acc_fast = vec![0.25f64; 40];
            // SAFETY: AVX-512F was detected.
            unsafe { accumulate_rows_avx512(&mut acc_fast, &flat[..40 * 900], 0.75) };
            assert!(
                acc_fast
                    .iter()
                    .zip(&acc_portable)
                    .all(|(a, b)| a.to_bits() == b.to_bits())
            );
        }
    }

    #[test]
    fn sum_squares_paths_agree_bit_for_bit() {
        // Every length class: empty, under one 32-lane group, whole groups, partial blocks, many
        // blocks; values of mixed sign and magnitude.
        for len in [0usize, 1, 7, 31, 32, 33, 255, 256, 257, 784, 1000, 4099] {
            let v: Vec<f32> = (0..len)
                .map(|i| ((i as f32) * 0.37).sin() * (1.0 + (i % 13) as f32 * 10.0))
                .collect();
            let portable = sum_squares_lanes(&v);
            let exact: f64 = v.iter().map(|&x| (x as f64) * (x as f64)).sum();
            assert!(
                (portable - exact).abs() <= 1e-6 * exact.max(1e-30),
                "len {len}"
            );
            assert_eq!(
                sum_squares_slice(&v).to_bits(),
                portable.to_bits(),
                "len {len}"
            );
            #[cfg(target_arch = "x86_64")]
            if avx512_available() {
                // SAFETY: AVX-512F was detected.
                let fast = unsafe { sum_squares_avx512(&v) };
                assert_eq!(fast.to_bits(), portable.to_bits(), "len {len}");
            }
        }
    }

    #[test]
    fn weights_round_toward_zero() {
        for w in [0.1f64, 1.0 / 3.0, 0.7, -0.3, 1e-40, 1.0] {
            let v = toward_zero_f32(w);
            assert!((v as f64).abs() <= w.abs(), "{w} -> {v}");
            assert!(
                ((v as f64) - w).abs() <= w.abs() * 1.2e-7 + 1e-45,
                "{w} -> {v}"
            );
        }
    }
}
