#!/usr/bin/python3
"""Writes a small random GPT-2 in the Hugging Face layout, for comparing vkgrad-gpt with
hf_gpt.py: config.json, the weights (model.safetensors, or --shards N with
model.safetensors.index.json; the hub's "transformer." names unless --no-prefix; the causal-mask
buffers h.<i>.attn.bias as old files have them), and a byte-level BPE tokenizer trained here on
a Debian text (vocab.json + merges.txt, and the same as tokenizer.json).

  make_hf_gpt2.py --out DIR [--text FILE --merges 200 --layers 2 --heads 4 --width 64
                   --context 64 --vocab 0 --seed 1 --dtype f32|bf16|f16 --shards 1 --no-prefix]

--vocab N makes vocab_size N (GPT-2's 50257 on the small tokenizer: the ids past it stand for no
text); 0: the tokenizer's.
"""
import argparse
import collections
import json
import os
import struct

import numpy as np

from hf_gpt import byte_alphabet, gpt2_words


def train_bpe(text, merges):
    """Merges the most frequent adjacent pair of the words' tokens, `merges` times (ties: the
    pair last in sorted order)."""
    to_char = byte_alphabet()
    words = collections.Counter(gpt2_words(text))
    split = {w: [to_char[b] for b in w.encode("utf-8")] for w in words}
    out = []
    for _ in range(merges):
        pairs = collections.Counter()
        for w, n in words.items():
            p = split[w]
            for i in range(len(p) - 1):
                pairs[(p[i], p[i + 1])] += n
        if not pairs:
            break
        best = max(pairs, key=lambda p: (pairs[p], p))
        out.append(best)
        for w in words:
            p, merged, i = split[w], [], 0
            while i < len(p):
                if i + 1 < len(p) and (p[i], p[i + 1]) == best:
                    merged.append(p[i] + p[i + 1])
                    i += 2
                else:
                    merged.append(p[i])
                    i += 1
            split[w] = merged
    vocab = {to_char[b]: i for i, b in enumerate(range(256))}
    for a, b in out:
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
    return vocab, out


def write_safetensors(path, tensors, dtype):
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        if dtype == "bf16":
            words = np.ascontiguousarray(array, dtype=np.float32).view(np.uint32)
            # round to nearest even, then keep the high half
            words = ((words + 0x7FFF + ((words >> 16) & 1)) >> 16).astype(np.uint16)
            raw, tag = words.tobytes(), "BF16"
        elif dtype == "f16":
            raw, tag = array.astype(np.float16).tobytes(), "F16"
        else:
            raw, tag = array.astype(np.float32).tobytes(), "F32"
        header[name] = {"dtype": tag, "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def write_tokenizer(out, text_path, merges_count):
    """A byte-level BPE of `merges_count` merges trained on the text's first 20000 characters,
    with "<|endoftext|>" last, into out: vocab.json + merges.txt and the same as tokenizer.json.
    Returns the id of "<|endoftext|>" (the tokenizer has one more id)."""
    with open(text_path, encoding="utf-8") as f:
        text = f.read()[:20000]
    vocab, merges = train_bpe(text, merges_count)
    end = len(vocab)
    vocab_with_end = dict(vocab, **{"<|endoftext|>": end})
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab_with_end, f, ensure_ascii=False)
    with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{x} {y}\n" for x, y in merges))
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": end, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}],
        "normalizer": None, "pre_tokenizer": byte_level,
        "post_processor": dict(byte_level, add_prefix_space=True, trim_offsets=False),
        "decoder": dict(byte_level, add_prefix_space=True),
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                  "vocab": vocab_with_end, "merges": [f"{x} {y}" for x, y in merges]},
    }
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False)
    return end


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--text", default="/usr/share/common-licenses/GPL-3")
    ap.add_argument("--merges", type=int, default=200)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--std", type=float, default=0.2)
    ap.add_argument("--dtype", choices=["f32", "bf16", "f16"], default="f32")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--no-prefix", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    end = write_tokenizer(a.out, a.text, a.merges)
    n_vocab, c, ctx = max(end + 1, a.vocab), a.width, a.context
    config = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "activation_function": "gelu_new",
              "n_embd": c, "n_layer": a.layers, "n_head": a.heads, "n_positions": ctx, "n_ctx": ctx,
              "n_inner": None, "vocab_size": n_vocab, "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True,
              "torch_dtype": {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}[a.dtype]}
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    rng = np.random.default_rng(a.seed)
    normal = lambda *shape: rng.normal(0.0, a.std, shape).astype(np.float32)
    w = {"wte.weight": normal(n_vocab, c), "wpe.weight": normal(ctx, c)}
    for i in range(a.layers):
        p = f"h.{i}."
        for ln in ("ln_1", "ln_2"):
            w[p + ln + ".weight"] = 1.0 + normal(c)
            w[p + ln + ".bias"] = normal(c)
        w[p + "attn.bias"] = np.tril(np.ones((ctx, ctx), np.float32)).reshape(1, 1, ctx, ctx)
        for name, shape in (("attn.c_attn", (c, 3 * c)), ("attn.c_proj", (c, c)),
                            ("mlp.c_fc", (c, 4 * c)), ("mlp.c_proj", (4 * c, c))):
            w[p + name + ".weight"] = normal(*shape)
            w[p + name + ".bias"] = normal(shape[1])
    w["ln_f.weight"] = 1.0 + normal(c)
    w["ln_f.bias"] = normal(c)
    prefix = "" if a.no_prefix else "transformer."
    w = {prefix + k: v for k, v in w.items()}
    if a.shards <= 1:
        write_safetensors(os.path.join(a.out, "model.safetensors"), w, a.dtype)
    else:
        names, weight_map = list(w), {}
        for s in range(a.shards):
            file = f"model-{s + 1:05d}-of-{a.shards:05d}.safetensors"
            part = {n: w[n] for n in names[s :: a.shards]}
            weight_map.update({n: file for n in part})
            write_safetensors(os.path.join(a.out, file), part, a.dtype)
        with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)
    print(f"{a.out}: GPT-2 of {a.layers} layers, width {c}, {a.heads} heads, context {ctx}, vocab {n_vocab}")


if __name__ == "__main__":
    main()
