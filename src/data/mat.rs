//! Data room: the MATLAB Level 5 MAT-file format (MathWorks, "MAT-File Format", chapter 1), the
//! subset numeric datasets are published in (SVHN's `train_32x32.mat`, `test_32x32.mat`).
//!
//! A file is a 128-byte header (descriptive text from "MATLAB 5.0 MAT-file", the version 0x0100
//! and the endian indicator "MI", read as "IM" when the file is little-endian) followed by data
//! elements. Each element is an 8-byte tag (type, byte count) and its data padded to 8 bytes, or a
//! 4-byte small element (count ≤ 4 in the tag's upper half). A variable is an `miMATRIX` element
//! (array flags with the class, dimensions, name, real part), either as is or inside an
//! `miCOMPRESSED` element (a zlib stream holding the `miMATRIX` element). MATLAB stores the real
//! part in the smallest integer type that holds its values, so a `double` array of labels may be
//! stored as `miUINT8`: values are converted from the storage type, whatever the class.
//!
//! Reads numeric, real, non-sparse arrays into f32 (exact for every integer up to 2^24, which
//! covers 8- and 16-bit data); skips variables of other classes and those not asked for. Owns
//! parsing and validation: every size a tag or a dimension claims is checked against the bytes
//! present and [`MAX_ELEMENTS`] before anything is allocated, and a compressed stream is inflated
//! as its data arrives, never to a size the tag claims up front. Must not interpret the arrays
//! (that is the dataset's module, e.g. `svhn`).

use std::io::Read;

use super::error::{DataError, MAX_ELEMENTS};
use super::io::read_capped;

const HEADER_BYTES: usize = 128;
const MI_INT8: u32 = 1;
const MI_UINT8: u32 = 2;
const MI_INT16: u32 = 3;
const MI_UINT16: u32 = 4;
const MI_INT32: u32 = 5;
const MI_UINT32: u32 = 6;
const MI_SINGLE: u32 = 7;
const MI_DOUBLE: u32 = 9;
const MI_INT64: u32 = 12;
const MI_UINT64: u32 = 13;
const MI_MATRIX: u32 = 14;
const MI_COMPRESSED: u32 = 15;
/// `mxDOUBLE_CLASS` ..= `mxUINT64_CLASS`: the numeric array classes.
const NUMERIC_CLASSES: std::ops::RangeInclusive<u8> = 6..=15;
/// The array-flags bit of complex data.
const COMPLEX_FLAG: u32 = 0x0800;

/// One numeric array of a MAT-file.
#[derive(Debug, Clone, PartialEq)]
pub struct MatArray {
    pub name: String,
    /// MATLAB's class code (6 double, 7 single, 8 int8, 9 uint8, … 15 uint64).
    pub class: u8,
    /// The dimensions as MATLAB gives them (at least two).
    pub dims: Vec<usize>,
    /// The values in MATLAB's column-major order (the first index fastest).
    pub data: Vec<f32>,
}

fn bad(expected: impl Into<String>, found: impl Into<String>) -> DataError {
    DataError::BadHeader {
        path: None,
        expected: expected.into(),
        found: found.into(),
    }
}

fn truncated(what: &'static str, expected: usize, found: usize) -> DataError {
    DataError::Truncated {
        path: None,
        what,
        expected_bytes: expected as u64,
        found_bytes: found as u64,
    }
}

#[derive(Clone, Copy)]
struct Endian {
    big: bool,
}

impl Endian {
    fn u32(self, b: &[u8]) -> u32 {
        let a = [b[0], b[1], b[2], b[3]];
        if self.big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    }
}

/// One data element: its type and its data (without padding).
struct Element<'a> {
    kind: u32,
    data: &'a [u8],
}

