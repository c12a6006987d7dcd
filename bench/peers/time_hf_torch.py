#!/usr/bin/python3
"""PyTorch CPU eager (float32) timings of a Hugging Face GPT-2, Llama or Qwen2 folder, the
peer of `vkgrad-gpt sample --checkpoint DIR` (KV-cached decoding) and of
`vkgrad-gpt train --init DIR [--lora R]` (one fine-tuning step) at the same shapes. The model is
hf_gpt.py's / hf_llama.py's (their weights and layout); decoding adds a key/value cache here.

  time_hf_torch.py decode --model DIR --prompt TEXT --tokens N [--threads 2]
      {"ids", "ms_per_token"}: greedy ids (top-1, as vkgrad-gpt sample --top-k 1); the median
      ms of the drawn tokens after the first (the first also runs the prompt)
  time_hf_torch.py train --model DIR --data FILE --steps N --batch B [--adapter PEFT_DIR]
      {"ms_per_step", "losses"}: the median ms of the steps after the first; rows of the
      model's context (config.json), AdamW at lr 1e-4 (hf_gpt_train.py's step, timed)

Decoding runs one row per token through every product, with the keys and values of the rows
so far kept per layer, as vkgrad's Cached decoding does; the prompt too goes row by row.
"""
import argparse
import json
import statistics
import sys
import time
import os

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_gpt import Tokenizer  # noqa: E402
from hf_gpt_train import Mt19937_64, lora_model, read_adapter  # noqa: E402


def gpt2_row(m, token, pos, cache):
    """GPT-2: one token at position pos -> its logits row; cache: per layer [keys, values]."""
    x = m.w["wte.weight"][token] + m.w["wpe.weight"][pos]
    c = x.shape[-1]
    d = c // m.heads
    for i in range(m.layers):
        p = f"h.{i}"
        q, k, v = m._linear(m._norm(x, p + ".ln_1"), p + ".attn.c_attn").split(c)
        keys, values = cache[i]
        keys.append(k.reshape(m.heads, 1, d))
        values.append(v.reshape(m.heads, 1, d))
        kk, vv = torch.cat(keys, 1), torch.cat(values, 1)  # (heads, T, d)
        scores = (q.reshape(m.heads, 1, d) @ kk.transpose(-1, -2)) / d**0.5
        o = (scores.softmax(-1) @ vv).reshape(c)
        x = x + m._linear(o, p + ".attn.c_proj")
        x = x + m._linear(m.gelu(m._linear(m._norm(x, p + ".ln_2"), p + ".mlp.c_fc")), p + ".mlp.c_proj")
    return m._norm(x, "ln_f") @ m.head.T


def rotate_row(m, x, pos):
    """x: (heads, 1, d) at position pos, rotate_half form (hf_llama.py's _rotate at one row)."""
    d = x.shape[-1]
    inv_freq = 1.0 / (m.theta ** (torch.arange(0, d, 2, dtype=m.dtype) / d))
    angle = torch.cat([inv_freq, inv_freq]) * pos
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * angle.cos() + torch.cat([-x2, x1], dim=-1) * angle.sin()


def llama_row(m, token, pos, cache):
    """Llama / Qwen2: one token at position pos -> its logits row."""
    x = m.w["model.embed_tokens.weight"][token]
    d = x.shape[-1] // m.heads
    group = m.heads // m.kv_heads
    for i in range(m.layers):
        p = f"model.layers.{i}."
        h = m._norm(x, p + "input_layernorm.weight")
        q = rotate_row(m, m._linear(h, p + "self_attn.q_proj").reshape(m.heads, 1, d), pos)
        k = rotate_row(m, m._linear(h, p + "self_attn.k_proj").reshape(m.kv_heads, 1, d), pos)
        v = m._linear(h, p + "self_attn.v_proj").reshape(m.kv_heads, 1, d)
        keys, values = cache[i]
        keys.append(k)
        values.append(v)
        kk = torch.cat(keys, 1).repeat_interleave(group, dim=0)
        vv = torch.cat(values, 1).repeat_interleave(group, dim=0)
        o = (((q @ kk.transpose(-1, -2)) / d**0.5).softmax(-1) @ vv).reshape(m.heads * d)
        x = x + m._linear(o, p + "self_attn.o_proj")
        h = m._norm(x, p + "post_attention_layernorm.weight")
        gate, up = m._linear(h, p + "mlp.gate_proj"), m._linear(h, p + "mlp.up_proj")
        x = x + m._linear(torch.nn.functional.silu(gate) * up, p + "mlp.down_proj")
    return m._norm(x, "model.norm.weight") @ m.head.T


def decode(a):
    torch.set_grad_enabled(False)
    m = lora_model(a.model, torch.float32)
    row = gpt2_row if m.config["model_type"] == "gpt2" else llama_row
    tok = Tokenizer(a.model)
    valid = len(tok.vocab)  # a padded vocabulary's ids past the tokenizer's are never drawn
    ids = tok.encode(a.prompt)
    cache = [([], []) for _ in range(m.layers)]
    drawn, times = [], []
    for pos in range(len(ids) + a.tokens - 1):
        start = time.perf_counter()
        logits = row(m, ids[pos], pos, cache)
        if pos + 1 >= len(ids):
            ids.append(int(logits[:valid].argmax()))
            drawn.append(ids[-1])
            times.append(time.perf_counter() - start)
    print(json.dumps({"ids": drawn, "ms_per_token": 1e3 * statistics.median(times[1:]),
                      "threads": torch.get_num_threads()}))


def train(a):
    m = lora_model(a.model, torch.float32)
    if a.adapter:
        m.adapters, m.scale = read_adapter(a.adapter, m, torch.float32)
        params = [t for pair in m.adapters.values() for t in pair]
    else:
        params = list(m.w.values())
    for p in params:
        p.requires_grad_(True)
    with open(a.data, "rb") as f:
        tokens = Tokenizer(a.model).encode(f.read().decode("utf-8"))
    ctx = m.context
    rows = len(tokens) * 9 // 10 - ctx
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.1)
    rng = Mt19937_64(1)
    data = torch.tensor(tokens)
    times, losses = [], []
    for _ in range(a.steps):
        start = time.perf_counter()
        total = 0
        for r in [rng() % rows for _ in range(a.batch)]:
            logits = m.logits(tokens[r : r + ctx])
            total = total + torch.nn.functional.cross_entropy(logits, data[r + 1 : r + ctx + 1], reduction="sum")
        loss = total / (a.batch * ctx)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
        times.append(time.perf_counter() - start)
    print(json.dumps({"ms_per_step": 1e3 * statistics.median(times[1:]), "losses": losses,
                      "context": ctx, "batch": a.batch, "threads": torch.get_num_threads()}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["decode", "train"])
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt", default="The licence")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--data")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--adapter")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    decode(a) if a.command == "decode" else train(a)


if __name__ == "__main__":
    main()
