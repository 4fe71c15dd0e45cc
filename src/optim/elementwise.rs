//! Element-wise passes over the parameter vector and the vectors beside it (the released gradient,
//! an optimizer's state): the loops of every update rule and of the update's division and
//! finiteness check (`train::update`).
//!
//! Part of the optimizer room. Each pass runs over contiguous slices, in chunks of
//! [`PAR_MIN_PARAMS`] on the rayon pool from [`PAR_MIN_PARAMS`] elements on, in two halves from
//! [`SPLIT_MIN`] (on this thread below), and each chunk is compiled for AVX-512 where the CPU has
//! it. The wide code performs the same operations in the same order on every element as the
//! portable one: Rust never fuses a multiply and an add, and IEEE division, square root and
//! f64 → f32 conversion round the same in any register width. So the bits depend neither on the
//! CPU nor on the thread count (tested).
//!
//! Why: the build targets the x86-64 baseline, whose vectors hold two f64. Measured on one AMD
//! EPYC core (2026-11-29, mlp_mnist's 669,706 parameters): the update of a step (division,
//! check, SGD) took 0.63–0.68 ms compiled for the baseline and 0.35–0.37 ms for the machine's own
//! CPU (`results/bench/README.md`).

use rayon::prelude::*;

use super::PAR_MIN_PARAMS;

