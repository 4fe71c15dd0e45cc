//! Data room: the CIFAR-10 binary format (Krizhevsky, "Learning Multiple Layers of Features
//! from Tiny Images", 2009; the "binary version" on the dataset page).
//!
//! Each batch file is a sequence of 3073-byte records: one label byte (0..=9), then 1024 red,
//! 1024 green and 1024 blue pixel bytes of a 32x32 image, each plane row-major. Train is
//! `data_batch_1..5.bin`, test is `test_batch.bin`; each may be gzipped (`.bin.gz`), and the
//! official `cifar-10-binary.tar.gz` is read directly without unpacking.
//!
//! Owns parsing and validation: a file length that is not a whole number of records is an
//! error saying so, a label above 9 is rejected, archive member sizes are checked against
//! [`MAX_FILE_BYTES`] before reading. Must not scale or normalise pixels (that is `preprocess`).

use std::io::Read;
use std::path::{Path, PathBuf};

use ndarray::Array2;

use super::error::{DataError, MAX_FILE_BYTES};
use super::io::{maybe_gunzip, open_maybe_gzip, read_capped};
use super::{Dataset, TrainTest};

/// Image side in pixels.
pub const SIDE: usize = 32;
/// Colour channels (R, G, B planes).
pub const CHANNELS: usize = 3;
/// Pixel bytes per image.
pub const PIXELS: usize = CHANNELS * SIDE * SIDE;
/// Bytes per record: one label byte plus the pixels.
pub const RECORD_BYTES: usize = 1 + PIXELS;
/// Number of classes.
pub const NUM_CLASSES: usize = 10;
/// The training batch file stems, in order.
pub const TRAIN_BATCHES: [&str; 5] = [
    "data_batch_1",
    "data_batch_2",
    "data_batch_3",
    "data_batch_4",
    "data_batch_5",
];
/// The test batch file stem.
pub const TEST_BATCH: &str = "test_batch";

/// Examples accumulated from one or more batch files.
#[derive(Debug, Default, Clone)]
pub struct CifarBatches {
    features: Vec<f32>,
    labels: Vec<usize>,
}

impl CifarBatches {
    /// Parse one batch (raw or gzip) from `reader` and append its records.
    pub fn push_reader<R: Read>(&mut self, reader: R) -> Result<(), DataError> {
        self.push_reader_sized(reader, 0)
    }

    /// [`Self::push_reader`] with the read buffer pre-sized to `expected_bytes` (a hint, at most
    /// [`MAX_FILE_BYTES`] + 1), so a whole file is read without the buffer growing by doubling.
    fn push_reader_sized<R: Read>(
        &mut self,
        reader: R,
        expected_bytes: u64,
    ) -> Result<(), DataError> {
        let reader = maybe_gunzip(reader).map_err(DataError::io)?;
        let bytes = read_capped(reader, expected_bytes, "CIFAR-10 batch size in bytes")?;
        self.push_bytes(&bytes)
    }

    /// Parse one batch file (raw or gzip); errors name the file.
    pub fn push_file(&mut self, path: &Path) -> Result<(), DataError> {
        let reader = open_maybe_gzip(path)?;
        self.push_reader_sized(reader, file_bytes(path) + 1)
            .map_err(|e| e.with_path(path))
    }

    /// Make room for `records` more records at once (a hint: the arrays still grow if more come).
    /// Loading the five training batches into one array grew it by doubling, file after file:
    /// copies and fresh pages were a quarter of `dpx eval`'s time on CIFAR-10 (`perf`, 2026-11-26).
    pub fn reserve_records(&mut self, records: usize) {
        self.features.reserve(records.saturating_mul(PIXELS));
        self.labels.reserve(records);
    }

    /// Parse the records of one uncompressed batch held in memory.
    pub fn push_bytes(&mut self, bytes: &[u8]) -> Result<(), DataError> {
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(DataError::TooLarge {
                path: None,
                what: "CIFAR-10 batch size in bytes".to_string(),
                claimed: bytes.len() as u64,
                limit: MAX_FILE_BYTES,
            });
        }
        if bytes.is_empty() {
            return Err(DataError::Empty { path: None });
        }
        if !bytes.len().is_multiple_of(RECORD_BYTES) {
            return Err(DataError::RecordSize {
                path: None,
                what: "CIFAR-10 batch",
                record_bytes: RECORD_BYTES as u64,
                found_bytes: bytes.len() as u64,
            });
        }
        let n = bytes.len() / RECORD_BYTES;
        self.features.reserve(n * PIXELS);
        self.labels.reserve(n);
        for (i, record) in bytes.chunks_exact(RECORD_BYTES).enumerate() {
            let label = record[0] as usize;
            if label >= NUM_CLASSES {
                return Err(DataError::BadLabel {
                    path: None,
                    line: None,
                    expected: format!("a class in 0..{NUM_CLASSES} (record #{i})"),
                    found: label.to_string(),
                });
            }
            self.labels.push(label);
            self.features
                .extend(record[1..].iter().map(|&b| f32::from(b)));
        }
        Ok(())
    }

    /// Number of records so far.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// True when no record was read.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// The accumulated examples as a [`Dataset`] (pixels as f32 in 0..=255).
    ///
    /// # Shapes
    /// `features`: `[n, 3072]`, channel-major (R plane, G plane, B plane);
    /// `sample_shape`: `[3, 32, 32]`.
    pub fn into_dataset(self) -> Dataset {
        let n = self.labels.len();
        let features = Array2::from_shape_vec((n, PIXELS), self.features)
            .expect("push_bytes appends exactly PIXELS features per label");
        Dataset {
            features,
            labels: self.labels,
            sample_shape: vec![CHANNELS, SIDE, SIDE],
            num_classes: NUM_CLASSES,
        }
    }
}

