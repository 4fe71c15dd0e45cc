//! Fast bulk standard-normal sampling for the Gaussian mechanism: a xoshiro256++ stream seeded
//! from the caller's RNG, turned into f64 normals by a 256-layer ziggurat, filled block by block
//! so the work can be spread over threads without changing a single sample.
//!
//! Part of the privacy room; owns only the sampler (it forms no noise scale: the Gaussian
//! mechanism multiplies by `noise_std`). It never imports `model` or `train`.
//!
//! - Generator: xoshiro256++ (Blackman & Vigna 2021, "Scrambled linear pseudorandom number
//!   generators", ACM TOMS 47(4)), seeded with 256 bits drawn from the caller's RNG (an all-zero
//!   seed, probability 2^-256, is replaced by a fixed non-zero one). Not cryptographic: a secure
//!   mode must not use this module.
//! - Normal transform: the ziggurat of Marsaglia & Tsang 2000 ("The ziggurat method for generating
//!   random variables", J. Stat. Softw. 5(8)) with 256 layers in Doornik's form (2005, "An
//!   improved ziggurat method to generate normal random samples"): R = 3.6541528853610088,
//!   V = 0.00492867323399; one 64-bit draw gives the layer (8 bits) and a 52-bit symmetric
//!   uniform, exact rejection in the wedges and Marsaglia's exact tail beyond R.
//! - Determinism: the output is cut into blocks of [`BLOCK`] samples (an output of [`SPLIT_MIN`]
//!   to [`BLOCK`] samples into two halves, so that two cores share it), and each block into
//!   [`LANES`] interleaved lanes; lane l of block k uses the root state advanced by `LANES·k + l`
//!   calls of xoshiro's `jump` (2^128 steps each, so no two streams overlap). The samples depend
//!   only on the caller's RNG state and the length, never on the thread count.
//! - Speed: where the CPU has AVX2 (or AVX-512VL) the four lanes advance together in one register
//!   and the ziggurat's fast test runs on four samples at once; a rejected lane is finished by the
//!   scalar code from its own state, so every path gives the scalar path's bits (tested).
//!
//! Floating-point noise leaks through low-order bits (Mironov 2012); like the mechanism that
//! calls it, this sampler does not defend against that attack.

use std::sync::OnceLock;

use rand::Rng;
use rayon::prelude::*;

/// Samples per independently seeded block (each block is one task for the thread pool).
pub const BLOCK: usize = 1 << 16;

/// Shortest output cut into two blocks. A one-block draw of `n` samples keeps one core busy for
/// about 2 ns per sample while the pool's other workers wait, and a worker left idle for a few
/// tens of microseconds goes to sleep: waking it then costs the next parallel loop about 25 µs on a
/// virtual machine. Measured on two AMD EPYC cores (2026-11-29, `results/bench/README.md`): the
/// 7,850 samples of `logreg_mnist`'s noise in one block put one sleep in every step (20,000
/// context switches in 10,000 steps, against 300–560 with two halves) and its two-thread step went
/// from 0.135–0.139 to 0.117 ms. Shorter outputs take under 8 µs, less than the hand-off saves.
pub const SPLIT_MIN: usize = 1 << 12;

/// xoshiro256++: 256 bits of state, period 2^256 − 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xoshiro256PlusPlus {
    s: [u64; 4],
}

impl Xoshiro256PlusPlus {
    /// A generator from 256 bits of seed; the all-zero state (a fixed point) is replaced by the
    /// SplitMix64 expansion of 0.
    pub fn from_state(s: [u64; 4]) -> Self {
        if s == [0; 4] {
            let mut x = 0u64;
            let mut next = || {
                x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = x;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                z ^ (z >> 31)
            };
            return Xoshiro256PlusPlus {
                s: [next(), next(), next(), next()],
            };
        }
        Xoshiro256PlusPlus { s }
    }

    /// A generator seeded with four 64-bit words drawn from `rng`.
    pub fn from_rng<R: Rng + ?Sized>(rng: &mut R) -> Self {
        Self::from_state([
            rng.next_u64(),
            rng.next_u64(),
            rng.next_u64(),
            rng.next_u64(),
        ])
    }

