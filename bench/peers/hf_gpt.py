#!/usr/bin/python3
"""An independent PyTorch GPT-2 (and, through hf_llama.py, Llama and Qwen2) that reads a
Hugging Face model folder, the peer of
`vkgrad-gpt sample/eval --checkpoint DIR` (Debian 12 has no `transformers` or `safetensors`
package, so the folder's files are read here with the standard library, numpy and torch).

  hf_gpt.py eval   --model DIR --data FILE [--context N]        {"loss", "tokens"}
  hf_gpt.py greedy --model DIR --prompt TEXT --tokens N         {"ids", "text"}
  hf_gpt.py logits --model DIR --data FILE [--context N] --npy OUT.npy [--compare VK.npy]

eval's windows are vkgrad-gpt eval's: they start every `context` tokens, each holds up to
context + 1 tokens and predicts all but its first. logits are the first such window's rows.
The tokenizer is the folder's vocab.json + merges.txt (or tokenizer.json's BPE model), GPT-2's
byte-level BPE; the model is GPT-2 (pre-norm, learned positions, GELU-tanh, tied head).
Everything runs in float64 unless --float32: the reference side of a float32 comparison.
"""
import argparse
import json
import os
import re
import struct
import sys
import unicodedata

import numpy as np
import torch

# ---------------------------------------------------------------- safetensors, read by hand

_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = data[base + begin : base + end]
        shape = entry["shape"]
        if entry["dtype"] == "BF16":
            # bf16 is the high half of an f32: widen by a 16-bit shift.
            words = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
            array = words.view(np.float32)
        else:
            array = np.frombuffer(raw, dtype=_DTYPES[entry["dtype"]])
        out[name] = torch.from_numpy(array.astype(np.float64).reshape(shape))
    return out


def read_weights(folder):
    single = os.path.join(folder, "model.safetensors")
    if os.path.exists(single):
        return read_safetensors(single)
    with open(os.path.join(folder, "model.safetensors.index.json")) as f:
        index = json.load(f)
    tensors = {}
    for shard in sorted(set(index["weight_map"].values())):
        tensors.update(read_safetensors(os.path.join(folder, shard)))
    return tensors


# ---------------------------------------------------------------- GPT-2's byte-level BPE


def byte_alphabet():
    """GPT-2's bytes -> printable characters: printable Latin-1 bytes stand for themselves,
    the others for 256, 257, ... in byte order."""
    keep = [b for b in range(256) if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255]
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


_CONTRACTION = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+", re.ASCII)


def _char_class(c):
    """A stand-in for c in the ASCII copy of the text: letters (\\p{L}) become 'a', numbers
    (\\p{N}) '0', white space ' ', anything else '!', ASCII characters themselves. The pattern
    runs on the copy, whose spans cut the text."""
    if ord(c) < 128:
        return c
    cat = unicodedata.category(c)
    if cat.startswith("L"):
        return "a"
    if cat.startswith("N"):
        return "0"
    if c.isspace():
        return " "
    return "!"


def gpt2_words(text):
    copy = "".join(_char_class(c) for c in text)
    return [text[m.start() : m.end()] for m in _CONTRACTION.finditer(copy)]


class Tokenizer:
    def __init__(self, folder):
        path = os.path.join(folder, "tokenizer.json")
        if os.path.exists(os.path.join(folder, "vocab.json")):
            with open(os.path.join(folder, "vocab.json"), encoding="utf-8") as f:
                vocab = json.load(f)
            with open(os.path.join(folder, "merges.txt"), encoding="utf-8") as f:
                lines = f.read().split("\n")
            merges = [tuple(l.split(" ")) for l in lines if l and not l.startswith("#version")]
            added = ["<|endoftext|>"] if "<|endoftext|>" in vocab else []
        else:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
            vocab = dict(doc["model"]["vocab"])
            merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in doc["model"]["merges"]]
            added = []
            for t in doc["added_tokens"]:
                vocab[t["content"]] = t["id"]
                added.append(t["content"])
        self.vocab = vocab
        self.by_id = {i: t for t, i in vocab.items()}
        self.ranks = {m: r for r, m in enumerate(merges)}
        self.added = added
        self.to_char = byte_alphabet()
        self.to_byte = {c: b for b, c in self.to_char.items()}

    def _bpe(self, word):
        parts = [self.to_char[b] for b in word.encode("utf-8")]
        while len(parts) > 1:
            ranked = [(self.ranks.get((parts[i], parts[i + 1]), None), i) for i in range(len(parts) - 1)]
            ranked = [(r, i) for r, i in ranked if r is not None]
            if not ranked:
                break
            best = min(ranked)[0]
            pair = next(m for m, r in self.ranks.items() if r == best)
            merged, i = [], 0
            while i < len(parts):
                if i + 1 < len(parts) and (parts[i], parts[i + 1]) == pair:
                    merged.append(parts[i] + parts[i + 1])
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        return [self.vocab[p] for p in parts]

    def encode(self, text):
        ids = []
        pieces = [text]
        if self.added:
            pattern = "(" + "|".join(re.escape(a) for a in self.added) + ")"
            pieces = re.split(pattern, text)
        for piece in pieces:
            if piece in self.added:
                ids.append(self.vocab[piece])
                continue
            for word in gpt2_words(piece):
                ids.extend(self._bpe(word))
        return ids

    def decode(self, ids):
        out = bytearray()
        for i in ids:
            if i not in self.by_id:  # a padded vocabulary's id stands for no text
                continue
            t = self.by_id[i]
            if t in self.added:
                out.extend(t.encode("utf-8"))
            else:
                out.extend(self.to_byte[c] for c in t)
        return bytes(out)


