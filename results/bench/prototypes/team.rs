// A prototype, not part of dpx's build: the logistic-regression DP step of `logreg_mnist`
// (batch 256, 784 inputs, 10 classes; forward, softmax cross-entropy, ghost norms, clip weights,
// the clipped sum, noise, the finiteness check and the SGD update) written three ways over the
// same kernels: serially, as four `rayon::join`s of two halves each, and as a persistent team of
// two threads that meet at four spin barriers per step. It asks whether a hand-off cheaper than
// the pool's would take a 0.17 ms step to 1.85x on two cores (results/bench/README.md, "Where
// logreg_mnist's two-thread step still goes").
//
// The noise is a stand-in of the same cost per sample (one xorshift uniform per coordinate), not
// dpx's sampler; the three forms give the same parameters bit for bit (checked every round).
//
// Run: a cargo project with `gemm = { version = "0.19", default-features = false, features =
// ["std", "rayon", "x86-v4"] }` and `rayon = "1.12"`, this file as `src/bin/team.rs`,
// `cargo run --release --bin team` (release profile with `lto = "thin"`).
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

const B: usize = 256;
const D: usize = 784;
const K: usize = 10;
const P: usize = K * D + K;

struct Ptr<T>(*mut T);
unsafe impl<T> Send for Ptr<T> {}
unsafe impl<T> Sync for Ptr<T> {}
impl<T> Clone for Ptr<T> { fn clone(&self) -> Self { Ptr(self.0) } }
impl<T> Copy for Ptr<T> {}

struct St {
    x: Vec<f32>, labels: Vec<usize>, w: Vec<f32>, // w: [K*D] then bias [K]
    logits: Vec<f32>, d: Vec<f32>, a: Vec<f32>, wts: Vec<f64>, gw: Vec<f32>, sum: Vec<f64>,
    rng: Vec<u64>, ok: [AtomicBool; 2],
}

