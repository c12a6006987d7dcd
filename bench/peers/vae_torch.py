#!/usr/bin/python3
"""PyTorch peer of vkgrad's VAE: the configuration of PyTorch's VAE example, on the CPU.

What it trains (examples/vae/main.py in pytorch/examples, with vkgrad's parameterisation):
  encoder  784 -> 400 (ReLU) -> two linear heads, mu and log_sigma (20 each)
  z        mu + exp(log_sigma) * eps, eps ~ N(0, I)   (log sigma, not the example's log variance)
  decoder  20 -> 400 (ReLU) -> 784 logits; sigmoid(logits) is the image
  loss     recon + beta * KL per image, in nats, the mean over the batch:
             recon bce: sum_j BCE(sigmoid(l_j), x_j)   (from the logits, stable for any l)
             recon mse: sum_j (sigmoid(l_j) - x_j)^2
             KL:        sum_k (mu_k^2 + exp(2 log_sigma_k) - 1) / 2 - log_sigma_k
  Adam lr 1e-3, batch 128, 10 epochs, reshuffled every epoch; nn.Linear's default init.
The example minimises the batch's sum; this script minimises its mean, as vkgrad does. Adam
is invariant to that scale except through its eps (1e-8), so the runs are alike.
Evaluation follows the example too: every test image, z sampled as in training.

Data: the Fashion-MNIST IDX files (gzip or not) read directly, pixels / 255 as floats in
[0, 1], not binarised. Only the images are read; a VAE needs no labels.

Benchmark-only: python3-torch and libopenblas0-pthread are installed by hand (see
bench/peers/README.md), never by scripts/setup.sh. Run it with Debian's /usr/bin/python3,
which is the interpreter that sees python3-torch.
"""

import argparse
import gzip
import json
import os
import struct
import sys
import time

import torch_blas  # bench/peers/torch_blas.py

PROG = "vae_torch.py"
DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
TRAIN_IMAGES = "train-images-idx3-ubyte"
TEST_IMAGES = "t10k-images-idx3-ubyte"

# Filled by import_torch(): numpy and torch load the BLAS (and size its thread pool) when
# they are imported, so they are imported only after the thread count is in the environment.
np = None
torch = None
F = None


class Failure(Exception):
    """A user-facing error: printed as one line, exit status 1."""


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog=PROG, description="Train PyTorch's example VAE on Fashion-MNIST on the CPU "
        "(the peer of vkgrad's VAE); prints per-epoch losses and throughput.")
    p.add_argument("--data", default=DEFAULT_DATA,
                   help="folder with the Fashion-MNIST IDX files (default %(default)s)")
    p.add_argument("--hidden", type=int, default=400, help="hidden width (default 400)")
    p.add_argument("--latent", type=int, default=20, help="latent dimensions (default 20)")
    p.add_argument("--recon", choices=("bce", "mse"), default="bce",
                   help="reconstruction term (default bce)")
    p.add_argument("--beta", type=float, default=1.0, help="the KL term's weight (default 1)")
    p.add_argument("--batch", type=int, default=128, help="batch size (default 128)")
    p.add_argument("--epochs", type=int, default=10, help="epochs (default 10)")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate (default 1e-3)")
    p.add_argument("--seed", type=int, default=1, help="seed of init, shuffles and eps (default 1)")
    p.add_argument("--threads", type=int, default=1,
                   help="intra-op threads for torch and the BLAS (default 1). On a busy "
                   "machine, OpenMP's spinning threads can make more than 1 far slower; "
                   "OMP_WAIT_POLICY=PASSIVE avoids that")
    p.add_argument("--limit", type=int, default=0,
                   help="train on the first N training images only (default: all)")
    p.add_argument("--drop-last", action="store_true",
                   help="skip each epoch's last partial batch (vkgrad's apps do; the example "
                   "does not)")
    p.add_argument("--json", action="store_true", help="end with one JSON line of results")
    args = p.parse_args(argv)
    for name in ("hidden", "latent", "batch", "epochs", "threads"):
        if getattr(args, name) < 1:
            p.error("--%s must be at least 1, not %d" % (name, getattr(args, name)))
    if args.limit < 0:
        p.error("--limit must be 0 (all) or positive, not %d" % args.limit)
    if not args.lr > 0:
        p.error("--lr must be positive, not %g" % args.lr)
    if not args.beta >= 0:
        p.error("--beta must be 0 or more, not %g" % args.beta)
    return args