/// The element at `pos` of `buf` and the position after it (padding included).
fn element(buf: &[u8], pos: usize, e: Endian) -> Result<(Element<'_>, usize), DataError> {
    let rest = buf.len() - pos.min(buf.len());
    if rest < 8 {
        return Err(truncated("MAT-file element tag", 8, rest));
    }
    let first = e.u32(&buf[pos..]);
    let small = first >> 16;
    if small != 0 {
        // Small data element: type in the lower half, byte count (≤ 4) in the upper half.
        if small > 4 {
            return Err(bad(
                "a small data element of at most 4 bytes",
                format!("{small} bytes"),
            ));
        }
        let data = &buf[pos + 4..pos + 4 + small as usize];
        return Ok((
            Element {
                kind: first & 0xffff,
                data,
            },
            pos + 8,
        ));
    }
    let count = e.u32(&buf[pos + 4..]) as usize;
    let start = pos + 8;
    if count > buf.len() - start {
        return Err(truncated("MAT-file element", count, buf.len() - start));
    }
    let end = start + count;
    let padded = start + count.div_ceil(8) * 8;
    Ok((
        Element {
            kind: first,
            data: &buf[start..end],
        },
        padded.min(buf.len()),
    ))
}

/// The byte order of a MAT-file from its 128-byte header, checking the text and the version.
fn header(bytes: &[u8]) -> Result<Endian, DataError> {
    if bytes.len() < HEADER_BYTES {
        return Err(truncated("MAT-file header", HEADER_BYTES, bytes.len()));
    }
    let text = &bytes[..19];
    if text != b"MATLAB 5.0 MAT-file" {
        return Err(DataError::BadMagic {
            path: None,
            format: "MATLAB 5.0 MAT-file",
            expected: "\"MATLAB 5.0 MAT-file\"".into(),
            found: format!("{:?}", String::from_utf8_lossy(text)),
        });
    }
    let big = match &bytes[126..128] {
        b"IM" => false,
        b"MI" => true,
        other => {
            return Err(bad("the endian indicator IM or MI", format!("{other:?}")));
        }
    };
    let version = if big {
        u16::from_be_bytes([bytes[124], bytes[125]])
    } else {
        u16::from_le_bytes([bytes[124], bytes[125]])
    };
    if version != 0x0100 {
        return Err(bad("MAT-file version 0x0100", format!("{version:#06x}")));
    }
    Ok(Endian { big })
}

/// Inflate an `miCOMPRESSED` element's zlib stream, growing the buffer as data arrives, up to
/// [`MAX_FILE_BYTES`].
fn inflate(data: &[u8]) -> Result<Vec<u8>, DataError> {
    read_capped(
        flate2::read::ZlibDecoder::new(data),
        0,
        "MAT-file compressed variable in bytes",
    )
}

/// Bytes per value of a numeric storage type, or None for a type that is not numeric.
fn value_bytes(kind: u32) -> Option<usize> {
    match kind {
        MI_INT8 | MI_UINT8 => Some(1),
        MI_INT16 | MI_UINT16 => Some(2),
        MI_INT32 | MI_UINT32 | MI_SINGLE => Some(4),
        MI_DOUBLE | MI_INT64 | MI_UINT64 => Some(8),
        _ => None,
    }
}

/// The values of a numeric element, converted to f32.
fn values(kind: u32, data: &[u8], e: Endian) -> Vec<f32> {
    let width = value_bytes(kind).unwrap_or(1);
    let word = |c: &[u8]| -> u64 {
        let mut v = 0u64;
        if e.big {
            for &b in c {
                v = (v << 8) | u64::from(b);
            }
        } else {
            for &b in c.iter().rev() {
                v = (v << 8) | u64::from(b);
            }
        }
        v
    };
    data.chunks_exact(width)
        .map(|c| match kind {
            MI_UINT8 => f32::from(c[0]),
            MI_INT8 => f32::from(c[0] as i8),
            MI_INT16 => f32::from(word(c) as u16 as i16),
            MI_UINT16 => f32::from(word(c) as u16),
            MI_INT32 => word(c) as u32 as i32 as f32,
            MI_UINT32 => word(c) as u32 as f32,
            MI_SINGLE => f32::from_bits(word(c) as u32),
            MI_DOUBLE => f64::from_bits(word(c)) as f32,
            MI_INT64 => word(c) as i64 as f32,
            _ => word(c) as f32,
        })
        .collect()
}

