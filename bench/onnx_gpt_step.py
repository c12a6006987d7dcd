"""The imported GPT's training step against the native one: the same GPT-2-style model
(token and position embeddings, pre-norm blocks with a fused qkv, causal attention, GELU-tanh
MLP, a tied head) built in PyTorch, exported to ONNX (training export, opset 17) and trained
by `vkgrad-onnx train`, side by side with `vkgrad-gpt train` at the same configuration:
AdamW at a constant learning rate, no clipping, no weight decay, the same batch and window.
Each side runs twice per round, --steps-short and --steps-long steps, and the difference of
their training-loop times (each program's --json train_seconds) over the difference of the
steps is the steady step: process start, import, compile and the first step cancel out.
Rounds alternate native, imported, imported without fusions.
Benchmark-only (needs Debian's python3-torch and python3-onnx; run with /usr/bin/python3):
  /usr/bin/python3 bench/onnx_gpt_step.py [--build build] [--rounds 3]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "peers"))
import onnx_torch  # noqa: E402  (the GPT-2-style model, shared with the PyTorch comparison)


def run(cmd, key):
    r = subprocess.run(cmd + ["--json"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(" ".join(cmd) + "\n" + r.stderr[-2000:])
    return json.loads(r.stdout.strip().splitlines()[-1])[key]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--data", default="/usr/share/common-licenses/GPL-3")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps-short", type=int, default=10)
    p.add_argument("--steps-long", type=int, default=50)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="vkgrad-onnx-gpt-")
    data = open(args.data, "rb").read()
    vocab = sorted(set(data))
    index = {b: i for i, b in enumerate(vocab)}
    ids = np.array([index[b] for b in data], dtype=np.int64)
    t = args.context
    rows = (len(ids) - 1) // t
    x = np.stack([ids[i * t:(i + 1) * t] for i in range(rows)])
    y = np.stack([ids[i * t + 1:(i + 1) * t + 1] for i in range(rows)])
    np.save(os.path.join(work, "ids.npy"), x)
    np.save(os.path.join(work, "next.npy"), y)
    torch.manual_seed(0)
    model = onnx_torch.Gpt(vocab=len(vocab), d=args.width, heads=args.heads, layers=args.layers, t=t)
    path = os.path.join(work, "gpt.onnx")
    torch.onnx.export(model, (torch.from_numpy(x[:args.batch]),), path, opset_version=17,
                      input_names=["ids"], output_names=["logits"],
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    bin_dir = os.path.join(args.build, "apps")

    def native(steps):
        return run([os.path.join(bin_dir, "vkgrad-gpt"), "train", "--data", args.data,
                    "--layers", str(args.layers), "--heads", str(args.heads),
                    "--width", str(args.width), "--context", str(t), "--batch", str(args.batch),
                    "--tie", "--schedule", "constant", "--clip", "0", "--weight-decay", "0",
                    "--lr", "3e-3", "--steps", str(steps), "--out", os.path.join(work, "native")],
                   "train_seconds")

    def imported(steps, fuse=True):
        return run([os.path.join(bin_dir, "vkgrad-onnx"), "train", path,
                    "--input", "ids=" + os.path.join(work, "ids.npy"),
                    "--target", os.path.join(work, "next.npy"), "--loss", "cross-entropy",
                    "--optimizer", "adamw", "--lr", "3e-3", "--batch", str(args.batch),
                    "--steps", str(steps), "--out", os.path.join(work, "onnx")]
                   + ([] if fuse else ["--no-fusion"]), "train_seconds")

    sides = {"native": native, "imported": imported, "imported, no fusion": lambda s: imported(s, False)}
    results = {k: [] for k in sides}
    for r in range(args.rounds):
        for name, fn in sides.items():
            short, long_ = fn(args.steps_short), fn(args.steps_long)
            ms = (long_ - short) / (args.steps_long - args.steps_short) * 1e3
            results[name].append(ms)
            print(json.dumps({"round": r, "side": name, "step_ms": round(ms, 2)}), flush=True)
    med = {k: float(np.median(v)) for k, v in results.items()}
    print(json.dumps({"median_step_ms": med,
                      "imported_over_native": med["imported"] / med["native"],
                      "unfused_over_native": med["imported, no fusion"] / med["native"],
                      "config": vars(args)}))


if __name__ == "__main__":
    main()
