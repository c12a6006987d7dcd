#!/usr/bin/env bash
# ggml's Vulkan backend as a peer of vkgrad's op benchmarks, on a lent GPU machine: runs
# .ggml/ggml_vulkan_ops (bench/peers/ggml_vulkan_ops.sh build made it; the call carries .ggml
# with .gl and .gpu) at full size after `source bench/gpu/setup.sh`: mul_mat 4096³ and the
# GPT's shapes (F32, F16 weights, F16 both; ggml's default and F32 accumulation), soft_max and
# norm at 4096x4096 and 768x128, causal flash attention B 12, H 4, D 32, T 64/1024/4096.
# 20 warm-up computes (and at least 200 ms) per case, then 50 timed rounds; median ms.
# A second pass repeats the F32 x F32 products under GGML_VK_DISABLE_F16=1 (tag "no_f16"):
# by default ggml rounds F32 operands to F16 inside its matmul shaders.
#   bash bench/gpu/ggml.sh OUT_DIR      -> OUT_DIR/ggml.jsonl, OUT_DIR/ggml.log, a table here
# About 20-30 s on an H100/H200 (34 cases, each well under a second, plus two start-ups).
# GGML_ARGS adds arguments (e.g. GGML_ARGS=--quick for a dry run on lavapipe, which also needs
# GGML_VK_VISIBLE_DEVICES=0).
set -uo pipefail
out=${1:?output folder}
cd "$(dirname "$0")/../.."
mkdir -p "$out"
bin=.ggml/ggml_vulkan_ops
if [[ ! -x $bin ]]; then
  [[ -f $bin.xz ]] || { echo "no $bin(.xz): run bench/peers/ggml_vulkan_ops.sh build and carry .ggml" >&2; exit 1; }
  bin=/tmp/ggml_vulkan_ops
  if command -v xz >/dev/null; then xz -dc .ggml/ggml_vulkan_ops.xz > $bin
  else python3 -c 'import lzma,sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())' .ggml/ggml_vulkan_ops.xz > $bin
  fi
  chmod +x $bin
fi
# No validation layer for the peer: ggml enables none itself, and none may be forced on.
unset VK_INSTANCE_LAYERS VK_LOADER_LAYERS_ENABLE
start=$(date +%s)
args=(--device "${GGML_DEVICE:-0}" --warmup 20 --iters 50 --warm-ms 200 ${GGML_ARGS:-})
timeout 240 "$bin" "${args[@]}" > "$out/ggml.jsonl" 2> "$out/ggml.log"
rc=$?
GGML_VK_DISABLE_F16=1 timeout 120 "$bin" "${args[@]}" --only "w=f32 x=f32" --tag no_f16 \
  >> "$out/ggml.jsonl" 2>> "$out/ggml.log"
rc2=$?; (( rc == 0 )) && rc=$rc2
echo "ggml_vulkan_ops exit $rc (second pass $rc2) after $(( $(date +%s) - start )) s"
grep -m1 '^ggml_vulkan: [0-9]* = ' "$out/ggml.log" || { echo "no ggml device line; log tail:"; tail -20 "$out/ggml.log"; }
python3 - "$out/ggml.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith("{"): continue
    r = json.loads(l)
    if "description" in r:
        print(f'device {r["device"]}: {r["description"]} | ggml {r["ggml_version"]} ({r["ggml_commit"]}) | tag {r["tag"]}')
        continue
    op = r["op"] if r["tag"] == "default" else r["op"] + " " + r["tag"]
    if r["op"] == "mul_mat":
        shape = f'{r["m"]}x{r["n"]}x{r["k"]} w={r["wtype"]} x={r["xtype"]} acc={r["prec"]}'
    elif r["op"] == "flash_attn_ext":
        shape = f'B{r["b"]} H{r["h"]} T{r["t"]} D{r["d"]} causal acc={r["prec"]}'
    else:
        shape = f'{r["rows"]}x{r["cols"]}'
    if not r.get("supported", True):
        print(f'{op:15} {shape:42} unsupported by ggml'); continue
    if not r["ok"]:
        print(f'{op:15} {shape:42} FAILED (error {r.get("error")})'); continue
    rate = f'{r["tflops"]:8.2f} TFLOP/s' if "tflops" in r else f'{r["gbs"]:8.1f} GB/s   '
    print(f'{op:15} {shape:42} {r["ms"]:9.4f} ms {rate}  err {r["error"]:.1e}  (x{r["reps"]} per round)')
PY
exit $rc
