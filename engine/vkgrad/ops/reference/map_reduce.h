// CPU reference for ops::mapReduce: the same broadcast space walked in double.
#pragma once

#include <cstdint>
#include <vector>

#include "vkgrad/ops/map_reduce.h"

namespace vkgrad::ops::ref {

// inputs: mapFnInputs(fn) arrays with their shapes, each broadcasting to space (a condition
// as 0/1 floats); returns reducedShape(space, axes) elements: alpha * fold of fn over axes.
std::vector<float> mapReduce(MapFn fn, Fold fold, const std::vector<const float*>& inputs,
                             const std::vector<Shape>& shapes, const Shape& space, uint32_t axes,
                             float alpha = 1.0f);

}  // namespace vkgrad::ops::ref