/// Parse one `miMATRIX` element's data; None for a variable that is skipped (not numeric, or
/// not in `wanted`).
fn matrix(data: &[u8], e: Endian, wanted: &[&str]) -> Result<Option<MatArray>, DataError> {
    let (flags, pos) = element(data, 0, e)?;
    if flags.kind != MI_UINT32 || flags.data.len() != 8 {
        return Err(bad(
            "array flags (miUINT32, 8 bytes)",
            format!("type {} of {} bytes", flags.kind, flags.data.len()),
        ));
    }
    let flag_word = e.u32(flags.data);
    let class = (flag_word & 0xff) as u8;
    let (dims_el, pos) = element(data, pos, e)?;
    if dims_el.kind != MI_INT32 || dims_el.data.len() < 8 || !dims_el.data.len().is_multiple_of(4) {
        return Err(bad(
            "dimensions (miINT32, at least two)",
            format!("type {} of {} bytes", dims_el.kind, dims_el.data.len()),
        ));
    }
    let mut dims = Vec::with_capacity(dims_el.data.len() / 4);
    for c in dims_el.data.chunks_exact(4) {
        let d = e.u32(c) as i32;
        if d < 0 {
            return Err(bad("non-negative dimensions", d.to_string()));
        }
        dims.push(d as usize);
    }
    let (name_el, pos) = element(data, pos, e)?;
    let name = String::from_utf8_lossy(name_el.data).into_owned();
    if !NUMERIC_CLASSES.contains(&class) || !wanted.contains(&name.as_str()) {
        return Ok(None);
    }
    if flag_word & COMPLEX_FLAG != 0 {
        return Err(bad(
            format!("real data in variable `{name}`"),
            "complex data",
        ));
    }
    let count = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64))
        .unwrap_or(u64::MAX);
    if count > MAX_ELEMENTS {
        return Err(DataError::TooLarge {
            path: None,
            what: format!("element count of MAT-file variable `{name}`"),
            claimed: count,
            limit: MAX_ELEMENTS,
        });
    }
    let (real, _) = element(data, pos, e)?;
    let Some(width) = value_bytes(real.kind) else {
        return Err(bad(
            format!("a numeric storage type for variable `{name}`"),
            format!("type {}", real.kind),
        ));
    };
    let expected = count as usize * width;
    if real.data.len() != expected {
        return Err(bad(
            format!("{expected} bytes of data for variable `{name}` of dimensions {dims:?}"),
            format!("{} bytes", real.data.len()),
        ));
    }
    Ok(Some(MatArray {
        name,
        class,
        dims,
        data: values(real.kind, real.data, e),
    }))
}

/// The numeric arrays named in `wanted` of the MAT-file held in `bytes`, in file order.
pub fn read_mat(bytes: &[u8], wanted: &[&str]) -> Result<Vec<MatArray>, DataError> {
    let e = header(bytes)?;
    let mut out = Vec::new();
    let mut pos = HEADER_BYTES;
    while pos < bytes.len() {
        let (el, next) = element(bytes, pos, e)?;
        // Top-level elements follow each other without padding after compressed data.
        let next = if el.kind == MI_COMPRESSED {
            pos + 8 + el.data.len()
        } else {
            next
        };
        match el.kind {
            MI_MATRIX => out.extend(matrix(el.data, e, wanted)?),
            MI_COMPRESSED => {
                let inner = inflate(el.data)?;
                let (m, _) = element(&inner, 0, e)?;
                if m.kind != MI_MATRIX {
                    return Err(bad(
                        "an miMATRIX element inside miCOMPRESSED",
                        format!("type {}", m.kind),
                    ));
                }
                out.extend(matrix(m.data, e, wanted)?);
            }
            _ => {}
        }
        pos = next;
    }
    Ok(out)
}

/// [`read_mat`] on everything `reader` yields (at most `MAX_FILE_BYTES`).
pub fn read_mat_reader<R: Read>(reader: R, wanted: &[&str]) -> Result<Vec<MatArray>, DataError> {
    read_mat(&read_capped(reader, 0, "MAT-file size in bytes")?, wanted)
}

/// Writing MAT-files in the format above, for tests (the layout MATLAB and SciPy write).
#[doc(hidden)]
pub mod write {
    use std::io::Write;

