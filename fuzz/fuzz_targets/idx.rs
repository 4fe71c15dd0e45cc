//! Fuzz target: the IDX parser (MNIST) on arbitrary bytes, alone and as an image/label pair.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = dpx::data::idx::read_idx(data);
    let mid = data.len() / 2;
    let _ = dpx::data::idx::read_idx_dataset(&data[..mid], &data[mid..], 10);
});