/// Parse one CIFAR-10 batch (raw or gzip) from a reader.
pub fn read_cifar_batch<R: Read>(reader: R) -> Result<Dataset, DataError> {
    let mut b = CifarBatches::default();
    b.push_reader(reader)?;
    Ok(b.into_dataset())
}

/// The file for batch `stem` in `dir`: `stem.bin` or `stem.bin.gz`, whichever exists.
pub fn batch_file(dir: &Path, stem: &str) -> Option<PathBuf> {
    [format!("{stem}.bin"), format!("{stem}.bin.gz")]
        .into_iter()
        .map(|name| dir.join(name))
        .find(|p| p.is_file())
}

/// The size of the file at `path` in bytes (0 when it cannot be read: only a hint).
fn file_bytes(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// Load train (`data_batch_1..5`) and test (`test_batch`) from a `cifar-10-batches-bin/`
/// directory holding `.bin` or `.bin.gz` files.
pub fn load_cifar_dir(dir: &Path) -> Result<TrainTest, DataError> {
    let find = |stem: &str| {
        batch_file(dir, stem).ok_or_else(|| DataError::NotFound {
            dataset: "cifar10".to_string(),
            expected: format!("{stem}.bin or {stem}.bin.gz"),
            looked_in: vec![dir.to_path_buf()],
            hint:
                "the directory is incomplete; get the whole dataset with `dpx data fetch cifar10`"
                    .to_string(),
        })
    };
    let train_files = TRAIN_BATCHES
        .iter()
        .map(|stem| find(stem))
        .collect::<Result<Vec<_>, _>>()?;
    let mut train = CifarBatches::default();
    // Room for every record the raw files hold (each at most MAX_FILE_BYTES): what is read next.
    train.reserve_records(
        train_files
            .iter()
            .map(|p| usize::try_from(file_bytes(p).min(MAX_FILE_BYTES)).unwrap_or(0) / RECORD_BYTES)
            .sum(),
    );
    for path in &train_files {
        train.push_file(path)?;
    }
    let mut test = CifarBatches::default();
    test.push_file(&find(TEST_BATCH)?)?;
    Ok(TrainTest {
        train: train.into_dataset(),
        test: test.into_dataset(),
    })
}

/// Read train and test directly from the official `cifar-10-binary.tar.gz` (or an uncompressed
/// tar) without unpacking it. Members are matched by file name (`data_batch_1.bin` ...
/// `test_batch.bin`, in any directory); other members are skipped.
pub fn read_cifar_tar<R: Read>(reader: R) -> Result<TrainTest, DataError> {
    let reader = maybe_gunzip(reader).map_err(DataError::io)?;
    let mut archive = tar::Archive::new(reader);
    let mut train: [Option<Vec<u8>>; 5] = Default::default();
    let mut test: Option<Vec<u8>> = None;
    for entry in archive.entries().map_err(DataError::io)? {
        let mut entry = entry.map_err(DataError::io)?;
        let name = {
            let path = entry.path().map_err(DataError::io)?;
            match path.file_name().and_then(|n| n.to_str()) {
                Some(n) => n.to_string(),
                None => continue,
            }
        };
        let slot = if name == format!("{TEST_BATCH}.bin") {
            &mut test
        } else if let Some(i) = TRAIN_BATCHES
            .iter()
            .position(|s| name == format!("{s}.bin"))
        {
            &mut train[i]
        } else {
            continue;
        };
        let size = entry.header().size().map_err(DataError::io)?;
        if size > MAX_FILE_BYTES {
            return Err(DataError::TooLarge {
                path: None,
                what: format!("archive member {name} size"),
                claimed: size,
                limit: MAX_FILE_BYTES,
            });
        }
        let mut bytes = Vec::new();
        (&mut entry)
            .take(size)
            .read_to_end(&mut bytes)
            .map_err(DataError::io)?;
        *slot = Some(bytes);
    }
    let missing = |stem: &str| DataError::Inconsistent {
        what: "CIFAR-10 archive members".to_string(),
        expected: "data_batch_1.bin .. data_batch_5.bin and test_batch.bin".to_string(),
        found: format!("no {stem}.bin"),
    };
    let mut train_set = CifarBatches::default();
    for (i, bytes) in train.iter().enumerate() {
        let bytes = bytes.as_ref().ok_or_else(|| missing(TRAIN_BATCHES[i]))?;
        train_set.push_bytes(bytes)?;
    }
    let mut test_set = CifarBatches::default();
    test_set.push_bytes(test.as_ref().ok_or_else(|| missing(TEST_BATCH))?)?;
    Ok(TrainTest {
        train: train_set.into_dataset(),
        test: test_set.into_dataset(),
    })
}

/// [`read_cifar_tar`] on a file; errors name the file.
pub fn load_cifar_tar(path: &Path) -> Result<TrainTest, DataError> {
    super::io::check_regular(path, "the CIFAR-10 archive cifar-10-binary.tar.gz")?;
    let file = std::fs::File::open(path).map_err(|e| DataError::io(e).with_path(path))?;
    read_cifar_tar(file).map_err(|e| e.with_path(path))
}
