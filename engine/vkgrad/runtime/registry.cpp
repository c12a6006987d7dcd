#include "vkgrad/runtime/op.h"

#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

// Indexed by OpKind: both come from the same list.
const OpDef* const kTable[] = {
#define VKGRAD_OP(kind) &defs::k##kind,
#include "vkgrad/runtime/ops/list.h"
#undef VKGRAD_OP
};

}  // namespace

const OpDef& opDef(OpKind kind) {
  return *kTable[size_t(kind)];
}

const char* opName(OpKind kind) {
  return opDef(kind).name;
}

}  // namespace vkgrad::graph
