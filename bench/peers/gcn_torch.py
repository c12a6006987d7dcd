#!/usr/bin/python3
"""PyTorch peer of vkgrad-gnn's block-model benchmark: a 2-layer GCN on the CPU.

The same task as `vkgrad-gnn train --data sbm --model gcn`: a stochastic block model of
--nodes nodes in --communities equal communities, each node with about --degree-in neighbours
inside its community and --degree-out outside (undirected), features the community's N(0, 1)
centre plus N(0, noise^2); labels the communities, --labelled nodes per community trained on.
Model: H = relu(A_hat X W1 + b1), logits = A_hat H W2 + b2 with A_hat = D^-1/2 (A + I) D^-1/2
as a torch sparse CSR tensor (torch.sparse.mm); cross-entropy on the labelled nodes; Adam with
--lr. An epoch is one forward, backward and update over the whole graph. Prints the median and
minimum ms per epoch after a warm-up epoch, the accuracy on the unlabelled nodes and the peak
resident memory.

Benchmark-only (bench/peers/README.md): run with Debian's /usr/bin/python3, which sees
python3-torch.
"""

import argparse
import json
import os
import resource
import sys
import time


def parse_args(argv):
    p = argparse.ArgumentParser(prog="gcn_torch.py", description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, default=100000)
    p.add_argument("--communities", type=int, default=10)
    p.add_argument("--degree-in", type=float, default=16.0)
    p.add_argument("--degree-out", type=float, default=4.0)
    p.add_argument("--features", type=int, default=32)
    p.add_argument("--noise", type=float, default=1.0)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--labelled", type=int, default=20, help="labelled nodes per community")
    p.add_argument("--epochs", type=int, default=10, help="timed epochs (after one warm-up)")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--threads", type=int, default=2, help="torch intra-op threads (default 2)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true", help="end with one JSON line of results")
    return p.parse_args(argv)


def block_model(np, args):
    """Undirected SBM edges in O(nodes + edges): per block pair, a binomial count of pairs."""
    rng = np.random.default_rng(args.seed)
    n, k = args.nodes, args.communities
    start = [c * n // k for c in range(k + 1)]
    size = n // k
    p_in = min(1.0, args.degree_in / max(size - 1, 1))
    p_out = min(1.0, args.degree_out / max(n - size, 1))
    src, dst = [], []
    for a in range(k):
        for b in range(a, k):
            rows, cols = start[a + 1] - start[a], start[b + 1] - start[b]
            pairs = rows * cols
            count = rng.binomial(pairs, p_in if a == b else p_out)
            flat = rng.choice(pairs, size=count, replace=False) if count else np.empty(0, np.int64)
            i, j = start[a] + flat // cols, start[b] + flat % cols
            keep = i < j if a == b else np.ones_like(i, dtype=bool)
            src.append(i[keep])
            dst.append(j[keep])
    src, dst = np.concatenate(src), np.concatenate(dst)
    labels = np.repeat(np.arange(k), np.diff(start))
    centres = rng.standard_normal((k, args.features)).astype(np.float32)
    x = centres[labels] + args.noise * rng.standard_normal((n, args.features)).astype(np.float32)
    return src, dst, labels, x


def main(argv):
    args = parse_args(argv)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import numpy as np
    import torch
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    src, dst, labels, x = block_model(np, args)
    n = args.nodes
    # A + I, both directions, and its symmetric normalisation.
    rows = np.concatenate([src, dst, np.arange(n)])
    cols = np.concatenate([dst, src, np.arange(n)])
    degree = np.bincount(rows, minlength=n).astype(np.float32)
    values = 1.0 / np.sqrt(degree[rows] * degree[cols])
    a_hat = torch.sparse_coo_tensor(np.stack([rows, cols]), values.astype(np.float32),
                                    (n, n)).coalesce().to_sparse_csr()
    edges = len(rows)
    rng = np.random.default_rng(args.seed + 1)
    train = np.concatenate([rng.choice(np.flatnonzero(labels == c), args.labelled, replace=False)
                            for c in range(args.communities)])
    test = np.setdiff1d(np.arange(n), train)
    xt, yt = torch.from_numpy(x), torch.from_numpy(labels)
    train_t, test_t = torch.from_numpy(train), torch.from_numpy(test)
    w1 = torch.nn.Linear(args.features, args.hidden)
    w2 = torch.nn.Linear(args.hidden, args.communities)
    opt = torch.optim.Adam(list(w1.parameters()) + list(w2.parameters()), lr=args.lr)

    def epoch():
        opt.zero_grad()
        h = torch.relu(torch.sparse.mm(a_hat, w1(xt)))
        logits = torch.sparse.mm(a_hat, w2(h))
        loss = torch.nn.functional.cross_entropy(logits[train_t], yt[train_t])
        loss.backward()
        opt.step()
        return logits

    epoch()  # warm-up
    times = []
    for _ in range(args.epochs):
        t0 = time.perf_counter()
        logits = epoch()
        times.append(1000.0 * (time.perf_counter() - t0))
    accuracy = float((logits[test_t].argmax(1) == yt[test_t]).float().mean())
    times.sort()
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print("gcn_torch.py: PyTorch %s, %d thread(s); %d nodes, %d edges (with self-loops); load "
          "average %.1f" % (torch.__version__, args.threads, n, edges, os.getloadavg()[0]),
          file=sys.stderr)
    print("%d epochs: median %.1f ms, min %.1f ms per epoch; accuracy %.2f %%; peak RSS %.0f MiB"
          % (args.epochs, times[len(times) // 2], times[0], 100 * accuracy, peak_mib))
    if args.json:
        print(json.dumps({"peer": "pytorch", "nodes": n, "edges": edges,
                          "ms_per_epoch_median": times[len(times) // 2], "ms_per_epoch_min": times[0],
                          "accuracy": accuracy, "peak_rss_mib": peak_mib}))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except ModuleNotFoundError as e:
        sys.exit("gcn_torch.py: %s (install python3-torch; run with /usr/bin/python3)" % e)
