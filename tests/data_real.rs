//! Integration test on the real MNIST, CIFAR-10 and a9a files in the official formats.
//!
//! They are read from the directory named by `DPX_REAL_DATA_DIR` (laid out as a dpx data
//! directory: `mnist/`, `cifar10/`, `a9a/`), through the same `load` a run uses. Without the
//! variable these tests are skipped with one printed line saying how to run them: a clone has
//! no real datasets, and `dpx data fetch NAME --data-dir DIR` for `mnist`, `cifar10` and `a9a`
//! gets them. CI (`.ci/run`) sets the variable, so CI always runs them. A variable naming a
//! missing directory is a failure, not a skip; `DPX_SKIP_REAL_DATA=1` skips even when it is set.
//! Expected statistics were computed with Python's standard library (`gzip`, integer sums)
//! directly from the same files.

#[path = "support/http_server.rs"]
mod http_server;

use std::path::PathBuf;

use assert_cmd::Command;
use dpx::data::preprocess::keep_classes;
use dpx::data::source::{DataSource, NamedDataset};
use dpx::data::{Dataset, load};

fn real_data_dir() -> Option<PathBuf> {
    if std::env::var_os("DPX_SKIP_REAL_DATA").is_some_and(|v| v == "1") {
        skip_note("DPX_SKIP_REAL_DATA=1: real-data tests skipped");
        return None;
    }
    let Some(dir) = std::env::var_os("DPX_REAL_DATA_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
    else {
        skip_note(
            "real-data tests skipped: set DPX_REAL_DATA_DIR to a directory holding mnist/, \
             cifar10/ and a9a/ (`dpx data fetch NAME --data-dir DIR` for each) to run them",
        );
        return None;
    };
    assert!(
        dir.is_dir(),
        "DPX_REAL_DATA_DIR={} is not a directory (unset it to skip these tests)",
        dir.display()
    );
    Some(dir)
}

/// Print the reason for skipping once per test binary. It goes straight to the process's stderr
/// (not through `eprintln!`, which the test harness captures and hides for passing tests), so
/// `cargo test` shows it.
fn skip_note(message: &str) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "note: {message}");
    });
}

fn named(dataset: NamedDataset) -> DataSource {
    DataSource::Named {
        dataset,
        path: None,
    }
}

fn mean(ds: &Dataset) -> f64 {
    ds.features.iter().map(|&x| f64::from(x)).sum::<f64>() / ds.features.len() as f64
}

#[test]
fn mnist_counts_shapes_labels_and_pixel_means() {
    let Some(dir) = real_data_dir() else { return };
    let tt = load(&named(NamedDataset::Mnist), &dir).unwrap();
    assert_eq!((tt.train.len(), tt.test.len()), (60_000, 10_000));
    assert_eq!(tt.train.features.dim(), (60_000, 784));
    assert_eq!(tt.train.sample_shape, vec![1, 28, 28]);
    assert_eq!(tt.train.num_classes, 10);
    assert!(
        tt.train
            .labels
            .iter()
            .chain(&tt.test.labels)
            .all(|&l| l < 10)
    );
    assert_eq!(tt.train.labels[..10], [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]);
    assert_eq!(tt.test.labels[..10], [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]);
    // Python: sum of all train pixel bytes 1567298545 over 47040000 → 33.318421449829934
    // (= 0.1307 · 255, the familiar MNIST mean); test 33.791224489795916.
    assert!((mean(&tt.train) - 33.318_421_449_829_934).abs() < 1e-9);
    assert!((mean(&tt.test) - 33.791_224_489_795_916).abs() < 1e-9);
    assert!(
        tt.train
            .features
            .iter()
            .all(|&x| (0.0..=255.0).contains(&x))
    );
    // MNIST 3 vs 5 (the dynamic-noise paper's MNIST35): 6131 threes and 5421 fives in train.
    let m35 = keep_classes(&tt.train, &[3, 5]).unwrap();
    assert_eq!(m35.len(), 6131 + 5421);
    assert_eq!(m35.labels.iter().filter(|&&l| l == 0).count(), 6131);

    // The paper's MNIST35: 1000 images of 3 and 5, PCA to 60 dimensions.
    use dpx::data::preprocess::{Step, apply_steps};
    let steps = [
        Step::KeepClasses(vec![3, 5]),
        Step::SubsampleTrain { n: 1000 },
        Step::ScaleToUnit,
        Step::Pca { components: 60 },
    ];
    let p = apply_steps(tt, &steps, 0).unwrap();
    assert_eq!(p.data.train.features.dim(), (1000, 60));
    assert_eq!(p.data.test.features.dim(), (1902, 60)); // 1010 threes + 892 fives in t10k
    // Projected training columns are centred (PCA subtracts the training mean).
    let col0 = p.data.train.features.column(0);
    assert!(col0.iter().map(|&x| f64::from(x)).sum::<f64>().abs() / 1000.0 < 1e-4);
}

