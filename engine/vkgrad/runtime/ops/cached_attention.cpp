// cachedAttention: one decoding step of causal self-attention over a key/value cache
// (ops/cached_attention.h). The node appends the new rows' keys and values to the caches, at
// the row a device word names, then attends each new row over the cached rows up to its
// own. The caches are Input tensors, so they persist from one replay to the next; the host
// sets the position, not new commands. Inference only: not differentiable.
#include <string>

#include "vkgrad/ops/cached_attention.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct CachedAttention {
  enum In { qkv, k_cache, v_cache, position, kInputs };
  enum Out { o, kOutputs };  // (B,R,H*D)
  struct Attrs {
    int64_t heads = 0, kv_heads = 0, head_dim = 0;  // kv_heads: the caches' (dividing heads)
    float scale = 0.0f;                             // 0: 1/sqrt(D)
  };
};

// Column block `part` (q 0, k 1, v 2) of the fused (B,R,(H+2*Hkv)*D) projection, rows
// [q heads | k heads | v heads], as (B,R,H,D) (q) or (B,R,Hkv,D) (k, v).
ops::AttentionTensor part(ops::TensorView t, const CachedAttention::Attrs& at, int part) {
  const int64_t d = at.head_dim, heads = part == 0 ? at.heads : at.kv_heads;
  const int64_t first_head = part == 0 ? 0 : at.heads + (part - 1) * at.kv_heads;
  ops::AttentionTensor a{t, (at.heads + 2 * at.kv_heads) * d};
  a.view.shape = {t.shape[0], t.shape[1], heads, d};
  a.view.offset += uint64_t(first_head * d) * ops::dtypeBytes(t.dtype);
  return a;
}

// A cache (B,rows,Hkv*D) as the kernels see it.
ops::TensorView perHead(ops::TensorView t, const CachedAttention::Attrs& at) {
  t.shape = {t.shape[0], t.shape[1], at.kv_heads, at.head_dim};
  return t;
}

void launch(const Launch& l) {
  using C = CachedAttention;
  const auto& at = l.attr<C::Attrs>();
  const ops::TensorView qkv = l.in(C::qkv), position = l.in(C::position);
  const ops::TensorView k_cache = perHead(l.in(C::k_cache), at),
                        v_cache = perHead(l.in(C::v_cache), at);
  ops::TensorView o = l.out(C::o);
  o.shape = {o.shape[0], o.shape[1], at.heads, at.head_dim};
  ops::writeKvCache(l.rec, part(qkv, at, 1), part(qkv, at, 2), k_cache, v_cache, position);
  ops::cachedAttention(l.rec, part(qkv, at, 0), k_cache, v_cache, position, {o}, at.scale);
}

}  // namespace

Tensor Graph::cachedAttention(Tensor qkv, int64_t heads, Tensor k_cache, Tensor v_cache,
                              Tensor position, float scale) {
  return cachedAttention(qkv, heads, heads, k_cache, v_cache, position, scale);
}

Tensor Graph::cachedAttention(Tensor qkv, int64_t heads, int64_t kv_heads, Tensor k_cache,
                              Tensor v_cache, Tensor position, float scale) {
  for (Tensor t : {qkv, k_cache, v_cache, position}) check(t, "cachedAttention");
  const Shape s = shape(qkv);  // a copy: output() may move tensors_
  auto fail = [&](const std::string& why) {
    throw ShapeError(describe("cachedAttention", {qkv, k_cache, v_cache, position}) + " with " +
                     std::to_string(heads) + " heads" +
                     (kv_heads != heads ? " and " + std::to_string(kv_heads) + " key/value heads"
                                        : std::string()) +
                     ": " + why);
  };
  if (s.rank() != 3) fail("qkv must be (B,R,(H+2*Hkv)*D)");
  if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0)
    fail("the key/value heads must divide the query heads");
  if (s[2] % (heads + 2 * kv_heads) != 0)
    fail(kv_heads == heads ? "qkv's last dim must be a multiple of 3*heads"
                           : "qkv's last dim must be a multiple of heads + 2*kv_heads");
  const int64_t head_dim = s[2] / (heads + 2 * kv_heads);
  const int64_t width = heads * head_dim, kv_width = kv_heads * head_dim;
  for (Tensor cache : {k_cache, v_cache}) {
    const TensorInfo& c = tensor(cache);
    if (c.kind != TensorKind::Input || c.root != cache.id)
      fail("the caches must be input tensors (they persist between steps)");
    if (c.shape.rank() != 3 || c.shape[0] != s[0] || c.shape[2] != kv_width || c.shape[1] < s[1])
      fail("the caches must be (B,rows,Hkv*D) with qkv's B, Hkv*D and at least its R rows");
  }
  if (!(shape(k_cache) == shape(v_cache))) fail("the caches differ in shape");
  if (tensor(position).dtype != DType::U32 || shape(position).numel() != 1)
    fail("position must be one u32");
  if (!(scale >= 0)) fail("scale must be >= 0 (0: 1/sqrt(D))");
  if (head_dim > ops::kMaxHeadDim) fail("the head dim is above the kernels' limit");
  const int o = output({s[0], s[1], width}, DType::F32, /*differentiable=*/false);
  addNode({OpKind::CachedAttention,
           {qkv.id, k_cache.id, v_cache.id, position.id},
           {o},
           {},
           CachedAttention::Attrs{heads, kv_heads, head_dim, scale}});
  return {o};
}

namespace defs {
// Side effects: the caches change on every step, and a later step reads them.
const OpDef kCachedAttention{.name = "cachedAttention",
                             .inputs = CachedAttention::kInputs,
                             .outputs = CachedAttention::kOutputs,
                             .side_effects = true,
                             .launch = launch};
}  // namespace defs

}  // namespace vkgrad::graph
