// The op definitions, declared from the registration list (ops/list.h) so that each op file's
// `const OpDef k<Kind>{...}` has external linkage and registry.cpp can table it.
#pragma once

#include "vkgrad/runtime/op.h"

namespace vkgrad::graph::defs {
#define VKGRAD_OP(kind) extern const OpDef k##kind;
#include "vkgrad/runtime/ops/list.h"
#undef VKGRAD_OP
}  // namespace vkgrad::graph::defs
