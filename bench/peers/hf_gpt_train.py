#!/usr/bin/python3
"""Fine-tuning steps of a Hugging Face GPT-2, Llama or Qwen2 folder in PyTorch, the peer of
`vkgrad-gpt train --init DIR [--adapter PEFT_DIR]`: the same windows, rows, optimizer and
learning rate, every weight trained or only LoRA adapters (PEFT's layout) with the base frozen.

  hf_gpt_train.py train --model DIR --data FILE --steps N --batch B --lr X
                        [--weight-decay W --seed S --adapter PEFT_DIR]     {"losses": [...]}
  hf_gpt_train.py eval  --model DIR --adapter PEFT_DIR --data FILE        {"loss", "tokens"}
  hf_gpt_train.py init-adapter --model DIR --out PEFT_DIR --rank R [--alpha A --seed S
                        --targets LIST --b-std X]
  (targets by default every product: GPT-2's c_attn,c_proj,c_fc; Llama's and Qwen2's
  q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj, each its own nn.Linear here as
  in PEFT, where vkgrad fuses q, k, v and gate, up and adapts column blocks)

What it reproduces of vkgrad-gpt train (apps/common/training_run.cpp, training/optimizer.h):
  - tokens: the whole file through the folder's tokenizer; the first 90% trains; row i is the
    window tokens[i : i + context] with its targets one token on; rows = 90% - context;
  - each step draws `batch` rows as r = mt19937_64(seed)() % rows (the C++ std::mt19937_64);
  - the loss is the mean cross-entropy over batch * context tokens, read before the update;
  - AdamW, beta (0.9, 0.999), eps 1e-8, decoupled weight decay p *= 1 - lr * wd on matrices
    only (rank > 1), none on biases and norm gains; a constant learning rate (run vkgrad-gpt
    with --schedule constant --warmup 0 --clip 0);
  - LoRA: y = x W + b + (alpha / r) (x A^T) B^T with PEFT's lora_A.weight A (r, in) and
    lora_B.weight B (out, r); only A and B train (both matrices, both decayed).
init-adapter writes a PEFT adapter folder both sides start from: A as PEFT draws it,
U(-1/sqrt(in), 1/sqrt(in)), and B from N(0, b-std) (PEFT starts B at 0; a non-zero B makes
the first steps train A too).
Runs in float64 (the reference side of vkgrad's float32) unless --float32.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_gpt import Tokenizer, load_model, read_safetensors  # noqa: E402

_MASK64 = (1 << 64) - 1


class Mt19937_64:
    """The C++ std::mt19937_64 (seeded with one integer), in pure Python."""

    def __init__(self, seed):
        self.mt = [seed & _MASK64]
        for i in range(1, 312):
            prev = self.mt[-1]
            self.mt.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & _MASK64)
        self.index = 312

    def _twist(self):
        upper, lower = 0xFFFFFFFF80000000, 0x7FFFFFFF
        for i in range(312):
            x = (self.mt[i] & upper) | (self.mt[(i + 1) % 312] & lower)
            xa = x >> 1
            if x & 1:
                xa ^= 0xB5026F5AA96619E9
            self.mt[i] = self.mt[(i + 156) % 312] ^ xa
        self.index = 0

    def __call__(self):
        if self.index >= 312:
            self._twist()
        y = self.mt[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & _MASK64


def is_gpt2(model):
    return model.config["model_type"] == "gpt2"


def products(model):
    """The products LoRA may adapt: (PEFT module name, weight name in model.w less .weight)."""
    out = []
    for i in range(model.layers):
        if is_gpt2(model):
            for part in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"):
                out.append((f"transformer.h.{i}.{part}", f"h.{i}.{part}"))
        else:
            for part in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                         "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"):
                out.append((f"model.layers.{i}.{part}",) * 2)
    return out


def default_targets(model):
    if is_gpt2(model):
        return "c_attn,c_proj,c_fc"
    return "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"


def selected(model, targets):
    return [(m, w) for m, w in products(model) if any(m == t or m.endswith("." + t) for t in targets)]


def lora_model(folder, dtype):
    """The folder's model (hf_gpt.load_model) whose products add PEFT's LoRA term where an
    adapter is given: model.adapters (weight name -> (A (r,in), B (out,r))), model.scale."""
    model = load_model(folder, dtype)

    class Lora(type(model)):
        def _linear(self, x, name):
            y = super()._linear(x, name)
            if name in self.adapters:
                a, b = self.adapters[name]
                y = y + self.scale * ((x @ a.T) @ b.T)
            return y

    model.__class__ = Lora
    model.adapters, model.scale = {}, 1.0
    return model


def read_adapter(folder, model, dtype):
    with open(os.path.join(folder, "adapter_config.json")) as f:
        config = json.load(f)
    tensors = read_safetensors(os.path.join(folder, "adapter_model.safetensors"))
    adapters = {}
    for module, weight in selected(model, config["target_modules"]):
        a = tensors[f"base_model.model.{module}.lora_A.weight"].to(dtype)
        b = tensors[f"base_model.model.{module}.lora_B.weight"].to(dtype)
        adapters[weight] = (a, b)
    return adapters, config["lora_alpha"] / config["r"]


def train(a):
    dtype = torch.float32 if a.float32 else torch.float64
    model = lora_model(a.model, dtype)
    if a.adapter:
        model.adapters, model.scale = read_adapter(a.adapter, model, dtype)
        params = [t for pair in model.adapters.values() for t in pair]
    else:
        params = list(model.w.values())  # a tied head is wte.weight itself
    for p in params:
        p.requires_grad_(True)
    tok = Tokenizer(a.model)
    with open(a.data, "rb") as f:
        tokens = tok.encode(f.read().decode("utf-8"))
    ctx = model.context
    split = len(tokens) * 9 // 10
    rows = split - ctx
    decay = [p for p in params if p.dim() > 1]
    no_decay = [p for p in params if p.dim() <= 1]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": a.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
    rng = Mt19937_64(a.seed)
    data = torch.tensor(tokens)
    losses = []
    for _ in range(a.steps):
        drawn = [rng() % rows for _ in range(a.batch)]
        total = 0
        for r in drawn:
            logits = model.logits(tokens[r : r + ctx])
            total = total + torch.nn.functional.cross_entropy(logits, data[r + 1 : r + ctx + 1], reduction="sum")
        loss = total / (a.batch * ctx)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    print(json.dumps({"losses": losses}))


def evaluate(a):
    """hf_gpt.py eval's windows on the base with the adapter folder's LoRA terms."""
    torch.set_grad_enabled(False)
    model = lora_model(a.model, torch.float64)
    model.adapters, model.scale = read_adapter(a.adapter, model, torch.float64)
    with open(a.data, "rb") as f:
        tokens = Tokenizer(a.model).encode(f.read().decode("utf-8"))
    loss, count = model.stream_loss(tokens, model.context)
    print(json.dumps({"loss": loss, "tokens": count}))


def init_adapter(a):
    from make_hf_gpt2 import write_safetensors  # noqa: E402

    model = load_model(a.model, torch.float64)
    gen = np.random.default_rng(a.seed)
    targets = (a.targets or default_targets(model)).split(",")
    tensors = {}
    for module, weight in selected(model, targets):
        n_in, n_out = model.w[weight + ".weight"].shape  # GPT-2's Conv1D: (in, out)
        if not is_gpt2(model):
            n_out, n_in = n_in, n_out  # nn.Linear: (out, in)
        bound = 1.0 / np.sqrt(n_in)
        tensors[f"base_model.model.{module}.lora_A.weight"] = gen.uniform(-bound, bound, (a.rank, n_in)).astype(np.float32)
        tensors[f"base_model.model.{module}.lora_B.weight"] = (gen.standard_normal((n_out, a.rank)) * a.b_std).astype(np.float32)
    os.makedirs(a.out, exist_ok=True)
    write_safetensors(os.path.join(a.out, "adapter_model.safetensors"), tensors, "f32")
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": a.rank, "lora_alpha": a.alpha,
              "target_modules": targets, "fan_in_fan_out": is_gpt2(model), "bias": "none",
              "base_model_name_or_path": os.path.abspath(a.model), "lora_dropout": 0.0}
    with open(os.path.join(a.out, "adapter_config.json"), "w") as f:
        json.dump(config, f, indent=2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["train", "eval", "init-adapter"])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--adapter")
    ap.add_argument("--float32", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--rank", type=int, default=4)
    ap.add_argument("--alpha", type=float, default=8.0)
    ap.add_argument("--targets", default="")
    ap.add_argument("--b-std", type=float, default=0.02)
    a = ap.parse_args()
    if a.command == "train":
        train(a)
    elif a.command == "eval":
        evaluate(a)
    else:
        init_adapter(a)


if __name__ == "__main__":
    main()
