//! Data room: the IDX format of MNIST and Fashion-MNIST (raw or gzip).
//!
//! Format (LeCun et al., "THE MNIST DATABASE", file format section): two zero bytes, a type
//! code (0x08 = unsigned byte, the only one MNIST uses), the number of dimensions, then each
//! dimension as a big-endian u32, then the data in row-major order. Images are
//! `[n, rows, cols]`; labels are `[n]`.
//!
//! Owns parsing and validation only: a header's claimed size is checked against
//! [`MAX_FILE_BYTES`] (and, for a raw file, its length on disk) before any read, and the body
//! is read without trusting the header for allocation. Must not scale or otherwise transform
//! pixels (that is `preprocess`).

use std::fs;
use std::io::Read;
use std::path::Path;

use ndarray::Array2;

use super::Dataset;
use super::error::{DataError, MAX_ELEMENTS, MAX_FILE_BYTES};
use super::io::{is_gzip_file, maybe_gunzip, open_maybe_gzip, read_exact_body, read_some};

/// The IDX type code for unsigned bytes.
const TYPE_UBYTE: u8 = 0x08;

/// The most dimensions an IDX file may declare here (MNIST uses 1 and 3).
const MAX_DIMS: u8 = 4;

/// A parsed IDX array of unsigned bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdxArray {
    /// The dimensions from the header, outermost first.
    pub dims: Vec<usize>,
    /// The data, row-major; `data.len() == dims.iter().product()`.
    pub data: Vec<u8>,
}

/// Parsed header: dimensions and the byte size they claim.
struct Header {
    dims: Vec<usize>,
    body_bytes: u64,
    header_bytes: u64,
}

fn read_header<R: Read>(reader: &mut R) -> Result<Header, DataError> {
    let mut magic = [0u8; 4];
    let got = read_some(reader, &mut magic)?;
    if got < 4 {
        return Err(DataError::Truncated {
            path: None,
            what: "IDX header",
            expected_bytes: 4,
            found_bytes: got as u64,
        });
    }
    if magic[0] != 0 || magic[1] != 0 || magic[2] != TYPE_UBYTE || magic[3] == 0 {
        return Err(DataError::BadMagic {
            path: None,
            format: "IDX (unsigned byte)",
            expected: "00 00 08 <ndim>".to_string(),
            found: format!(
                "{:02x} {:02x} {:02x} {:02x}",
                magic[0], magic[1], magic[2], magic[3]
            ),
        });
    }
    let ndim = magic[3];
    if ndim > MAX_DIMS {
        return Err(DataError::BadHeader {
            path: None,
            expected: format!("at most {MAX_DIMS} dimensions"),
            found: format!("{ndim} dimensions"),
        });
    }
    let mut dims = Vec::with_capacity(ndim as usize);
    let mut body_bytes: u64 = 1;
    for _ in 0..ndim {
        let mut b = [0u8; 4];
        let got = read_some(reader, &mut b)?;
        if got < 4 {
            return Err(DataError::Truncated {
                path: None,
                what: "IDX header",
                expected_bytes: 4 + 4 * u64::from(ndim),
                found_bytes: 4 + 4 * dims.len() as u64 + got as u64,
            });
        }
        let d = u32::from_be_bytes(b);
        dims.push(d as usize);
        body_bytes = body_bytes.saturating_mul(u64::from(d));
    }
    if body_bytes > MAX_FILE_BYTES {
        return Err(DataError::TooLarge {
            path: None,
            what: format!("IDX data size claimed by header dims {dims:?}"),
            claimed: body_bytes,
            limit: MAX_FILE_BYTES,
        });
    }
    // Each byte becomes a 4-byte f32 (an 8-byte label): bound what the conversion will hold,
    // not only the bytes on disk.
    if body_bytes > MAX_ELEMENTS {
        return Err(DataError::TooLarge {
            path: None,
            what: format!("IDX header dims {dims:?}: converted to f32, {body_bytes} values"),
            claimed: body_bytes,
            limit: MAX_ELEMENTS,
        });
    }
    Ok(Header {
        dims,
        body_bytes,
        header_bytes: 4 + 4 * u64::from(ndim),
    })
}

/// Read an IDX array of unsigned bytes from `reader` (raw or gzip, detected by magic bytes).
pub fn read_idx<R: Read>(reader: R) -> Result<IdxArray, DataError> {
    let mut reader = maybe_gunzip(reader).map_err(DataError::io)?;
    let header = read_header(&mut reader)?;
    let data = read_exact_body(&mut reader, header.body_bytes, "IDX data")?;
    Ok(IdxArray {
        dims: header.dims,
        data,
    })
}

/// Read an IDX file whose header must have `ndim` dimensions (`what`: e.g. "images"); the
/// header is checked before the body is read, so an images file with a labels header is refused
/// for its dimensions rather than for the bytes that follow them.
pub fn read_idx_file_expecting(
    path: &Path,
    ndim: usize,
    shape: &str,
) -> Result<IdxArray, DataError> {
    let mut reader = open_maybe_gzip(path)?;
    let header = read_header(&mut reader).map_err(|e| e.with_path(path))?;
    if header.dims.len() != ndim {
        return Err(DataError::BadHeader {
            path: Some(path.to_path_buf()),
            expected: format!("{ndim} dimension(s) {shape}"),
            found: format!(
                "{} dimension(s) {:?}, wrong for this file",
                header.dims.len(),
                header.dims
            ),
        });
    }
    drop(reader);
    read_idx_file(path)
}

