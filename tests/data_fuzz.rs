//! Property tests: arbitrary bytes, and valid files with arbitrary corruption, never make a
//! parser panic; they either parse or return a `DataError`.

use dpx::data::cifar;
use dpx::data::csv::{CsvOptions, read_csv};
use dpx::data::idx::{read_idx, read_idx_dataset};
use dpx::data::libsvm::read_libsvm;
use proptest::prelude::*;

fn valid_idx() -> Vec<u8> {
    let mut b = vec![0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 2];
    b.extend(0..12u8);
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4000)) {
        let _ = read_idx(&bytes[..]);
        let _ = read_idx_dataset(&bytes[..], &bytes[..], 10);
        let _ = cifar::read_cifar_batch(&bytes[..]);
        let _ = cifar::read_cifar_tar(&bytes[..]);
        let _ = read_libsvm(&bytes[..]);
        let _ = read_csv(&bytes[..], &CsvOptions::default());
    }

    #[test]
    fn corrupted_idx_never_panics(pos in 0usize..28, value in any::<u8>(), cut in 0usize..29) {
        let mut b = valid_idx();
        b[pos] = value;
        b.truncate(cut);
        let _ = read_idx(&b[..]);
    }

    #[test]
    fn arbitrary_text_never_panics(text in "[-+0-9a-z:.# \n,eE]{0,300}") {
        let _ = read_libsvm(text.as_bytes());
        let _ = read_csv(text.as_bytes(), &CsvOptions::default());
    }
}
