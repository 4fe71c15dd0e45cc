//! The scattering transform (`src/data/scattering.rs`) against Kymatio 0.3.0's outputs
//! (`tests/data/scattering_reference.bin`, written by `scripts/scattering_reference.py`), plus
//! its shape, low-pass, thread-count and bad-shape behaviour.

use dpx::data::Dataset;
use dpx::data::scattering::{Scattering2d, num_channels};
use ndarray::Array2;
use std::path::Path;

/// Largest |dpx − Kymatio| allowed, relative to the largest |Kymatio output| of a case.
const TOLERANCE: f64 = 1e-5;

struct Case {
    c: usize,
    h: usize,
    w: usize,
    j: usize,
    l: usize,
    input: Vec<f32>,
    output: Vec<f32>,
}

fn read_u32(bytes: &[u8], at: &mut usize) -> usize {
    let v = u32::from_le_bytes(bytes[*at..*at + 4].try_into().expect("4 bytes"));
    *at += 4;
    v as usize
}

fn read_f32s(bytes: &[u8], at: &mut usize, n: usize) -> Vec<f32> {
    let v = bytes[*at..*at + 4 * n]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
        .collect();
    *at += 4 * n;
    v
}

fn reference() -> Vec<Case> {
    let bytes = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/scattering_reference.bin"
    ))
    .expect("reference file");
    assert_eq!(&bytes[..8], b"DPXSCREF");
    let mut at = 8;
    let n = read_u32(&bytes, &mut at);
    let cases: Vec<Case> = (0..n)
        .map(|_| {
            let (c, h, w, j, l) = (
                read_u32(&bytes, &mut at),
                read_u32(&bytes, &mut at),
                read_u32(&bytes, &mut at),
                read_u32(&bytes, &mut at),
                read_u32(&bytes, &mut at),
            );
            let input = read_f32s(&bytes, &mut at, c * h * w);
            let output = read_f32s(
                &bytes,
                &mut at,
                c * num_channels(j, l) * (h >> j) * (w >> j),
            );
            Case {
                c,
                h,
                w,
                j,
                l,
                input,
                output,
            }
        })
        .collect();
    assert_eq!(at, bytes.len(), "trailing bytes in the reference file");
    cases
}

#[test]
fn matches_kymatio() {
    let cases = reference();
    assert!(cases.len() >= 3);
    let mut worst = 0.0f64;
    for case in &cases {
        let s = Scattering2d::new(case.h, case.w, case.j, case.l).expect("valid shape");
        let mut out = vec![0.0f32; case.output.len()];
        s.transform_image(&case.input, &mut out).expect("transform");
        let scale = case
            .output
            .iter()
            .fold(0.0f64, |m, v| m.max(f64::from(v.abs())));
        let err = out
            .iter()
            .zip(&case.output)
            .fold(0.0f64, |m, (a, b)| m.max(f64::from((a - b).abs())));
        let rel = err / scale;
        eprintln!(
            "{}x{}x{} J={} L={}: max abs error {err:.3e}, {rel:.3e} of max |S| = {scale:.4}",
            case.c, case.h, case.w, case.j, case.l
        );
        assert!(
            rel <= TOLERANCE,
            "{}x{}x{} J={} L={}: relative error {rel:e}",
            case.c,
            case.h,
            case.w,
            case.j,
            case.l
        );
        worst = worst.max(rel);
    }
    eprintln!("worst relative error vs Kymatio: {worst:.3e}");
}

fn image(c: usize, h: usize, w: usize, seed: f64) -> Vec<f32> {
    (0..c * h * w)
        .map(|i| {
            let v = ((i as f64 + seed) * 12.9898).sin() * 43758.5453;
            (v - v.floor()) as f32
        })
        .collect()
}

#[test]
fn shape_and_channel_count() {
    let s = Scattering2d::new(32, 32, 2, 8).expect("valid");
    assert_eq!(s.channels_per_input(), 81);
    assert_eq!(s.output_shape(3), vec![243, 8, 8]);
    let x = image(3, 32, 32, 0.0);
    let mut out = vec![0.0f32; 3 * 81 * 64];
    s.transform_image(&x, &mut out).expect("transform");
    assert!(out.iter().all(|v| v.is_finite()));
    // Wrong output length: an error, not a panic.
    let mut short = vec![0.0f32; 10];
    assert!(s.transform_image(&x, &mut short).is_err());
}

