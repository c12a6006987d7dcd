// Learning-rate schedules: exact values at the ends of each phase and monotonic shapes.
#include "vkgrad/training/lr_schedule.h"

#include <cmath>
#include <numbers>

#include <gtest/gtest.h>

#include "vkgrad/core/error.h"

namespace vkgrad::test {
namespace {

using graph::Schedule;

TEST(LrScheduleTest, ConstantIsTheSameEveryStep) {
  const Schedule s = Schedule::constant(0.05f);
  for (int64_t step : {0, 1, 17, 1000000}) EXPECT_EQ(s.at(step), 0.05f);
}

TEST(LrScheduleTest, LinearWarmupRisesToThePeakThenStays) {
  const Schedule s = Schedule::linearWarmup(0.1f, 4);
  EXPECT_FLOAT_EQ(s.at(0), 0.025f);  // the first update already moves
  EXPECT_FLOAT_EQ(s.at(1), 0.05f);
  EXPECT_FLOAT_EQ(s.at(2), 0.075f);
  EXPECT_FLOAT_EQ(s.at(3), 0.1f);
  EXPECT_FLOAT_EQ(s.at(4), 0.1f);
  EXPECT_FLOAT_EQ(s.at(999), 0.1f);
}

TEST(LrScheduleTest, CosineDecaysFromThePeakToTheFloor) {
  const Schedule s = Schedule::cosine(1.0f, 2, 10, 0.1f);
  EXPECT_FLOAT_EQ(s.at(0), 0.5f);
  EXPECT_FLOAT_EQ(s.at(1), 1.0f);
  EXPECT_FLOAT_EQ(s.at(2), 1.0f);    // decay starts at the peak
  EXPECT_FLOAT_EQ(s.at(7), 0.55f);   // halfway: the mean of peak and floor
  EXPECT_FLOAT_EQ(s.at(12), 0.1f);   // the end of the decay
  EXPECT_FLOAT_EQ(s.at(100), 0.1f);  // and after it
  const float three_tenths = 0.1f + 0.45f * float(1.0 + std::cos(std::numbers::pi * 0.3));
  EXPECT_FLOAT_EQ(s.at(5), three_tenths);  // 3 of 10 decay steps
  for (int64_t step = 2; step < 12; ++step) EXPECT_GT(s.at(step), s.at(step + 1)) << step;
  // Without warm-up the first step runs at the peak.
  EXPECT_FLOAT_EQ(Schedule::cosine(0.3f, 0, 5).at(0), 0.3f);
  EXPECT_FLOAT_EQ(Schedule::cosine(0.3f, 0, 5).at(5), 0.0f);
}

TEST(LrScheduleTest, ValidateRejectsImpossibleSchedules) {
  EXPECT_NO_THROW(Schedule::cosine(1.0f, 3, 5, 0.5f).validate());
  EXPECT_THROW(Schedule::constant(-1.0f).validate(), Error);
  EXPECT_THROW(Schedule::constant(NAN).validate(), Error);
  EXPECT_THROW(Schedule::linearWarmup(1.0f, -1).validate(), Error);
  EXPECT_THROW(Schedule::cosine(1.0f, 0, -2).validate(), Error);
  EXPECT_THROW(Schedule::cosine(1.0f, 0, 5, 2.0f).validate(), Error);
}

}  // namespace
}  // namespace vkgrad::test
