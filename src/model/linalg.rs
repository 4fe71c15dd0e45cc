//! Matrix products for the model room: `C = A·B + β·C` on f32 views, on the calling thread
//! ([`gemm_serial`]) or shared out on the current rayon pool ([`gemm()`]), the product into
//! uninitialised memory ([`gemm_serial_uninit`]) for outputs that are written whole (no memset of
//! arrays that are overwritten at once), and a cache-blocked transpose ([`transposed`]) for
//! right-hand sides the backend would otherwise pack on one thread.
//!
//! Part of the model room. The backend is the `gemm` crate (pure Rust, run-time dispatch to
//! AVX-512/AVX2/FMA kernels, packing skipped where it does not pay), chosen by measurement over
//! ndarray's `matrixmultiply`: on the convolution shapes dpx multiplies (`[B·L, K] × [K, C_out]`
//! with C_out = 16…128, per-example `[K, L] × [L, C_out]`) it ran 1.5–2.6× faster on one core,
//! and equal on the dense layers (`results/bench/README.md`).
//!
//! Determinism: the backend's parallel loops share out tiles of the output, never the reduction
//! dimension, and its blocking of the reduction (`kc`) depends only on the shapes and the cache
//! sizes, not on the number of threads; so every output element is the same sequence of
//! multiply-adds whatever the pool size (tested here and in `tests/per_sample.rs`). The blocking
//! does depend on the whole product's shape, which is why callers never split a product
//! themselves by thread count. The one cut made here, of narrow products into bands of rows whose
//! count follows the shape alone (`split`), is the same on every pool.

use std::mem::MaybeUninit;

use ndarray::{Array2, ArrayView2, ArrayViewMut2};
use rayon::prelude::*;

/// A row-major copy of `aᵀ` (`[n, m]` for `a` of `[m, n]`): blocks of output rows in parallel on
/// the current pool, each transposed in 8 × 8 tiles (an AVX kernel where the CPU has it) when `a`
/// is row-major.
///
/// Why: a right-hand side given as a transposed view (a dense layer's `X·Wᵀ` with `W` stored
/// `[out, in]`) is packed by the backend on one thread. Measured on the MLP's `256 × 512 × 512`
/// product (2026-11-26, one AMD EPYC core at ~110 GFLOP/s of sgemm): 81 GFLOP/s on one thread and
/// 1.32–1.46× on two from the view, against 113 GFLOP/s and 1.90–1.95× from a row-major
/// right-hand side; with a copy made first (the `transpose` crate's, in that measurement) and
/// counted, 107 GFLOP/s and 172 GFLOP/s. The values are copied exactly, so only the backend's
/// blocking can tell the two apart.
pub fn transposed(a: ArrayView2<'_, f32>) -> Array2<f32> {
    let (m, n) = a.dim();
    let Some(src) = a.as_slice() else {
        return a.t().as_standard_layout().into_owned();
    };
    // Output rows in blocks over the current pool; each block is a cache-blocked transpose of the
    // matching columns of `a` (a copy: the same values on any thread count and either path).
    const ROWS: usize = 64;
    let mut out = Array2::<f32>::uninit((n, m));
    let Some(dst) = out.as_slice_mut() else {
        unreachable!("a fresh array is contiguous")
    };
    if m > 0 {
        dst.par_chunks_mut(ROWS * m)
            .enumerate()
            .for_each(|(b, block)| transpose_rows(src, (m, n), b * ROWS, block));
    }
    // SAFETY: every element of every output row was written above (rows·m of them per block).
    unsafe { out.assume_init() }
}

/// Output rows `j0..j0 + block.len() / m` of `aᵀ` from `src`, `a` row-major `[m, n]`: 8 × 8
/// tiles in column strips of [`TILE`] source rows, on the fastest path this CPU has.
fn transpose_rows(src: &[f32], (m, n): (usize, usize), j0: usize, block: &mut [MaybeUninit<f32>]) {
    let rows = block.len() / m;
    assert!(src.len() == m * n && j0 + rows <= n && block.len() == rows * m);
    #[cfg(target_arch = "x86_64")]
    if crate::cpu::avx_available() {
        // SAFETY: the CPU supports AVX (checked just above); the bounds are asserted above.
        unsafe { transpose_rows_avx(src, (m, n), j0, block) };
        return;
    }
    // SAFETY: the bounds are asserted above.
    unsafe { transpose_rows_portable(src, (m, n), j0, block) };
}