#[test]
fn order_zero_is_a_low_pass_average() {
    // A constant image: the low-pass (unit DC gain) gives the constant back, and every wavelet
    // (zero mean) gives zero.
    let s = Scattering2d::new(16, 16, 2, 8).expect("valid");
    let x = vec![0.7f32; 256];
    let mut out = vec![0.0f32; 81 * 16];
    s.transform_image(&x, &mut out).expect("transform");
    for v in &out[..16] {
        assert!((v - 0.7).abs() < 2e-3, "order 0 of a constant: {v}");
    }
    for v in &out[16..] {
        assert!(v.abs() < 1e-3, "higher orders of a constant: {v}");
    }
    // On a random image, the order-0 channel's mean is close to the image mean.
    let x = image(1, 16, 16, 3.0);
    s.transform_image(&x, &mut out).expect("transform");
    let mean_in = x.iter().sum::<f32>() / 256.0;
    let mean_s0 = out[..16].iter().sum::<f32>() / 16.0;
    assert!((mean_in - mean_s0).abs() < 0.05, "{mean_in} vs {mean_s0}");
}

#[test]
fn dataset_transform_is_independent_of_threads() {
    let (n, c, h, w) = (7, 2, 16, 16);
    let mut features = Array2::<f32>::zeros((n, c * h * w));
    for (i, mut row) in features.rows_mut().into_iter().enumerate() {
        row.assign(&ndarray::Array1::from(image(c, h, w, i as f64 * 1000.0)));
    }
    let data = Dataset {
        features,
        labels: (0..n).map(|i| i % 2).collect(),
        sample_shape: vec![c, h, w],
        num_classes: 2,
    };
    let s = Scattering2d::new(h, w, 2, 8).expect("valid");
    let run = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("pool")
            .install(|| s.transform_dataset(&data).expect("transform"))
    };
    let one = run(1);
    let two = run(2);
    assert_eq!(one.sample_shape, vec![c * 81, 4, 4]);
    assert_eq!(one.features.dim(), (n, c * 81 * 16));
    assert_eq!(one.labels, data.labels);
    assert!(
        one.features
            .iter()
            .zip(two.features.iter())
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
    // Row i is the transform of image i alone.
    let mut out = vec![0.0f32; c * 81 * 16];
    s.transform_image(&image(c, h, w, 3000.0), &mut out)
        .expect("transform");
    assert_eq!(one.features.row(3).to_vec(), out);
}

#[test]
fn bad_shapes_are_clear_errors() {
    for (h, w) in [(30, 32), (32, 18), (4, 32), (0, 32)] {
        let e = Scattering2d::new(h, w, 2, 8).expect_err("not a multiple of 4");
        let msg = e.to_string();
        assert!(msg.contains("multiple of 2^J = 4"), "{msg}");
    }
    assert!(Scattering2d::new(32, 32, 0, 8).is_err());
    assert!(Scattering2d::new(32, 32, 2, 0).is_err());
    // A dataset of vectors is refused.
    let s = Scattering2d::new(16, 16, 2, 8).expect("valid");
    let data = Dataset {
        features: Array2::zeros((2, 256)),
        labels: vec![0, 1],
        sample_shape: vec![256],
        num_classes: 2,
    };
    assert!(s.transform_dataset(&data).is_err());
}

/// Timing on real CIFAR-10 (not run by default): `DPX_DATA_DIR=<dir with cifar10/>
/// cargo test --release --test scattering -- --ignored --nocapture time_cifar10`, with
/// `DPX_SCATTERING_TIME_N` images (default 2000; 60000 for all), on one thread.
#[test]
#[ignore = "needs CIFAR-10 and a release build"]
fn time_cifar10() {
    use dpx::data::{DataSource, NamedDataset};
    let Some(dir) = std::env::var_os("DPX_DATA_DIR") else {
        eprintln!("DPX_DATA_DIR is not set: nothing timed");
        return;
    };
    let n: usize = std::env::var("DPX_SCATTERING_TIME_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let source = DataSource::Named {
        dataset: NamedDataset::Cifar10,
        path: None,
    };
    let mut data = dpx::data::load(&source, Path::new(&dir)).expect("CIFAR-10");
    let mut all = data.train.clone();
    all.features = ndarray::concatenate(
        ndarray::Axis(0),
        &[data.train.features.view(), data.test.features.view()],
    )
    .expect("same width");
    all.labels.extend_from_slice(&data.test.labels);
    data.train = all;
    dpx::data::preprocess::scale_to_unit(&mut data.train);
    let n = n.min(data.train.len());
    let subset = Dataset {
        features: data.train.features.slice(ndarray::s![..n, ..]).to_owned(),
        labels: data.train.labels[..n].to_vec(),
        sample_shape: data.train.sample_shape.clone(),
        num_classes: data.train.num_classes,
    };
    let s = Scattering2d::new(32, 32, 2, 8).expect("valid");
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("pool");
    let start = std::time::Instant::now();
    let out = pool.install(|| s.transform_dataset(&subset).expect("transform"));
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "{n} CIFAR-10 images -> {:?} on 1 thread: {secs:.2} s, {:.1} images/s, 60000 images ≈ {:.1} min",
        out.sample_shape,
        n as f64 / secs,
        60000.0 * secs / n as f64 / 60.0
    );
}
