//! Fuzz target: the CSV dataset parser with its default options.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = dpx::data::csv::read_csv(data, &dpx::data::csv::CsvOptions::default());
});