    /// The next 64 random bits.
    #[inline(always)]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Advance by 2^128 steps (the reference `jump` of xoshiro256++).
    pub fn jump(&mut self) {
        const JUMP: [u64; 4] = [
            0x180e_c6d3_3cfd_0aba,
            0xd5a6_1266_f0c9_392c,
            0xa958_2618_e03f_c9aa,
            0x39ab_dc45_29b1_661c,
        ];
        let mut acc = [0u64; 4];
        for word in JUMP {
            for bit in 0..64 {
                if word & (1u64 << bit) != 0 {
                    for (a, s) in acc.iter_mut().zip(self.s) {
                        *a ^= s;
                    }
                }
                self.next_u64();
            }
        }
        self.s = acc;
    }

    /// A uniform in (0, 1): 53 random bits, offset by half a step so 0 never occurs.
    #[inline(always)]
    fn open01(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) * (1.0 / (1u64 << 53) as f64)
    }

    /// One standard normal (ziggurat; see the module doc).
    #[inline(always)]
    pub fn standard_normal(&mut self) -> f64 {
        let t = tables();
        loop {
            let r = self.next_u64();
            let i = (r & 0xff) as usize;
            // 52 bits, symmetric on (−1, 1).
            let u = ((r >> 12) as f64 + 0.5) * (1.0 / (1u64 << 51) as f64) - 1.0;
            if u.abs() < t.ratio[i] {
                return u * t.x[i];
            }
            if let Some(z) = self.slow_path(i, u, t) {
                return z;
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn slow_path(&mut self, i: usize, u: f64, t: &Tables) -> Option<f64> {
        if i == 0 {
            // Tail beyond R (Marsaglia 1964): x = −ln(U1)/R, accept when −2 ln(U2) ≥ x².
            loop {
                let x = -self.open01().ln() / ZIG_R;
                let y = -self.open01().ln();
                if 2.0 * y >= x * x {
                    return Some(if u < 0.0 { -(ZIG_R + x) } else { ZIG_R + x });
                }
            }
        }
        let x = u * t.x[i];
        let f0 = (-0.5 * (t.x[i] * t.x[i] - x * x)).exp();
        let f1 = (-0.5 * (t.x[i + 1] * t.x[i + 1] - x * x)).exp();
        if f1 + self.open01() * (f0 - f1) < 1.0 {
            Some(x)
        } else {
            None
        }
    }
}

const ZIG_R: f64 = 3.654_152_885_361_009;
const ZIG_V: f64 = 0.004_928_673_233_99;

struct Tables {
    /// Layer right edges, x[0] = V / f(R) (the base layer's pseudo-width), x[1] = R, …, x[256] = 0.
    x: [f64; 257],
    /// x[i+1] / x[i]: below it, the point lies inside the layer's rectangle.
    ratio: [f64; 256],
}

fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| {
        let f = |x: f64| (-0.5 * x * x).exp();
        let mut x = [0.0f64; 257];
        x[0] = ZIG_V / f(ZIG_R);
        x[1] = ZIG_R;
        for i in 1..256 {
            let arg = ZIG_V / x[i] + f(x[i]);
            x[i + 1] = if i == 255 || arg >= 1.0 {
                0.0
            } else {
                (-2.0 * arg.ln()).sqrt()
            };
        }
        let mut ratio = [0.0f64; 256];
        for i in 0..256 {
            ratio[i] = x[i + 1] / x[i];
        }
        Tables { x, ratio }
    })
}

/// Independent generators interleaved within a block: sample j of a block comes from lane
/// j mod [`LANES`], so the lanes' dependency chains overlap in the CPU (measured 2.7 ns per sample
/// with one chain).
pub const LANES: usize = 4;

/// `out[j] += scale · z_j`, z_j i.i.d. N(0, 1), from xoshiro256++ streams seeded with 256 bits
/// drawn from `rng` (four `next_u64` calls, whatever the length). Block k of `block_len(n)` samples
/// draws sample j from lane j mod [`LANES`], whose generator is the root state advanced by
/// `LANES·k + lane` jumps of 2^128 steps (so no two lanes or blocks overlap). Blocks run in
/// parallel on the current rayon pool; the result does not depend on the thread count.
pub fn add_scaled_normals<R: Rng + ?Sized>(out: &mut [f64], scale: f64, rng: &mut R) {
    let mut s = Xoshiro256PlusPlus::from_rng(rng);
    let block = block_len(out.len());
    let blocks = out.len().div_ceil(block);
    let mut states: Vec<[Xoshiro256PlusPlus; LANES]> = Vec::with_capacity(blocks);
    for _ in 0..blocks {
        states.push(std::array::from_fn(|_| {
            let lane = s.clone();
            s.jump();
            lane
        }));
    }
    out.par_chunks_mut(block)
        .zip(states.into_par_iter())
        .for_each(|(chunk, mut lanes)| add_block(chunk, scale, &mut lanes));
}

