//! Small MNIST-format files for tests: IDX files of unsigned bytes and a tiny MNIST directory.

use std::path::Path;

/// An IDX file of unsigned bytes with these dimensions.
pub fn idx_file(dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut out = vec![0, 0, 0x08, dims.len() as u8];
    for d in dims {
        out.extend_from_slice(&d.to_be_bytes());
    }
    out.extend_from_slice(data);
    out
}

/// A small MNIST-shaped dataset in `dir`: n train and the same n test images of 28x28, pixel i
/// of the concatenated images `(i * stride) % 251`, labels `i % 10`.
pub fn tiny_mnist(dir: &Path, n: u32, stride: usize) {
    let images: Vec<u8> = (0..n as usize * 784)
        .map(|i| ((i * stride) % 251) as u8)
        .collect();
    let labels: Vec<u8> = (0..n).map(|i| (i % 10) as u8).collect();
    for prefix in ["train", "t10k"] {
        std::fs::write(
            dir.join(format!("{prefix}-images-idx3-ubyte")),
            idx_file(&[n, 28, 28], &images),
        )
        .expect("write");
        std::fs::write(
            dir.join(format!("{prefix}-labels-idx1-ubyte")),
            idx_file(&[n], &labels),
        )
        .expect("write");
    }
}
