//! Fuzz target: the MAT-file reader and SVHN's interpretation of its arrays.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(arrays) = dpx::data::mat::read_mat(data, &["X", "y"]) {
        let _ = dpx::data::svhn::from_arrays(arrays);
    }
});
