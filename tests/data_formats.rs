//! Parsers of every data format on small files written here in the real formats (raw and
//! gzip), every hostile input the issue names (matched on the error variant), and `load` on
//! small directory layouts (including the "not found" message).

use std::io::Write;
use std::path::Path;

use dpx::data::cifar::{self, RECORD_BYTES};
use dpx::data::csv::{CsvOptions, LabelColumn, read_csv};
use dpx::data::idx::{load_idx_dataset, read_idx, read_idx_dataset, read_idx_file};
use dpx::data::libsvm::{load_libsvm_pair, read_libsvm};
use dpx::data::source::{DataSource, NamedDataset, data_dir_from_env};
use dpx::data::{DataError, load};

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// An IDX file of unsigned bytes with the given dims and data.
fn idx_bytes(dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut b = vec![0, 0, 0x08, dims.len() as u8];
    for d in dims {
        b.extend_from_slice(&d.to_be_bytes());
    }
    b.extend_from_slice(data);
    b
}

/// Three 2x3 images with pixel (i, r, c) = 10 i + 3 r + c, labels 7, 0, 9.
fn small_idx() -> (Vec<u8>, Vec<u8>) {
    let pixels: Vec<u8> = (0..3u8)
        .flat_map(|i| (0..2u8).flat_map(move |r| (0..3u8).map(move |c| 10 * i + 3 * r + c)))
        .collect();
    (idx_bytes(&[3, 2, 3], &pixels), idx_bytes(&[3], &[7, 0, 9]))
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

// ---------------------------------------------------------------- IDX

#[test]
fn idx_raw_and_gzip_parse_to_the_same_dataset() {
    let (images, labels) = small_idx();
    let raw = read_idx_dataset(&images[..], &labels[..], 10).unwrap();
    let gz = read_idx_dataset(&gzip(&images)[..], &gzip(&labels)[..], 10).unwrap();
    assert_eq!(raw, gz);
    assert_eq!(raw.len(), 3);
    assert_eq!(raw.sample_shape, vec![1, 2, 3]);
    assert_eq!(raw.labels, vec![7, 0, 9]);
    assert_eq!(raw.num_classes, 10);
    // Pixel (i=2, r=1, c=2) = 20 + 3 + 2 = 25, at flat column 1*3 + 2 = 5.
    assert_eq!(raw.features[[2, 5]], 25.0);
    assert_eq!(raw.features[[0, 0]], 0.0);
}

#[test]
fn idx_files_raw_and_gz_name_the_file_in_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (images, labels) = small_idx();
    let i = write(dir.path(), "img", &images);
    let l = write(dir.path(), "lab.gz", &gzip(&labels));
    let ds = load_idx_dataset(&i, &l, 10).unwrap();
    assert_eq!(ds.labels, vec![7, 0, 9]);

    let bad = write(dir.path(), "bad", &[1, 2, 3, 4, 5, 6, 7, 8]);
    let err = read_idx_file(&bad).unwrap_err();
    assert!(matches!(err, DataError::BadMagic { path: Some(ref p), .. } if p == &bad));
    assert!(err.to_string().contains("bad"), "{err}");
}

#[test]
fn idx_wrong_magic() {
    let mut b = small_idx().0;
    b[2] = 0x0D; // float data, not unsigned bytes
    assert!(matches!(read_idx(&b[..]), Err(DataError::BadMagic { .. })));
    let png = b"\x89PNG\r\n\x1a\n....".to_vec();
    assert!(matches!(
        read_idx(&png[..]),
        Err(DataError::BadMagic { .. })
    ));
}

