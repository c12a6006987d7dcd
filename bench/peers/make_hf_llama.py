#!/usr/bin/python3
"""Writes a small random Llama or Qwen2 in the Hugging Face layout, for comparing vkgrad-gpt
with hf_llama.py: config.json, model.safetensors under the names save_pretrained writes
(model.layers.<i>.self_attn.q_proj.weight, ...; nn.Linear weights (out, in)), and the byte-level
BPE tokenizer make_hf_gpt2.py trains on a Debian text.

  make_hf_llama.py --out DIR [--qwen2 --tied --attention-bias --layers 2 --width 48 --heads 6
                    --kv-heads 2 --intermediate 80 --context 64 --rope-theta 10000 --merges 40
                    --pad 0 --vocab 0 --rms-norm-eps 1e-6 --seed 1 --dtype f32|bf16|f16]

--pad N makes vocab_size N more than the tokenizer's ids (a padded vocabulary, as Qwen2's);
--vocab N makes it N (a published model's size, such as SmolLM2's 49152, on the small tokenizer).
Qwen2 always has q, k and v biases; a Llama has q, k, v and o biases with --attention-bias.
"""
import argparse
import json
import os

import numpy as np

from make_hf_gpt2 import write_safetensors, write_tokenizer


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--text", default="/usr/share/common-licenses/GPL-3")
    ap.add_argument("--merges", type=int, default=40)
    ap.add_argument("--qwen2", action="store_true")
    ap.add_argument("--tied", action="store_true")
    ap.add_argument("--attention-bias", action="store_true")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--width", type=int, default=48)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--intermediate", type=int, default=80)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--pad", type=int, default=0)
    ap.add_argument("--vocab", type=int, default=0)
    ap.add_argument("--rms-norm-eps", type=float, default=1e-6)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--std", type=float, default=0.2)
    ap.add_argument("--dtype", choices=["f32", "bf16", "f16"], default="f32")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    n_vocab = write_tokenizer(a.out, a.text, a.merges) + 1 + a.pad
    n_vocab = max(n_vocab, a.vocab)
    c, d = a.width, a.width // a.heads
    q, kv, inter = a.heads * d, a.kv_heads * d, a.intermediate
    config = {"architectures": ["Qwen2ForCausalLM" if a.qwen2 else "LlamaForCausalLM"],
              "model_type": "qwen2" if a.qwen2 else "llama", "hidden_act": "silu", "hidden_size": c,
              "intermediate_size": inter, "num_hidden_layers": a.layers, "num_attention_heads": a.heads,
              "num_key_value_heads": a.kv_heads, "max_position_embeddings": a.context,
              "vocab_size": n_vocab, "rms_norm_eps": a.rms_norm_eps, "rope_theta": a.rope_theta, "rope_scaling": None,
              "tie_word_embeddings": a.tied, "attention_dropout": 0.0,
              "torch_dtype": {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}[a.dtype]}
    if a.qwen2:
        config.update({"use_sliding_window": False, "sliding_window": 4096, "max_window_layers": a.layers})
    else:
        config.update({"attention_bias": a.attention_bias, "mlp_bias": False, "pretraining_tp": 1,
                       "head_dim": d})
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    rng = np.random.default_rng(a.seed)
    normal = lambda *shape: rng.normal(0.0, a.std, shape).astype(np.float32)
    qkv_bias, o_bias = a.qwen2 or a.attention_bias, a.attention_bias and not a.qwen2
    w = {"model.embed_tokens.weight": normal(n_vocab, c)}
    for i in range(a.layers):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = 1.0 + normal(c)
        for name, rows in (("q_proj", q), ("k_proj", kv), ("v_proj", kv)):
            w[p + "self_attn." + name + ".weight"] = normal(rows, c)
            if qkv_bias:
                w[p + "self_attn." + name + ".bias"] = normal(rows)
        w[p + "self_attn.o_proj.weight"] = normal(c, q)
        if o_bias:
            w[p + "self_attn.o_proj.bias"] = normal(c)
        w[p + "post_attention_layernorm.weight"] = 1.0 + normal(c)
        w[p + "mlp.gate_proj.weight"] = normal(inter, c)
        w[p + "mlp.up_proj.weight"] = normal(inter, c)
        w[p + "mlp.down_proj.weight"] = normal(c, inter)
    w["model.norm.weight"] = 1.0 + normal(c)
    if not a.tied:
        w["lm_head.weight"] = normal(n_vocab, c)
    write_safetensors(os.path.join(a.out, "model.safetensors"), w, a.dtype)
    print(f"{a.out}: {config['model_type']} of {a.layers} layers, width {c}, {a.heads} heads "
          f"({a.kv_heads} key/value), MLP {inter}, context {a.context}, vocab {n_vocab}")


if __name__ == "__main__":
    main()
