// Gather by id (an embedding lookup): out[..., :] = table[ids[...], :], and its backward, a
// deterministic scatter-add of dout rows into dtable (no float atomics).
//
// Ids are u32 and must be < V. An op cannot see device ids without a readback, so bad
// ids are handled twice:
//  - on the device, kernels never touch memory for an id >= V (its out row is 0, its
//    gradient is dropped) and record it in a status buffer the caller owns: 2 u32 words
//      status[0] |= kGatherBadId      flags; 0 means every id so far was in range
//      status[1]  = max(status[1], id)   the largest bad id seen
//    Zero it once (e.g. rec.fill) and read it back whenever convenient: the kernels only
//    ever set bits and raise the maximum, so a bad batch stays visible until cleared.
//  - on the host, checkIds() rejects bad ids in data about to be uploaded.
#pragma once

#include <cstdint>
#include <span>

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// Bit of status[0] set by the gather kernels when an id is >= V.
constexpr uint32_t kGatherBadId = 1u << 0;

// Throws ShapeError "gather: id 70 at position 12 is out of range for vocab 65" for the
// first id >= vocab.
void checkIds(std::span<const uint32_t> ids, uint32_t vocab);

// The shape rule of a gather, Vulkan-free (the graph builder uses it too): rows of table
// (V, ...) picked by u32 ids (...) are (ids' dims..., table's dims after V), at most 6 dims.
// Throws ShapeError "gather: table (10,3), ids (4): ids must be u32, got f32".
Shape gatherShape(const Shape& table, const Shape& ids, DType ids_dtype = DType::U32,
                  const char* op = "gather");

// ids: (...) u32, n = ids.numel() positions; table: (V,D); out: (..., D) (ids' shape + D);
// status: (>= 2) u32, see above. table and out in any float format, each its own (a 16-bit
// out rounds an f32 table's values once); a u32 table (labels) is copied as words, into a u32
// or f32 out.
// table_row_stride: elements from one table row to the next; 0 means D (a dense table).
// A stride below D makes rows overlap: over a token stream of L words, table (L - T + 1, T)
// with stride 1 has every window of T tokens as a row, stored once (graph::uploadWindows).
// The table view then needs (V - 1) * stride + D elements, not V * D.
void gather(vk::Recorder& rec, const TensorView& ids, const TensorView& table,
            const TensorView& out, const TensorView& status, int64_t table_row_stride = 0);

enum class GatherBackwardVariant {
  Auto,    // Bucket on CPUs (100-2000x faster than Scan at V = 65..5000 on lavapipe); on
           // GPUs Scan for a large table (V*D >= 65,536) and up to 2048 positions
           // (gather.cpp), else Bucket
  Bucket,  // stable counting sort of positions by id (1 workgroup), then one sum per (v, d)
  Scan,    // each (v, d) scans all ids: O(V*n*D), no scratch; for tests and comparisons
};

// u32 elements of scratch gatherBackward needs: V + n.
int64_t gatherBackwardScratch(int64_t vocab, int64_t n);

// ids: (...) u32; dout: (..., D); dtable: (V,D), (=|+=) sum over positions j with ids[j] == v
// of dout[j], added in increasing j, so every variant gives the same bits on a device. dout
// and dtable in any float format (a 16-bit dout into an f32 parameter gradient, say); the sums
// are f32 and only the store into a 16-bit dtable rounds, once.
// scratch: (>= gatherBackwardScratch(V, n)) u32, overwritten. status: as for gather().
void gatherBackward(vk::Recorder& rec, const TensorView& ids, const TensorView& dout,
                    const TensorView& dtable, const TensorView& scratch, const TensorView& status,
                    Write write = Write::Overwrite,
                    GatherBackwardVariant variant = GatherBackwardVariant::Auto);

}  // namespace vkgrad::ops