#[test]
fn idx_truncated_header_and_body() {
    let (images, _) = small_idx();
    for cut in [2, 6, images.len() - 1] {
        let err = read_idx(&images[..cut]).unwrap_err();
        assert!(
            matches!(err, DataError::Truncated { .. }),
            "cut {cut}: {err}"
        );
        let err = read_idx(&gzip(&images[..cut])[..]).unwrap_err();
        assert!(
            matches!(err, DataError::Truncated { .. }),
            "gz cut {cut}: {err}"
        );
    }
    // A gzip stream cut in the middle is an I/O error (unexpected end), not a panic.
    let gz = gzip(&images);
    let err = read_idx(&gz[..gz.len() - 10]).unwrap_err();
    assert!(
        matches!(err, DataError::Io { .. } | DataError::Truncated { .. }),
        "{err}"
    );
}

#[test]
fn idx_truncated_raw_file_is_caught_from_the_file_length() {
    let dir = tempfile::tempdir().unwrap();
    let (images, _) = small_idx();
    let p = write(dir.path(), "short", &images[..images.len() - 4]);
    let err = read_idx_file(&p).unwrap_err();
    assert!(
        matches!(
            err,
            DataError::Truncated {
                expected_bytes: 34,
                found_bytes: 30,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn idx_trailing_data() {
    let (mut images, _) = small_idx();
    images.push(0);
    assert!(matches!(
        read_idx(&images[..]),
        Err(DataError::TrailingData { .. })
    ));
}

#[test]
fn idx_absurd_header_is_refused_without_allocating() {
    // Claims 4e9 x 4e9 x 4e9 bytes over a 16-byte file.
    let b = idx_bytes(&[4_000_000_000, 4_000_000_000, 4_000_000_000], &[]);
    assert!(matches!(read_idx(&b[..]), Err(DataError::TooLarge { .. })));
    // Claims 2^29 bytes (under the bound) over a tiny body: read lazily, so truncated.
    let b = idx_bytes(&[1 << 29], &[1, 2, 3]);
    assert!(matches!(read_idx(&b[..]), Err(DataError::Truncated { .. })));
    // Too many dimensions.
    let b = idx_bytes(&[1, 1, 1, 1, 1, 1], &[0]);
    assert!(matches!(read_idx(&b[..]), Err(DataError::BadHeader { .. })));
}

#[test]
fn idx_label_image_count_mismatch_names_both_files() {
    let dir = tempfile::tempdir().unwrap();
    let (images, _) = small_idx();
    let i = write(dir.path(), "images.idx", &images);
    let l = write(dir.path(), "labels.idx", &idx_bytes(&[2], &[1, 2]));
    let err = load_idx_dataset(&i, &l, 10).unwrap_err();
    assert!(matches!(
        err,
        DataError::CountMismatch {
            images: 3,
            labels: 2,
            ..
        }
    ));
    let msg = err.to_string();
    assert!(
        msg.contains("images.idx") && msg.contains("labels.idx"),
        "{msg}"
    );
}

#[test]
fn idx_labels_out_of_range_and_wrong_rank() {
    let (images, _) = small_idx();
    let labels = idx_bytes(&[3], &[1, 10, 2]);
    assert!(matches!(
        read_idx_dataset(&images[..], &labels[..], 10),
        Err(DataError::BadLabel { .. })
    ));
    // Images passed as labels: 3-D labels.
    assert!(matches!(
        read_idx_dataset(&images[..], &images[..], 10),
        Err(DataError::BadHeader { .. })
    ));
}

// ---------------------------------------------------------------- CIFAR-10

/// `n` CIFAR records: label i mod 10, pixel j of record i = (i + j) mod 256.
fn cifar_bytes(n: usize, offset: usize) -> Vec<u8> {
    let mut b = Vec::with_capacity(n * RECORD_BYTES);
    for i in 0..n {
        b.push(((i + offset) % 10) as u8);
        b.extend((0..3072).map(|j| ((i + offset + j) % 256) as u8));
    }
    b
}

#[test]
fn cifar_batch_raw_and_gzip() {
    let b = cifar_bytes(4, 0);
    let raw = cifar::read_cifar_batch(&b[..]).unwrap();
    let gz = cifar::read_cifar_batch(&gzip(&b)[..]).unwrap();
    assert_eq!(raw, gz);
    assert_eq!(raw.len(), 4);
    assert_eq!(raw.sample_shape, vec![3, 32, 32]);
    assert_eq!(raw.labels, vec![0, 1, 2, 3]);
    // Record 3, green plane (offset 1024), pixel (row 0, col 5): byte (3 + 1029) mod 256 = 8.
    assert_eq!(raw.features[[3, 1029]], 8.0);
}

#[test]
fn cifar_hostile_batches() {
    let b = cifar_bytes(2, 0);
    assert!(matches!(
        cifar::read_cifar_batch(&b[..b.len() - 100]),
        Err(DataError::RecordSize { .. })
    ));
    assert!(matches!(
        cifar::read_cifar_batch(&[][..]),
        Err(DataError::Empty { .. })
    ));
    let mut bad = b.clone();
    bad[RECORD_BYTES] = 10; // label of record 1
    assert!(matches!(
        cifar::read_cifar_batch(&bad[..]),
        Err(DataError::BadLabel { .. })
    ));
}

fn write_cifar_dir(dir: &Path, gz: bool) {
    for (k, stem) in cifar::TRAIN_BATCHES.iter().enumerate() {
        let b = cifar_bytes(2, 2 * k);
        if gz {
            write(dir, &format!("{stem}.bin.gz"), &gzip(&b));
        } else {
            write(dir, &format!("{stem}.bin"), &b);
        }
    }
    write(dir, "test_batch.bin", &cifar_bytes(3, 100));
}

#[test]
fn cifar_directory_bin_and_bin_gz() {
    for gz in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        write_cifar_dir(dir.path(), gz);
        let tt = cifar::load_cifar_dir(dir.path()).unwrap();
        assert_eq!(tt.train.len(), 10);
        assert_eq!(tt.test.len(), 3);
        assert_eq!(tt.train.labels, (0..10).collect::<Vec<_>>());
        assert_eq!(tt.test.labels, vec![0, 1, 2]);
    }
}

fn cifar_tar(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, data) in members {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append_data(&mut header, name, &data[..]).unwrap();
    }
    gzip(&builder.into_inner().unwrap())
}

#[test]
fn cifar_official_tarball_read_directly() {
    let mut members: Vec<(String, Vec<u8>)> = vec![(
        "cifar-10-batches-bin/batches.meta.txt".into(),
        b"airplane\n".to_vec(),
    )];
    // Members deliberately out of order: test first, then batches 5..1.
    members.push((
        "cifar-10-batches-bin/test_batch.bin".into(),
        cifar_bytes(3, 100),
    ));
    for k in (0..5).rev() {
        members.push((
            format!("cifar-10-batches-bin/data_batch_{}.bin", k + 1),
            cifar_bytes(2, 2 * k),
        ));
    }
    let m: Vec<(&str, Vec<u8>)> = members
        .iter()
        .map(|(n, d)| (n.as_str(), d.clone()))
        .collect();
    let tt = cifar::read_cifar_tar(&cifar_tar(&m)[..]).unwrap();
    assert_eq!(tt.train.labels, (0..10).collect::<Vec<_>>());
    assert_eq!(tt.test.len(), 3);

    // The same archive through `load` from <data_dir>/cifar10/cifar-10-binary.tar.gz.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("cifar10")).unwrap();
    write(
        &dir.path().join("cifar10"),
        "cifar-10-binary.tar.gz",
        &cifar_tar(&m),
    );
    let source = DataSource::Named {
        dataset: NamedDataset::Cifar10,
        path: None,
    };
    assert_eq!(load(&source, dir.path()).unwrap(), tt);

    // A missing member is an error naming it.
    let err = cifar::read_cifar_tar(&cifar_tar(&m[..m.len() - 1])[..]).unwrap_err();
    assert!(matches!(err, DataError::Inconsistent { .. }));
    assert!(err.to_string().contains("data_batch_1.bin"), "{err}");
}

// ---------------------------------------------------------------- LIBSVM

const LIBSVM_TEXT: &str = "\
-1 3:1 11:0.5 # a comment
+1 1:2 4:-1

+1 2:1
";

#[test]
fn libsvm_parses_labels_indices_and_comments() {
    for bytes in [
        LIBSVM_TEXT.as_bytes().to_vec(),
        gzip(LIBSVM_TEXT.as_bytes()),
    ] {
        let f = read_libsvm(&bytes[..]).unwrap();
        assert_eq!(f.max_index, 11);
        assert_eq!(f.labels.lines, vec![1, 2, 4]);
        let map = dpx::data::labels::LabelMap::infer(&[(&f.labels, None)]).unwrap();
        let ds = f.into_dataset(12, map).unwrap();
        assert_eq!(ds.labels, vec![0, 1, 1]);
        assert_eq!(ds.num_classes, 2);
        assert_eq!(ds.features[[0, 2]], 1.0);
        assert_eq!(ds.features[[0, 10]], 0.5);
        assert_eq!(ds.features[[1, 0]], 2.0);
        assert_eq!(ds.features[[1, 3]], -1.0);
        assert_eq!(ds.features[[2, 1]], 1.0);
        assert_eq!(ds.features.sum(), 1.0 + 0.5 + 2.0 - 1.0 + 1.0);
    }
}

#[test]
fn libsvm_fixed_feature_count_makes_train_and_test_agree() {
    let dir = tempfile::tempdir().unwrap();
    let train = write(dir.path(), "train", b"+1 1:1 5:1\n-1 2:1\n");
    let test = write(dir.path(), "test", b"-1 3:1\n");
    let (a, b) = load_libsvm_pair(&train, &test, Some(8)).unwrap();
    assert_eq!((a.num_features(), b.num_features()), (8, 8));
    // Inferred: the largest index in either file.
    let (a, b) = load_libsvm_pair(&train, &test, None).unwrap();
    assert_eq!((a.num_features(), b.num_features()), (5, 5));
    // An index above the fixed count names the file and line.
    let err = load_libsvm_pair(&train, &test, Some(4)).unwrap_err();
    assert!(
        matches!(err, DataError::FeatureIndex { index: 5, line: Some(1), path: Some(ref p), .. } if p == &train),
        "{err}"
    );
}

#[test]
fn libsvm_hostile_lines() {
    type Check = fn(&DataError) -> bool;
    let cases: [(&str, Check); 7] = [
        ("+1 0:1\n", |e| {
            matches!(e, DataError::FeatureIndex { index: 0, .. })
        }),
        ("+1 a:1\n", |e| matches!(e, DataError::Parse { .. })),
        ("+1 3:x\n", |e| matches!(e, DataError::Parse { .. })),
        ("+1 3:nan\n", |e| matches!(e, DataError::NonFinite { .. })),
        ("+1 3:inf\n", |e| matches!(e, DataError::NonFinite { .. })),
        ("yes 3:1\n", |e| matches!(e, DataError::Parse { .. })),
        ("+1 99999999999:1\n", |e| {
            matches!(e, DataError::FeatureIndex { .. })
        }),
    ];
    for (text, check) in cases {
        let err = read_libsvm(text.as_bytes()).unwrap_err();
        assert!(check(&err), "{text:?}: {err}");
        assert!(err.to_string().contains("line 1"), "{err}");
    }
    assert!(matches!(
        read_libsvm(&b"\n# only a comment\n"[..]),
        Err(DataError::Empty { .. })
    ));
    assert!(matches!(
        read_libsvm(&b"0.5 1:1\n"[..]),
        Err(DataError::BadLabel { .. })
    ));
}

#[test]
fn libsvm_multiclass_labels_are_class_indices() {
    let dir = tempfile::tempdir().unwrap();
    let train = write(dir.path(), "tr", b"0 1:1\n2 1:2\n1 1:3\n");
    let test = write(dir.path(), "te", b"3 1:1\n");
    let (a, b) = load_libsvm_pair(&train, &test, None).unwrap();
    assert_eq!(a.labels, vec![0, 2, 1]);
    assert_eq!((a.num_classes, b.num_classes), (4, 4));
    // −1 mixed with 0 is neither ±1 nor class indices.
    let bad = write(dir.path(), "bad", b"-1 1:1\n0 1:1\n");
    let err = load_libsvm_pair(&bad, &test, None).unwrap_err();
    assert!(
        matches!(err, DataError::BadLabel { line: Some(1), .. }),
        "{err}"
    );
}

// ---------------------------------------------------------------- CSV

#[test]
fn csv_with_header_label_by_name_and_gzip() {
    let text = "x1,label,x2\n1.5,1,-2\n0,0,3e2\n";
    for bytes in [text.as_bytes().to_vec(), gzip(text.as_bytes())] {
        let t = read_csv(&bytes[..], &CsvOptions::default()).unwrap();
        assert_eq!(t.num_features, 2);
        assert_eq!(t.features, vec![1.5, -2.0, 0.0, 300.0]);
        assert_eq!(t.labels.values, vec![1.0, 0.0]);
        assert_eq!(t.feature_names, vec!["x1".to_string(), "x2".to_string()]);
    }
}

#[test]
fn csv_without_header_label_by_index() {
    let opts = CsvOptions {
        has_header: false,
        label: LabelColumn::Index(2),
        delimiter: b';',
    };
    let t = read_csv(&b"1;2;-1\n3;4;1\n"[..], &opts).unwrap();
    assert_eq!(t.features, vec![1.0, 2.0, 3.0, 4.0]);
    let map = dpx::data::labels::LabelMap::infer(&[(&t.labels, None)]).unwrap();
    assert_eq!(t.into_dataset(map).labels, vec![0, 1]);
}

#[test]
fn csv_hostile_inputs() {
    let opts = CsvOptions::default();
    let e = read_csv(&b"a,label\nx,1\n"[..], &opts).unwrap_err();
    assert!(matches!(e, DataError::Parse { line: Some(2), .. }), "{e}");
    let e = read_csv(&b"a,label\nNaN,1\n"[..], &opts).unwrap_err();
    assert!(
        matches!(e, DataError::NonFinite { line: Some(2), .. }),
        "{e}"
    );
    let e = read_csv(&b"a,label\n1,1\n1,2,3\n"[..], &opts).unwrap_err();
    assert!(
        matches!(
            e,
            DataError::RaggedRow {
                expected: 2,
                found: 3,
                ..
            }
        ),
        "{e}"
    );
    let e = read_csv(&b"a,b\n1,1\n"[..], &opts).unwrap_err();
    assert!(matches!(e, DataError::BadHeader { .. }), "{e}");
    let e = read_csv(&b"a,label\n1,0.5\n"[..], &opts).unwrap_err();
    assert!(matches!(e, DataError::BadLabel { .. }), "{e}");
    let e = read_csv(&b"a,label\n"[..], &opts).unwrap_err();
    assert!(matches!(e, DataError::Empty { .. }), "{e}");
    let no_header_by_name = CsvOptions {
        has_header: false,
        ..CsvOptions::default()
    };
    let e = read_csv(&b"1,1\n"[..], &no_header_by_name).unwrap_err();
    assert!(matches!(e, DataError::InvalidParameter { .. }), "{e}");
}

#[test]
fn csv_source_loads_train_and_test() {
    let dir = tempfile::tempdir().unwrap();
    let train = write(dir.path(), "train.csv", b"label,a,b\n0,1,2\n2,3,4\n");
    let test = write(dir.path(), "test.csv", b"label,a,b\n1,5,6\n");
    let source = DataSource::Csv {
        train: train.clone(),
        test: test.clone(),
        options: CsvOptions::default(),
    };
    let tt = load(&source, Path::new("unused")).unwrap();
    assert_eq!(tt.train.labels, vec![0, 2]);
    assert_eq!((tt.train.num_classes, tt.test.num_classes), (3, 3));
    let narrow = write(dir.path(), "narrow.csv", b"label,a\n1,5\n");
    let source = DataSource::Csv {
        train,
        test: narrow,
        options: CsvOptions::default(),
    };
    assert!(matches!(
        load(&source, Path::new("unused")),
        Err(DataError::Inconsistent { .. })
    ));
}

// ---------------------------------------------------------------- locating datasets

#[test]
fn data_dir_defaults_to_data_and_honours_the_variable() {
    assert_eq!(data_dir_from_env(None), Path::new("data"));
    assert_eq!(data_dir_from_env(Some("".into())), Path::new("data"));
    assert_eq!(data_dir_from_env(Some("/x/y".into())), Path::new("/x/y"));
}

#[test]
fn mnist_layout_raw_or_gz_and_explicit_path() {
    let dir = tempfile::tempdir().unwrap();
    let mnist = dir.path().join("mnist");
    std::fs::create_dir(&mnist).unwrap();
    let (images, labels) = small_idx();
    write(&mnist, "train-images-idx3-ubyte.gz", &gzip(&images));
    write(&mnist, "train-labels-idx1-ubyte", &labels);
    write(&mnist, "t10k-images-idx3-ubyte", &images);
    write(&mnist, "t10k-labels-idx1-ubyte.gz", &gzip(&labels));
    let tt = load(
        &DataSource::Named {
            dataset: NamedDataset::Mnist,
            path: None,
        },
        dir.path(),
    )
    .unwrap();
    assert_eq!((tt.train.len(), tt.test.len()), (3, 3));
    // An explicit path wins over the data directory.
    let tt2 = load(
        &DataSource::Named {
            dataset: NamedDataset::FashionMnist,
            path: Some(mnist.clone()),
        },
        Path::new("/nonexistent"),
    )
    .unwrap();
    assert_eq!(tt, tt2);
}

#[test]
fn missing_dataset_says_where_it_looked_and_how_to_fetch() {
    let dir = tempfile::tempdir().unwrap();
    for (dataset, needle) in [
        (NamedDataset::Mnist, "train-images-idx3-ubyte"),
        (NamedDataset::FashionMnist, "train-images-idx3-ubyte"),
        (NamedDataset::Cifar10, "cifar-10-binary.tar.gz"),
        (NamedDataset::A9a, "a9a.t"),
        (NamedDataset::Svhn, "train_32x32.mat"),
    ] {
        let err = load(
            &DataSource::Named {
                dataset,
                path: None,
            },
            dir.path(),
        )
        .unwrap_err();
        assert!(matches!(err, DataError::NotFound { .. }), "{err}");
        let msg = err.to_string();
        let expected_dir = dir.path().join(dataset.name());
        assert!(msg.contains(&expected_dir.display().to_string()), "{msg}");
        assert!(msg.contains(needle), "{msg}");
        assert!(
            msg.contains(&format!(
                "dpx data fetch {} --data-dir {}",
                dataset.name(),
                dir.path().display()
            )),
            "{msg}"
        );
    }
    // With the default data directory the command is the short one.
    assert_eq!(
        NamedDataset::A9a.fetch_command(Path::new("data")),
        "dpx data fetch a9a"
    );
}

#[test]
fn named_dataset_names_round_trip() {
    for d in NamedDataset::ALL {
        assert_eq!(d.name().parse::<NamedDataset>().unwrap(), d);
    }
    assert!(matches!(
        "mnist2".parse::<NamedDataset>(),
        Err(DataError::InvalidParameter { .. })
    ));
}

#[test]
fn idx_bound_is_on_the_converted_f32_size() {
    // A regression: a header may claim up to the 4 GiB raw limit, 16 GiB once converted to f32.
    // [70000, 128, 128] is 1.1e9 bytes on disk, over the 2^30 values (4 GiB of f32) bound.
    let b = idx_bytes(&[70_000, 128, 128], &[]);
    let e = read_idx(&b[..]).unwrap_err();
    assert!(matches!(e, DataError::TooLarge { .. }), "{e}");
    assert!(e.to_string().contains("f32"), "{e}");
    let gz = gzip(&b);
    let e = read_idx(&gz[..]).unwrap_err();
    assert!(matches!(e, DataError::TooLarge { .. }), "{e}");
}

#[test]
fn idx_images_with_a_labels_header_say_the_dimensions_are_wrong() {
    // A regression: a 1-dimensional header on an images file was reported as "trailing data".
    let dir = tempfile::tempdir().unwrap();
    let (images, labels) = small_idx();
    let flat = idx_bytes(&[3], &images[16..]);
    let i = write(dir.path(), "images.idx", &flat);
    let l = write(dir.path(), "labels.idx", &labels);
    let e = load_idx_dataset(&i, &l, 10).unwrap_err();
    assert!(matches!(e, DataError::BadHeader { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("images.idx") && msg.contains("for images"),
        "{msg}"
    );
    assert!(!msg.contains("trailing"), "{msg}");
}

#[test]
fn cifar_batch_one_byte_too_long_is_not_called_truncated() {
    let mut b = cifar_bytes(2, 0);
    b.push(0);
    let e = cifar::read_cifar_batch(&b[..]).unwrap_err();
    assert!(matches!(e, DataError::RecordSize { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("not a multiple of the 3073-byte record"),
        "{msg}"
    );
    assert!(msg.contains("2 whole records and 1 bytes over"), "{msg}");
}

#[test]
fn numbers_beyond_f32_say_they_overflow() {
    let e = read_libsvm(&b"+1 3:1e308\n"[..]).unwrap_err();
    assert!(matches!(e, DataError::Overflow { .. }), "{e}");
    assert!(e.to_string().contains("overflows f32"), "{e}");
    let e = read_csv(&b"a,label\n-1e300,1\n"[..], &CsvOptions::default()).unwrap_err();
    assert!(
        matches!(e, DataError::Overflow { line: Some(2), .. }),
        "{e}"
    );
    // NaN and infinities are still "not finite".
    let e = read_libsvm(&b"+1 3:inf\n"[..]).unwrap_err();
    assert!(matches!(e, DataError::NonFinite { .. }), "{e}");
}

#[test]
fn a_short_first_csv_line_is_blamed_on_line_1() {
    let opts = CsvOptions {
        has_header: false,
        label: LabelColumn::Index(0),
        ..CsvOptions::default()
    };
    let e = read_csv(&b"1,2\n0,1,2\n1,3,4\n"[..], &opts).unwrap_err();
    assert!(
        matches!(
            e,
            DataError::RaggedRow {
                line: Some(1),
                expected: 3,
                found: 2,
                ..
            }
        ),
        "{e}"
    );
    // A short header likewise.
    let e = read_csv(&b"a,label\n1,2,1\n3,4,0\n"[..], &CsvOptions::default()).unwrap_err();
    assert!(
        matches!(e, DataError::RaggedRow { line: Some(1), .. }),
        "{e}"
    );
    // One odd row after agreeing ones is blamed on itself.
    let e = read_csv(&b"a,label\n1,1\n1,2,3\n"[..], &CsvOptions::default()).unwrap_err();
    assert!(
        matches!(e, DataError::RaggedRow { line: Some(3), .. }),
        "{e}"
    );
}

#[cfg(unix)]
#[test]
fn a_directory_or_fifo_where_a_data_file_belongs_is_not_a_regular_file() {
    // A regression: it was "dataset mnist not found ... Download it" (and a FIFO could hang).
    let dir = tempfile::tempdir().unwrap();
    let mnist = dir.path().join("mnist");
    std::fs::create_dir_all(mnist.join("train-images-idx3-ubyte")).unwrap();
    let err = load(
        &DataSource::Named {
            dataset: NamedDataset::Mnist,
            path: None,
        },
        dir.path(),
    )
    .unwrap_err();
    assert!(matches!(err, DataError::NotRegularFile { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("not a regular file (a directory)"), "{msg}");
    assert!(!msg.contains("Download"), "{msg}");

    let fifo = dir.path().join("train.csv");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        let err = dpx::data::csv::read_csv_file(&fifo, &CsvOptions::default()).unwrap_err();
        assert!(
            err.to_string().contains("not a regular file (a FIFO)"),
            "{err}"
        );
    }
}

/// An SVHN split of `labels.len()` images in the published layout (X: 32 × 32 × 3 × N uint8,
/// column-major; y: N × 1 doubles stored as uint8), pixel (row, col, c) of image i = (row + 2 col
/// + 3 c + 5 i) mod 256.
fn svhn_split(labels: &[u8], compress: bool) -> Vec<u8> {
    use dpx::data::mat::write::{Var, file};
    let n = labels.len();
    let mut x = vec![0u8; n * 3072];
    for (k, v) in x.iter_mut().enumerate() {
        let (row, col, c, i) = (k % 32, (k / 32) % 32, (k / 1024) % 3, k / 3072);
        *v = ((row + 2 * col + 3 * c + 5 * i) % 256) as u8;
    }
    let (dx, dy) = ([32, 32, 3, n as i32], [n as i32, 1]);
    file(
        &[
            Var {
                name: "X",
                class: 9,
                dims: &dx,
                storage: 2,
                data: &x,
            },
            Var {
                name: "y",
                class: 6,
                dims: &dy,
                storage: 2,
                data: labels,
            },
        ],
        compress,
    )
}

#[test]
fn svhn_loads_from_its_directory_compressed_plain_or_gzipped() {
    let dir = tempfile::tempdir().unwrap();
    let svhn = dir.path().join("svhn");
    std::fs::create_dir(&svhn).unwrap();
    std::fs::write(svhn.join("train_32x32.mat"), svhn_split(&[1, 10, 4], true)).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&svhn_split(&[10, 7], false)).unwrap();
    std::fs::write(svhn.join("test_32x32.mat.gz"), gz.finish().unwrap()).unwrap();
    let tt = load(
        &DataSource::Named {
            dataset: NamedDataset::Svhn,
            path: None,
        },
        dir.path(),
    )
    .unwrap();
    assert_eq!(tt.train.labels, vec![1, 0, 4]);
    assert_eq!(tt.test.labels, vec![0, 7]);
    assert_eq!(tt.train.sample_shape, vec![3, 32, 32]);
    assert_eq!(tt.train.num_classes, 10);
    // dpx's pixel (c, row, col) of image i is MATLAB's X(row, col, c, i).
    for (i, c, row, col) in [(0, 0, 0, 1), (2, 2, 31, 0), (1, 1, 5, 17)] {
        let want = ((row + 2 * col + 3 * c + 5 * i) % 256) as f32;
        assert_eq!(tt.train.features[[i, c * 1024 + row * 32 + col]], want);
    }
    // A damaged file is an error naming it.
    std::fs::write(svhn.join("train_32x32.mat"), b"MATLAB 5.0 MAT-file").unwrap();
    let err = load(
        &DataSource::Named {
            dataset: NamedDataset::Svhn,
            path: None,
        },
        dir.path(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("train_32x32.mat"), "{err}");
}
