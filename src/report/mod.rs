//! The report room: writing results to disk.
//!
//! - [`atomic`]: every output file is written to a temporary file in the same directory, synced,
//!   then renamed over the target, so an interrupted run never leaves a half-written file.
//!
//! This room formats and writes; it computes no privacy or model quantity.

pub mod atomic;
pub mod plot;
pub mod summary;
pub mod tuning;
mod vector_text;
