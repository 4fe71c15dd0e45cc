//! dpx: a command-line experiment runner for differentially private (DP) machine learning.
//!
//! The crate is a library plus a thin binary. Rooms (see `ARCHITECTURE.md`):
//!
//! - [`cli`]: one file per subcommand; orchestration only, no maths.
//! - [`privacy`]: DP events, accountants, calibration, mechanisms. Never imports `model` or `train`.
//! - [`data`]: datasets in their real file formats, synthetic generators, preprocessing.
//! - [`model`]: layers, losses, forward and per-sample backward. Knows nothing of DP.
//! - [`grad`]: the three questions a clipping policy may ask of per-sample gradients; the
//!   interface between `model` (which answers) and `privacy` (which asks).
//! - [`audit`]: an empirical lower bound on ε by canaries (one-run auditing) for `dpx audit`.
//! - [`text_file`]: the one way a text input is read, with a size limit.

pub mod audit;
pub mod cli;
pub mod config;
pub(crate) mod cpu;
pub mod data;
pub mod eigen;
pub mod grad;
pub mod model;
pub mod optim;
pub mod privacy;
pub mod report;
pub mod sweep;
pub mod text_file;
pub mod train;