# ---------------------------------------------------------------- GPT-2


class CausalLm:
    """What eval needs of a model: logits(ids) -> (T, vocab), and its context."""

    def stream_loss(self, tokens, window):
        total, count = 0.0, 0
        for start in range(0, len(tokens) - 1, window):
            n = min(window, len(tokens) - 1 - start)
            logits = self.logits(tokens[start : start + n])
            target = torch.tensor(tokens[start + 1 : start + n + 1])
            total += float(torch.nn.functional.cross_entropy(logits, target, reduction="sum"))
            count += n
        return total / count, count


class Gpt2(CausalLm):
    def __init__(self, folder, dtype):
        with open(os.path.join(folder, "config.json")) as f:
            self.config = json.load(f)
        assert self.config["model_type"] == "gpt2"
        raw = read_weights(folder)
        self.w = {}
        for name, t in raw.items():
            name = name[len("transformer.") :] if name.startswith("transformer.") else name
            self.w[name] = t.to(dtype)
        c = self.config
        self.layers, self.heads = c["n_layer"], c["n_head"]
        self.context = c.get("n_positions", c.get("n_ctx"))
        self.eps = c.get("layer_norm_epsilon", 1e-5)
        tied = c.get("tie_word_embeddings", True) or "lm_head.weight" not in self.w
        self.head = self.w["wte.weight"] if tied else self.w["lm_head.weight"]
        act = c.get("activation_function", "gelu_new")
        self.gelu = (lambda x: torch.nn.functional.gelu(x)) if act == "gelu" else self._gelu_tanh

    @staticmethod
    def _gelu_tanh(x):
        return 0.5 * x * (1.0 + torch.tanh((2.0 / torch.pi) ** 0.5 * (x + 0.044715 * x**3)))

    def _norm(self, x, name):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + self.eps) * self.w[name + ".weight"] + self.w[name + ".bias"]

    def _linear(self, x, name):  # Conv1D: weight (in, out)
        return x @ self.w[name + ".weight"] + self.w[name + ".bias"]

    def logits(self, ids):
        """ids: a list of T <= context ids -> (T, vocab)."""
        t = len(ids)
        x = self.w["wte.weight"][torch.tensor(ids)] + self.w["wpe.weight"][:t]
        c = x.shape[-1]
        d = c // self.heads
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        for i in range(self.layers):
            p = f"h.{i}"
            q, k, v = self._linear(self._norm(x, p + ".ln_1"), p + ".attn.c_attn").split(c, dim=-1)
            q, k, v = (z.reshape(t, self.heads, d).transpose(0, 1) for z in (q, k, v))
            scores = (q @ k.transpose(-1, -2)) / d**0.5
            scores = scores.masked_fill(~mask, float("-inf"))
            o = (scores.softmax(-1) @ v).transpose(0, 1).reshape(t, c)
            x = x + self._linear(o, p + ".attn.c_proj")
            h = self.gelu(self._linear(self._norm(x, p + ".ln_2"), p + ".mlp.c_fc"))
            x = x + self._linear(h, p + ".mlp.c_proj")
        return self._norm(x, "ln_f") @ self.head.T


def load_model(folder, dtype):
    """The folder's model by config.json's model_type: gpt2 here, llama and qwen2 in
    hf_llama.py."""
    with open(os.path.join(folder, "config.json")) as f:
        model_type = json.load(f)["model_type"]
    if model_type == "gpt2":
        return Gpt2(folder, dtype)
    from hf_llama import Llama

    return Llama(folder, dtype)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["eval", "greedy", "logits"])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data")
    ap.add_argument("--prompt")
    ap.add_argument("--tokens", type=int, default=20)
    ap.add_argument("--context", type=int, default=0)
    ap.add_argument("--npy")
    ap.add_argument("--compare")
    ap.add_argument("--float32", action="store_true")
    a = ap.parse_args()
    torch.set_grad_enabled(False)
    model = load_model(a.model, torch.float32 if a.float32 else torch.float64)
    tok = Tokenizer(a.model)
    window = a.context or model.context
    if a.command == "greedy":
        ids = tok.encode(a.prompt)
        start = len(ids)
        for _ in range(a.tokens):
            ids.append(int(model.logits(ids[-model.context :])[-1].argmax()))
        drawn = ids[start:]
        print(json.dumps({"ids": drawn, "text": tok.decode(drawn).decode("utf-8", "replace")}))
        return
    with open(a.data, "rb") as f:
        tokens = tok.encode(f.read().decode("utf-8"))
    if a.command == "eval":
        loss, count = model.stream_loss(tokens, window)
        print(json.dumps({"loss": loss, "tokens": count}))
        return
    rows = min(window, len(tokens) - 1)
    logits = model.logits(tokens[:rows]).numpy()
    if a.npy:
        np.save(a.npy, logits.astype(np.float32))
    if a.compare:
        other = np.load(a.compare).astype(np.float64)
        diff = np.abs(other - logits)
        rel = float(diff.max() / np.abs(logits).max())
        # elementwise, over the logits not near 0 (where any rounding is a large ratio)
        big = np.abs(logits) >= 0.01 * np.abs(logits).max()
        worst = float((diff[big] / np.abs(logits[big])).max())
        print(json.dumps({"rows": rows, "max_abs": float(diff.max()), "max_abs_over_max_logit": rel,
                          "max_rel_of_logits_above_1pct_of_max": worst,
                          "max_logit": float(np.abs(logits).max())}))


if __name__ == "__main__":
    main()
