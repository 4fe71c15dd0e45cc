//! Hostile dataset files and configs without libFuzzer (issue 9, item 1): a deterministic
//! random-mutation fuzzer over a small corpus of valid files, run by `cargo test` for a bounded
//! number of cases. It complements the coverage-guided targets in `fuzz/` (nightly only,
//! `scripts/fuzz.sh`). Outcome for every input: the parser returns (Ok or an error), never
//! panics, and answers within a generous time bound.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use dpx::data::cifar::{read_cifar_batch, read_cifar_tar};
use dpx::data::csv::{CsvOptions, read_csv};
use dpx::data::idx::{read_idx, read_idx_dataset};
use dpx::data::libsvm::read_libsvm;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Mutated inputs per parser.
const CASES: usize = 3000;

fn idx_images() -> Vec<u8> {
    let mut b = vec![0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 2];
    b.extend([7u8; 12]);
    b
}

fn idx_labels() -> Vec<u8> {
    vec![0, 0, 8, 1, 0, 0, 0, 2, 1, 7]
}

fn cifar_batch() -> Vec<u8> {
    let mut b = vec![3u8];
    b.extend(std::iter::repeat_n(0u8, 3072));
    b.push(9);
    b.extend(std::iter::repeat_n(128u8, 3072));
    b
}

fn cifar_tar_gz() -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    for name in [
        "data_batch_1.bin",
        "data_batch_2.bin",
        "data_batch_3.bin",
        "data_batch_4.bin",
        "data_batch_5.bin",
        "test_batch.bin",
    ] {
        let data = cifar_batch();
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        tar.append_data(&mut h, format!("cifar-10-batches-bin/{name}"), &data[..])
            .unwrap();
    }
    let raw = tar.into_inner().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&raw).unwrap();
    gz.finish().unwrap()
}

const HUGE: [u8; 4] = [0xff, 0xff, 0xff, 0xff];

/// One random mutation: flip bits, overwrite with a boundary value (a huge big-endian count
/// included), insert, delete, duplicate a slice, or truncate.
fn mutate(rng: &mut ChaCha8Rng, input: &[u8]) -> Vec<u8> {
    let mut b = input.to_vec();
    for _ in 0..rng.random_range(1..=4) {
        let len = b.len();
        match rng.random_range(0..7) {
            0 if len > 0 => {
                let i = rng.random_range(0..len);
                b[i] ^= 1 << rng.random_range(0..8);
            }
            1 if len > 0 => {
                let i = rng.random_range(0..len);
                b[i] = [0u8, 1, 0x7f, 0x80, 0xff, b'-', b':', b',', b'\n', b'e']
                    [rng.random_range(0..10)];
            }
            2 if len >= 4 => {
                let i = rng.random_range(0..=len - 4);
                b[i..i + 4].copy_from_slice(&HUGE);
            }
            3 => {
                let i = rng.random_range(0..=len);
                let n = rng.random_range(1..16);
                let bytes: Vec<u8> = (0..n).map(|_| rng.random()).collect();
                b.splice(i..i, bytes);
            }
            4 if len > 0 => {
                let i = rng.random_range(0..len);
                let j = rng.random_range(i..=len.min(i + 64));
                b.drain(i..j);
            }
            5 if len > 0 => {
                let i = rng.random_range(0..len);
                let j = rng.random_range(i..=len.min(i + 64));
                let piece = b[i..j].to_vec();
                let at = rng.random_range(0..=b.len());
                b.splice(at..at, piece);
            }
            _ => {
                let cut = rng.random_range(0..=len);
                b.truncate(cut);
            }
        }
    }
    b
}

/// Feed `CASES` mutations of the corpus to `parse`; returns the number of inputs tried.
fn fuzz(
    name: &str,
    corpus: &[Vec<u8>],
    seed: u64,
    parse: impl Fn(&[u8]) + std::panic::RefUnwindSafe,
) -> usize {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let started = Instant::now();
    for case in 0..CASES {
        let base = &corpus[case % corpus.len()];
        let input = mutate(&mut rng, base);
        let t = Instant::now();
        let r = std::panic::catch_unwind(|| parse(&input));
        assert!(
            r.is_ok(),
            "{name}: case {case} panicked on {:?}",
            &input[..input.len().min(64)]
        );
        // A generous bound that only a hang or a runaway allocation loop can exceed.
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{name}: case {case} took {:?}",
            t.elapsed()
        );
    }
    eprintln!(
        "{name}: {CASES} mutated inputs in {:.2?}",
        started.elapsed()
    );
    CASES
}

#[test]
fn idx_survives_mutations() {
    let corpus = vec![idx_images(), idx_labels()];
    fuzz("idx", &corpus, 1, |b| {
        let _ = read_idx(b);
        let mid = b.len() / 2;
        let _ = read_idx_dataset(&b[..mid], &b[mid..], 10);
        let _ = read_idx_dataset(b, &idx_labels()[..], 10);
    });
}

#[test]
fn cifar_survives_mutations() {
    let corpus = vec![cifar_batch(), cifar_tar_gz()];
    fuzz("cifar", &corpus, 2, |b| {
        let _ = read_cifar_batch(b);
        let _ = read_cifar_tar(b);
    });
}

/// A small SVHN-layout MAT-file: X (32 × 32 × 3 × 2, uint8) and y (2 × 1).
fn svhn_mat(compress: bool) -> Vec<u8> {
    use dpx::data::mat::write::{Var, file};
    let x: Vec<u8> = (0..2 * 3072).map(|k| (k % 251) as u8).collect();
    file(
        &[
            Var {
                name: "X",
                class: 9,
                dims: &[32, 32, 3, 2],
                storage: 2,
                data: &x,
            },
            Var {
                name: "y",
                class: 6,
                dims: &[2, 1],
                storage: 2,
                data: &[10, 3],
            },
        ],
        compress,
    )
}

#[test]
fn mat_files_survive_mutations() {
    let corpus = vec![svhn_mat(false), svhn_mat(true)];
    fuzz("mat", &corpus, 6, |b| {
        if let Ok(arrays) = dpx::data::mat::read_mat(b, &["X", "y"]) {
            let _ = dpx::data::svhn::from_arrays(arrays);
        }
    });
}

#[test]
fn libsvm_survives_mutations() {
    let corpus = vec![
        b"-1 3:1 11:1 14:1\n+1 5:1 7:1 14:1 123:1\n".to_vec(),
        b"1 1:0.5 2:-1.25e-3\n0 2:7\n".to_vec(),
    ];
    fuzz("libsvm", &corpus, 3, |b| {
        let _ = read_libsvm(b);
    });
}

#[test]
fn csv_survives_mutations() {
    let corpus = vec![
        b"label,x1,x2\n0,0.5,1.0\n1,-2,3e-2\n".to_vec(),
        b"label,a\n1,2\n0,4.5\n".to_vec(),
    ];
    fuzz("csv", &corpus, 4, |b| {
        let _ = read_csv(b, &CsvOptions::default());
    });
}

#[test]
fn configs_survive_mutations() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs");
    let mut corpus: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    corpus.sort();
    assert!(!corpus.is_empty());
    fuzz("config", &corpus, 5, |b| {
        if let Ok(text) = std::str::from_utf8(b) {
            let _ = dpx::config::load_str(text, Path::new("mutated.toml"));
        }
    });
}
