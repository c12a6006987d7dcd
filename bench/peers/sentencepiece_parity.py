#!/usr/bin/python3
"""Parity of vkgrad's SentencePiece-style tokenizer with SentencePiece itself.

Trains a small BPE model with Debian's python3-sentencepiece (byte fallback, a dummy prefix,
spaces kept, no normalization: Llama 2's settings), writes it as the tokenizer.json Hugging
Face writes for such a model (Prepend and Replace normalizer, merges ranked by the score of
the piece they make, the Replace/ByteFallback/Fuse/Strip decoder), then encodes the same
texts with `vkgrad-tokenize encode` and with SentencePiece and counts the texts whose ids
differ. A benchmark tool only: nothing in the build or the tests runs it.

    apt-get install -y python3-sentencepiece
    /usr/bin/python3 bench/peers/sentencepiece_parity.py [--vkgrad-tokenize build/apps/vkgrad-tokenize]
"""
import argparse
import glob
import json
import os
import random
import subprocess
import sys
import tempfile

import sentencepiece as spm


def licence_text(limit):
    text = ""
    for path in sorted(glob.glob("/usr/share/common-licenses/*")):
        if os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                text += f.read()
        if len(text) >= limit:
            break
    return text[:limit]


def merges_of(model):
    """Each piece that two pieces make, as a merge ranked by the made piece's score (then by
    the ids of its parts), as Hugging Face's conversion of a SentencePiece BPE model does."""
    vocab = {model.id_to_piece(i): i for i in range(model.get_piece_size())}
    merges = []
    for piece, pid in vocab.items():
        if model.is_control(pid) or model.is_byte(pid) or model.is_unknown(pid):
            continue
        splits = [(piece[:k], piece[k:]) for k in range(1, len(piece))
                  if piece[:k] in vocab and piece[k:] in vocab]
        splits.sort(key=lambda lr: (vocab[lr[0]], vocab[lr[1]]))
        merges += [(model.get_score(pid), left, right) for left, right in splits]
    merges.sort(key=lambda m: -m[0])  # stable: a piece's splits keep their order
    return vocab, [left + " " + right for _, left, right in merges]


def tokenizer_json(model):
    vocab, merges = merges_of(model)
    special = lambda content, i: {"id": i, "content": content, "single_word": False,
                                  "lstrip": False, "rstrip": False, "normalized": False,
                                  "special": True}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [special("<unk>", 0), special("<s>", 1), special("</s>", 2)],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": True, "vocab": vocab, "merges": merges},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vkgrad-tokenize", default="build/apps/vkgrad-tokenize")
    ap.add_argument("--vocab", type=int, default=1500)
    ap.add_argument("--texts", type=int, default=300)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="vkgrad-spm-")
    train = licence_text(400000)
    with open(os.path.join(work, "train.txt"), "w") as f:
        f.write(train)
    spm.SentencePieceTrainer.train(
        input=os.path.join(work, "train.txt"), model_prefix=os.path.join(work, "sp"),
        model_type="bpe", vocab_size=args.vocab, byte_fallback=True, character_coverage=0.999,
        normalization_rule_name="identity", remove_extra_whitespaces=False,
        add_dummy_prefix=True, split_digits=False, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        max_sentence_length=1 << 20, minloglevel=2)
    model = spm.SentencePieceProcessor(model_file=os.path.join(work, "sp.model"))
    with open(os.path.join(work, "tokenizer.json"), "w") as f:
        json.dump(tokenizer_json(model), f, ensure_ascii=False)

    rng = random.Random(0)
    lines = [l for l in licence_text(2000000).split("\n") if l.strip()]
    extra = "éü日本語 ΑΒΓ ðÞ 🙂 «»—…"
    texts = rng.sample(lines, min(args.texts, len(lines)))
    texts += ["".join(rng.choice(extra + "the cat ") for _ in range(rng.randint(1, 40)))
              for _ in range(args.texts // 3)]
    differ = 0
    for i, text in enumerate(texts):
        text = text.lstrip(" ")  # SentencePiece's dummy prefix and Prepend agree then
        path = os.path.join(work, "t.txt")
        with open(path, "w") as f:
            f.write(text)
        out = subprocess.run([args.vkgrad_tokenize, "encode", work, "--file", path, "--json",
                              "--no-special"], capture_output=True, text=True, check=True)
        ours = json.loads(out.stdout)["ids"]
        theirs = model.encode(text)
        if ours != theirs:
            differ += 1
            if differ <= 5:
                print(f"differ: {text[:60]!r}\n  vkgrad       {ours[:20]}\n  sentencepiece {theirs[:20]}")
    print(json.dumps({"peer": "sentencepiece " + spm.__version__, "vocab": args.vocab,
                      "texts": len(texts), "differ": differ}))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
