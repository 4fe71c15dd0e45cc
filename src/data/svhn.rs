//! Data room: SVHN, the Street View House Numbers digits in their cropped 32×32 form (Netzer,
//! Wang, Coates, Bissacco, Wu, Ng, "Reading digits in natural images with unsupervised feature
//! learning", NIPS workshop 2011; "Format 2" on the dataset page).
//!
//! `train_32x32.mat` (73,257 images) and `test_32x32.mat` (26,032) are MAT-files (`mat`) holding
//! `X`, uint8 of dimensions 32 × 32 × 3 × N (row, column, colour, image; column-major), and `y`,
//! N × 1 labels in 1..=10 where 10 stands for the digit 0. dpx reads them as CIFAR-10's layout:
//! `[N, 3072]` channel-major (R plane, G plane, B plane, each row-major), sample shape
//! `[3, 32, 32]`, pixels in 0..=255, and label 10 as class 0 (as torchvision does), so classes
//! are the digits 0..=9. The `extra` split (531,131 images) is not read.
//!
//! Owns the interpretation of the two arrays and its validation (dimensions, label range).
//! Must not scale or normalise pixels (that is `preprocess`).

use std::path::Path;

use ndarray::Array2;

use super::Dataset;
use super::error::DataError;
use super::io::open_maybe_gzip;
use super::mat::{MatArray, read_mat_reader};

/// Image side in pixels.
pub const SIDE: usize = 32;
/// Colour channels.
pub const CHANNELS: usize = 3;
/// Pixel values per image.
pub const PIXELS: usize = CHANNELS * SIDE * SIDE;
/// Number of classes (the digits).
pub const NUM_CLASSES: usize = 10;
/// The training file.
pub const TRAIN_FILE: &str = "train_32x32.mat";
/// The test file.
pub const TEST_FILE: &str = "test_32x32.mat";

fn header(expected: String, found: String) -> DataError {
    DataError::BadHeader {
        path: None,
        expected,
        found,
    }
}

/// The dataset held by SVHN's two arrays.
pub fn from_arrays(arrays: Vec<MatArray>) -> Result<Dataset, DataError> {
    let mut x = None;
    let mut y = None;
    for a in arrays {
        match a.name.as_str() {
            "X" => x = Some(a),
            "y" => y = Some(a),
            _ => {}
        }
    }
    let (Some(x), Some(y)) = (x, y) else {
        return Err(header(
            "the variables X and y of an SVHN file".into(),
            "a MAT-file without them".into(),
        ));
    };
    if x.dims.len() != 4 || x.dims[..3] != [SIDE, SIDE, CHANNELS] {
        return Err(header(
            "X of dimensions 32 × 32 × 3 × N".into(),
            format!("{:?}", x.dims),
        ));
    }
    let n = x.dims[3];
    let label_count: usize = y.dims.iter().product();
    if label_count != n || y.dims.iter().filter(|&&d| d != 1).count() > 1 {
        return Err(header(
            format!("y of dimensions {n} × 1 (one label per image of X)"),
            format!("{:?}", y.dims),
        ));
    }
    let mut labels = Vec::with_capacity(n);
    for (i, &v) in y.data.iter().enumerate() {
        if !(1.0..=10.0).contains(&v) || v.fract() != 0.0 {
            return Err(DataError::BadLabel {
                path: None,
                line: None,
                expected: format!("a label in 1..=10 (image #{i})"),
                found: v.to_string(),
            });
        }
        labels.push(v as usize % 10);
    }
    // MATLAB's X(row, col, c, i) sits at row + 32·col + 1024·c + 3072·i; dpx's pixel (c, row,
    // col) of image i at c·1024 + row·32 + col + 3072·i: each 32 × 32 colour plane is transposed,
    // in place.
    let mut data = x.data;
    for plane in data.chunks_exact_mut(SIDE * SIDE) {
        for row in 0..SIDE {
            for col in row + 1..SIDE {
                plane.swap(row * SIDE + col, col * SIDE + row);
            }
        }
    }
    let features =
        Array2::from_shape_vec((n, PIXELS), data).expect("X holds n images of PIXELS values");
    Ok(Dataset {
        features,
        labels,
        sample_shape: vec![CHANNELS, SIDE, SIDE],
        num_classes: NUM_CLASSES,
    })
}

/// Read one SVHN split file (the MAT-file, or it gzipped); errors name the file.
pub fn read_svhn_file(path: &Path) -> Result<Dataset, DataError> {
    let reader = open_maybe_gzip(path)?;
    read_mat_reader(reader, &["X", "y"])
        .and_then(from_arrays)
        .map_err(|e| e.with_path(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::mat::read_mat;
    use crate::data::mat::write::{Var, file};

    /// Images whose pixel (row, col, c) of image i is (7 row + 3 col + 50 c + 101 i) mod 256.
    fn svhn_bytes(labels: &[u8], compress: bool) -> Vec<u8> {
        let n = labels.len();
        let mut x = vec![0u8; n * PIXELS];
        for i in 0..n {
            for c in 0..CHANNELS {
                for row in 0..SIDE {
                    for col in 0..SIDE {
                        x[row + SIDE * col + SIDE * SIDE * c + PIXELS * i] =
                            ((row * 7 + col * 3 + c * 50 + i * 101) % 256) as u8;
                    }
                }
            }
        }
        let dims_x = [32, 32, 3, n as i32];
        let dims_y = [n as i32, 1];
        file(
            &[
                Var {
                    name: "X",
                    class: 9,
                    dims: &dims_x,
                    storage: 2,
                    data: &x,
                },
                Var {
                    name: "y",
                    class: 6,
                    dims: &dims_y,
                    storage: 2,
                    data: labels,
                },
            ],
            compress,
        )
    }

    #[test]
    fn pixels_are_channel_planes_row_major_and_ten_is_zero() {
        for compress in [false, true] {
            let bytes = svhn_bytes(&[10, 3], compress);
            let d = from_arrays(read_mat(&bytes, &["X", "y"]).unwrap()).unwrap();
            assert_eq!(d.labels, vec![0, 3]);
            assert_eq!(d.sample_shape, vec![3, 32, 32]);
            for i in 0..2 {
                for c in 0..3 {
                    for (row, col) in [(0, 0), (0, 1), (1, 0), (31, 5), (4, 31)] {
                        let want = ((row * 7 + col * 3 + c * 50 + i * 101) % 256) as f32;
                        assert_eq!(d.features[[i, c * 1024 + row * 32 + col]], want);
                    }
                }
            }
        }
    }

    #[test]
    fn wrong_shapes_and_labels_are_errors() {
        let bad_label = svhn_bytes(&[0, 3], false);
        assert!(matches!(
            from_arrays(read_mat(&bad_label, &["X", "y"]).unwrap()),
            Err(DataError::BadLabel { .. })
        ));
        let x = vec![0u8; 16];
        let wrong = file(
            &[
                Var {
                    name: "X",
                    class: 9,
                    dims: &[4, 4],
                    storage: 2,
                    data: &x,
                },
                Var {
                    name: "y",
                    class: 6,
                    dims: &[1, 1],
                    storage: 2,
                    data: &[1],
                },
            ],
            false,
        );
        assert!(matches!(
            from_arrays(read_mat(&wrong, &["X", "y"]).unwrap()),
            Err(DataError::BadHeader { .. })
        ));
        let only_x = read_mat(&bad_label, &["X"]).unwrap();
        assert!(matches!(
            from_arrays(only_x),
            Err(DataError::BadHeader { .. })
        ));
    }
}
