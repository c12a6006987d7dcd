#include "vkgrad/training/sweep.h"

#include <algorithm>
#include <numeric>
#include <span>
#include <string>

#include "vkgrad/core/error.h"

namespace vkgrad::graph {

Sweep::Sweep(vk::Context& context, int64_t rows, int64_t batch, const Build& build)
    : context_(context), rows_(rows) {
  if (rows <= 0) throw Error("graph::Sweep: no rows to sweep");
  if (batch <= 0) throw Error("graph::Sweep: the batch must be positive");
  if (rows > int64_t(UINT32_MAX)) throw Error("graph::Sweep: more than 2^32 rows");
  batch = std::min(batch, rows);
  full_ = make(batch, build);
  if (rows % batch) tail_ = make(rows % batch, build);
  ids_.resize(size_t(batch));
}

Sweep::~Sweep() = default;

std::unique_ptr<Sweep::Pass> Sweep::make(int64_t batch, const Build& build) const {
  auto p = std::make_unique<Pass>();
  p->batch = batch;
  p->g.setTraining(false);
  p->indices = p->g.input("sweep.indices", {batch}, DType::U32);
  p->outputs = build(p->g, p->indices);
  for (const Tensor t : p->outputs) p->g.markOutput(t);
  p->exec = std::make_unique<Executor>(context_, p->g);
  return p;
}

void Sweep::run(const std::function<void(Pass&)>& before, const std::function<void(Pass&)>& after) {
  for (int64_t first = 0; first < rows_;) {
    Pass& pass = first + full_->batch <= rows_ ? *full_ : *tail_;
    const std::span<uint32_t> ids = std::span(ids_).first(size_t(pass.batch));
    std::iota(ids.begin(), ids.end(), uint32_t(first));
    if (before) before(pass);
    pass.exec->setInput(pass.indices, ids);
    pass.exec->step();
    ++pass.runs;
    if (after) after(pass);
    first += pass.batch;
  }
}

std::vector<Sweep::Pass*> Sweep::passes() {
  std::vector<Pass*> out{full_.get()};
  if (tail_) out.push_back(tail_.get());
  return out;
}

}  // namespace vkgrad::graph
