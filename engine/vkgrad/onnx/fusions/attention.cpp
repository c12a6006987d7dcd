// Attention written out, onto flash attention (ops/attention.h):
//   S = (q · kᵀ) [* or / a constant] [masked causally]; P = Softmax(S, last axis); O = P · v
// with the exporters' head transposes around it: q and v (B,T,H,D) -> (B,H,T,D) by perm
// (0,2,1,3), k -> (B,H,D,T) by (0,2,3,1), O back by (0,2,1,3); the scale also on q before
// the product; the mask as Where(cond, -inf, S) or S + M with M 0 or <= -1e9, known when
// importing and causal (query i sees key j <= i + Tk - Tq) or all open. The (B,H,T,T)
// scores are never stored, and the backward pass is flash attention's.
// Three forms: q, k and v the three parts of one fused projection (Split, Reshape to
// (B,T,H,D), Transpose), read in place (Graph::attention(qkv, heads)); q, k and v given as
// (B,T,H,D) (the transposes absorbed); anything else ((B*H, T, D) products, no transposes) as
// attention over B*H one-head batches, reshaped, a transpose added only where one was.
#include <algorithm>
#include <cmath>

#include "vkgrad/onnx/fusions/matcher.h"
#include "vkgrad/onnx/node_context.h"
#include "vkgrad/ops/attention.h"

