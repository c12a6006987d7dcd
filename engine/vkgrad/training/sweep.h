// A forward graph swept over every row of N-row datasets in batches of consecutive rows: the
// evaluation loop of every model (test accuracy, a test loss). The batches that fill `batch`
// run on one compiled graph, a last partial batch on a second graph built for its size, so no
// row is padded or counted twice.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/graph.h"

namespace vkgrad::graph {

class Sweep {
 public:
  // One compiled graph over `batch` rows: `indices` (u32, (batch)) are the rows it reads
  // (Graph::gather them from the datasets), `outputs` what build() returned.
  struct Pass {
    int64_t batch = 0;
    int64_t runs = 0;  // batches it ran since the caller last set it to 0
    Graph g;
    Tensor indices;
    std::vector<Tensor> outputs;
    std::unique_ptr<Executor> exec;
  };
  // Adds the forward graph over the rows `indices` to g (its training mode is off) and returns
  // the tensors the caller reads (they are marked as outputs).
  using Build = std::function<std::vector<Tensor>(Graph& g, Tensor indices)>;

  // Builds the full pass (min(batch, rows) rows) and, when rows is not a multiple, the tail.
  // Throws Error when rows or batch is not positive.
  Sweep(vk::Context& context, int64_t rows, int64_t batch, const Build& build);
  ~Sweep();
  Sweep(const Sweep&) = delete;
  Sweep& operator=(const Sweep&) = delete;

  // Runs every row once, in order: before(pass) ahead of each batch's step (to reset running
  // totals, say), after(pass) once it has run (to read what it produced). Either may be empty.
  void run(const std::function<void(Pass&)>& before, const std::function<void(Pass&)>& after);
  // The full pass, then the tail when there is one.
  std::vector<Pass*> passes();
  int64_t rows() const { return rows_; }

 private:
  std::unique_ptr<Pass> make(int64_t batch, const Build& build) const;

  vk::Context& context_;
  int64_t rows_;
  std::unique_ptr<Pass> full_, tail_;
  std::vector<uint32_t> ids_;
};

}  // namespace vkgrad::graph
