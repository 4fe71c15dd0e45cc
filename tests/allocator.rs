//! The mimalloc options `src/main.rs` sets are addressed by their index in mimalloc's
//! `mi_option_e`; this checks that those indices name the intended options (by their documented
//! defaults in mimalloc v3: purge_delay 1000 ms, arena_purge_mult 1) and that mimalloc reads
//! back what is set.

use libmimalloc_sys::{mi_option_get, mi_option_set};

#[test]
fn purge_options_sit_at_the_indices_main_uses() {
    // SAFETY: plain integer options of the linked mimalloc; this test binary does not use it as
    // its allocator, and nothing else in the process reads these options.
    unsafe {
        assert_eq!(
            mi_option_get(15),
            1000,
            "index 15 = purge_delay (default 1000 ms)"
        );
        assert_eq!(
            mi_option_get(24),
            1,
            "index 24 = arena_purge_mult (default 1)"
        );
        // Neighbours with other defaults, so an off-by-one cannot pass by coincidence.
        assert_eq!(mi_option_get(18), 100, "index 18 = os_tag (default 100)");
        assert_eq!(
            mi_option_get(23),
            1024 * 1024,
            "index 23 = arena_reserve, 1 GiB in KiB"
        );
        mi_option_set(15, -1);
        assert_eq!(mi_option_get(15), -1);
    }
}
