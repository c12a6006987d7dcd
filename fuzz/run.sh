#!/usr/bin/env bash
# Builds the libFuzzer programs (clang, ASan + UBSan, into build-fuzz/) and runs each target
# for RUNS executions from its stored inputs (tests/fuzz/corpus/<target>), with a 2 GiB memory
# limit and a 10 s limit per input. What a run finds is left in build-fuzz/findings/<target>/;
# once fixed, copy it into the corpus folder (named crash-*, leak-*, oom-* or timeout-*) so
# that the FuzzReplay test keeps it fixed. New coverage the fuzzer reaches goes to
# build-fuzz/corpus/<target>, not into the tree.
#   fuzz/run.sh [RUNS=1000000] [TARGET...]     (needs Debian's clang)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${VKGRAD_FUZZ_BUILD_DIR:-$root/build-fuzz}"
runs="${1:-1000000}"
shift || true
command -v clang++ >/dev/null || { echo "fuzz/run.sh: needs clang (apt-get install clang)" >&2; exit 1; }
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DVKGRAD_FUZZ=ON -DVKGRAD_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --target vkgrad-fuzz-all -j"$(nproc)"
targets=("$@")
((${#targets[@]})) || targets=(safetensors gpt_config vit_config vae_config idx_images idx_labels
                                edge_list vocab cli npy hf_folder tokenizer_json
                                tokenizer_encode)
status=0
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t" "$build/findings/$t"
  echo "== $t: $runs runs"
  if ! (cd "$build/findings/$t" &&
        ASAN_OPTIONS=detect_leaks=1 "$build/fuzz/vkgrad-fuzz-$t" -runs="$runs" -rss_limit_mb=2048 \
          -timeout=10 -max_len=65536 -print_final_stats=1 "$build/corpus/$t" \
          "$root/tests/fuzz/corpus/$t" 2>"$build/findings/$t/log.txt"); then
    status=1
    echo "   FOUND something: $build/findings/$t/ (log.txt)"
  fi
  grep -E "^stat::number_of_executed_units|^Done" "$build/findings/$t/log.txt" || true
done
exit $status
