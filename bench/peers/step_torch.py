#!/usr/bin/env python3
"""PyTorch eager training steps of the four vkgrad models at the shapes of their apps' default
(or BENCHMARKS.md) configurations, for a side-by-side speed comparison on one machine:

  gpt  4 layers, 4 heads, width 128, context 64, batch 12, 86 symbols (vkgrad-gpt train ...
       --layers 4 --heads 4 --width 128 --context 64 --batch 12 on the license texts)
  vit  28x28 grey images, patch 7, width 64, 4 layers, 4 heads, MLP x2, class token, batch 128
       (vkgrad-vit train's defaults)
  vae  784-400-20 encoder and 20-400-784 decoder, Bernoulli loss + KL, batch 128
       (vkgrad-vae train's defaults)
  gcn  2-layer GCN, hidden 64, on a 100,000-node graph of about 2.1 M edges, 32 features,
       10 classes (vkgrad-gnn train --data sbm --nodes 100000 ... --model gcn --hidden 64)

Inputs are random tensors of those shapes (the step's time does not depend on their values);
each step is forward, backward and the optimizer (AdamW, or Adam for the VAE and GCN), as
vkgrad's. Timed: --steps steps after --warmup, with one device synchronisation at the end.
Never a dependency of vkgrad's build or tests. Prints one line per model and, with --json, a
JSON line each.

  python3 bench/peers/step_torch.py [--device cuda|cpu] [--models gpt,vit,vae,gcn]
      [--gpt LAYERS,HEADS,WIDTH,CONTEXT,BATCH] [--autocast bf16|fp16]

--gpt gives the GPT another shape (12,12,768,1024,8: GPT-2 small's body on 86 symbols);
--autocast runs forward and backward under torch.autocast in that type (fp32 weights and
AdamW state, as PyTorch's mixed precision does; fp16 with a GradScaler).
"""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def attention(q, k, v, causal):
    """PyTorch's fused attention where it has one (2.0 and later), else the plain product."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        t = q.shape[-2]
        s = s.masked_fill(torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return s.softmax(-1) @ v


class Block(nn.Module):
    def __init__(self, width, heads, mlp, causal):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc, self.out = nn.Linear(width, mlp), nn.Linear(mlp, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        a = attention(q, k, v, self.causal)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, vocab=86, layers=4, heads=4, width=128, context=64):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads, 4 * width, True) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(width), nn.Linear(width, vocab)

    def forward(self, ids):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


class Vit(nn.Module):
    def __init__(self, patch=7, width=64, layers=4, heads=4, mlp_ratio=2, classes=10):
        super().__init__()
        self.patch = patch
        tokens = (28 // patch) ** 2
        self.embed = nn.Linear(patch * patch, width)
        self.cls = nn.Parameter(torch.zeros(1, 1, width))
        self.pos = nn.Parameter(torch.zeros(1, tokens + 1, width))
        self.blocks = nn.ModuleList(
            Block(width, heads, mlp_ratio * width, False) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(width), nn.Linear(width, classes)

    def forward(self, images):
        b, p = images.shape[0], self.patch
        x = images.view(b, 28 // p, p, 28 // p, p).permute(0, 1, 3, 2, 4).reshape(b, -1, p * p)
        x = torch.cat([self.cls.expand(b, -1, -1), self.embed(x)], dim=1) + self.pos
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x[:, 0]))


class Vae(nn.Module):
    def __init__(self, hidden=400, latent=20):
        super().__init__()
        self.enc, self.mu, self.logsigma = nn.Linear(784, hidden), nn.Linear(hidden, latent), nn.Linear(hidden, latent)
        self.dec, self.out = nn.Linear(latent, hidden), nn.Linear(hidden, 784)

    def loss(self, x):
        h = F.relu(self.enc(x))
        mu, logsigma = self.mu(h), self.logsigma(h)
        z = mu + torch.randn_like(mu) * logsigma.exp()
        logits = self.out(F.relu(self.dec(z)))
        recon = F.binary_cross_entropy_with_logits(logits, x, reduction="sum")
        kl = -0.5 * torch.sum(1 + 2 * logsigma - mu.pow(2) - (2 * logsigma).exp())
        return (recon + kl) / x.shape[0]


def sbm_adjacency(nodes, communities, degree_in, degree_out, device, gen):
    """Sym-normalised (A + I) of an undirected random graph of about degree_in + degree_out
    neighbours per node, as many inside the node's community as degree_in (half of them drawn
    from each end) and the rest anywhere: about 2.1 M directed edges at 100,000 nodes."""
    size = nodes // communities
    half_in, half = int(degree_in // 2), int((degree_in + degree_out) // 2)
    src = torch.arange(nodes).repeat_interleave(half)
    inside = torch.arange(half).repeat(nodes) < half_in
    other = torch.randint(0, nodes, (src.numel(),), generator=gen)
    same = (src // size) * size + torch.randint(0, size, (src.numel(),), generator=gen)
    dst = torch.where(inside, same, other).clamp_(max=nodes - 1)
    src, dst = torch.cat([src, dst, torch.arange(nodes)]), torch.cat([dst, src, torch.arange(nodes)])
    deg = torch.zeros(nodes).index_add_(0, dst, torch.ones(dst.numel()))
    w = deg[src].rsqrt() * deg[dst].rsqrt()
    a = torch.sparse_coo_tensor(torch.stack([dst, src]), w, (nodes, nodes)).coalesce().to_sparse_csr()
    return a.to(device), src.numel()


def make(model, device, gen, gpt_shape=(4, 4, 128, 64, 12), autocast=None):
    """(step function, items per step, unit) for one model."""
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(autocast)
    scaler = torch.amp.GradScaler(device.type) if dtype == torch.float16 else None

    def cast():
        if dtype is None:
            return torch.autocast(device.type, enabled=False)
        return torch.autocast(device.type, dtype=dtype)

    def backward(loss):
        if scaler:
            scaler.scale(loss).backward()
        else:
            loss.backward()

    def update(opt):
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()

    if model == "gpt":
        layers, heads, width, context, batch = gpt_shape
        net = Gpt(86, layers, heads, width, context).to(device)
        params = sum(p.numel() for p in net.parameters())
        print(f"gpt: {layers} layers, {heads} heads, width {width}, context {context}, batch {batch}: "
              f"{params:,} parameters", file=sys.stderr)
        opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=0.1)
        ids = torch.randint(0, 86, (batch, context), generator=gen).to(device)
        tgt = torch.randint(0, 86, (batch, context), generator=gen).to(device)

        def step():
            with cast():
                loss = F.cross_entropy(net(ids).view(-1, 86), tgt.view(-1))
            opt.zero_grad(set_to_none=True)
            backward(loss)
            if scaler:
                scaler.unscale_(opt)
            nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            update(opt)
        return step, batch * context, "tokens"
    if model == "vit":
        net = Vit().to(device)
        opt = torch.optim.AdamW(net.parameters(), lr=2e-3, weight_decay=0.05)
        x = torch.rand(128, 28, 28, generator=gen).to(device)
        y = torch.randint(0, 10, (128,), generator=gen).to(device)

        def step():
            with cast():
                loss = F.cross_entropy(net(x), y)
            opt.zero_grad(set_to_none=True)
            backward(loss)
            update(opt)
        return step, 128, "images"
    if model == "vae":
        net = Vae().to(device)
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        x = torch.rand(128, 784, generator=gen).to(device)

        def step():
            with cast():
                loss = net.loss(x)
            opt.zero_grad(set_to_none=True)
            backward(loss)
            update(opt)
        return step, 128, "images"
    if model == "gcn":
        a, edges = sbm_adjacency(100000, 10, 16, 4, device, gen)
        print(f"gcn graph: 100000 nodes, {edges} directed edges with self-loops", file=sys.stderr)
        x = torch.randn(100000, 32, generator=gen).to(device)
        y = torch.randint(0, 10, (100000,), generator=gen).to(device)
        labelled = torch.randperm(100000, generator=gen)[:200].to(device)
        w1, w2 = nn.Linear(32, 64).to(device), nn.Linear(64, 10).to(device)
        opt = torch.optim.Adam(list(w1.parameters()) + list(w2.parameters()), lr=0.01)

        def step():
            # Sparse products have no 16-bit path: autocast leaves the GCN in fp32.
            h = F.relu(torch.sparse.mm(a, w1(x)))
            out = torch.sparse.mm(a, w2(h))
            loss = F.cross_entropy(out[labelled], y[labelled])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return step, 1, "epochs"
    raise SystemExit(f"unknown model {model!r}: gpt, vit, vae or gcn")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--models", default="gpt,vit,vae,gcn")
    p.add_argument("--steps", type=int, default=200, help="timed steps (default 200)")
    p.add_argument("--warmup", type=int, default=20, help="untimed steps first (default 20)")
    p.add_argument("--threads", type=int, default=0, help="CPU intra-op threads (0: PyTorch's)")
    p.add_argument("--json", action="store_true", help="a JSON line per model")
    p.add_argument("--gpt", default="4,4,128,64,12",
                   help="the GPT's LAYERS,HEADS,WIDTH,CONTEXT,BATCH (default 4,4,128,64,12)")
    p.add_argument("--autocast", choices=["bf16", "fp16"], default=None,
                   help="forward and backward under torch.autocast in this type")
    args = p.parse_args(argv)
    gpt_shape = tuple(int(v) for v in args.gpt.split(","))
    if len(gpt_shape) != 5 or min(gpt_shape) < 1 or gpt_shape[2] % gpt_shape[1]:
        p.error("--gpt takes LAYERS,HEADS,WIDTH,CONTEXT,BATCH, WIDTH a multiple of HEADS")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"PyTorch {torch.__version__} eager on {name}", file=sys.stderr)
    if device.type == "cpu":
        # The BLAS decides the CPU timings; OMP/OPENBLAS_NUM_THREADS must be set before
        # Python starts (scripts/bench-gpt.sh does).
        import torch_blas  # bench/peers/torch_blas.py
        report = torch_blas.blas_report(torch, torch.get_num_threads())
        print(torch_blas.describe_blas(report), file=sys.stderr)
        print(f"threads: {torch.get_num_threads()} intra-op", file=sys.stderr)
    gen = torch.Generator().manual_seed(1)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for model in args.models.split(","):
        step, items, unit = make(model, device, gen, gpt_shape, args.autocast)
        steps = args.steps if model != "gcn" else max(10, args.steps // 10)
        for _ in range(args.warmup):
            step()
        sync()
        start = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        ms = (time.perf_counter() - start) * 1e3 / steps
        precision = args.autocast or "fp32"
        print(f"{model}: {ms:.3f} ms/step, {items * 1e3 / ms:,.0f} {unit}/s ({steps} steps, {precision})")
        if args.json:
            print(json.dumps({"model": model, "ms_per_step": ms, "steps": steps,
                              "precision": precision, "gpt": args.gpt if model == "gpt" else None,
                              "device": name, "torch": torch.__version__}))
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
