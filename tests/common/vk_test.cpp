#include "common/vk_test.h"

#include <cstdio>
#include <memory>
#include <set>
#include <string>

#include "common/not_run.h"

namespace vkgrad::test {
namespace {

std::unique_ptr<vk::Context>& contextSlot() {
  static std::unique_ptr<vk::Context> context;
  return context;
}

// Destroys the shared Context before main() returns, not in a static destructor.
class ContextEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { contextSlot().reset(); }
};

const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new ContextEnvironment);

}  // namespace

vk::Context& sharedContext() {
  auto& context = contextSlot();
  if (!context) {
    vk::ContextOptions options;
    options.validation = true;
    context = std::make_unique<vk::Context>(options);
  }
  return *context;
}

void noteNotRun(const std::string& what, const std::string& limit) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name =
      test ? std::string(test->test_suite_name()) + "." + test->name() : std::string("(no test)");
  static std::set<std::string> noted;
  if (!noted.insert(name + "\n" + what).second) return;
  std::printf("[ NOT RUN  ] %s: %s: the device lacks %s\n", name.c_str(), what.c_str(),
              limit.c_str());
  if (test) ::testing::Test::RecordProperty("not_run", what + " (" + limit + ")");
}

void VkTest::SetUp() {
  messages_before_ = ctx().validationMessages().size();
}

void VkTest::TearDown() {
  const auto messages = ctx().validationMessages();
  for (size_t i = messages_before_; i < messages.size(); ++i)
    ADD_FAILURE() << "validation message: " << messages[i];
}

}  // namespace vkgrad::test