/// The samples per block for an output of `len`: [`BLOCK`], except that an output of
/// [`SPLIT_MIN`] to [`BLOCK`] samples is cut in two halves (rounded up to whole lane groups).
fn block_len(len: usize) -> usize {
    if (SPLIT_MIN..=BLOCK).contains(&len) {
        len.div_ceil(2).next_multiple_of(LANES)
    } else {
        BLOCK
    }
}

/// One block: sample j from lane j mod [`LANES`], on the fastest path this CPU has (all paths
/// give the same bits).
fn add_block(chunk: &mut [f64], scale: f64, lanes: &mut [Xoshiro256PlusPlus; LANES]) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::cpu::avx512vl_available() {
            // SAFETY: the CPU supports AVX2, AVX-512F and AVX-512VL (checked just above).
            unsafe { add_block_avx512(chunk, scale, lanes) };
            return;
        }
        if crate::cpu::avx2_available() {
            // SAFETY: the CPU supports AVX2 (checked at run time just above).
            unsafe { add_block_avx2(chunk, scale, lanes) };
            return;
        }
    }
    add_block_scalar(chunk, scale, lanes);
}

/// The portable form of [`add_block`] (the reference the vector path must equal).
fn add_block_scalar(chunk: &mut [f64], scale: f64, lanes: &mut [Xoshiro256PlusPlus; LANES]) {
    let mut groups = chunk.chunks_exact_mut(LANES);
    for group in &mut groups {
        for (v, g) in group.iter_mut().zip(lanes.iter_mut()) {
            *v += scale * g.standard_normal();
        }
    }
    for (v, g) in groups.into_remainder().iter_mut().zip(lanes.iter_mut()) {
        *v += scale * g.standard_normal();
    }
}