    /// A numeric variable to write: name, class code, dimensions, storage type code and the
    /// stored bytes (little-endian, column-major).
    pub struct Var<'a> {
        pub name: &'a str,
        pub class: u8,
        pub dims: &'a [i32],
        pub storage: u32,
        pub data: &'a [u8],
    }

    fn pad(v: &mut Vec<u8>) {
        while !v.len().is_multiple_of(8) {
            v.push(0);
        }
    }

    fn tagged(v: &mut Vec<u8>, kind: u32, data: &[u8]) {
        if data.len() <= 4 && kind != super::MI_MATRIX {
            v.extend_from_slice(&(((data.len() as u32) << 16) | kind).to_le_bytes());
            let mut four = [0u8; 4];
            four[..data.len()].copy_from_slice(data);
            v.extend_from_slice(&four);
        } else {
            v.extend_from_slice(&kind.to_le_bytes());
            v.extend_from_slice(&(data.len() as u32).to_le_bytes());
            v.extend_from_slice(data);
            pad(v);
        }
    }

    /// The `miMATRIX` element of `var`.
    pub fn matrix(var: &Var) -> Vec<u8> {
        let mut body = Vec::new();
        let mut flags = [0u8; 8];
        flags[0] = var.class;
        tagged(&mut body, super::MI_UINT32, &flags);
        let dims: Vec<u8> = var.dims.iter().flat_map(|d| d.to_le_bytes()).collect();
        tagged(&mut body, super::MI_INT32, &dims);
        tagged(&mut body, super::MI_INT8, var.name.as_bytes());
        tagged(&mut body, var.storage, var.data);
        let mut out = Vec::new();
        tagged(&mut out, super::MI_MATRIX, &body);
        out
    }

    /// A little-endian MAT-file holding `vars`, each compressed when `compress`.
    pub fn file(vars: &[Var], compress: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let mut text = b"MATLAB 5.0 MAT-file, written by dpx's tests".to_vec();
        text.resize(116, b' ');
        out.extend_from_slice(&text);
        out.extend_from_slice(&[0u8; 8]);
        out.extend_from_slice(&0x0100u16.to_le_bytes());
        out.extend_from_slice(b"IM");
        for var in vars {
            let m = matrix(var);
            if compress {
                let mut z =
                    flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
                z.write_all(&m).expect("writing to memory");
                let c = z.finish().expect("writing to memory");
                out.extend_from_slice(&super::MI_COMPRESSED.to_le_bytes());
                out.extend_from_slice(&(c.len() as u32).to_le_bytes());
                out.extend_from_slice(&c);
            } else {
                out.extend_from_slice(&m);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::write::{Var, file};
    use super::*;

    fn vars<'a>(x: &'a [u8], y: &'a [u8]) -> [Var<'a>; 2] {
        [
            Var {
                name: "X",
                class: 9,
                dims: &[2, 3],
                storage: MI_UINT8,
                data: x,
            },
            Var {
                name: "y",
                class: 6,
                dims: &[3, 1],
                storage: MI_UINT8,
                data: y,
            },
        ]
    }

    #[test]
    fn reads_plain_and_compressed_variables_in_their_storage_type() {
        let x = [1u8, 2, 3, 4, 5, 255];
        let y = [10u8, 1, 7];
        for compress in [false, true] {
            let bytes = file(&vars(&x, &y), compress);
            let got = read_mat(&bytes, &["X", "y"]).unwrap();
            assert_eq!(got.len(), 2);
            assert_eq!(got[0].name, "X");
            assert_eq!(got[0].class, 9);
            assert_eq!(got[0].dims, vec![2, 3]);
            assert_eq!(got[0].data, vec![1.0, 2.0, 3.0, 4.0, 5.0, 255.0]);
            assert_eq!(got[1].class, 6);
            assert_eq!(got[1].data, vec![10.0, 1.0, 7.0]);
            // Only what is asked for.
            let only_y = read_mat(&bytes, &["y"]).unwrap();
            assert_eq!(only_y.len(), 1);
            assert_eq!(only_y[0].name, "y");
        }
    }

    #[test]
    fn doubles_and_big_endian_files() {
        let d: Vec<u8> = [1.5f64, -2.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let var = Var {
            name: "v",
            class: 6,
            dims: &[1, 2],
            storage: MI_DOUBLE,
            data: &d,
        };
        let le = file(std::slice::from_ref(&var), false);
        assert_eq!(read_mat(&le, &["v"]).unwrap()[0].data, vec![1.5, -2.0]);
        // The same file written big-endian: header indicator and every word swapped.
        let mut be = le[..124].to_vec();
        be.extend_from_slice(&0x0100u16.to_be_bytes());
        be.extend_from_slice(b"MI");
        let m = write::matrix(&var);
        let swap4 = |b: &[u8]| [b[3], b[2], b[1], b[0]];
        // Tag of miMATRIX, then each sub-element's tag; values swapped per their width.
        let mut out = Vec::new();
        out.extend_from_slice(&swap4(&m[0..4]));
        out.extend_from_slice(&swap4(&m[4..8]));
        let body = &m[8..];
        // flags (tag 8 + data 8), dims (8 + 8), name "v" (small element 8), real (8 + 16).
        out.extend_from_slice(&swap4(&body[0..4]));
        out.extend_from_slice(&swap4(&body[4..8]));
        out.extend_from_slice(&swap4(&body[8..12]));
        out.extend_from_slice(&body[12..16]);
        out.extend_from_slice(&swap4(&body[16..20]));
        out.extend_from_slice(&swap4(&body[20..24]));
        out.extend_from_slice(&swap4(&body[24..28]));
        out.extend_from_slice(&swap4(&body[28..32]));
        // Small element: the tag word swapped, the byte 'v' stays first.
        out.extend_from_slice(&swap4(&body[32..36]));
        out.extend_from_slice(&body[36..40]);
        out.extend_from_slice(&swap4(&body[40..44]));
        out.extend_from_slice(&swap4(&body[44..48]));
        for v in [1.5f64, -2.0] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        be.extend_from_slice(&out);
        assert_eq!(read_mat(&be, &["v"]).unwrap()[0].data, vec![1.5, -2.0]);
    }

    #[test]
    fn hostile_files_are_errors_not_allocations() {
        let x = [1u8, 2, 3, 4, 5, 6];
        let y = [1u8, 2, 3];
        let good = file(&vars(&x, &y), false);
        // Not a MAT-file.
        assert!(matches!(
            read_mat(b"hello", &["X"]),
            Err(DataError::Truncated { .. })
        ));
        let mut text = good.clone();
        text[0] = b'N';
        assert!(matches!(
            read_mat(&text, &["X"]),
            Err(DataError::BadMagic { .. })
        ));
        // Cut anywhere after the header: never a panic. Inside a variable it is an error; at a
        // boundary between variables (or in the last one's padding) the file holds fewer
        // variables, or all of them whole.
        let full = read_mat(&good, &["X", "y"]).unwrap();
        for cut in HEADER_BYTES + 1..good.len() {
            match read_mat(&good[..cut], &["X", "y"]) {
                Err(_) => {}
                Ok(got) => assert_eq!(got[..], full[..got.len()], "cut at {cut}"),
            }
        }
        assert!(read_mat(&good[..HEADER_BYTES + 20], &["X", "y"]).is_err());
        // Dimensions claiming 2^31 × 2^31 elements: refused before any allocation.
        let huge = Var {
            name: "X",
            class: 9,
            dims: &[i32::MAX, i32::MAX],
            storage: MI_UINT8,
            data: &x,
        };
        assert!(matches!(
            read_mat(&file(&[huge], true), &["X"]),
            Err(DataError::TooLarge { .. })
        ));
        // Data shorter than the dimensions say.
        let short = Var {
            name: "X",
            class: 9,
            dims: &[4, 3],
            storage: MI_UINT8,
            data: &x,
        };
        assert!(matches!(
            read_mat(&file(&[short], false), &["X"]),
            Err(DataError::BadHeader { .. })
        ));
        // A corrupt zlib stream.
        let mut z = file(&vars(&x, &y), true);
        let last = z.len() - 3;
        z[HEADER_BYTES + 10..last]
            .iter_mut()
            .for_each(|b| *b ^= 0x5a);
        assert!(read_mat(&z, &["X", "y"]).is_err());
    }
}