/// Read an IDX file; errors name the file. For an uncompressed file the header's claimed size
/// is compared with the file length before the body is read.
pub fn read_idx_file(path: &Path) -> Result<IdxArray, DataError> {
    if !is_gzip_file(path)? {
        let len = fs::metadata(path)
            .map_err(|e| DataError::io(e).with_path(path))?
            .len();
        let mut file = fs::File::open(path).map_err(|e| DataError::io(e).with_path(path))?;
        let header = read_header(&mut file).map_err(|e| e.with_path(path))?;
        let expected = header.header_bytes + header.body_bytes;
        if len < expected {
            return Err(DataError::Truncated {
                path: Some(path.to_path_buf()),
                what: "IDX file",
                expected_bytes: expected,
                found_bytes: len,
            });
        }
    }
    let reader = open_maybe_gzip(path)?;
    read_idx(reader).map_err(|e| e.with_path(path))
}

/// Check an IDX array is an image stack `[n, rows, cols]`.
fn check_images(a: &IdxArray) -> Result<(usize, usize, usize), DataError> {
    match a.dims.as_slice() {
        &[n, rows, cols] => Ok((n, rows, cols)),
        other => Err(DataError::BadHeader {
            path: None,
            expected: "3 dimensions [n, rows, cols] for images".to_string(),
            found: format!("{} dimensions {other:?}", other.len()),
        }),
    }
}

/// Check an IDX array is a label vector `[n]` with every label below `num_classes`.
fn check_labels(a: &IdxArray, num_classes: usize) -> Result<usize, DataError> {
    let n = match a.dims.as_slice() {
        &[n] => n,
        other => {
            return Err(DataError::BadHeader {
                path: None,
                expected: "1 dimension [n] for labels".to_string(),
                found: format!("{} dimensions {other:?}", other.len()),
            });
        }
    };
    if let Some((i, &l)) = a
        .data
        .iter()
        .enumerate()
        .find(|&(_, &l)| l as usize >= num_classes)
    {
        return Err(DataError::BadLabel {
            path: None,
            line: None,
            expected: format!("a class in 0..{num_classes} (label #{i})"),
            found: l.to_string(),
        });
    }
    Ok(n)
}

/// Pair parsed images and labels into a [`Dataset`] (pixels as f32 in 0..=255).
///
/// # Shapes
/// `features`: `[n, rows * cols]`; `sample_shape`: `[1, rows, cols]`.
fn pair(images: IdxArray, labels: IdxArray, num_classes: usize) -> Result<Dataset, DataError> {
    let (n, rows, cols) = check_images(&images)?;
    let n_labels = check_labels(&labels, num_classes)?;
    if n != n_labels {
        return Err(DataError::CountMismatch {
            images_path: None,
            labels_path: None,
            images: n,
            labels: n_labels,
        });
    }
    if n == 0 {
        return Err(DataError::Empty { path: None });
    }
    let d = rows * cols;
    let features: Vec<f32> = images.data.iter().map(|&b| f32::from(b)).collect();
    let features = Array2::from_shape_vec((n, d), features).map_err(|e| DataError::BadHeader {
        path: None,
        expected: format!("{n} x {d} pixels"),
        found: e.to_string(),
    })?;
    Ok(Dataset {
        features,
        labels: labels.data.iter().map(|&l| l as usize).collect(),
        sample_shape: vec![1, rows, cols],
        num_classes,
    })
}

/// Read an IDX image file and an IDX label file (raw or gzip) into a [`Dataset`].
pub fn read_idx_dataset<R1: Read, R2: Read>(
    images: R1,
    labels: R2,
    num_classes: usize,
) -> Result<Dataset, DataError> {
    pair(read_idx(images)?, read_idx(labels)?, num_classes)
}

/// [`read_idx_dataset`] on two files; errors name the file at fault.
pub fn load_idx_dataset(
    images_path: &Path,
    labels_path: &Path,
    num_classes: usize,
) -> Result<Dataset, DataError> {
    let images = read_idx_file_expecting(images_path, 3, "[n, rows, cols] for images")?;
    let labels = read_idx_file_expecting(labels_path, 1, "[n] for labels")?;
    check_images(&images).map_err(|e| e.with_path(images_path))?;
    check_labels(&labels, num_classes).map_err(|e| e.with_path(labels_path))?;
    pair(images, labels, num_classes).map_err(|e| match e {
        DataError::CountMismatch { images, labels, .. } => DataError::CountMismatch {
            images_path: Some(images_path.to_path_buf()),
            labels_path: Some(labels_path.to_path_buf()),
            images,
            labels,
        },
        other => other.with_path(images_path),
    })
}
