//! Fuzz target: the LIBSVM text parser (a9a).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = dpx::data::libsvm::read_libsvm(data);
});