def import_torch(threads):
    global np, torch, F
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    try:
        import numpy
        import torch as torch_module
        import torch.nn.functional as functional
    except ImportError as e:
        raise Failure("cannot import numpy and torch (%s); install Debian's python3-torch and "
                      "run this with /usr/bin/python3 (now %s)" % (e, sys.executable))
    np, torch, F = numpy, torch_module, functional
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)


# ---- data ----------------------------------------------------------------------------------

def find_idx(folder, name):
    for candidate in (name, name + ".gz"):
        path = os.path.join(folder, candidate)
        if os.path.isfile(path):
            return path
    raise Failure("neither %s nor %s.gz in %s (the Fashion-MNIST IDX files; --data DIR to "
                  "read them elsewhere)" % (name, name, folder))


def read_idx_images(path):
    """An IDX file of unsigned-byte images -> (count, rows * cols) float32 tensor in [0, 1]."""
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError
        raise Failure("%s: cannot read: %s" % (path, e))
    if len(raw) < 16:
        raise Failure("%s: %d bytes is too short for an IDX image header" % (path, len(raw)))
    zero, dtype, dims = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype != 0x08 or dims != 3:
        raise Failure("%s: not an IDX file of unsigned-byte images (magic %s, want 00000803)"
                      % (path, raw[:4].hex()))
    count, rows, cols = struct.unpack(">III", raw[4:16])
    want = 16 + count * rows * cols
    if len(raw) != want:
        raise Failure("%s: header says %d images of %dx%d (%d bytes with the header) but the file "
                      "holds %d"
                      % (path, count, rows, cols, want, len(raw)))
    pixels = np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(count, rows * cols)
    return torch.from_numpy(pixels.astype(np.float32) / np.float32(255.0)), rows, cols


# ---- model ---------------------------------------------------------------------------------

def make_model(pixels, hidden, latent):
    class Vae(torch.nn.Module):
        # Parameter names as vkgrad's: enc0, mu, log_sigma, dec0, out.
        def __init__(self):
            super().__init__()
            self.enc0 = torch.nn.Linear(pixels, hidden)
            self.mu = torch.nn.Linear(hidden, latent)
            self.log_sigma = torch.nn.Linear(hidden, latent)
            self.dec0 = torch.nn.Linear(latent, hidden)
            self.out = torch.nn.Linear(hidden, pixels)

        def forward(self, x):  # x: (B, pixels) -> logits (B, pixels), mu and log_sigma (B, latent)
            h = F.relu(self.enc0(x))
            mu, log_sigma = self.mu(h), self.log_sigma(h)
            z = mu + torch.exp(log_sigma) * torch.randn_like(mu)
            return self.out(F.relu(self.dec0(z))), mu, log_sigma

    return Vae()


def loss_terms(logits, x, mu, log_sigma, recon):
    """Per-image reconstruction and KL, (B) each, in nats."""
    if recon == "bce":
        r = F.binary_cross_entropy_with_logits(logits, x, reduction="none").sum(1)
    else:
        r = (torch.sigmoid(logits) - x).square().sum(1)
    kl = (0.5 * (mu.square() + torch.exp(2 * log_sigma) - 1) - log_sigma).sum(1)
    return r, kl


def evaluate(model, test, batch, recon):
    """Test recon and KL per image over all of `test`, and the seconds it took."""
    model.eval()
    start = time.perf_counter()
    r_sum = kl_sum = 0.0
    with torch.no_grad():
        for first in range(0, test.shape[0], batch):
            x = test[first:first + batch]
            logits, mu, log_sigma = model(x)
            r, kl = loss_terms(logits, x, mu, log_sigma, recon)
            r_sum += r.sum(dtype=torch.float64).item()
            kl_sum += kl.sum(dtype=torch.float64).item()
    seconds = time.perf_counter() - start
    model.train()
    return r_sum / test.shape[0], kl_sum / test.shape[0], seconds


