"""An independent check of vkgrad's CNN (vkgrad-vit train --model cnn) against PyTorch:
the same network built from torch.nn layers, loaded with the weights vkgrad wrote, run on the
batch `vkgrad-vit dump` wrote, and compared: the logits, the loss and every parameter's
gradient, each as max |vkgrad - torch| / max |torch| (and the worst element's relative error).
Benchmark-only: nothing in the build or tests runs it.

    vkgrad-vit train --model cnn --out cnn-out ...
    vkgrad-vit dump --checkpoint cnn-out --count 64 --out /tmp/batch.safetensors
    /usr/bin/python3 bench/peers/cnn_torch.py --checkpoint cnn-out --batch /tmp/batch.safetensors

The safetensors files are parsed here with json and numpy (no safetensors package): an
8-byte little-endian header length, a JSON header, then the raw little-endian data.
"""
import argparse
import json
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

DTYPES = {"F32": np.float32, "U32": np.uint32, "F16": np.float16}


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length])
    data = raw[8 + length:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        if info["dtype"] == "BF16":  # the top halves of f32s
            words = np.frombuffer(data[begin:end], dtype=np.uint16).astype(np.uint32) << 16
            array = words.view(np.float32)
        else:
            array = np.frombuffer(data[begin:end], dtype=DTYPES[info["dtype"]])
        tensors[name] = array.reshape(info["shape"]).copy()
    return tensors


class Cnn(torch.nn.Module):
    """vit/cnn.h's network: conv 5x5 same -> ReLU -> max pool 2, twice, then two linears."""

    def __init__(self, conv1, conv2, hidden, image, classes):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, conv1, 5, padding=2)
        self.conv2 = torch.nn.Conv2d(conv1, conv2, 5, padding=2)
        self.fc = torch.nn.Linear(conv2 * (image // 4) ** 2, hidden)
        self.head = torch.nn.Linear(hidden, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.head(F.relu(self.fc(torch.flatten(x, 1))))


def vkgrad_name(torch_name):
    """conv1.weight -> conv1.w; vkgrad's linear weights are (in, out): torch's transposed."""
    layer, kind = torch_name.split(".")
    return layer + (".w" if kind == "weight" else ".b")


def compare(what, got, want):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    scale = max(np.abs(want).max(), 1e-30)
    normalised = np.abs(got - want).max() / scale
    big = np.abs(want) > 1e-3 * scale  # elementwise relative error where it means something
    elementwise = (np.abs(got - want)[big] / np.abs(want)[big]).max() if big.any() else 0.0
    print("%-14s %-16s max|diff|/max|torch| %.2e   max elementwise rel. error %.2e"
          % (what, str(tuple(want.shape)), normalised, elementwise))
    return normalised


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", required=True, help="vkgrad-vit train --model cnn's --out")
    parser.add_argument("--batch", required=True, help="vkgrad-vit dump's --out")
    parser.add_argument("--tolerance", type=float, default=1e-4)
    args = parser.parse_args()
    with open(args.checkpoint + "/config.json") as f:
        model = json.load(f)["model"]
    if model.get("kind") != "cnn":
        sys.exit("%s is not a CNN checkpoint" % args.checkpoint)
    weights = read_safetensors(args.checkpoint + "/model.safetensors")
    batch = read_safetensors(args.batch)

    torch.manual_seed(0)
    net = Cnn(model["conv1"], model["conv2"], model["hidden"], model["image"], model["classes"])
    with torch.no_grad():
        for name, p in net.named_parameters():
            w = weights[vkgrad_name(name)]
            p.copy_(torch.from_numpy(w.T.copy() if w.ndim == 2 else w))
    net = net.double()  # the oracle in double: what is compared is vkgrad's f32 error
    x = (torch.from_numpy(batch["pixels"]).double() / 255.0 - model["mean"]) / model["stddev"]
    x = x.unsqueeze(1)
    labels = torch.from_numpy(batch["labels"].astype(np.int64))
    logits = net(x)
    loss = F.cross_entropy(logits, labels)
    loss.backward()

    worst = 0.0
    worst = max(worst, compare("logits", batch["logits"], logits.detach().numpy()))
    worst = max(worst, compare("loss", batch["loss"], [loss.item()]))
    for name, p in net.named_parameters():
        grad = p.grad.numpy()
        got = batch["grad." + vkgrad_name(name)]
        worst = max(worst, compare("grad " + vkgrad_name(name), got.T if got.ndim == 2 else got,
                                   grad))
    print("worst normalised error %.2e (tolerance %.0e): %s"
          % (worst, args.tolerance, "OK" if worst <= args.tolerance else "MISMATCH"))
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
