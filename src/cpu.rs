//! Which vector extensions this CPU has, detected once per process: the run-time choice of every
//! wide kernel (the model room's, the noise sampler's, the optimizer's element-wise passes) and
//! the `# cpu` line of `dpx bench`.
//!
//! The release build targets the x86-64 baseline; kernels compiled for a wider extension are
//! chosen where these say the CPU has it. Each such kernel performs the same operations in the
//! same order as its portable form (Rust never fuses a multiply and an add), so results do not
//! depend on the answer. Depends on no room.

/// A feature test run once, then read from its cache.
macro_rules! detected {
    ($(#[$doc:meta])* $name:ident, $($feature:tt),+) => {
        $(#[$doc])*
        #[cfg(target_arch = "x86_64")]
        pub(crate) fn $name() -> bool {
            static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
            *HAS.get_or_init(|| true $(&& std::arch::is_x86_feature_detected!($feature))+)
        }
    };
}

detected!(
    /// AVX (for kernels that only move data: the 8 × 8 transposes).
    avx_available,
    "avx"
);
detected!(
    /// AVX2.
    avx2_available,
    "avx2"
);
detected!(
    /// AVX-512F.
    avx512_available,
    "avx512f"
);
detected!(
    /// AVX2, AVX-512F and AVX-512VL (512-bit instructions on 256-bit registers).
    avx512vl_available,
    "avx2",
    "avx512f",
    "avx512vl"
);
