//! Data room: byte-level helpers shared by the format parsers.
//!
//! Owns gzip detection by magic bytes (so every parser accepts raw or `.gz` input without
//! trusting file names) and bounded reads that never allocate from an untrusted header.
//! Knows nothing of any particular format.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use super::error::{DataError, MAX_FILE_BYTES};

/// The two magic bytes that open every gzip member (RFC 1952, section 2.3.1).
pub const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Wrap `reader` in a gzip decoder when its first two bytes are the gzip magic, else pass it
/// through unchanged. Multi-member gzip files are read to the end.
pub fn maybe_gunzip<'a, R: Read + 'a>(reader: R) -> io::Result<Box<dyn Read + 'a>> {
    let mut buffered = BufReader::with_capacity(1 << 16, reader);
    let is_gzip = peek2(&mut buffered)? == Some(GZIP_MAGIC);
    if is_gzip {
        Ok(Box::new(flate2::read::MultiGzDecoder::new(buffered)))
    } else {
        Ok(Box::new(buffered))
    }
}

/// The first two bytes of a buffered stream without consuming them (`None` when shorter).
fn peek2<R: BufRead>(reader: &mut R) -> io::Result<Option<[u8; 2]>> {
    // fill_buf may return fewer bytes than exist; a 64 KiB buffer over a file or slice returns
    // at least two unless the stream is shorter.
    let buf = reader.fill_buf()?;
    if buf.len() >= 2 {
        Ok(Some([buf[0], buf[1]]))
    } else {
        Ok(None)
    }
}

/// What kind of file system object `path` is when it exists but is not a regular file
/// (`None` for a regular file or a path that does not exist).
pub fn non_regular_kind(path: &Path) -> Option<&'static str> {
    let m = std::fs::metadata(path).ok()?;
    let t = m.file_type();
    if t.is_file() {
        return None;
    }
    if t.is_dir() {
        return Some("a directory");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return Some("a FIFO");
        }
        if t.is_socket() {
            return Some("a socket");
        }
        if t.is_char_device() || t.is_block_device() {
            return Some("a device");
        }
    }
    Some("not a regular file")
}

/// Refuse a directory, FIFO or device where a data file (`expected`) should be, before opening
/// it (opening a FIFO would wait for a writer).
pub fn check_regular(path: &Path, expected: &str) -> Result<(), DataError> {
    match non_regular_kind(path) {
        Some(kind) => Err(DataError::NotRegularFile {
            path: path.to_path_buf(),
            kind,
            expected: expected.to_string(),
        }),
        None => Ok(()),
    }
}

/// Open a file for reading, decompressing it when it is gzip.
pub fn open_maybe_gzip(path: &Path) -> Result<Box<dyn Read>, DataError> {
    check_regular(path, "a data file")?;
    let file = File::open(path).map_err(|e| DataError::io(e).with_path(path))?;
    maybe_gunzip(file).map_err(|e| DataError::io(e).with_path(path))
}

/// True when the file at `path` starts with the gzip magic.
pub fn is_gzip_file(path: &Path) -> Result<bool, DataError> {
    check_regular(path, "a data file")?;
    let mut file = File::open(path).map_err(|e| DataError::io(e).with_path(path))?;
    let mut magic = [0u8; 2];
    let mut got = 0;
    while got < 2 {
        let n = file
            .read(&mut magic[got..])
            .map_err(|e| DataError::io(e).with_path(path))?;
        if n == 0 {
            return Ok(false);
        }
        got += n;
    }
    Ok(magic == GZIP_MAGIC)
}

/// Read exactly `expected` bytes of `what` from `reader`, then check that nothing follows.
///
/// Allocation grows with the bytes actually read (at most 16 MiB reserved up front), so a
/// header claiming a huge size over a short stream costs nothing; the caller has already
/// checked `expected` against a sane bound.
pub fn read_exact_body<R: Read>(
    reader: &mut R,
    expected: u64,
    what: &'static str,
) -> Result<Vec<u8>, DataError> {
    let mut data = Vec::with_capacity(expected.min(1 << 24) as usize);
    reader
        .by_ref()
        .take(expected)
        .read_to_end(&mut data)
        .map_err(map_read_error)?;
    if (data.len() as u64) < expected {
        return Err(DataError::Truncated {
            path: None,
            what,
            expected_bytes: expected,
            found_bytes: data.len() as u64,
        });
    }
    let mut probe = [0u8; 1];
    let extra = read_some(reader, &mut probe)?;
    if extra > 0 {
        return Err(DataError::TrailingData {
            path: None,
            what,
            expected_bytes: expected,
        });
    }
    Ok(data)
}

/// Everything `reader` yields, at most [`MAX_FILE_BYTES`]: more is [`DataError::TooLarge`] for
/// `what`. The buffer starts at `capacity_hint` bytes (capped at the limit) and grows only with
/// the bytes that arrive, so a small stream costs little whatever a header claims.
pub fn read_capped<R: Read>(
    reader: R,
    capacity_hint: u64,
    what: &str,
) -> Result<Vec<u8>, DataError> {
    let capacity = capacity_hint.min(MAX_FILE_BYTES + 1);
    let mut bytes = Vec::with_capacity(usize::try_from(capacity).unwrap_or(0));
    reader
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(DataError::io)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(DataError::TooLarge {
            path: None,
            what: what.to_string(),
            claimed: bytes.len() as u64,
            limit: MAX_FILE_BYTES,
        });
    }
    Ok(bytes)
}

/// Read into `buf` until it is full or the stream ends; returns the number of bytes read.
pub fn read_some<R: Read>(reader: &mut R, buf: &mut [u8]) -> Result<usize, DataError> {
    let mut got = 0;
    while got < buf.len() {
        match reader.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(map_read_error(e)),
        }
    }
    Ok(got)
}

/// A read error without a path; a gzip stream cut short surfaces as `UnexpectedEof`.
pub fn map_read_error(e: io::Error) -> DataError {
    DataError::io(e)
}
