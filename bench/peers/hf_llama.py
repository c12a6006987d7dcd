#!/usr/bin/python3
"""An independent PyTorch Llama / Qwen2 (Hugging Face's LlamaForCausalLM and Qwen2ForCausalLM)
that reads a Hugging Face model folder, the peer of `vkgrad-gpt sample/eval --checkpoint DIR`
on such folders. hf_gpt.py's commands run it (they pick the model by config.json's
model_type), so this file is the model alone; run it as hf_gpt.py is run:

  hf_llama.py eval|greedy|logits --model DIR ...      (the same as hf_gpt.py)

The model: token embedding; per layer RMSNorm -> q, k, v projections (nn.Linear (out, in),
biases where the folder has them: Qwen2, attention_bias) -> rotary positions on q and k
(rotate_half, rope_theta) -> causal attention with num_key_value_heads key/value heads, each
shared by heads / kv_heads query heads -> o_proj -> residual; RMSNorm -> down(silu(gate) * up)
-> residual; model.norm; lm_head or the token table (tie_word_embeddings, or no lm_head.weight).
"""
import json
import os

import torch

from hf_gpt import CausalLm, main, read_weights


class Llama(CausalLm):
    def __init__(self, folder, dtype):
        with open(os.path.join(folder, "config.json")) as f:
            self.config = c = json.load(f)
        assert c["model_type"] in ("llama", "qwen2"), c["model_type"]
        for key in ("rope_scaling",):
            assert c.get(key) is None, f"{key} is not implemented here"
        assert not c.get("use_sliding_window", False), "sliding windows are not implemented here"
        self.w = {name: t.to(dtype) for name, t in read_weights(folder).items()}
        self.layers = c["num_hidden_layers"]
        self.heads = c["num_attention_heads"]
        self.kv_heads = c.get("num_key_value_heads") or self.heads
        self.context = c["max_position_embeddings"]
        self.eps = c.get("rms_norm_eps", 1e-6)
        self.theta = c.get("rope_theta", 10000.0)
        self.dtype = dtype
        tied = c.get("tie_word_embeddings", False) or "lm_head.weight" not in self.w
        self.head = self.w["model.embed_tokens.weight" if tied else "lm_head.weight"]

    def _norm(self, x, name):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.w[name]

    def _linear(self, x, name):  # nn.Linear: weight (out, in)
        y = x @ self.w[name + ".weight"].T
        bias = self.w.get(name + ".bias")
        return y if bias is None else y + bias

    def _rotate(self, x):
        """x: (heads, T, D) at positions 0..T-1 -> rotated, Hugging Face's rotate_half form."""
        t, d = x.shape[1], x.shape[2]
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, d, 2, dtype=self.dtype) / d))
        freqs = torch.outer(torch.arange(t, dtype=self.dtype), inv_freq)
        angle = torch.cat([freqs, freqs], dim=-1)  # (T, D)
        x1, x2 = x[..., : d // 2], x[..., d // 2 :]
        return x * angle.cos() + torch.cat([-x2, x1], dim=-1) * angle.sin()

    def logits(self, ids):
        """ids: a list of T <= context ids -> (T, vocab)."""
        t = len(ids)
        x = self.w["model.embed_tokens.weight"][torch.tensor(ids)]
        d = x.shape[-1] // self.heads
        group = self.heads // self.kv_heads
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        for i in range(self.layers):
            p = f"model.layers.{i}."
            h = self._norm(x, p + "input_layernorm.weight")
            q = self._linear(h, p + "self_attn.q_proj").reshape(t, self.heads, d).transpose(0, 1)
            k = self._linear(h, p + "self_attn.k_proj").reshape(t, self.kv_heads, d).transpose(0, 1)
            v = self._linear(h, p + "self_attn.v_proj").reshape(t, self.kv_heads, d).transpose(0, 1)
            q, k = self._rotate(q), self._rotate(k)
            k, v = k.repeat_interleave(group, dim=0), v.repeat_interleave(group, dim=0)
            scores = (q @ k.transpose(-1, -2)) / d**0.5
            scores = scores.masked_fill(~mask, float("-inf"))
            o = (scores.softmax(-1) @ v).transpose(0, 1).reshape(t, self.heads * d)
            x = x + self._linear(o, p + "self_attn.o_proj")
            h = self._norm(x, p + "post_attention_layernorm.weight")
            gate, up = self._linear(h, p + "mlp.gate_proj"), self._linear(h, p + "mlp.up_proj")
            x = x + self._linear(torch.nn.functional.silu(gate) * up, p + "mlp.down_proj")
        return self._norm(x, "model.norm.weight") @ self.head.T


if __name__ == "__main__":
    main()