/// Source rows per strip of [`transpose_rows`]. Measured with the source just written (in L3, as
/// after an update) on the MLP's `512 × 784` and `512 × 512` weights, AMD EPYC, 2026-11-29: strips
/// of 64 rows took 230 + 150 µs on one thread against 290–310 + 180–200 µs for strips of 32
/// (medians of 54; 8 and 16 were slower still).
const TILE: usize = 64;

/// The loop of [`transpose_rows`], with `$tile` the 8 × 8 kernel: `$tile(s, n, d, m)` reads
/// `s[r·n + c]` and writes `d[c·m + r]` for r, c < 8.
macro_rules! transpose_rows_with {
    ($src:ident, $m:ident, $n:ident, $j0:ident, $block:ident, $tile:ident) => {{
        let s = $src.as_ptr();
        let d = $block.as_mut_ptr().cast::<f32>();
        let rows = $block.len() / $m;
        for i0 in (0..$m).step_by(TILE) {
            let i1 = (i0 + TILE).min($m);
            let mut jj = 0;
            while jj + 8 <= rows {
                let j = $j0 + jj;
                let mut i = i0;
                while i + 8 <= i1 {
                    $tile(s.add(i * $n + j), $n, d.add(jj * $m + i), $m);
                    i += 8;
                }
                for c in 0..8 {
                    for ii in i..i1 {
                        *d.add((jj + c) * $m + ii) = *s.add(ii * $n + j + c);
                    }
                }
                jj += 8;
            }
            for jj in jj..rows {
                let j = $j0 + jj;
                for ii in i0..i1 {
                    *d.add(jj * $m + ii) = *s.add(ii * $n + j);
                }
            }
        }
    }};
}

/// # Safety
/// `src` holds `m · n` floats, `j0 + block.len() / m ≤ n` and `block.len()` is a multiple of `m`.
unsafe fn transpose_rows_portable(
    src: &[f32],
    (m, n): (usize, usize),
    j0: usize,
    block: &mut [MaybeUninit<f32>],
) {
    #[inline(always)]
    unsafe fn tile(s: *const f32, n: usize, d: *mut f32, m: usize) {
        let mut t = [[0.0f32; 8]; 8];
        for (r, row) in t.iter_mut().enumerate() {
            // SAFETY: the caller's tile lies inside `src` (eight contiguous floats per row).
            unsafe { std::ptr::copy_nonoverlapping(s.add(r * n), row.as_mut_ptr(), 8) };
        }
        for c in 0..8 {
            for (r, row) in t.iter().enumerate() {
                // SAFETY: the caller's tile lies inside the block.
                unsafe { *d.add(c * m + r) = row[c] };
            }
        }
    }
    // SAFETY: the caller's bounds keep every tile and every remainder inside `src` and `block`.
    unsafe { transpose_rows_with!(src, m, n, j0, block, tile) }
}

/// [`transpose_rows_portable`] with an AVX 8 × 8 kernel (unpack, shuffle, lane permute).
///
/// # Safety
/// As [`transpose_rows_portable`], and the CPU supports AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn transpose_rows_avx(
    src: &[f32],
    (m, n): (usize, usize),
    j0: usize,
    block: &mut [MaybeUninit<f32>],
) {
    use std::arch::x86_64::*;
    #[inline]
    #[target_feature(enable = "avx")]
    unsafe fn tile(s: *const f32, n: usize, d: *mut f32, m: usize) {
        // SAFETY: the caller's tile lies inside `src` and the block (eight floats per row).
        unsafe {
            let r0 = _mm256_loadu_ps(s);
            let r1 = _mm256_loadu_ps(s.add(n));
            let r2 = _mm256_loadu_ps(s.add(2 * n));
            let r3 = _mm256_loadu_ps(s.add(3 * n));
            let r4 = _mm256_loadu_ps(s.add(4 * n));
            let r5 = _mm256_loadu_ps(s.add(5 * n));
            let r6 = _mm256_loadu_ps(s.add(6 * n));
            let r7 = _mm256_loadu_ps(s.add(7 * n));
            let t0 = _mm256_unpacklo_ps(r0, r1);
            let t1 = _mm256_unpackhi_ps(r0, r1);
            let t2 = _mm256_unpacklo_ps(r2, r3);
            let t3 = _mm256_unpackhi_ps(r2, r3);
            let t4 = _mm256_unpacklo_ps(r4, r5);
            let t5 = _mm256_unpackhi_ps(r4, r5);
            let t6 = _mm256_unpacklo_ps(r6, r7);
            let t7 = _mm256_unpackhi_ps(r6, r7);
            let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
            let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
            let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
            let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
            let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
            let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
            let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
            let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
            _mm256_storeu_ps(d, _mm256_permute2f128_ps::<0x20>(s0, s4));
            _mm256_storeu_ps(d.add(m), _mm256_permute2f128_ps::<0x20>(s1, s5));
            _mm256_storeu_ps(d.add(2 * m), _mm256_permute2f128_ps::<0x20>(s2, s6));
            _mm256_storeu_ps(d.add(3 * m), _mm256_permute2f128_ps::<0x20>(s3, s7));
            _mm256_storeu_ps(d.add(4 * m), _mm256_permute2f128_ps::<0x31>(s0, s4));
            _mm256_storeu_ps(d.add(5 * m), _mm256_permute2f128_ps::<0x31>(s1, s5));
            _mm256_storeu_ps(d.add(6 * m), _mm256_permute2f128_ps::<0x31>(s2, s6));
            _mm256_storeu_ps(d.add(7 * m), _mm256_permute2f128_ps::<0x31>(s3, s7));
        }
    }
    // SAFETY: the caller's bounds keep every tile and every remainder inside `src` and `block`.
    unsafe { transpose_rows_with!(src, m, n, j0, block, tile) }
}