unsafe fn gemm_rows(s: *mut St, r0: usize, r1: usize) {
    let s = &mut *s;
    // logits[r, k] = b[k] + sum_j x[r, j] w[k, j]
    for r in r0..r1 { for k in 0..K { s.logits[r * K + k] = s.w[K * D + k]; } }
    gemm::gemm(r1 - r0, K, D, s.logits.as_mut_ptr().add(r0 * K), 1, K as isize, true,
        s.x.as_ptr().add(r0 * D), 1, D as isize, s.w.as_ptr(), D as isize, 1, 1.0, 1.0, false, false, false, gemm::Parallelism::None);
}
unsafe fn loss_norms_rows(s: *mut St, r0: usize, r1: usize) {
    let s = &mut *s;
    for r in r0..r1 {
        let z = &s.logits[r * K..r * K + K];
        let m = z.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let mut sum = 0.0f64;
        for &v in z { sum += (v as f64 - m).exp(); }
        let lse = m + sum.ln();
        let mut sd = 0.0f64;
        for j in 0..K {
            let p = (z[j] as f64 - lse).exp();
            let g = (p - if j == s.labels[r] { 1.0 } else { 0.0 }) as f32;
            s.d[r * K + j] = g;
            sd += (g as f64) * (g as f64);
        }
        let mut acc = [0f32; 16];
        for c in s.x[r * D..r * D + D].chunks_exact(16) { for l in 0..16 { acc[l] += c[l] * c[l]; } }
        let sx: f64 = acc.iter().map(|&v| v as f64).sum();
        let n = (sx * sd + sd).sqrt();
        let w = if n > 1.0 { 1.0 / n } else { 1.0 };
        s.wts[r] = w;
        for j in 0..K { s.a[r * K + j] = s.d[r * K + j] * w as f32; }
    }
}
unsafe fn csum_cols(s: *mut St, c0: usize, c1: usize, bias: bool) {
    let s = &mut *s;
    // gw[k, c] = sum_r a[r, k] x[r, c]
    gemm::gemm(K, c1 - c0, B, s.gw.as_mut_ptr().add(c0), 1, D as isize, false,
        s.a.as_ptr(), 1, K as isize, s.x.as_ptr().add(c0), 1, D as isize, 0.0, 1.0, false, false, false, gemm::Parallelism::None);
    for k in 0..K { for c in c0..c1 { s.sum[k * D + c] = s.gw[k * D + c] as f64; } }
    if bias { for k in 0..K { let mut t = 0.0f64; for r in 0..B { t += s.a[r * K + k] as f64; } s.sum[K * D + k] = t; } }
}
#[inline(always)]
fn next(s: &mut u64) -> u64 { *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17; *s }
unsafe fn noise_check(s: *mut St, h: usize, i0: usize, i1: usize) {
    let s = &mut *s;
    let mut st = s.rng[h];
    let mut ok = true;
    for i in i0..i1 {
        let u: f64 = (next(&mut st) >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
        let v = &mut s.sum[i];
        *v += 1.0 * u * 1.7320508;
        *v /= B as f64;
        ok &= v.is_finite();
    }
    s.rng[h] = st;
    s.ok[h].store(ok, Ordering::Relaxed);
}
unsafe fn update(s: *mut St, i0: usize, i1: usize) {
    let s = &mut *s;
    for i in i0..i1 { s.w[i] = (s.w[i] as f64 - 0.01 * s.sum[i]) as f32; }
}

fn serial_step(s: *mut St) {
    unsafe {
        gemm_rows(s, 0, B); loss_norms_rows(s, 0, B); csum_cols(s, 0, D, true);
        noise_check(s, 0, 0, P / 2); noise_check(s, 1, P / 2, P);
        let ok = (*s).ok[0].load(Ordering::Relaxed) & (*s).ok[1].load(Ordering::Relaxed);
        if ok { update(s, 0, P); }
    }
}
fn rayon_step(s: *mut St) {
    let p = Ptr(s);
    unsafe {
        rayon::join(|| { let p = p; gemm_rows(p.0, 0, B / 2); loss_norms_rows(p.0, 0, B / 2) },
                    || { let p = p; gemm_rows(p.0, B / 2, B); loss_norms_rows(p.0, B / 2, B) });
        rayon::join(|| { let p = p; csum_cols(p.0, 0, 384, true) }, || { let p = p; csum_cols(p.0, 384, D, false) });
        rayon::join(|| { let p = p; noise_check(p.0, 0, 0, P / 2) }, || { let p = p; noise_check(p.0, 1, P / 2, P) });
        let ok = (*s).ok[0].load(Ordering::Relaxed) & (*s).ok[1].load(Ordering::Relaxed);
        if ok { rayon::join(|| { let p = p; update(p.0, 0, P / 2) }, || { let p = p; update(p.0, P / 2, P) }); }
    }
}

struct Barrier { count: AtomicUsize, gen: AtomicUsize }
impl Barrier {
    fn wait(&self) {
        let g = self.gen.load(Ordering::Acquire);
        if self.count.fetch_add(1, Ordering::AcqRel) == 1 {
            self.count.store(0, Ordering::Relaxed);
            self.gen.store(g + 1, Ordering::Release);
        } else {
            while self.gen.load(Ordering::Acquire) == g { std::hint::spin_loop(); }
        }
    }
}
static WORK: [[AtomicUsize; 8]; 2] = [[const { AtomicUsize::new(0) }; 8], [const { AtomicUsize::new(0) }; 8]];
fn team_part(s: *mut St, t: usize, bar: &Barrier) {
    unsafe {
        let ns = |a: Instant| a.elapsed().as_nanos() as usize;
        let (r0, r1) = if t == 0 { (0, B / 2) } else { (B / 2, B) };
        let a = Instant::now();
        gemm_rows(s, r0, r1);
        WORK[t][0].fetch_add(ns(a), Ordering::Relaxed);
        let a = Instant::now();
        loss_norms_rows(s, r0, r1);
        WORK[t][1].fetch_add(ns(a), Ordering::Relaxed);
        let a = Instant::now();
        bar.wait();
        WORK[t][5].fetch_add(ns(a), Ordering::Relaxed);
        let a = Instant::now();
        if t == 0 { csum_cols(s, 0, 384, true) } else { csum_cols(s, 384, D, false) }
        WORK[t][2].fetch_add(ns(a), Ordering::Relaxed);
        let a = Instant::now();
        bar.wait();
        WORK[t][6].fetch_add(ns(a), Ordering::Relaxed);
        let a = Instant::now();
        let (i0, i1) = if t == 0 { (0, P / 2) } else { (P / 2, P) };
        noise_check(s, t, i0, i1);
        bar.wait();
        let ok = (*s).ok[0].load(Ordering::Relaxed) & (*s).ok[1].load(Ordering::Relaxed);
        if ok { update(s, i0, i1); }
        bar.wait();
        WORK[t][3].fetch_add(ns(a), Ordering::Relaxed);
    }
}

fn init() -> St {
    let mut r = 12345u64;
    let mut f = || ((next(&mut r) >> 40) as f32 / (1u64 << 24) as f32) - 0.5;
    St { x: (0..B * D).map(|_| f()).collect(), labels: (0..B).map(|i| i % K).collect(), w: (0..P).map(|_| f() * 0.01).collect(),
        logits: vec![0.0; B * K], d: vec![0.0; B * K], a: vec![0.0; B * K], wts: vec![0.0; B], gw: vec![0.0; K * D], sum: vec![0.0; P],
        rng: vec![1, 2], ok: [AtomicBool::new(true), AtomicBool::new(true)] }
}

fn phases() {
    let mut s = init();
    let sp = &mut s as *mut St;
    let n = 5000;
    let mut t = [0f64; 4];
    for _ in 0..n { unsafe {
        let a = Instant::now(); gemm_rows(sp, 0, B); let b = Instant::now(); loss_norms_rows(sp, 0, B); let c = Instant::now();
        csum_cols(sp, 0, D, true); let d = Instant::now(); noise_check(sp, 0, 0, P / 2); noise_check(sp, 1, P / 2, P); update(sp, 0, P); let e = Instant::now();
        t[0] += (b - a).as_secs_f64(); t[1] += (c - b).as_secs_f64(); t[2] += (d - c).as_secs_f64(); t[3] += (e - d).as_secs_f64();
    } }
    let mut h = [0f64; 3];
    for _ in 0..n { unsafe {
        let a = Instant::now(); gemm_rows(sp, 0, B / 2); let b = Instant::now(); loss_norms_rows(sp, 0, B / 2); let c = Instant::now(); csum_cols(sp, 0, 384, true); let d = Instant::now();
        h[0] += (b - a).as_secs_f64(); h[1] += (c - b).as_secs_f64(); h[2] += (d - c).as_secs_f64();
    } }
    println!("one thread, first halves alone us: forward {:.1} loss+norms {:.1} csum {:.1}", h[0] * 1e6 / n as f64, h[1] * 1e6 / n as f64, h[2] * 1e6 / n as f64);
    println!("serial phases us: forward {:.1} loss+norms {:.1} csum {:.1} noise+update {:.1}", t[0] * 1e6 / n as f64, t[1] * 1e6 / n as f64, t[2] * 1e6 / n as f64, t[3] * 1e6 / n as f64);
}

fn main() {
    phases();
    let steps = 20000;
    let mut results = vec![];
    for round in 0..3 {
        // serial
        let mut s = init();
        let t = Instant::now();
        for _ in 0..steps { serial_step(&mut s); }
        let ts = t.elapsed().as_secs_f64() * 1e6 / steps as f64;
        let ws = s.w.clone();
        // rayon 2 threads
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let mut s = init();
        let sp = Ptr(&mut s as *mut St);
        let t = Instant::now();
        pool.install(|| { let sp = sp; for _ in 0..steps { rayon_step(sp.0); } });
        let tr = t.elapsed().as_secs_f64() * 1e6 / steps as f64;
        let same_r = s.w == ws;
        // team
        let mut s = init();
        let sp = Ptr(&mut s as *mut St);
        let bar = Barrier { count: AtomicUsize::new(0), gen: AtomicUsize::new(0) };
        let t = Instant::now();
        std::thread::scope(|sc| {
            let barr = &bar;
            sc.spawn(move || { let sp = sp; for _ in 0..steps { team_part(sp.0, 1, barr); } });
            let sp2 = sp;
            for _ in 0..steps { team_part(sp2.0, 0, barr); }
        });
        let tt = t.elapsed().as_secs_f64() * 1e6 / steps as f64;
        let same_t = s.w == ws;
        println!("round {round}: serial {ts:.1} us, rayon-join 2t {tr:.1} us ({:.2}x, same {same_r}), team 2t {tt:.1} us ({:.2}x, same {same_t})", ts / tr, ts / tt);
        results.push((ts, tr, tt));
        for th in 0..2 { println!("  team thread {th} us/step: forward {:.1} loss+norms {:.1} wait1 {:.1} csum {:.1} wait2 {:.1} noise+update+waits {:.1}", 
            WORK[th][0].swap(0, Ordering::Relaxed) as f64 / 1e3 / steps as f64, WORK[th][1].swap(0, Ordering::Relaxed) as f64 / 1e3 / steps as f64,
            WORK[th][5].swap(0, Ordering::Relaxed) as f64 / 1e3 / steps as f64, WORK[th][2].swap(0, Ordering::Relaxed) as f64 / 1e3 / steps as f64,
            WORK[th][6].swap(0, Ordering::Relaxed) as f64 / 1e3 / steps as f64, WORK[th][3].swap(0, Ordering::Relaxed) as f64 / 1e3 / steps as f64); }
    }
}
