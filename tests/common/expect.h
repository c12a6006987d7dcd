// Assertions the op tests share beyond allClose (compare.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/device_tensor.h"
#include "vkgrad/ops/tensor.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::test {

// got == want + init (a gradient accumulated onto init), normalised by the largest |want| or
// |init|, or `floor` where that is larger (see allCloseOnScale); a NaN anywhere fails.
::testing::AssertionResult accumulatedClose(const std::vector<float>& got,
                                            const std::vector<float>& want,
                                            const std::vector<float>& init, double tolerance,
                                            double floor = 0);

// allClose with the error normalised by at least `floor`: for results that are sums of terms
// which may cancel to far less than the terms themselves (column sums, gradients that vanish
// exactly), where the rounding is on the terms' scale.
::testing::AssertionResult allCloseOnScale(std::vector<float> got, std::vector<float> want,
                                           double floor, double tolerance);

// The message of the ShapeError call() throws, or "(no ShapeError)": for comparing the texts
// two layers give for the same bad shapes.
std::string shapeErrorText(const std::function<void()>& call);

// record() must throw ShapeError whose message contains `message`, before recording anything.
void expectShapeError(vk::Recorder& rec, const std::function<void()>& record,
                      const std::string& message);
// The same with a fresh Recorder, which record(rec) is given to record into.
void expectShapeError(vk::Context& context, const std::function<void(vk::Recorder&)>& record,
                      const std::string& message);

// The same for any vkgrad::Error (a device that cannot run what was asked, a tiling it
// cannot fit): record(rec) must throw one whose message contains `message`, recording nothing.
void expectError(vk::Context& context, const std::function<void(vk::Recorder&)>& record,
                 const std::string& message);

// A view at element `at` of a buffer whose other elements hold a sentinel: ops must work at
// any offset that is a multiple of 4 bytes and write nothing outside their outputs.
struct Placed {
  vk::Buffer buffer;
  ops::TensorView view;
  int64_t at = 0, n = 0, total = 0;
};
constexpr float kSentinel = 12345.0f;
Placed placed(vk::Context& context, const ops::Shape& shape, const std::vector<float>& data,
              int64_t at);
// The view's elements, after checking (EXPECT) that every other element is still the sentinel.
std::vector<float> readPlaced(vk::Context& context, const Placed& p);

// The same check with NaN on both sides: x in the middle of x.size() + 2 * pad floats, for a
// view `pad` elements in (ops::view(t.buffer, shape, pad * 4)). A stray write shows in the
// pads; a stray read brings NaN into the result.
DeviceTensor paddedUpload(vk::Context& context, const std::vector<float>& x, int64_t pad);
// `all` without the `pad` elements at each end.
std::vector<float> unpadded(const std::vector<float>& all, int64_t pad);
// The `pad` elements at each end of `all` are all still NaN.
::testing::AssertionResult padsUntouched(const std::vector<float>& all, int64_t pad);

}  // namespace vkgrad::test
