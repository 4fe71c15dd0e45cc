//! Fuzz target: the config parser and validator (TOML text -> ExperimentSpec), without I/O.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = dpx::config::load_str(text, std::path::Path::new("fuzz.toml"));
    }
});