def train(args, train_images, test_images, log):
    torch.manual_seed(args.seed)  # init and eps
    shuffle = torch.Generator().manual_seed(args.seed)
    model = make_model(train_images.shape[1], args.hidden, args.latent)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    n = train_images.shape[0]
    used = n - n % args.batch if args.drop_last else n
    epochs = []
    for epoch in range(1, args.epochs + 1):
        order = torch.randperm(n, generator=shuffle)
        r_sum = kl_sum = torch.zeros((), dtype=torch.float64)
        start = time.perf_counter()
        for first in range(0, used, args.batch):
            x = train_images[order[first:first + args.batch]]
            logits, mu, log_sigma = model(x)
            r, kl = loss_terms(logits, x, mu, log_sigma, args.recon)
            loss = (r + args.beta * kl).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            # Summed as tensors: no .item() (and no Python float) per step in the timed loop.
            r_sum = r_sum + r.detach().sum(dtype=torch.float64)
            kl_sum = kl_sum + kl.detach().sum(dtype=torch.float64)
        train_seconds = time.perf_counter() - start
        test_r, test_kl, eval_seconds = evaluate(model, test_images, args.batch, args.recon)
        e = {"epoch": epoch,
             "train_recon": r_sum.item() / used, "train_kl": kl_sum.item() / used,
             "test_recon": test_r, "test_kl": test_kl, "test_neg_elbo": test_r + test_kl,
             "train_images_per_s": used / train_seconds,
             "eval_images_per_s": test_images.shape[0] / eval_seconds,
             "train_seconds": train_seconds, "eval_seconds": eval_seconds}
        e["train_loss"] = e["train_recon"] + args.beta * e["train_kl"]
        epochs.append(e)
        log("epoch %d/%d  train recon %.2f kl %.2f loss %.2f | test recon %.2f kl %.2f "
            "-elbo %.2f | train %.0f img/s, eval %.0f img/s | %.1f s"
            % (epoch, args.epochs, e["train_recon"], e["train_kl"], e["train_loss"],
               e["test_recon"], e["test_kl"], e["test_neg_elbo"], e["train_images_per_s"],
               e["eval_images_per_s"], train_seconds + eval_seconds))
    return epochs, used


def main(argv):
    args = parse_args(argv)
    import_torch(args.threads)

    def log(text):
        print(text, flush=True)

    train_path = find_idx(args.data, TRAIN_IMAGES)
    test_path = find_idx(args.data, TEST_IMAGES)
    blas = torch_blas.blas_report(torch, args.threads)
    train_images, rows, cols = read_idx_images(train_path)
    test_images, test_rows, test_cols = read_idx_images(test_path)
    if (rows, cols) != (test_rows, test_cols):
        raise Failure("%s has %dx%d images but %s has %dx%d"
                      % (train_path, rows, cols, test_path, test_rows, test_cols))
    if args.limit:
        if args.limit > train_images.shape[0]:
            raise Failure("--limit %d is more than the %d images in %s"
                          % (args.limit, train_images.shape[0], train_path))
        train_images = train_images[:args.limit]
    if args.drop_last and train_images.shape[0] < args.batch:
        raise Failure("--batch %d with --drop-last leaves none of the %d training images"
                      % (args.batch, train_images.shape[0]))

    log("%s: PyTorch %s, %d intra-op thread(s); load average %.1f on %d CPUs%s"
        % (PROG, torch.__version__, torch.get_num_threads(), os.getloadavg()[0], os.cpu_count(),
           " (busy: timings are contended)" if os.getloadavg()[0] > 0.5 else ""))
    log(torch_blas.describe_blas(blas))
    log("data: %d training images (%s), %d test images (%s), %dx%d"
        % (train_images.shape[0], train_path, test_images.shape[0], test_path, rows, cols))
    log("model: %d-%d-%d, recon %s, beta %g; Adam lr %g, batch %d, %d epoch(s), seed %d%s"
        % (rows * cols, args.hidden, args.latent, args.recon, args.beta, args.lr, args.batch,
           args.epochs, args.seed, ", last partial batch dropped" if args.drop_last else ""))
    log("losses are nats per image; -elbo = recon + kl (beta 1) on all test images, z sampled")

    start = time.perf_counter()
    epochs, used = train(args, train_images, test_images, log)
    seconds = time.perf_counter() - start
    train_seconds = sum(e["train_seconds"] for e in epochs)
    eval_seconds = sum(e["eval_seconds"] for e in epochs)
    log("done: %d epoch(s) in %.1f s (training %.0f images/s, evaluation %.0f images/s), "
        "test -elbo %.2f nats per image"
        % (args.epochs, seconds, used * args.epochs / train_seconds,
           test_images.shape[0] * args.epochs / eval_seconds, epochs[-1]["test_neg_elbo"]))
    if args.json:
        config = {k: getattr(args, k) for k in ("hidden", "latent", "recon", "beta", "batch",
                                                "epochs", "lr", "seed", "threads", "limit",
                                                "drop_last", "data")}
        print(json.dumps({"peer": "pytorch", "torch": torch.__version__, "config": config,
                          "train_images": used, "test_images": test_images.shape[0],
                          "blas": blas, "epochs": epochs,
                          "train_images_per_s": used * args.epochs / train_seconds,
                          "eval_images_per_s": test_images.shape[0] * args.epochs / eval_seconds,
                          "seconds": seconds}), flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Failure as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        sys.exit(1)