#[test]
fn cifar10_counts_shapes_labels_and_channel_means() {
    let Some(dir) = real_data_dir() else { return };
    let tt = load(&named(NamedDataset::Cifar10), &dir).unwrap();
    assert_eq!((tt.train.len(), tt.test.len()), (50_000, 10_000));
    assert_eq!(tt.train.features.dim(), (50_000, 3072));
    assert_eq!(tt.train.sample_shape, vec![3, 32, 32]);
    assert_eq!(tt.train.labels[..5], [6, 9, 9, 4, 1]);
    assert_eq!(tt.test.labels[..5], [3, 8, 8, 0, 6]);
    let mut per_class = [0usize; 10];
    tt.train.labels.iter().for_each(|&l| per_class[l] += 1);
    assert_eq!(per_class, [5000; 10]);
    // Python: per-channel train means 125.306918046875, 122.950394140625, 113.86538318359375
    // (the familiar 0.4914, 0.4822, 0.4465 times 255).
    let want = [
        125.306_918_046_875,
        122.950_394_140_625,
        113.865_383_183_593_75,
    ];
    for (c, w) in want.iter().enumerate() {
        let plane = tt
            .train
            .features
            .slice(ndarray::s![.., c * 1024..(c + 1) * 1024]);
        let m = plane.iter().map(|&x| f64::from(x)).sum::<f64>() / plane.len() as f64;
        assert!((m - w).abs() < 1e-9, "channel {c}: {m}");
    }
}

#[test]
fn a9a_counts_features_and_labels() {
    let Some(dir) = real_data_dir() else { return };
    let tt = load(&named(NamedDataset::A9a), &dir).unwrap();
    assert_eq!((tt.train.len(), tt.test.len()), (32_561, 16_281));
    // a9a.t never uses feature 123; the fixed count keeps train and test at 123.
    assert_eq!(
        (tt.train.num_features(), tt.test.num_features()),
        (123, 123)
    );
    assert_eq!(tt.train.num_classes, 2);
    // Python: 7841 and 3846 positive labels; 451592 and 225731 stored (all 1) values.
    assert_eq!(tt.train.labels.iter().filter(|&&l| l == 1).count(), 7841);
    assert_eq!(tt.test.labels.iter().filter(|&&l| l == 1).count(), 3846);
    assert_eq!(
        tt.train.features.iter().filter(|&&x| x == 1.0).count(),
        451_592
    );
    assert_eq!(
        tt.test.features.iter().filter(|&&x| x == 1.0).count(),
        225_731
    );
    assert!(tt.train.features.iter().all(|&x| x == 0.0 || x == 1.0));
    // First line: "-1 3:1 11:1 14:1 ...".
    assert_eq!(tt.train.labels[0], 0);
    assert_eq!(tt.train.features[[0, 2]], 1.0);
    assert_eq!(tt.train.features[[0, 10]], 1.0);
    assert_eq!(tt.train.features[[0, 0]], 0.0);
}

/// End to end: `dpx data fetch a9a` from a loopback mirror serving the real files verifies the
/// official MD5s, writes them, and a second run skips them.
#[test]
fn cli_fetch_a9a_from_a_mirror_verifies_the_official_checksums() {
    let Some(dir) = real_data_dir() else { return };
    let train = std::fs::read(dir.join("a9a/a9a")).unwrap();
    let test = std::fs::read(dir.join("a9a/a9a.t")).unwrap();
    let base = http_server::serve(vec![("a9a", train.clone()), ("a9a.t", test)], 2);
    let out_dir = tempfile::tempdir().unwrap();
    let run = || {
        Command::cargo_bin("dpx")
            .unwrap()
            .env_remove("DPX_DATA_DIR")
            .args(["data", "fetch", "a9a", "--mirror", &base, "--data-dir"])
            .arg(out_dir.path())
            .output()
            .unwrap()
    };
    let first = run();
    assert_eq!(first.status.code(), Some(0), "{:?}", first);
    assert_eq!(
        std::fs::read(out_dir.path().join("a9a/a9a")).unwrap(),
        train
    );
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(stdout.contains("2 downloaded"), "{stdout}");
    let second = run();
    assert_eq!(second.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&second.stdout).contains("2 already present"));
    // And the fetched copy loads.
    let tt = load(&named(NamedDataset::A9a), out_dir.path()).unwrap();
    assert_eq!(tt.train.len(), 32_561);
}