/// `c ← a·b + beta·c` on the calling thread.
///
/// # Shapes
/// `a`: `[m, k]`, `b`: `[k, n]`, `c`: `[m, n]` (any strides; transposed views are fine).
pub fn gemm_serial(
    a: ArrayView2<'_, f32>,
    b: ArrayView2<'_, f32>,
    beta: f32,
    c: ArrayViewMut2<'_, f32>,
) {
    product(a, b, beta, c, false);
}

/// `c ← a·b + beta·c` on the current rayon pool: narrow products in bands of rows (`split`),
/// the rest with the backend's own parallel loops.
///
/// # Shapes
/// `a`: `[m, k]`, `b`: `[k, n]`, `c`: `[m, n]` (any strides; transposed views are fine).
pub fn gemm(a: ArrayView2<'_, f32>, b: ArrayView2<'_, f32>, beta: f32, c: ArrayViewMut2<'_, f32>) {
    product(a, b, beta, c, true);
}

/// `c ← a·b` on the calling thread, into uninitialised memory; returns `c`, now initialised.
/// The same operations (and bits) as [`gemm_serial`] with `beta = 0`.
///
/// # Shapes
/// `a`: `[m, k]`, `b`: `[k, n]`, `c`: `[m, n]` (any strides).
pub fn gemm_serial_uninit<'c>(
    a: ArrayView2<'_, f32>,
    b: ArrayView2<'_, f32>,
    c: ArrayViewMut2<'c, MaybeUninit<f32>>,
) -> ArrayViewMut2<'c, f32> {
    product_uninit(a, b, c, false)
}

/// [`gemm_serial_uninit`] with the backend's own parallel loops on the current rayon pool (as
/// [`gemm()`]).
pub fn gemm_uninit<'c>(
    a: ArrayView2<'_, f32>,
    b: ArrayView2<'_, f32>,
    c: ArrayViewMut2<'c, MaybeUninit<f32>>,
) -> ArrayViewMut2<'c, f32> {
    product_uninit(a, b, c, true)
}

/// `c ← a·b` into uninitialised memory, shared out on the current pool when `cut` (as [`gemm`]).
fn product_uninit<'c>(
    a: ArrayView2<'_, f32>,
    b: ArrayView2<'_, f32>,
    mut c: ArrayViewMut2<'c, MaybeUninit<f32>>,
    cut: bool,
) -> ArrayViewMut2<'c, f32> {
    let (m, k) = a.dim();
    let n = b.ncols();
    assert_eq!(b.nrows(), k, "gemm: inner dimensions differ");
    assert_eq!(c.dim(), (m, n), "gemm: output shape");
    if m > 0 && n > 0 && k == 0 {
        c.iter_mut().for_each(|v| {
            v.write(0.0);
        });
    } else if m > 0 && n > 0 {
        let strides = [c.strides()[0], c.strides()[1]];
        // SAFETY: `c` is valid for its shape and strides and borrowed mutably; with `beta` 0 the
        // backend writes every element and never reads one, so uninitialised memory is never read.
        unsafe { backend_split(a, b, 0.0, c.as_mut_ptr().cast::<f32>(), strides, cut) };
    }
    // SAFETY: every element was written above (an empty view has none).
    unsafe { c.assume_init() }
}