/// [`add_block_scalar`] with the four lanes' generators in 256-bit registers (word w of lane l in
/// element l of register w): one xoshiro256++ step per lane, the ziggurat's fast test for four
/// samples at once (layer tables gathered by index), and the rare rejected lane finished by the
/// scalar code from the same state. Every operation is the scalar one (the 52-bit integer is
/// converted exactly by the 2^52 exponent trick; multiply and add are never fused), so the samples
/// and the lanes' final states are bit for bit those of [`add_block_scalar`] (tested).
///
/// Compiled twice from one body: for AVX2, and for AVX-512 (VL), whose 32 registers hold the
/// state without spills and whose rotate is one instruction.
macro_rules! vector_add_block {
    ($name:ident, $features:literal) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        unsafe fn $name(chunk: &mut [f64], scale: f64, lanes: &mut [Xoshiro256PlusPlus; LANES]) {
            use std::arch::x86_64::*;
            const _: () = assert!(LANES == 4, "one 256-bit register holds the four lanes");
            let t = tables();
            let word = |w: usize, lanes: &[Xoshiro256PlusPlus; LANES]| {
                _mm256_set_epi64x(
                    lanes[3].s[w] as i64,
                    lanes[2].s[w] as i64,
                    lanes[1].s[w] as i64,
                    lanes[0].s[w] as i64,
                )
            };
            let (mut s0, mut s1, mut s2, mut s3) = (
                word(0, lanes),
                word(1, lanes),
                word(2, lanes),
                word(3, lanes),
            );
            let rotl = |x: __m256i, k: i32| -> __m256i {
                // Shift counts as vectors: the immediate forms need constant arguments.
                let left = _mm256_sll_epi64(x, _mm_cvtsi32_si128(k));
                let right = _mm256_srl_epi64(x, _mm_cvtsi32_si128(64 - k));
                _mm256_or_si256(left, right)
            };
            let exponent = _mm256_set1_epi64x(0x4330_0000_0000_0000);
            let two52 = _mm256_set1_pd((1u64 << 52) as f64);
            let half = _mm256_set1_pd(0.5);
            let step = _mm256_set1_pd(1.0 / (1u64 << 51) as f64);
            let one = _mm256_set1_pd(1.0);
            let sign = _mm256_set1_pd(-0.0);
            let scale_v = _mm256_set1_pd(scale);
            let layer = _mm256_set1_epi64x(0xff);
            let mut groups = chunk.chunks_exact_mut(LANES);
            for group in &mut groups {
                // xoshiro256++ next_u64, four lanes.
                let r = _mm256_add_epi64(rotl(_mm256_add_epi64(s0, s3), 23), s0);
                let shifted = _mm256_slli_epi64(s1, 17);
                s2 = _mm256_xor_si256(s2, s0);
                s3 = _mm256_xor_si256(s3, s1);
                s1 = _mm256_xor_si256(s1, s2);
                s0 = _mm256_xor_si256(s0, s3);
                s2 = _mm256_xor_si256(s2, shifted);
                s3 = rotl(s3, 45);
                // u = ((r >> 12) as f64 + 0.5) / 2^51 − 1; the layer is r & 0xff.
                let bits = _mm256_or_si256(_mm256_srli_epi64(r, 12), exponent);
                let int = _mm256_sub_pd(_mm256_castsi256_pd(bits), two52);
                let u = _mm256_sub_pd(_mm256_mul_pd(_mm256_add_pd(int, half), step), one);
                let idx = _mm256_and_si256(r, layer);
                // Table rows by index: four scalar loads each (measured faster than AVX2 gathers).
                let mut ids_now = [0u64; 4];
                // SAFETY: `ids_now` holds four u64.
                unsafe { _mm256_storeu_si256(ids_now.as_mut_ptr().cast(), idx) };
                let [i0, i1, i2, i3] = ids_now.map(|i| i as usize & 0xff);
                let ratio = _mm256_set_pd(t.ratio[i3], t.ratio[i2], t.ratio[i1], t.ratio[i0]);
                let x = _mm256_set_pd(t.x[i3], t.x[i2], t.x[i1], t.x[i0]);
                let accept = _mm256_cmp_pd::<_CMP_LT_OQ>(_mm256_andnot_pd(sign, u), ratio);
                let z = _mm256_mul_pd(u, x);
                if _mm256_movemask_pd(accept) == 0b1111 {
                    // SAFETY: `group` holds exactly four f64.
                    unsafe {
                        let v = _mm256_loadu_pd(group.as_ptr());
                        _mm256_storeu_pd(
                            group.as_mut_ptr(),
                            _mm256_add_pd(v, _mm256_mul_pd(scale_v, z)),
                        );
                    }
                    continue;
                }
                // A lane fell outside its rectangle: finish it with the scalar code from its state.
                let mut st = [[0u64; 4]; 4];
                let (mut zs, mut us, mut ids) = ([0.0f64; 4], [0.0f64; 4], [0u64; 4]);
                let mask = _mm256_movemask_pd(accept);
                // SAFETY: each destination holds four 64-bit values.
                unsafe {
                    for (w, v) in [s0, s1, s2, s3].into_iter().enumerate() {
                        _mm256_storeu_si256(st[w].as_mut_ptr().cast(), v);
                    }
                    _mm256_storeu_pd(zs.as_mut_ptr(), z);
                    _mm256_storeu_pd(us.as_mut_ptr(), u);
                    _mm256_storeu_si256(ids.as_mut_ptr().cast(), idx);
                }
                for (l, v) in group.iter_mut().enumerate() {
                    let zl = if mask & (1 << l) != 0 {
                        zs[l]
                    } else {
                        let mut g = Xoshiro256PlusPlus {
                            s: [st[0][l], st[1][l], st[2][l], st[3][l]],
                        };
                        let zl = match g.slow_path(ids[l] as usize, us[l], t) {
                            Some(zl) => zl,
                            None => g.standard_normal(),
                        };
                        for (w, &sw) in g.s.iter().enumerate() {
                            st[w][l] = sw;
                        }
                        zl
                    };
                    *v += scale * zl;
                }
                // SAFETY: each source holds four 64-bit values.
                unsafe {
                    s0 = _mm256_loadu_si256(st[0].as_ptr().cast());
                    s1 = _mm256_loadu_si256(st[1].as_ptr().cast());
                    s2 = _mm256_loadu_si256(st[2].as_ptr().cast());
                    s3 = _mm256_loadu_si256(st[3].as_ptr().cast());
                }
            }
            let mut st = [[0u64; 4]; 4];
            // SAFETY: each destination holds four 64-bit values.
            unsafe {
                for (w, v) in [s0, s1, s2, s3].into_iter().enumerate() {
                    _mm256_storeu_si256(st[w].as_mut_ptr().cast(), v);
                }
            }
            for (l, g) in lanes.iter_mut().enumerate() {
                g.s = [st[0][l], st[1][l], st[2][l], st[3][l]];
            }
            for (v, g) in groups.into_remainder().iter_mut().zip(lanes.iter_mut()) {
                *v += scale * g.standard_normal();
            }
        }
    };
}
vector_add_block!(add_block_avx2, "avx2");
vector_add_block!(add_block_avx512, "avx2,avx512f,avx512vl");

