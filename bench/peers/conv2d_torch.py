"""PyTorch CPU's conv2d on the shapes vkgrad-bench conv2d times (BENCHMARKS.md, "conv2d"):
forward, and the backward (input and weight gradients, and the bias's), median of --iters
runs after a warm-up, with the GFLOP/s of the same count vkgrad-bench uses (2 N O OH OW C K^2
per product; the backward does two). Benchmark-only: nothing in the build or tests runs it.

    /usr/bin/python3 bench/peers/conv2d_torch.py --threads 2
    /usr/bin/python3 bench/peers/conv2d_torch.py --shape 8,128,28,128,3 --json
"""
import argparse
import json
import os
import statistics
import time

import torch

from torch_blas import blas_report, describe_blas

# N, C, size, O, K: two ResNet stages' 3x3 convolutions at batch 8, and the Fashion-MNIST
# CNN's second convolution at batch 128.
DEFAULT_SHAPES = ["8,64,56,64,3", "8,128,28,128,3", "128,32,14,64,5"]


def timed(fn, iters):
    fn()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), min(times), max(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", action="append", help="N,C,SIZE,O,K (repeatable)")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    report = blas_report(torch, args.threads)
    print(describe_blas(report))
    print("torch %s, %d threads, load average %s" % (torch.__version__, args.threads,
                                                      " ".join("%.2f" % v for v in os.getloadavg())))
    for text in args.shape or DEFAULT_SHAPES:
        n, c, size, o, k = (int(v) for v in text.split(","))
        x = torch.rand(n, c, size, size) * 2 - 1
        conv = torch.nn.Conv2d(c, o, k, padding=k // 2)
        with torch.no_grad():
            out = conv(x)
        flops = 2.0 * out.numel() * c * k * k
        with torch.no_grad():
            fwd = timed(lambda: conv(x), args.iters)
        xg = x.clone().requires_grad_(True)
        dy = torch.rand_like(out) * 2 - 1

        def step():
            conv.zero_grad(set_to_none=True)
            xg.grad = None
            conv(xg).backward(dy)

        both = timed(step, args.iters)  # forward + backward
        bwd = both[0] - fwd[0]
        line = {"peer": "torch", "n": n, "c": c, "size": size, "o": o, "k": k,
                "forward_ms": fwd[0], "forward_gflops": flops / (fwd[0] * 1e6),
                "backward_ms": bwd, "backward_gflops": 2 * flops / (bwd * 1e6),
                "threads": args.threads, "blas": report["kind"]}
        if args.json:
            print(json.dumps(line))
        else:
            print("torch conv2d N %d C %d %dx%d O %d k %d: forward %.2f ms (%.1f GFLOP/s), "
                  "backward %.2f ms (%.1f GFLOP/s)" % (n, c, size, size, o, k, fwd[0],
                                                        line["forward_gflops"], bwd,
                                                        line["backward_gflops"]))


if __name__ == "__main__":
    main()
