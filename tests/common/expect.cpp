#include "common/expect.h"

#include <algorithm>
#include <cmath>

#include "common/compare.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/core/error.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {

::testing::AssertionResult accumulatedClose(const std::vector<float>& got,
                                            const std::vector<float>& want,
                                            const std::vector<float>& init, double tolerance,
                                            double floor) {
  if (got.size() != want.size() || init.size() != want.size())
    return ::testing::AssertionFailure() << "sizes differ: got " << got.size() << ", want "
                                         << want.size() << ", init " << init.size();
  double scale = std::max(1e-30, floor), worst = 0;
  size_t worst_at = 0;
  for (size_t i = 0; i < want.size(); ++i)
    scale = std::max({scale, std::fabs(double(want[i])), std::fabs(double(init[i]))});
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(double(got[i]) - (double(want[i]) + init[i])) / scale;
    if (!(err <= worst)) worst = err, worst_at = i;  // a NaN sticks
  }
  if (!(worst <= tolerance))
    return ::testing::AssertionFailure()
           << "normalised error " << worst << " > " << tolerance << " at element " << worst_at
           << " (got " << got[worst_at] << ", want " << want[worst_at] << " + " << init[worst_at]
           << ")";
  return ::testing::AssertionSuccess() << "normalised error " << worst;
}

::testing::AssertionResult allCloseOnScale(std::vector<float> got, std::vector<float> want,
                                           double floor, double tolerance) {
  // One extra element of size `floor` on both sides sets the scale and adds no error.
  got.push_back(float(floor));
  want.push_back(float(floor));
  return allClose(got, want, tolerance);
}

void expectShapeError(vk::Recorder& rec, const std::function<void()>& record,
                      const std::string& message) {
  try {
    record();
    ADD_FAILURE() << "no ShapeError, expected: " << message;
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
  EXPECT_EQ(rec.dispatchCount(), 0u);
}

void expectShapeError(vk::Context& context, const std::function<void(vk::Recorder&)>& record,
                      const std::string& message) {
  vk::Recorder rec(context);
  expectShapeError(
      rec, [&] { record(rec); }, message);
}

void expectError(vk::Context& context, const std::function<void(vk::Recorder&)>& record,
                 const std::string& message) {
  vk::Recorder rec(context);
  try {
    record(rec);
    ADD_FAILURE() << "no Error, expected: " << message;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
  EXPECT_EQ(rec.dispatchCount(), 0u);
}

Placed placed(vk::Context& context, const ops::Shape& shape, const std::vector<float>& data,
              int64_t at) {
  Placed p;
  p.at = at, p.n = shape.numel(), p.total = at + p.n + 7;
  std::vector<float> all(size_t(p.total), kSentinel);
  std::copy(data.begin(), data.end(), all.begin() + at);
  p.buffer = context.allocator().allocate(uint64_t(p.total) * 4);
  context.staging().upload(p.buffer, 0, all.data(), all.size() * 4);
  p.view = ops::view(p.buffer, shape, uint64_t(at) * 4);
  return p;
}

std::vector<float> readPlaced(vk::Context& context, const Placed& p) {
  std::vector<float> all(size_t(p.total));
  context.staging().download(p.buffer, 0, all.data(), all.size() * 4);
  for (int64_t i = 0; i < p.total; ++i)
    if (i < p.at || i >= p.at + p.n) {
      EXPECT_EQ(all[i], kSentinel) << "element " << i << ", outside the view";
    }
  return std::vector<float>(all.begin() + p.at, all.begin() + p.at + p.n);
}

DeviceTensor paddedUpload(vk::Context& context, const std::vector<float>& x, int64_t pad) {
  std::vector<float> all(x.size() + 2 * size_t(pad), std::nanf(""));
  std::copy(x.begin(), x.end(), all.begin() + pad);
  return upload(context, {int64_t(all.size())}, all);
}

std::vector<float> unpadded(const std::vector<float>& all, int64_t pad) {
  return {all.begin() + pad, all.end() - pad};
}

::testing::AssertionResult padsUntouched(const std::vector<float>& all, int64_t pad) {
  for (int64_t i = 0; i < pad; ++i)
    if (!std::isnan(all[i]) || !std::isnan(all[all.size() - 1 - i]))
      return ::testing::AssertionFailure() << "wrote into the pad, " << i << " from an end";
  return ::testing::AssertionSuccess();
}

std::string shapeErrorText(const std::function<void()>& call) {
  try {
    call();
  } catch (const ShapeError& e) {
    return e.what();
  }
  return "(no ShapeError)";
}

}  // namespace vkgrad::test