/// `c ← a·b + beta·c`, shared out on the current pool when `cut` (as [`gemm`]), else on the calling thread.
fn product(
    a: ArrayView2<'_, f32>,
    b: ArrayView2<'_, f32>,
    beta: f32,
    mut c: ArrayViewMut2<'_, f32>,
    cut: bool,
) {
    let (m, k) = a.dim();
    let n = b.ncols();
    assert_eq!(b.nrows(), k, "gemm: inner dimensions differ");
    assert_eq!(c.dim(), (m, n), "gemm: output shape");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        c.mapv_inplace(|v| if beta == 0.0 { 0.0 } else { beta * v });
        return;
    }
    let strides = [c.strides()[0], c.strides()[1]];
    // SAFETY: `c` is valid for its shape and strides and borrowed mutably.
    unsafe { backend_split(a, b, beta, c.as_mut_ptr(), strides, cut) };
}

/// Fewest multiply-adds a product must have before it is cut into bands: smaller ones cost more
/// in task hand-offs than a second core gains on them.
const SPLIT_MIN_MACS: usize = 1 << 18;

/// Widest output cut into bands: products at least this wide are left to the backend's own
/// parallel loops.
const SPLIT_MAX_COLUMNS: usize = 16;

/// Fewest output rows one band gets: each band packs the whole right-hand side again.
const SPLIT_MIN_ROWS: usize = 128;

/// Most bands a product is cut into.
const SPLIT_MAX_BANDS: usize = 8;

/// The bands of rows [`gemm`] cuts a narrow `[m, k] × [k, n]` product into (each band one serial
/// product, the bands in parallel on the pool), or `None` to leave the product to the backend's
/// own parallel loops. A function of the shape only, never of the thread count: the backend forms
/// an element's sum differently for different band heights (a 64-row band of a
/// `256 × 784 × 10` product differs in the last bit from the whole), so only a cut that is the
/// same on every pool gives the same bits on every pool.
///
/// Why narrow products only: measured on two AMD EPYC cores (2026-11-28,
/// `results/bench/README.md`), the backend's parallel loops made the logistic regression's
/// `256 × 784 × 10` product slower on two threads than on one, where two bands of 128 rows took
/// it from 0.10 to 0.07 ms. On the wide products of the MLP the bands gained nothing over the
/// backend's loops in the full step, and bands of columns lost (the clipped sum `[10 × 256] ·
/// [256 × 784]` went from 0.043 to 0.072 ms on one thread), so neither is cut.
fn split(m: usize, n: usize, k: usize) -> Option<usize> {
    if n >= SPLIT_MAX_COLUMNS || m.saturating_mul(n).saturating_mul(k) < SPLIT_MIN_MACS {
        return None;
    }
    let bands = (m / SPLIT_MIN_ROWS).min(SPLIT_MAX_BANDS);
    (bands >= 2).then_some(bands)
}

/// The backend's `dst ← beta·dst + a·b`: with `cut` and a narrow product, in the bands of rows of
/// [`split`], one serial product per band, the bands in parallel on the current pool; otherwise
/// whole, with the backend's own parallel loops when `cut` (on the pool's threads) and on the
/// calling thread when not. The same bits on any pool: the bands depend on the shape only, and
/// the backend's loops share out tiles of the output, never the reduction (module doc).
///
/// # Safety
/// As [`backend`].
unsafe fn backend_split(
    a: ArrayView2<'_, f32>,
    b: ArrayView2<'_, f32>,
    beta: f32,
    c: *mut f32,
    c_strides: [isize; 2],
    cut: bool,
) {
    let (m, k) = a.dim();
    let n = b.ncols();
    let threads = if cut { rayon::current_num_threads() } else { 1 };
    let Some(bands) = split(m, n, k).filter(|_| cut) else {
        // SAFETY: as the caller promises.
        unsafe { backend(a, b, beta, c, c_strides, threads) };
        return;
    };
    // The destination's address, shared by bands that write disjoint rows of it.
    let dst = c as usize;
    (0..bands).into_par_iter().for_each(|band| {
        let rows = band * m / bands..(band + 1) * m / bands;
        let offset = rows.start as isize * c_strides[0];
        // SAFETY: the band's destination starts at its first row of `c` and covers only its
        // rows, inside `c` and disjoint from every other band's; `a` is a view of the caller's.
        unsafe {
            backend(
                a.slice(ndarray::s![rows, ..]),
                b,
                beta,
                (dst as *mut f32).offset(offset),
                c_strides,
                1,
            )
        };
    });
}