namespace vkgrad::onnx {
namespace {

const std::vector<int64_t> kHeads{0, 2, 1, 3};  // (B,T,H,D) <-> (B,H,T,D)
const std::vector<int64_t> kKeysT{0, 2, 3, 1};  // (B,T,H,D) -> (B,H,D,T)
constexpr double kMasked = -1e9;                // a mask value at or below: no weight

struct Attention {
  int qk = -1, softmax = -1, pv = -1;
  int scale = -1, mask = -1, q_scale = -1;
  int q_t = -1, k_t = -1, v_t = -1, out_t = -1;  // the head transposes, where present
  bool k_swap = false;                           // k_t swaps the last two axes (else kKeysT)
  int split = -1, q_r = -1, k_r = -1, v_r = -1;  // q, k, v parts of one projection
  double factor = 1.0;                           // the scale, constant factors multiplied
  Operand q, k, v;                               // read from outside, after the members
  Operand mask_in;                               // Where's condition or the added mask
  bool where = false, masked_when = true;        // Where(cond, fill, S): masked where cond
  int64_t softmax_axis = -1;
};

std::vector<int64_t> permuted(const std::vector<int64_t>& d, const std::vector<int64_t>& perm) {
  std::vector<int64_t> out;
  for (int64_t p : perm) out.push_back(d[size_t(p)]);
  return out;
}

// The mask's verdict over (..., Tq, Tk): causal, all open, or neither (nullopt).
std::optional<bool> causalMask(const Attention& a, NodeContext& c, int64_t tq, int64_t tk) {
  if (!c.foldable(a.mask_in.input)) return {};
  const HostTensor& m = c.host(a.mask_in.input);
  if (m.dims.size() < 2 || m.dims[m.dims.size() - 2] != tq || m.dims.back() != tk) return {};
  bool all_open = true, causal = true;
  for (int64_t idx = 0; idx < m.numel(); ++idx) {
    const int64_t j = idx % tk, i = (idx / tk) % tq;
    bool masked;
    if (a.where) {
      masked = (m.intAt(idx) != 0) == a.masked_when;
    } else {
      const double v = m.at(idx);
      if (v != 0.0 && !(v <= kMasked)) return {};
      masked = v != 0.0;
    }
    all_open = all_open && !masked;
    causal = causal && masked == (j > i + (tk - tq));
  }
  if (causal && tq <= tk && !all_open) return true;
  if (all_open) return false;
  return {};
}

// (B,T,H,D) parts of the fused projection read by Split: the projection (B,T,3*H*D) and H.
std::optional<std::pair<std::vector<int64_t>, int64_t>> fusedProjection(const Attention& a,
                                                                        FusionSite& s) {
  NodeContext& sp = s.node(a.split);
  const std::vector<int64_t>& d = sp.dims(0);
  if (d.size() != 3 || sp.outputCount() != 3 || sp.foldable(0)) return {};
  if (int64_t axis = sp.attrInt("axis", 0); axis != 2 && axis != -1) return {};
  const int64_t c = d[2] / 3;
  std::vector<int64_t> sizes = sp.has(1) ? sp.hostInts(1) : sp.attrInts("split");
  if (!sizes.empty() && sizes != std::vector<int64_t>{c, c, c}) return {};
  if (d[2] != 3 * c) return {};
  std::vector<int64_t> part{d[0], d[1], c}, heads;
  for (int r : {a.q_r, a.k_r, a.v_r}) {
    NodeContext& rc = s.node(r);
    std::vector<int64_t> to;
    try {
      to = reshapeDims(rc, part, rc.hostInts(1), rc.attrInt("allowzero", 0) != 0);
    } catch (const Error&) {
      return {};
    }
    if (to.size() != 4 || to[0] != d[0] || to[1] != d[1] || (!heads.empty() && to != heads))
      return {};
    heads = to;
  }
  return std::make_pair(heads, heads[2]);
}

// The operands as the products see them: q (…,Tq,D), k (…,Tk,D), v (…,Tk,D), and for the
// fused form the projection's (B,T,H,D) and H. Nothing where the shapes do not fit.
struct Operands {
  std::vector<int64_t> q, k, v;
  std::optional<std::pair<std::vector<int64_t>, int64_t>> fused;
  int64_t tq = 0, tk = 0, d = 0;
};

std::optional<Operands> operands(const Attention& a, FusionSite& s) {
  Operands o;
  if (a.split >= 0) {
    if (!(o.fused = fusedProjection(a, s))) return {};
    o.q = o.k = o.v = permuted(o.fused->first, kHeads);
  } else {
    for (const auto* op : {&a.q, &a.k, &a.v})
      if (!isFloatType(s.node(op->node).value(op->input).type)) return {};
    NodeContext &qc = s.node(a.q.node), &kc = s.node(a.k.node), &vc = s.node(a.v.node);
    o.q = a.q_t >= 0 ? permuted(qc.dims(a.q.input), kHeads) : qc.dims(a.q.input);
    o.v = a.v_t >= 0 ? permuted(vc.dims(a.v.input), kHeads) : vc.dims(a.v.input);
    o.k = kc.dims(a.k.input);
    if (a.k_t >= 0 && !a.k_swap) {
      if (o.k.size() != 4) return {};
      o.k = permuted(o.k, kHeads);
    } else if (a.k_t < 0 && o.k.size() >= 2) {
      std::swap(o.k[o.k.size() - 1], o.k[o.k.size() - 2]);  // the product reads kᵀ as given
    }
  }
  const size_t r = o.q.size();
  if (r < 2 || o.k.size() != r || o.v.size() != r) return {};
  if (!std::equal(o.q.begin(), o.q.end() - 2, o.k.begin()) ||
      !std::equal(o.q.begin(), o.q.end() - 2, o.v.begin()))
    return {};
  o.tq = o.q[r - 2], o.tk = o.k[r - 2], o.d = o.q[r - 1];
  if (o.k[r - 1] != o.d || o.v[r - 1] != o.d || o.v[r - 2] != o.tk || o.d > ops::kMaxHeadDim)
    return {};
  if (a.softmax_axis != -1 && a.softmax_axis != int64_t(r) - 1) return {};
  if ((a.q_t >= 0 || a.v_t >= 0) && r != 4) return {};
  return o;
}

// The first two forms: (B,Tq,H,D) from flash attention, then (B,H,Tq,D) as the product
// wrote it, or as the head transpose after it wrote (B,Tq,H,D). Nothing for the third form.
std::optional<std::pair<graph::Tensor, std::vector<int64_t>>> emitHeads(const Attention& a,
                                                                        const Operands& o,
                                                                        FusionSite& s,
                                                                        bool causal) {
  graph::Graph& g = s.g;
  const float scale = float(a.factor);
  graph::Tensor y;
  std::vector<int64_t> dims;
  if (o.fused) {
    dims = o.fused->first;
    y = g.reshape(g.attention(s.node(a.split).tensor(0), o.fused->second, causal, scale),
                  deviceShape(dims));
  } else if (a.q_t >= 0 && a.v_t >= 0 && a.k_t >= 0 && !a.k_swap) {
    NodeContext &qc = s.node(a.q.node), &kc = s.node(a.k.node), &vc = s.node(a.v.node);
    y = g.attention(qc.tensor(a.q.input), kc.tensor(a.k.input), vc.tensor(a.v.input), causal,
                    scale);
    dims = qc.dims(a.q.input);
  } else {
    return {};
  }
  if (a.out_t < 0) y = g.transpose(y, {0, 2, 1, 3}), dims = permuted(dims, kHeads);
  return std::make_pair(y, dims);
}

// The third form: batches of one head, (N, T, 1, D) views of the (…, T, D) operands, with
// the transposes that make them (…, T, D) where the pattern had others.
std::pair<graph::Tensor, std::vector<int64_t>> emitOneHeadBatches(const Attention& a,
                                                                  const Operands& o, FusionSite& s,
                                                                  bool causal) {
  graph::Graph& g = s.g;
  NodeContext &qc = s.node(a.q.node), &kc = s.node(a.k.node), &vc = s.node(a.v.node);
  const size_t r = o.q.size();
  graph::Tensor q = qc.tensor(a.q.input), k = kc.tensor(a.k.input), v = vc.tensor(a.v.input);
  if (a.q_t >= 0) q = g.transpose(q, {0, 2, 1, 3});
  if (a.v_t >= 0) v = g.transpose(v, {0, 2, 1, 3});
  if (a.k_t >= 0 && !a.k_swap) {
    k = g.transpose(k, {0, 2, 1, 3});
  } else if (a.k_t < 0) {
    std::vector<int> perm(r);
    for (size_t i = 0; i < r; ++i) perm[i] = int(i);
    std::swap(perm[r - 1], perm[r - 2]);
    k = g.transpose(k, perm);
  }
  const int64_t n = dimsNumel(o.q) / (o.tq * o.d);
  auto one = [&](graph::Tensor t, int64_t rows) {
    return g.reshape(t, graph::Shape{n, rows, 1, o.d});
  };
  graph::Tensor y = g.attention(one(q, o.tq), one(k, o.tk), one(v, o.tk), causal, float(a.factor));
  y = g.reshape(y, deviceShape(o.q));
  std::vector<int64_t> dims = o.q;
  if (a.out_t >= 0) y = g.transpose(y, {0, 2, 1, 3}), dims = permuted(dims, kHeads);
  return {y, dims};
}

bool emitAttention(const Attention& a, FusionSite& s, int last) {
  const std::optional<Operands> o = operands(a, s);
  if (!o || !(a.factor > 0) || !std::isfinite(a.factor)) return false;
  bool causal = false;
  if (a.mask >= 0) {
    const auto verdict = causalMask(a, s.node(a.mask_in.node), o->tq, o->tk);
    if (!verdict) return false;
    causal = *verdict;
  }
  auto out = emitHeads(a, *o, s, causal);
  if (!out) out = emitOneHeadBatches(a, *o, s, causal);
  s.node(last).setDevice(0, out->first, out->second);
  return true;
}

// A scale by a one-element constant: Mul (either side) or Div (by it). The other operand
// and the factor.
std::optional<std::pair<std::string, double>> scaled(const Matcher& m, const std::string& v) {
  if (const auto mul = m.inner(v, "Mul")) {
    const auto& n = *m.node(*mul);
    for (int k = 0; k < 2; ++k)
      if (const auto c = m.scalar(n.input(1 - k)); c && n.input(k) != n.input(1 - k))
        return std::make_pair(n.input(k), *c);
  }
  if (const auto div = m.inner(v, "Div")) {
    const auto& n = *m.node(*div);
    if (const auto c = m.scalar(n.input(1)); c && *c != 0)
      return std::make_pair(n.input(0), 1 / *c);
  }
  return {};
}

// Walks back from the scores Softmax reads: a mask and a scale in either order.
std::string scoresBefore(const Matcher& m, std::string x, Attention& a) {
  for (int step = 0; step < 2; ++step) {
    if (const auto w = m.inner(x, "Where"); w && a.mask < 0) {
      const auto& n = *m.node(*w);
      const auto fill_a = m.scalar(n.input(1)), fill_b = m.scalar(n.input(2));
      if (fill_a && *fill_a <= kMasked) {
        a.masked_when = true, x = n.input(2);
      } else if (fill_b && *fill_b <= kMasked) {
        a.masked_when = false, x = n.input(1);
      } else {
        break;
      }
      a.mask = *w, a.where = true, a.mask_in = {*w, 0};
      continue;
    }
    if (const auto add = m.inner(x, "Add"); add && a.mask < 0) {
      const auto& n = *m.node(*add);
      int scores = -1;
      for (int k = 0; k < 2 && scores < 0; ++k)
        if (m.inner(n.input(k), "MatMul") || scaled(m, n.input(k))) scores = k;
      if (scores < 0) break;
      a.mask = *add, a.mask_in = {*add, 1 - scores}, x = n.input(scores);
      continue;
    }
    if (const auto sc = scaled(m, x); sc && a.scale < 0) {
      a.scale = m.producer(x, "Mul") ? *m.producer(x, "Mul") : *m.producer(x, "Div");
      a.factor *= sc->second, x = sc->first;
      continue;
    }
    break;
  }
  return x;
}

// The head transpose writing `v` with `perm`, read only there.
std::optional<int> headTranspose(const Matcher& m, const std::string& v,
                                 const std::vector<int64_t>& perm) {
  const auto t = m.inner(v, "Transpose");
  if (t && m.ints(*t, "perm") == perm) return t;
  return {};
}

void attentionAt(const Matcher& m, int softmax, FusionPlan& plan) {
  Attention a;
  a.softmax = softmax;
  const auto& sm = *m.node(softmax);
  for (const auto& at : sm.attribute())
    if (at.name() == "axis") a.softmax_axis = at.i();
  const auto pv = m.consumer(sm.output(0), "MatMul");
  if (!pv || m.node(*pv)->input(0) != sm.output(0)) return;
  a.pv = *pv;
  const auto qk = m.inner(scoresBefore(m, sm.input(0), a), "MatMul");
  if (!qk) return;
  a.qk = *qk;
  // q: [Transpose] [scale]; k: [Transpose]; v: [Transpose]; O: [Transpose].
  std::string q = m.node(*qk)->input(0), k = m.node(*qk)->input(1), v = m.node(*pv)->input(1);
  if (const auto sc = scaled(m, q)) {
    a.q_scale = m.producer(q, "Mul") ? *m.producer(q, "Mul") : *m.producer(q, "Div");
    a.factor *= sc->second, q = sc->first;
  }
  if (const auto t = headTranspose(m, q, kHeads)) a.q_t = *t, q = m.node(*t)->input(0);
  if (const auto t = headTranspose(m, v, kHeads)) a.v_t = *t, v = m.node(*t)->input(0);
  if (const auto t = headTranspose(m, k, kKeysT)) {
    a.k_t = *t, k = m.node(*t)->input(0);
  } else if (const auto t2 = m.inner(k, "Transpose")) {
    const std::vector<int64_t> perm = m.ints(*t2, "perm");
    bool swap = perm.size() >= 2;
    for (size_t i = 0; swap && i + 2 < perm.size(); ++i) swap = perm[i] == int64_t(i);
    if (swap && perm[perm.size() - 1] == int64_t(perm.size()) - 2 &&
        perm[perm.size() - 2] == int64_t(perm.size()) - 1)
      a.k_t = *t2, a.k_swap = true, k = m.node(*t2)->input(0);
  }
  if (const auto t = m.consumer(m.node(*pv)->output(0), "Transpose");
      t && m.ints(*t, "perm") == kHeads)
    a.out_t = *t;
  // One projection's three parts: Split -> Reshape -> the head transposes.
  if (a.q_t >= 0 && a.v_t >= 0 && a.k_t >= 0 && !a.k_swap) {
    const auto rq = m.inner(q, "Reshape"), rk = m.inner(k, "Reshape"), rv = m.inner(v, "Reshape");
    if (rq && rk && rv) {
      const std::string& part = m.node(*rq)->input(0);
      const auto sp = m.producer(part, "Split");
      if (sp && m.node(*sp)->output_size() == 3 && m.node(*sp)->output(0) == part &&
          m.node(*sp)->output(1) == m.node(*rk)->input(0) &&
          m.node(*sp)->output(2) == m.node(*rv)->input(0) && m.inner(part, "Split") &&
          m.inner(m.node(*rk)->input(0), "Split") && m.inner(m.node(*rv)->input(0), "Split"))
        a.split = *sp, a.q_r = *rq, a.k_r = *rk, a.v_r = *rv;
    }
  }
  std::vector<int> members;
  for (int n : {a.qk, a.softmax, a.pv, a.scale, a.mask, a.q_scale, a.q_t, a.k_t, a.v_t, a.out_t,
                a.split, a.q_r, a.k_r, a.v_r})
    if (n >= 0) members.push_back(n);
  if (a.split < 0) {
    a.q = m.find(members, q), a.k = m.find(members, k), a.v = m.find(members, v);
    if (a.q.node < 0 || a.k.node < 0 || a.v.node < 0) return;
  }
  Fusion f;
  f.members = members;
  const int last = *std::max_element(members.begin(), members.end());
  f.description = std::string("attention") + (a.mask >= 0 ? " (masked)" : "") + " (" +
                  std::to_string(members.size()) + " nodes) ending at node " + m.label(last);
  f.emit = [a, last](FusionSite& s) { return emitAttention(a, s, last); };
  // The scales' and the fill's constants: every outside value but q, k, v and the mask.
  std::vector<std::string> operands{q, k, v};
  if (a.mask >= 0) operands.push_back(m.node(a.mask)->input(a.mask_in.input));
  if (a.split >= 0)
    for (int n : {a.split, a.q_r, a.k_r, a.v_r})
      for (const auto& in : m.node(n)->input()) operands.push_back(in);
  f.constants = m.externals(members, operands);
  plan.add(std::move(f));
}

}  // namespace

void findAttention(const Matcher& m, FusionPlan& plan) {
  for (int i = 0; i < m.nodeCount(); ++i)
    if (m.node(i)->op_type() == "Softmax" && !plan.containing(i)) attentionAt(m, i, plan);
}

}  // namespace vkgrad::onnx
