//! The on-disk cache of scattering features: `<data dir>/cache/scattering/<key>.bin`.
//!
//! Owns the cache key, the file format, and the rule that a cache file is never trusted: a
//! file that is missing, short, foreign (another key, version or shape) or damaged (its MD5
//! does not match) is ignored with a note on stderr and the features are recomputed.
//!
//! The key is the MD5 of: a domain tag, [`SCATTERING_VERSION`], `J`, `L`, the dataset name, the
//! split name, the input sample shape, the number of examples and the input feature bytes
//! (little-endian `f32`, after scaling). Any change to the examples, their order or their
//! preprocessing therefore gives another key.
//!
//! File format (little-endian): `b"DPXSCAT1"`, `u32` version, `u32` J, `u32` L, `u64` examples,
//! `u32 × 3` output sample shape, the 16-byte key, the 16-byte MD5 of the payload, then the
//! payload: `examples × prod(shape)` `f32`. Written atomically (temporary file, rename).

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

use md5::{Digest, Md5};
use ndarray::Array2;

use super::scattering::{SCATTERING_VERSION, Scattering2d};
use super::{DataError, Dataset};

const MAGIC: &[u8; 8] = b"DPXSCAT1";
/// Bytes before the payload.
const HEADER_LEN: usize = 8 + 4 * 3 + 8 + 4 * 3 + 16 + 16;
/// Payload bytes processed per read/write.
const CHUNK_FLOATS: usize = 1 << 18;

/// The cache directory under a data directory.
pub fn cache_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("cache").join("scattering")
}

/// The cache key of `data`'s scattering features.
pub fn key(s: &Scattering2d, dataset: &str, split: &str, data: &Dataset) -> [u8; 16] {
    let mut h = Md5::new();
    h.update(b"dpx scattering features");
    for v in [SCATTERING_VERSION, s.scales() as u32, s.angles() as u32] {
        h.update(v.to_le_bytes());
    }
    for text in [dataset, split] {
        h.update((text.len() as u64).to_le_bytes());
        h.update(text.as_bytes());
    }
    h.update((data.sample_shape.len() as u64).to_le_bytes());
    for &d in &data.sample_shape {
        h.update((d as u64).to_le_bytes());
    }
    h.update((data.len() as u64).to_le_bytes());
    let mut buf = Vec::with_capacity(4 * CHUNK_FLOATS);
    let features = data.features.as_standard_layout();
    let all = features.as_slice().unwrap_or(&[]);
    for chunk in all.chunks(CHUNK_FLOATS) {
        buf.clear();
        buf.extend(chunk.iter().flat_map(|v| v.to_le_bytes()));
        h.update(&buf);
    }
    h.finalize().into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The scattering features of `data`, from the cache under `data_dir` when a valid file is
/// there, otherwise computed (and then cached; a failure to write the cache is a note on
/// stderr, not an error).
pub fn transform_cached(
    s: &Scattering2d,
    data_dir: &Path,
    dataset: &str,
    split: &str,
    data: &Dataset,
) -> Result<Dataset, DataError> {
    let c = match data.sample_shape[..] {
        [c, _, _] => c,
        _ => return s.transform_dataset(data), // the transform's own error
    };
    let shape = s.output_shape(c);
    let k = key(s, dataset, split, data);
    let path = cache_dir(data_dir).join(format!("{}.bin", hex(&k)));
    if path.exists() {
        match read(&path, s, &k, data.len(), &shape) {
            Ok(features) => {
                return Ok(Dataset {
                    features,
                    labels: data.labels.clone(),
                    sample_shape: shape,
                    num_classes: data.num_classes,
                });
            }
            Err(why) => eprintln!(
                "note: ignoring the scattering cache file {} ({why}); recomputing it",
                path.display()
            ),
        }
    }
    let out = s.transform_dataset(data)?;
    if let Err(e) = write(&path, s, &k, &out) {
        eprintln!(
            "note: could not write the scattering cache file {}: {e}",
            path.display()
        );
    }
    Ok(out)
}

fn header(s: &Scattering2d, k: &[u8; 16], n: usize, shape: &[usize]) -> Vec<u8> {
    let mut h = Vec::with_capacity(HEADER_LEN - 16);
    h.extend_from_slice(MAGIC);
    for v in [SCATTERING_VERSION, s.scales() as u32, s.angles() as u32] {
        h.extend_from_slice(&v.to_le_bytes());
    }
    h.extend_from_slice(&(n as u64).to_le_bytes());
    for &d in shape {
        h.extend_from_slice(&(d as u32).to_le_bytes());
    }
    h.extend_from_slice(k);
    h
}

fn write(path: &Path, s: &Scattering2d, k: &[u8; 16], out: &Dataset) -> Result<(), String> {
    let dir = path.parent().ok_or("no parent directory")?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let features = out.features.as_standard_layout();
    let values = features.as_slice().ok_or("features not contiguous")?;
    let mut md5 = Md5::new();
    let mut buf = Vec::with_capacity(4 * CHUNK_FLOATS);
    for chunk in values.chunks(CHUNK_FLOATS) {
        buf.clear();
        buf.extend(chunk.iter().flat_map(|v| v.to_le_bytes()));
        md5.update(&buf);
    }
    let digest: [u8; 16] = md5.finalize().into();
    let head = header(s, k, out.len(), &out.sample_shape);
    crate::report::atomic::write_atomic_with(path, |f| {
        f.write_all(&head)?;
        f.write_all(&digest)?;
        let mut buf = Vec::with_capacity(4 * CHUNK_FLOATS);
        for chunk in values.chunks(CHUNK_FLOATS) {
            buf.clear();
            buf.extend(chunk.iter().flat_map(|v| v.to_le_bytes()));
            f.write_all(&buf)?;
        }
        Ok(())
    })
    .map_err(|e| e.to_string())
}

fn read(
    path: &Path,
    s: &Scattering2d,
    k: &[u8; 16],
    n: usize,
    shape: &[usize],
) -> Result<Array2<f32>, String> {
    let d: usize = shape.iter().product();
    let total = n
        .checked_mul(d)
        .and_then(|x| x.checked_mul(4))
        .and_then(|x| x.checked_add(HEADER_LEN))
        .ok_or("size overflow")?;
    let file = File::open(path).map_err(|e| e.to_string())?;
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    if len != total as u64 {
        return Err(format!("{len} bytes, expected {total}"));
    }
    let mut r = BufReader::new(file);
    let expected = header(s, k, n, shape);
    let mut head = vec![0u8; expected.len()];
    r.read_exact(&mut head).map_err(|e| e.to_string())?;
    if head != expected {
        return Err("its header is not this data's (another key, version or shape)".into());
    }
    let mut digest = [0u8; 16];
    r.read_exact(&mut digest).map_err(|e| e.to_string())?;
    let mut features = Array2::<f32>::zeros((n, d));
    let values = features.as_slice_mut().ok_or("features not contiguous")?;
    let mut md5 = Md5::new();
    let mut buf = vec![0u8; 4 * CHUNK_FLOATS];
    for chunk in values.chunks_mut(CHUNK_FLOATS) {
        let bytes = &mut buf[..4 * chunk.len()];
        r.read_exact(bytes).map_err(|e| e.to_string())?;
        md5.update(&*bytes);
        for (v, b) in chunk.iter_mut().zip(bytes.chunks_exact(4)) {
            *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
    }
    let found: [u8; 16] = md5.finalize().into();
    if found != digest {
        return Err("its checksum does not match (damaged)".into());
    }
    Ok(features)
}