/// The backend's `dst ← beta·dst + a·b` (`dst` read only when `beta` ≠ 0) on `threads` threads of
/// the current pool (1: the calling thread), for non-empty shapes.
///
/// # Safety
/// `c` must point to an `[a.nrows(), b.ncols()]` matrix with row and column strides `c_strides`,
/// valid for writes (and for reads when `beta` ≠ 0) and aliasing neither `a` nor `b`.
unsafe fn backend(
    a: ArrayView2<'_, f32>,
    b: ArrayView2<'_, f32>,
    beta: f32,
    c: *mut f32,
    c_strides: [isize; 2],
    threads: usize,
) {
    let (m, k) = a.dim();
    let n = b.ncols();
    let parallelism = if threads > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    let [a_rs, a_cs] = [a.strides()[0], a.strides()[1]];
    let [b_rs, b_cs] = [b.strides()[0], b.strides()[1]];
    let [c_rs, c_cs] = c_strides;
    // SAFETY: `a` and `b` are valid for their shapes and strides (ndarray guarantees it), `c` as
    // the caller promises; every index the backend forms is `row·rs + col·cs` with row < rows and
    // col < cols of the matrix it reads or writes. The backend computes
    // dst ← alpha·dst + beta·lhs·rhs, reading dst only when `read_dst`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c,
            c_cs,
            c_rs,
            beta != 0.0,
            a.as_ptr(),
            a_cs,
            a_rs,
            b.as_ptr(),
            b_cs,
            b_rs,
            beta,
            1.0,
            false,
            false,
            false,
            parallelism,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;

    fn naive(a: &Array2<f32>, b: &Array2<f32>) -> Array2<f64> {
        let (m, k) = a.dim();
        let n = b.ncols();
        Array2::from_shape_fn((m, n), |(i, j)| {
            (0..k).map(|l| a[[i, l]] as f64 * b[[l, j]] as f64).sum()
        })
    }

    fn filled(m: usize, n: usize, salt: usize) -> Array2<f32> {
        Array2::from_shape_fn((m, n), |(i, j)| {
            (((i * 31 + j * 17 + salt) % 23) as f32 - 11.0) / 7.0
        })
    }

    #[test]
    fn transposed_copies_every_element() {
        for &(m, n) in &[(1, 1), (3, 5), (8, 8), (64, 17), (130, 257), (512, 784)] {
            let a = filled(m, n, 4);
            let t = transposed(a.view());
            assert!(t.is_standard_layout());
            assert_eq!(t.view(), a.t(), "{m}x{n}");
            // A view that is not row-major takes the general path.
            let back = transposed(t.t());
            assert_eq!(back, t, "{m}x{n} from a transposed view");
            // The portable kernel gives the same copy as the one this CPU chose.
            let src = a.as_slice().expect("a fresh array is contiguous");
            let mut out = Array2::<f32>::uninit((n, m));
            let block = out.as_slice_mut().expect("a fresh array is contiguous");
            // SAFETY: `src` is `[m, n]` row-major and `block` all `n` output rows.
            unsafe { transpose_rows_portable(src, (m, n), 0, block) };
            // SAFETY: the kernel wrote all `n · m` elements.
            assert_eq!(unsafe { out.assume_init() }, t, "{m}x{n}, portable kernel");
        }
    }

    #[test]
    fn uninit_product_equals_the_beta_zero_product() {
        for &(m, k, n) in &[(1, 1, 1), (3, 0, 2), (130, 40, 7), (9, 300, 140)] {
            let a = filled(m, k, 1);
            let b = filled(k, n, 2);
            let mut want = filled(m, n, 3);
            gemm_serial(a.view(), b.view(), 0.0, want.view_mut());
            let mut c = Array2::<f32>::uninit((m, n));
            let got = gemm_serial_uninit(a.view(), b.view(), c.view_mut()).to_owned();
            assert_eq!(got, want, "{m}x{k}x{n}");
            // A transposed (column-major) destination.
            let mut ct = Array2::<f32>::uninit((n, m));
            let got_t = gemm_serial_uninit(a.view(), b.view(), ct.view_mut().reversed_axes());
            assert_eq!(got_t, want.view(), "{m}x{k}x{n} transposed");
        }
    }

    #[test]
    fn cut_products_give_the_same_bits_on_every_pool() {
        // Inner dimensions below and well above the backend's reduction block, transposed operands
        // and a transposed destination.
        for &(m, k, n) in &[(256, 784, 10), (1100, 300, 15), (257, 2100, 3)] {
            assert!(split(m, n, k).is_some(), "{m}x{k}x{n} is cut");
            let a = filled(m, k, 5);
            let at = a.t().to_owned();
            let b = filled(k, n, 6);
            let c0 = filled(m, n, 7);
            for (av, beta) in [(a.view(), 0.0f32), (at.t(), 1.0), (a.view(), 0.5)] {
                let on = |threads: usize, transposed_dst: bool| -> Array2<f32> {
                    let pool = rayon::ThreadPoolBuilder::new()
                        .num_threads(threads)
                        .build()
                        .unwrap();
                    pool.install(|| {
                        if transposed_dst {
                            let mut ct = Array2::<f32>::uninit((n, m));
                            gemm_uninit(av, b.view(), ct.view_mut().reversed_axes()).to_owned()
                        } else {
                            let mut c = c0.clone();
                            gemm(av, b.view(), beta, c.view_mut());
                            c
                        }
                    })
                };
                let bits = |c: &Array2<f32>| c.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                let one = bits(&on(1, false));
                let one_t = bits(&on(1, true));
                for threads in [2, 3, 8] {
                    assert_eq!(
                        bits(&on(threads, false)),
                        one,
                        "{m}x{k}x{n} beta {beta}, {threads} threads"
                    );
                    assert_eq!(
                        bits(&on(threads, true)),
                        one_t,
                        "{m}x{k}x{n} transposed destination"
                    );
                }
            }
        }
        assert_eq!(split(32, 10, 32), None, "too small to share");
        assert_eq!(split(200, 10, 3000), None, "a band would be under 128 rows");
        assert_eq!(split(256, 512, 784), None, "wide: the backend's own loops");
        assert_eq!(split(4096, 10, 784), Some(8), "at most 8 bands");
    }

    #[test]
    fn products_match_a_naive_sum_for_all_layouts_and_beta() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        for &(m, k, n) in &[
            (1, 1, 1),
            (3, 5, 2),
            (130, 40, 7),
            (9, 300, 140),
            (200, 17, 200),
            (300, 1100, 260),
        ] {
            let a = filled(m, k, 1);
            let b = filled(k, n, 2);
            let c0 = filled(m, n, 3);
            let want = naive(&a, &b);
            let at = a.t().to_owned(); // [k, m] row-major: at.t() is `a` with swapped strides
            let bt = b.t().to_owned();
            for beta in [0.0f32, 1.0, 0.5] {
                for (av, bv) in [
                    (a.view(), b.view()),
                    (at.t(), b.view()),
                    (a.view(), bt.t()),
                    (at.t(), bt.t()),
                ] {
                    let mut c = c0.clone();
                    pool.install(|| gemm(av, bv, beta, c.view_mut()));
                    let mut s = c0.clone();
                    one.install(|| gemm(av, bv, beta, s.view_mut()));
                    for ((i, j), &v) in c.indexed_iter() {
                        let expect = want[[i, j]] + beta as f64 * c0[[i, j]] as f64;
                        assert!(
                            (v as f64 - expect).abs() <= 1e-4 * (1.0 + expect.abs()),
                            "({m},{k},{n}) beta {beta}: {v} vs {expect}"
                        );
                        assert_eq!(v.to_bits(), s[[i, j]].to_bits(), "3 threads = 1");
                    }
                }
            }
        }
    }

    #[test]
    fn a_transposed_output_view_is_written_in_place() {
        let a = filled(70, 90, 4);
        let b = filled(90, 150, 5);
        let mut ct = Array2::<f32>::zeros((150, 70));
        gemm(a.view(), b.view(), 0.0, ct.view_mut().reversed_axes());
        let want = naive(&a, &b);
        for ((j, i), &v) in ct.indexed_iter() {
            assert!((v as f64 - want[[i, j]]).abs() <= 1e-4 * (1.0 + want[[i, j]].abs()));
        }
    }

    #[test]
    fn empty_inner_dimension_scales_the_output() {
        let a = Array2::<f32>::zeros((3, 0));
        let b = Array2::<f32>::zeros((0, 4));
        let mut c = Array2::<f32>::from_elem((3, 4), 2.0);
        gemm(a.view(), b.view(), 0.5, c.view_mut());
        assert!(c.iter().all(|&v| v == 1.0));
        gemm(a.view(), b.view(), 0.0, c.view_mut());
        assert!(c.iter().all(|&v| v == 0.0));
    }
}