/// `out[j] = z_j`, i.i.d. N(0, 1): the same stream as [`add_scaled_normals`] with scale 1 on
/// zeros.
pub fn fill_standard_normals<R: Rng + ?Sized>(out: &mut [f64], rng: &mut R) {
    out.iter_mut().for_each(|v| *v = 0.0);
    add_scaled_normals(out, 1.0, rng);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::privacy::special::normal_cdf;
    use rand::SeedableRng;
    use rand_chacha::ChaCha12Rng;

    #[test]
    fn xoshiro_matches_the_reference_output() {
        // Reference: xoshiro256plusplus.c (Blackman & Vigna) run from s = {1, 2, 3, 4}; the
        // first outputs are 41943041, 58720359, 3588806011781223, 3591011842654386 (the same
        // vector rand_xoshiro's test uses).
        let mut g = Xoshiro256PlusPlus::from_state([1, 2, 3, 4]);
        let expected = [
            41_943_041u64,
            58_720_359,
            3_588_806_011_781_223,
            3_591_011_842_654_386,
            9_228_616_714_210_784_205,
            9_973_669_472_204_895_162,
            14_011_001_112_246_962_877,
            12_406_186_145_184_390_807,
            15_849_039_046_786_891_736,
            10_450_023_813_501_588_000,
        ];
        for e in expected {
            assert_eq!(g.next_u64(), e);
        }
    }

    #[test]
    fn ziggurat_tables_close_at_zero() {
        // Doornik's (R, V) make the 256 layers of area V end at x = 0: x[255] is small and
        // positive, and the last layer's rectangle plus cap is V.
        let t = tables();
        assert!(t.x[255] > 0.0 && t.x[255] < 0.3, "x[255] = {}", t.x[255]);
        let top = t.x[255] * (1.0 - (-0.5 * t.x[255] * t.x[255]).exp());
        assert!((top - ZIG_V).abs() < 1e-6, "top layer area {top}");
    }

    #[test]
    fn samples_follow_the_standard_normal() {
        // 2,000,000 draws: Kolmogorov–Smirnov distance against Φ (special::normal_cdf). The 0.1%
        // critical value is 1.95/√n ≈ 0.00138; moments within 6 standard errors.
        let n = 2_000_000;
        let mut z = vec![0.0f64; n];
        fill_standard_normals(&mut z, &mut ChaCha12Rng::seed_from_u64(11));
        let mean = z.iter().sum::<f64>() / n as f64;
        let var = z.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let kurt = z.iter().map(|v| (v - mean).powi(4)).sum::<f64>() / n as f64 / (var * var);
        assert!(mean.abs() < 6.0 / (n as f64).sqrt(), "mean {mean}");
        assert!(
            (var - 1.0).abs() < 6.0 * (2.0 / n as f64).sqrt(),
            "var {var}"
        );
        assert!(
            (kurt - 3.0).abs() < 6.0 * (24.0 / n as f64).sqrt(),
            "kurt {kurt}"
        );
        z.sort_by(f64::total_cmp);
        let mut d = 0.0f64;
        for (i, &v) in z.iter().enumerate() {
            let f = normal_cdf(v);
            d = d
                .max((f - i as f64 / n as f64).abs())
                .max(((i + 1) as f64 / n as f64 - f).abs());
        }
        assert!(d < 1.95 / (n as f64).sqrt(), "KS distance {d}");
        // Tail frequency beyond R (both sides): 2·Φ(−R) = 2.58e-4, i.e. about 516 expected;
        // a 6-sigma Poisson band.
        let tail = z.iter().filter(|v| v.abs() > ZIG_R).count() as f64;
        let expect = 2.0 * normal_cdf(-ZIG_R) * n as f64;
        assert!(
            (tail - expect).abs() < 6.0 * expect.sqrt(),
            "tail {tail} vs {expect}"
        );
    }

    #[test]
    fn vector_path_equals_the_scalar_path_bit_for_bit() {
        // Lengths with and without a tail; 200,000 samples make ~2,400 rejected draws (wedges
        // and the tail beyond R), each finished by the scalar code inside the vector loop.
        for (len, seed) in [
            (0usize, 1u64),
            (3, 2),
            (4, 3),
            (7, 4),
            (4096, 5),
            (200_001, 6),
        ] {
            let root = Xoshiro256PlusPlus::from_rng(&mut ChaCha12Rng::seed_from_u64(seed));
            let mut lanes_a: [Xoshiro256PlusPlus; LANES] = std::array::from_fn(|l| {
                let mut g = root.clone();
                (0..l).for_each(|_| g.jump());
                g
            });
            let start = lanes_a.clone();
            let mut a: Vec<f64> = (0..len).map(|i| i as f64 * 0.25).collect();
            let init = a.clone();
            add_block_scalar(&mut a, 1.7, &mut lanes_a);
            type Path = fn(&mut [f64], f64, &mut [Xoshiro256PlusPlus; LANES]);
            let mut paths: Vec<(&str, Path)> = vec![("dispatch", add_block)];
            #[cfg(target_arch = "x86_64")]
            {
                if crate::cpu::avx2_available() {
                    // SAFETY (of the call below): AVX2 was detected.
                    paths.push(("avx2", |c, s, l| unsafe { add_block_avx2(c, s, l) }));
                }
                if crate::cpu::avx512vl_available() {
                    // SAFETY (of the call below): AVX2, AVX-512F and AVX-512VL were detected.
                    paths.push(("avx512", |c, s, l| unsafe { add_block_avx512(c, s, l) }));
                }
            }
            for (name, path) in paths {
                let mut lanes_b = start.clone();
                let mut b = init.clone();
                path(&mut b, 1.7, &mut lanes_b);
                assert!(
                    a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
                    "{name}, len {len}"
                );
                assert_eq!(lanes_a, lanes_b, "{name}: final states, len {len}");
            }
        }
    }

    /// `add_scaled_normals(v, scale, seed)` on `v = [start; n]`, on a pool of `threads`.
    fn draw_on(threads: usize, n: usize, start: f64, scale: f64, seed: u64) -> Vec<f64> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let mut v = vec![start; n];
            add_scaled_normals(&mut v, scale, &mut ChaCha12Rng::seed_from_u64(seed));
            v
        })
    }

    #[test]
    fn same_seed_same_noise_whatever_the_thread_count() {
        let n = 3 * BLOCK + 17;
        let draw = |threads: usize, seed: u64| draw_on(threads, n, 1.0, 2.0, seed);
        let one = draw(1, 5);
        assert_eq!(one, draw(2, 5));
        assert_eq!(one, draw(3, 5));
        assert_ne!(one, draw(1, 6));
        // Blocks are distinct streams (no block repeats the first one).
        assert_ne!(one[..100], one[BLOCK..BLOCK + 100]);
    }

    #[test]
    fn a_mid_sized_output_is_two_blocks_on_any_pool() {
        let draw = |threads: usize, n: usize| draw_on(threads, n, 0.0, 1.0, 9);
        assert_eq!(block_len(SPLIT_MIN - 1), BLOCK);
        assert_eq!(block_len(7850), 3928);
        assert_eq!(block_len(BLOCK), BLOCK / 2);
        assert_eq!(block_len(BLOCK + 1), BLOCK);
        let n = 7850;
        let split = draw(1, n);
        assert_eq!(split, draw(2, n));
        // The first half is the one-block stream of a short output from the same seed (the same
        // four lanes); the second half is the next four lanes, a different stream.
        let half = block_len(n);
        let short = draw(1, half);
        assert_eq!(split[..half], short[..]);
        assert_ne!(split[half..half + 100], short[..100]);
        // Just below the cut the output is still one block: its first samples are the same.
        assert_eq!(draw(1, SPLIT_MIN - 1)[..half], short[..]);
    }
}
