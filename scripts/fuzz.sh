#!/usr/bin/env bash
# Fuzz every dataset parser (IDX, CIFAR, LIBSVM, CSV, MAT-file/SVHN) and the config parser for a
# bounded time.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]     (default 60)
#
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`). With a nightly toolchain installed the
# targets run under AddressSanitizer (`cargo +nightly fuzz run`); on stable alone they run with
# `--sanitizer none` (libFuzzer with coverage, no sanitizer: panics, aborts, hangs and the RSS
# limit are still caught; this is what CI does). FUZZ_TOOLCHAIN=stable|nightly forces one.
# The seed corpus (small valid files) is generated here into fuzz/corpus/ and is never
# committed. Exit status is non-zero if any target finds a crash; the crashing input is then in
# fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
toolchain="${FUZZ_TOOLCHAIN:-}"
if [ -z "$toolchain" ]; then
  if rustup run nightly rustc --version >/dev/null 2>&1; then toolchain=nightly; else toolchain=stable; fi
fi
case "$toolchain" in
  nightly) fuzz=(cargo +nightly fuzz run) ;;
  stable) fuzz=(cargo +stable fuzz run --sanitizer none) ;;
  *) echo "FUZZ_TOOLCHAIN must be stable or nightly, found '$toolchain'" >&2; exit 2 ;;
esac
echo "== fuzzing with ${fuzz[*]}"
corpus=fuzz/corpus
rm -rf "$corpus"
mkdir -p "$corpus"/{idx,cifar,libsvm,csv,mat,config}

# IDX (MNIST layout): magic 0 0 type ndim, big-endian dims, then data.
printf '\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00\x02' >"$corpus/idx/images"
head -c 12 /dev/zero | tr '\0' '\7' >>"$corpus/idx/images"
printf '\x00\x00\x08\x01\x00\x00\x00\x02\x01\x07' >"$corpus/idx/labels"
cat "$corpus/idx/images" "$corpus/idx/labels" >"$corpus/idx/pair"

# CIFAR-10 binary batches: records of 1 label byte + 3072 pixel bytes; a gzip and a tar.gz.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for name in data_batch_1 data_batch_2 data_batch_3 data_batch_4 data_batch_5 test_batch; do
  { printf '\x03'; head -c 3072 /dev/zero; printf '\x09'; head -c 3072 /dev/zero | tr '\0' '\200'; } \
    >"$tmp/$name.bin"
done
cp "$tmp/data_batch_1.bin" "$corpus/cifar/batch.bin"
gzip -c "$tmp/test_batch.bin" >"$corpus/cifar/batch.bin.gz"
tar -C "$tmp" -czf "$corpus/cifar/cifar-10-binary.tar.gz" \
  data_batch_1.bin data_batch_2.bin data_batch_3.bin data_batch_4.bin data_batch_5.bin test_batch.bin

# LIBSVM (a9a style) and CSV.
printf -- '-1 3:1 11:1 14:1\n+1 5:1 7:1 14:1 123:1\n' >"$corpus/libsvm/a9a"
printf '1 1:0.5 2:-1.25e-3\n0 2:7\n' >"$corpus/libsvm/real"
printf 'label,x1,x2\n0,0.5,1.0\n1,-2,3e-2\n' >"$corpus/csv/header"
printf '1,2,3\n0,4.5,6\n' >"$corpus/csv/plain"

# MAT-files (SVHN layout): the 128-byte header, X (uint8, 32x32x3x1) as a plain miMATRIX element,
# y (double class stored as uint8) plain in one file and zlib-compressed (miCOMPRESSED) in another.
mat_header() { printf 'MATLAB 5.0 MAT-file, dpx fuzz seed'; printf '%*s' 82 ''; head -c 8 /dev/zero; printf '\x00\x01IM'; }
mat_x() {
  printf '\x0e\x00\x00\x00\x38\x0c\x00\x00'
  printf '\x06\x00\x00\x00\x08\x00\x00\x00\x09\x00\x00\x00\x00\x00\x00\x00'
  printf '\x05\x00\x00\x00\x10\x00\x00\x00\x20\x00\x00\x00\x20\x00\x00\x00\x03\x00\x00\x00\x01\x00\x00\x00'
  printf '\x01\x00\x01\x00\x58\x00\x00\x00\x02\x00\x00\x00\x00\x0c\x00\x00'
  head -c 3072 /dev/zero | tr '\0' '\7'
}
{ mat_header; mat_x
  printf '\x0e\x00\x00\x00\x30\x00\x00\x00\x06\x00\x00\x00\x08\x00\x00\x00\x06\x00\x00\x00\x00\x00\x00\x00'
  printf '\x05\x00\x00\x00\x08\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x01\x00\x01\x00\x79\x00\x00\x00'
  printf '\x02\x00\x01\x00\x03\x00\x00\x00'
} >"$corpus/mat/plain.mat"
{ mat_header; mat_x
  printf '\x0f\x00\x00\x00\x24\x00\x00\x00\x78\x9c\xe3\x63\x60\x60\x30\x00\x62\x36\x20\xe6\x80\xd2\x20\xc0'
  printf '\x0a\xe5\x33\xc2\x31\x23\x43\x25\x90\x66\x02\xd2\xcc\x40\x1a\x00\x18\x10\x00\xe3'
} >"$corpus/mat/compressed.mat"

# Configs: the shipped examples.
cp configs/*.toml "$corpus/config/"

status=0
for target in idx cifar libsvm csv mat config; do
  echo "== fuzz $target for ${secs}s"
  mkdir -p "fuzz/artifacts/$target"
  # -rss_limit_mb bounds memory: an allocation driven by an untrusted header fails the run.
  if ! "${fuzz[@]}" --fuzz-dir fuzz "$target" "$corpus/$target" -- \
      -max_total_time="$secs" -rss_limit_mb=1024 -max_len=65536 -timeout=10 \
      -artifact_prefix="fuzz/artifacts/$target/" 2>&1 | tee "$tmp/$target.log" | grep -E '^==' || true; then
    :
  fi
  if grep -qE 'ERROR: libFuzzer|SUMMARY: .*Sanitizer|panicked' "$tmp/$target.log"; then
    echo "!! $target: crash, see fuzz/artifacts/$target/"
    grep -E 'panicked|ERROR|SUMMARY' "$tmp/$target.log" | head -5
    status=1
  fi
  # libFuzzer ends a bounded run with "Done N runs in S second(s)"; without it the target did
  # not run (a build failure, a crash before fuzzing): that fails too.
  if ! grep -E '^Done [0-9]+ runs' "$tmp/$target.log"; then
    echo "!! $target: did not run to its time bound"
    tail -5 "$tmp/$target.log"
    status=1
  fi
done
exit "$status"
