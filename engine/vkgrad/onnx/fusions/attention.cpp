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

bool emitAttention(const Attention& a, FusionSite& s, int last) {
  graph::Graph& g = s.g;
  // The logical (…, T, D) operands, as the products see them.
  std::vector<int64_t> qd, kd, vd;  // q (…,Tq,D), k (…,Tk,D), v (…,Tk,D)
  std::optional<std::pair<std::vector<int64_t>, int64_t>> fused;
  if (a.split >= 0) {
    if (!(fused = fusedProjection(a, s))) return false;
    qd = kd = vd = permuted(fused->first, kHeads);
  } else {
    for (const auto* o : {&a.q, &a.k, &a.v})
      if (!isFloatType(s.node(o->node).value(o->input).type)) return false;
    NodeContext &qc = s.node(a.q.node), &kc = s.node(a.k.node), &vc = s.node(a.v.node);
    qd = a.q_t >= 0 ? permuted(qc.dims(a.q.input), kHeads) : qc.dims(a.q.input);
    vd = a.v_t >= 0 ? permuted(vc.dims(a.v.input), kHeads) : vc.dims(a.v.input);
    kd = kc.dims(a.k.input);
    if (a.k_t >= 0 && !a.k_swap) {
      if (kd.size() != 4) return false;
      kd = permuted(kd, kHeads);
    } else if (a.k_t < 0 && kd.size() >= 2) {
      std::swap(kd[kd.size() - 1], kd[kd.size() - 2]);  // the product reads kᵀ as given
    }
  }
  const size_t r = qd.size();
  if (r < 2 || kd.size() != r || vd.size() != r) return false;
  if (!std::equal(qd.begin(), qd.end() - 2, kd.begin()) ||
      !std::equal(qd.begin(), qd.end() - 2, vd.begin()))
    return false;
  const int64_t tq = qd[r - 2], tk = kd[r - 2], dh = qd[r - 1];
  if (kd[r - 1] != dh || vd[r - 1] != dh || vd[r - 2] != tk || dh > ops::kMaxHeadDim) return false;
  if (a.softmax_axis != -1 && a.softmax_axis != int64_t(r) - 1) return false;
  if (!(a.factor > 0) || !std::isfinite(a.factor)) return false;
  bool causal = false;
  if (a.mask >= 0) {
    const auto verdict = causalMask(a, s.node(a.mask_in.node), tq, tk);
    if (!verdict) return false;
    causal = *verdict;
  }
  if ((a.q_t >= 0 || a.v_t >= 0) && r != 4) return false;
  const float scale = float(a.factor);

  // (B,Tq,H,D) from the first two forms, then (B,H,Tq,D) as the product wrote it, or the
  // head transpose after it.
  graph::Tensor bthd;
  std::vector<int64_t> bthd_dims;
  if (fused) {
    const std::vector<int64_t>& h = fused->first;
    const graph::Tensor y = g.attention(s.node(a.split).tensor(0), fused->second, causal, scale);
    bthd = g.reshape(y, deviceShape(h)), bthd_dims = h;
  } else if (a.q_t >= 0 && a.v_t >= 0 && a.k_t >= 0 && !a.k_swap) {
    NodeContext &qc = s.node(a.q.node), &kc = s.node(a.k.node), &vc = s.node(a.v.node);
    bthd = g.attention(qc.tensor(a.q.input), kc.tensor(a.k.input), vc.tensor(a.v.input), causal,
                       scale);
    bthd_dims = qc.dims(a.q.input);
  }
  if (bthd.id >= 0) {
    graph::Tensor o = bthd;
    std::vector<int64_t> od = bthd_dims;
    if (a.out_t < 0) o = g.transpose(o, {0, 2, 1, 3}), od = permuted(od, kHeads);
    s.node(last).setDevice(0, o, od);
    return true;
  }
  // Batches of one head: (N, T, 1, D) views of the (…, T, D) operands.
  NodeContext &qc = s.node(a.q.node), &kc = s.node(a.k.node), &vc = s.node(a.v.node);
  const int64_t n = dimsNumel(qd) / (tq * dh);
  auto heads = [&](NodeContext& c, const Operand& o, bool transposed) {
    graph::Tensor t = c.tensor(o.input);
    if (transposed) t = g.transpose(t, {0, 2, 1, 3});
    return t;
  };
  const graph::Tensor q = heads(qc, a.q, a.q_t >= 0), v = heads(vc, a.v, a.v_t >= 0);
  graph::Tensor k = kc.tensor(a.k.input);
  if (a.k_t >= 0 && !a.k_swap) {
    k = g.transpose(k, {0, 2, 1, 3});
  } else if (a.k_t < 0) {
    std::vector<int> perm(r);
    for (size_t i = 0; i < r; ++i) perm[i] = int(i);
    std::swap(perm[r - 1], perm[r - 2]);
    k = g.transpose(k, perm);
  }
  auto one = [&](graph::Tensor t, int64_t rows) {
    return g.reshape(t, graph::Shape{n, rows, 1, dh});
  };
  graph::Tensor o = g.attention(one(q, tq), one(k, tk), one(v, tk), causal, scale);
  o = g.reshape(o, deviceShape(qd));
  std::vector<int64_t> od = qd;
  if (a.out_t >= 0) o = g.transpose(o, {0, 2, 1, 3}), od = permuted(od, kHeads);
  s.node(last).setDevice(0, o, od);
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
