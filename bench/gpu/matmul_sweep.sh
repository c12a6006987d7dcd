#!/usr/bin/env bash
# The matmul variants and the vector kernel's tilings, timed at 4096³ and at the 4-layer GPT's
# shapes (bench/gpu/README.md). Run after bench/gpu/setup.sh; JSON lines to $1, a table last.
#   bash bench/gpu/matmul_sweep.sh OUT.jsonl [SIZE=4096]
set -uo pipefail
out=${1:?output file}; size=${2:-4096}
B=${VKGRAD_BUILD:-build}/apps
: > "$out"
bench() { timeout 120 "$B/vkgrad-bench" matmul --json --warmup 20 --iters 50 "$@" >> "$out" 2>/dev/null ||
          echo "failed: $*" >&2; }
for v in naive tiled texel; do bench --m $size --n $size --k $size --variant $v --sample; done
for t in 16x16x8x8x8 16x16x16x8x8 16x16x32x8x8 16x16x16x4x8 16x16x16x8x4 16x8x16x8x8 \
         8x16x16x8x8 16x16x16x8x16 16x16x8x16x8 16x16x16x16x8 32x8x16x4x8 32x16x16x4x8 \
         16x32x16x8x4 8x8x16x8x8 16x16x16x4x4 8x8x16x4x4 32x32x8x4x4; do
  bench --m $size --n $size --k $size --variant vector --tiling $t --sample
done
# The GPT's products (batch 12 x context 64 = 768 rows, width 128, MLP 512, vocabulary 86),
# forward and the transposed backward ones.
for mnk in "768 384 128" "768 128 128" "768 512 128" "768 128 512" "768 86 128" \
           "128 384 768 --transA" "512 128 768 --transA" "128 512 768 --transA" "768 128 512 --transB" \
           "768 128 384 --transB" "768 128 86 --transB"; do
  set -- $mnk
  for v in tiled texel vector; do bench --m $1 --n $2 --k $3 ${4:-} --variant $v; done
  for t in 16x16x16x4x4 8x8x16x4x4 8x8x32x4x4 16x8x16x4x4 8x16x16x4x4 16x16x16x8x8; do
    bench --m $1 --n $2 --k $3 ${4:-} --variant vector --tiling $t
  done
done
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
best = {}
for r in rows:
    key = (r["m"], r["n"], r["k"], r["transA"], r["transB"])
    name = r["variant"] + (" " + r["tiling"] if r.get("tiling") else "")
    err = r["error"] if r["error"] is not None else float("nan")
    ok = err < 1e-3
    print(f'{r["m"]:5}x{r["n"]:<5}x{r["k"]:<5}{"tA" if r["transA"] else "  "}{"tB" if r["transB"] else "  "} '
          f'{name:22} {r["ms"]:9.4f} ms {r["gflops"]:9.0f} GFLOP/s  err {err:.1e}{"" if ok else " WRONG"}')
    if ok and (key not in best or r["gflops"] > best[key][1]): best[key] = (name, r["gflops"])
print("fastest per shape:")
for key, (name, g) in best.items(): print(" ", key, name, f"{g:.0f} GFLOP/s")
PY
