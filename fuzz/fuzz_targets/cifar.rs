//! Fuzz target: the CIFAR-10 binary batch parser and the tar.gz archive reader.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = dpx::data::cifar::read_cifar_batch(data);
    let _ = dpx::data::cifar::read_cifar_tar(data);
});
