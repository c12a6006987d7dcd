#include "common/vk_test.h"

#include <memory>

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

void VkTest::SetUp() {
  messages_before_ = ctx().validationMessages().size();
}

void VkTest::TearDown() {
  const auto messages = ctx().validationMessages();
  for (size_t i = messages_before_; i < messages.size(); ++i)
    ADD_FAILURE() << "validation message: " << messages[i];
}

}  // namespace vkgrad::test