/// Calls `$run` on one chunk, or `$wide`, the same generic function compiled for AVX-512F, where
/// the CPU has it. `$run` is `#[inline(always)]`, so its body and the caller's closure are compiled
/// inside `$wide`.
macro_rules! dispatch {
    ($run:ident, $wide:ident ( $($arg:expr),* )) => {{
        #[cfg(target_arch = "x86_64")]
        {
            if crate::cpu::avx512_available() {
                // SAFETY: the CPU supports AVX-512F (checked just above).
                unsafe { $wide($($arg),*) }
            } else {
                $run($($arg),*)
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            $run($($arg),*)
        }
    }};
}

/// Shortest pass cut into two halves (below [`PAR_MIN_PARAMS`]), so that a second core shares it:
/// a logistic regression's 7,850 parameters take about 4 µs on one core, on which the pool's other
/// worker would otherwise wait.
pub(crate) const SPLIT_MIN: usize = 1 << 12;

/// The elements per task of a pass over `n`: [`PAR_MIN_PARAMS`] from there on, two halves from
/// [`SPLIT_MIN`], else all of them (one task, on this thread).
fn chunk_len(n: usize) -> usize {
    if n >= PAR_MIN_PARAMS {
        PAR_MIN_PARAMS
    } else if n >= SPLIT_MIN {
        n.div_ceil(2)
    } else {
        n.max(1)
    }
}

/// `f(a_i)` for every i, and whether it returned true for all.
pub(crate) fn all_map(a: &mut [f64], f: impl Fn(&mut f64) -> bool + Sync + Send + Copy) -> bool {
    #[inline(always)]
    fn run(a: &mut [f64], f: impl Fn(&mut f64) -> bool) -> bool {
        a.iter_mut().fold(true, |ok, x| ok & f(x))
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn wide_run(a: &mut [f64], f: impl Fn(&mut f64) -> bool) -> bool {
        run(a, f)
    }
    let chunk = chunk_len(a.len());
    if chunk < a.len() {
        a.par_chunks_mut(chunk)
            .map(|c| dispatch!(run, wide_run(c, f)))
            .reduce(|| true, |x, y| x & y)
    } else {
        dispatch!(run, wide_run(a, f))
    }
}

/// `f(a_i, b_i)` for every i.
pub(crate) fn each2<A: Send, B: Sync>(a: &mut [A], b: &[B], f: impl Fn(&mut A, &B) + Sync + Copy) {
    assert_eq!(
        a.len(),
        b.len(),
        "element-wise pass over vectors of different lengths"
    );
    #[inline(always)]
    fn run<A, B>(a: &mut [A], b: &[B], f: impl Fn(&mut A, &B)) {
        a.iter_mut().zip(b).for_each(|(x, y)| f(x, y));
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn wide_run<A, B>(a: &mut [A], b: &[B], f: impl Fn(&mut A, &B)) {
        run(a, b, f)
    }
    let chunk = chunk_len(a.len());
    if chunk < a.len() {
        a.par_chunks_mut(chunk)
            .zip(b.par_chunks(chunk))
            .for_each(|(a, b)| dispatch!(run, wide_run(a, b, f)));
    } else {
        dispatch!(run, wide_run(a, b, f))
    }
}

/// `f(a_i, b_i, c_i)` for every i.
pub(crate) fn each3<A: Send, B: Sync, C: Send>(
    a: &mut [A],
    b: &[B],
    c: &mut [C],
    f: impl Fn(&mut A, &B, &mut C) + Sync + Copy,
) {
    assert!(
        a.len() == b.len() && a.len() == c.len(),
        "element-wise pass over vectors of different lengths"
    );
    #[inline(always)]
    fn run<A, B, C>(a: &mut [A], b: &[B], c: &mut [C], f: impl Fn(&mut A, &B, &mut C)) {
        a.iter_mut()
            .zip(b)
            .zip(c.iter_mut())
            .for_each(|((x, y), z)| f(x, y, z));
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn wide_run<A, B, C>(a: &mut [A], b: &[B], c: &mut [C], f: impl Fn(&mut A, &B, &mut C)) {
        run(a, b, c, f)
    }
    let chunk = chunk_len(a.len());
    if chunk < a.len() {
        a.par_chunks_mut(chunk)
            .zip(b.par_chunks(chunk))
            .zip(c.par_chunks_mut(chunk))
            .for_each(|((a, b), c)| dispatch!(run, wide_run(a, b, c, f)));
    } else {
        dispatch!(run, wide_run(a, b, c, f))
    }
}

/// `f(a_i, b_i, c_i, d_i)` for every i.
pub(crate) fn each4<A: Send, B: Sync, C: Send, D: Send>(
    a: &mut [A],
    b: &[B],
    c: &mut [C],
    d: &mut [D],
    f: impl Fn(&mut A, &B, &mut C, &mut D) + Sync + Copy,
) {
    assert!(
        a.len() == b.len() && a.len() == c.len() && a.len() == d.len(),
        "element-wise pass over vectors of different lengths"
    );
    #[inline(always)]
    fn run<A, B, C, D>(
        a: &mut [A],
        b: &[B],
        c: &mut [C],
        d: &mut [D],
        f: impl Fn(&mut A, &B, &mut C, &mut D),
    ) {
        a.iter_mut()
            .zip(b)
            .zip(c.iter_mut().zip(d.iter_mut()))
            .for_each(|((x, y), (z, w))| f(x, y, z, w));
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn wide_run<A, B, C, D>(
        a: &mut [A],
        b: &[B],
        c: &mut [C],
        d: &mut [D],
        f: impl Fn(&mut A, &B, &mut C, &mut D),
    ) {
        run(a, b, c, d, f)
    }
    let chunk = chunk_len(a.len());
    if chunk < a.len() {
        a.par_chunks_mut(chunk)
            .zip(b.par_chunks(chunk))
            .zip(c.par_chunks_mut(chunk))
            .zip(d.par_chunks_mut(chunk))
            .for_each(|(((a, b), c), d)| dispatch!(run, wide_run(a, b, c, d, f)));
    } else {
        dispatch!(run, wide_run(a, b, c, d, f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values with every kind of f64 the rules meet: ordinary, tiny, huge, zero, non-finite.
    fn values(n: usize, seed: u64) -> Vec<f64> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                match i % 97 {
                    0 => 1e-310,
                    1 => 3e38,
                    2 => -0.0,
                    _ => ((x >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 8.0,
                }
            })
            .collect()
    }

    /// The wide, chunked, parallel passes give the bits of a plain serial loop, on one and two
    /// threads, below and above the parallel threshold.
    #[test]
    fn every_pass_gives_the_serial_loops_bits() {
        for n in [5, 1000, SPLIT_MIN + 3, PAR_MIN_PARAMS + 1234] {
            let g = values(n, 1);
            let p0: Vec<f32> = values(n, 2).iter().map(|&v| v as f32).collect();
            let m0 = values(n, 3);
            let v0: Vec<f64> = values(n, 4).iter().map(|v| v * v).collect();
            let rule = |p: &mut f32, g: &f64, m: &mut f64, v: &mut f64| {
                *m = 0.9 * *m + 0.1 * g;
                *v = 0.999 * *v + 0.001 * g * g;
                *p = (*p as f64 - 0.01 * *m / (v.sqrt() + 1e-8)) as f32;
            };
            let (mut pe, mut me, mut ve) = (p0.clone(), m0.clone(), v0.clone());
            for i in 0..n {
                rule(&mut pe[i], &g[i], &mut me[i], &mut ve[i]);
            }
            let mut de = g.clone();
            let okd = de.iter_mut().fold(true, |ok, x| {
                *x /= 3.0;
                ok & x.is_finite()
            });
            for threads in [1, 2] {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                pool.install(|| {
                    let (mut p, mut m, mut v) = (p0.clone(), m0.clone(), v0.clone());
                    each4(&mut p, &g, &mut m, &mut v, rule);
                    let bits32 = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                    let bits64 = |x: &[f64]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits32(&p), bits32(&pe), "each4, n = {n}, {threads} threads");
                    assert_eq!(bits64(&m), bits64(&me));
                    assert_eq!(bits64(&v), bits64(&ve));

                    let mut p3 = p0.clone();
                    let mut m3 = m0.clone();
                    each3(&mut p3, &g, &mut m3, |p, g, m| {
                        *m = 0.9 * *m + 0.1 * g;
                        *p = (*p as f64 - 0.01 * *m) as f32;
                    });
                    let mut p3e = p0.clone();
                    let mut m3e = m0.clone();
                    for i in 0..n {
                        m3e[i] = 0.9 * m3e[i] + 0.1 * g[i];
                        p3e[i] = (p3e[i] as f64 - 0.01 * m3e[i]) as f32;
                    }
                    assert_eq!(bits32(&p3), bits32(&p3e), "each3, n = {n}");
                    assert_eq!(bits64(&m3), bits64(&m3e));

                    let mut p2 = p0.clone();
                    each2(&mut p2, &g, |p, g| *p = (*p as f64 - 0.37 * g) as f32);
                    let p2e: Vec<f32> = p0
                        .iter()
                        .zip(&g)
                        .map(|(&p, g)| (p as f64 - 0.37 * g) as f32)
                        .collect();
                    assert_eq!(bits32(&p2), bits32(&p2e), "each2, n = {n}");

                    let mut d = g.clone();
                    let ok = all_map(&mut d, |x| {
                        *x /= 3.0;
                        x.is_finite()
                    });
                    assert_eq!(ok, okd);
                    assert_eq!(bits64(&d), bits64(&de), "all_map, n = {n}");
                });
            }
        }
    }

    #[test]
    fn all_map_finds_one_non_finite_value_anywhere() {
        for n in [7, SPLIT_MIN * 3, PAR_MIN_PARAMS * 2 + 5] {
            for at in [0, n / 2, n - 1] {
                let mut a = vec![1.0; n];
                a[at] = f64::MAX;
                // MAX · 2 overflows to +inf at `at` only.
                assert!(!all_map(&mut a, |x| {
                    *x *= 2.0;
                    x.is_finite()
                }));
                assert_eq!(a[at], f64::INFINITY);
                assert!(a.iter().enumerate().all(|(i, &v)| i == at || v == 2.0));
            }
        }
    }
}
