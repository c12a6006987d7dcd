// An app that renders on its graphics family while the engine computes on a compute-only
// family (async compute): the results it reads move over by a release and an acquire
// (Executor::releaseAfterStep, vk::acquireBarrier), or live in buffers shared CONCURRENT
// (ExternalDevice::concurrent_families). On a device with one family (lavapipe) the test layer
// VK_LAYER_VKGRAD_split_queue_family (tests/layers) adds a compute-only family below the
// validation layer, so the transfers are checked there as on a GPU with a real one; the
// validation layer runs with synchronisation validation across submissions.
#include <volk.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "common/process.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/autograd.h"
#include "vkgrad/training/optimizer.h"
#include "vkgrad/vk/error.h"
#include "vkgrad/vk/instance.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Init;
using graph::Tensor;

constexpr uint32_t kNone = UINT32_MAX;

// The "app": its own instance (validation, then the split layer) and a device with one queue
// of its graphics family and one of a compute-only family, on the device the tests use; or,
// with `second_queue`, two queues of the graphics family (the layer's second mode).
class TwoFamilyApp {
 public:
  explicit TwoFamilyApp(const std::string& device_name, bool second_queue = false) {
    setEnv("VK_ADD_LAYER_PATH", VKGRAD_TEST_LAYER_DIR);
    setEnv("VKGRAD_SPLIT_QUEUE_FAMILY", second_queue ? "queues" : nullptr);
    // Hazards between the two queues are across submissions: checked only when asked.
    setEnv("VK_LAYER_ENABLES", "VALIDATION_CHECK_ENABLE_SYNCHRONIZATION_VALIDATION_QUEUE_SUBMIT");
    vk::loadVulkanLoader();
    createInstance();
    pickDevice(device_name, second_queue);
    createDevice();
    createAppObjects();
  }
  ~TwoFamilyApp() {
    if (device_) {
      vk_.vkDeviceWaitIdle(device_);
      vk_.vkDestroyFence(device_, fence_, nullptr);
      vk_.vkDestroySemaphore(device_, engine_done_, nullptr);
      vk_.vkDestroySemaphore(device_, app_done_, nullptr);
      vk_.vkDestroyCommandPool(device_, pool_, nullptr);
      vk_.vkDestroyBuffer(device_, host_buffer_, nullptr);
      vk_.vkFreeMemory(device_, host_memory_, nullptr);
      vk_.vkDestroyDevice(device_, nullptr);
    }
    destroy_messenger_(instance_, messenger_, nullptr);
    vkDestroyInstance(instance_, nullptr);
  }

  // The engine on the compute-only family; `concurrent`: every buffer shared with graphics.
  vk::ExternalDevice engineDevice(bool concurrent) const {
    vk::ExternalDevice external;
    external.instance = instance_;
    external.physical_device = physical_;
    external.device = device_;
    external.queue_family = compute_family_;
    external.queue_index = compute_index_;
    external.get_instance_proc_addr = vkGetInstanceProcAddr;
    external.enabled_features = enabled_;
    if (concurrent) external.concurrent_families = {graphics_family_};
    return external;
  }
  uint32_t graphicsFamily() const { return graphics_family_; }
  uint32_t computeFamily() const { return compute_family_; }

  // The two queues are ordered by binary semaphores: this layer version's synchronisation
  // validation follows binary semaphores across queues, not timeline ones (an app may use
  // either with the engine). The engine's step signals engineDone(); copyOut waits for it and
  // signals what the engine's next step waits for (afterCopy()).
  vk::SemaphoreSignal engineDone() const { return {engine_done_, 0}; }
  vk::SemaphoreWait afterCopy() const { return {app_done_, 0, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT}; }

  // On the graphics queue, after the engine's step: acquires `range` from `acquire_from`
  // (kNone: no barrier, the buffer is concurrent) and copies it to host memory; returns the
  // copied floats.
  std::vector<float> copyOut(const vk::BufferRange& range, uint32_t acquire_from) {
    VK_CHECK(vk_.vkResetCommandBuffer(cmd_, 0));
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    VK_CHECK(vk_.vkBeginCommandBuffer(cmd_, &begin));
    if (acquire_from != kNone) {
      const VkBufferMemoryBarrier acquire =
          vk::acquireBarrier(range, acquire_from, graphics_family_, VK_ACCESS_TRANSFER_READ_BIT);
      vk_.vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
                               0, 0, nullptr, 1, &acquire, 0, nullptr);
    }
    const VkBufferCopy region{range.offset, 0, range.bytes};
    vk_.vkCmdCopyBuffer(cmd_, range.buffer, host_buffer_, 1, &region);
    VkBufferMemoryBarrier host{VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER};
    host.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    host.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    host.srcQueueFamilyIndex = host.dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
    host.buffer = host_buffer_;
    host.size = VK_WHOLE_SIZE;
    vk_.vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 0,
                             nullptr, 1, &host, 0, nullptr);
    VK_CHECK(vk_.vkEndCommandBuffer(cmd_));

    const VkPipelineStageFlags wait_stage = VK_PIPELINE_STAGE_TRANSFER_BIT;
    VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    submit.waitSemaphoreCount = 1;
    submit.pWaitSemaphores = &engine_done_;
    submit.pWaitDstStageMask = &wait_stage;
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &cmd_;
    submit.signalSemaphoreCount = 1;
    submit.pSignalSemaphores = &app_done_;
    VK_CHECK(vk_.vkResetFences(device_, 1, &fence_));
    VK_CHECK(vk_.vkQueueSubmit(graphics_queue_, 1, &submit, fence_));
    VK_CHECK(vk_.vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX));
    // The whole device idle, not just this fence: after a fence wait alone, this layer version
    // (1.3.239) reports the engine's next upload as racing the one before it on the engine's
    // own queue, which submission order and the uploads' barriers do order (seen only across
    // two queues; the device wait retires both queues' batches and ends the false report).
    VK_CHECK(vk_.vkDeviceWaitIdle(device_));
    std::vector<float> out(range.bytes / 4);
    std::memcpy(out.data(), mapped_, range.bytes);
    return out;
  }
  std::vector<std::string> messages() const {
    std::lock_guard lock(mutex_);
    return messages_;
  }

 private:
  static VkBool32 VKAPI_PTR onMessage(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                      VkDebugUtilsMessageTypeFlagsEXT,
                                      const VkDebugUtilsMessengerCallbackDataEXT* data,
                                      void* self) {
    auto* app = static_cast<TwoFamilyApp*>(self);
    const std::string text =
        std::string(severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error: "
                                                                             : "warning: ") +
        (data->pMessage ? data->pMessage : "");
    std::fprintf(stderr, "app validation %s\n", text.c_str());
    std::lock_guard lock(app->mutex_);
    app->messages_.push_back(text);
    return VK_FALSE;
  }

  void createInstance() {
    const char* layers[] = {"VK_LAYER_KHRONOS_validation", "VK_LAYER_VKGRAD_split_queue_family"};
    const char* extensions[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME,
                                VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME};
    VkDebugUtilsMessengerCreateInfoEXT messenger{
        VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    messenger.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                                VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    messenger.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                            VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                            VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    messenger.pfnUserCallback = &TwoFamilyApp::onMessage;
    messenger.pUserData = this;
    const VkValidationFeatureEnableEXT sync =
        VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
    VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
    features.enabledValidationFeatureCount = 1;
    features.pEnabledValidationFeatures = &sync;
    features.pNext = &messenger;
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.apiVersion = VK_API_VERSION_1_2;
    VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    info.pNext = &features;
    info.pApplicationInfo = &app;
    info.enabledLayerCount = 2;
    info.ppEnabledLayerNames = layers;
    info.enabledExtensionCount = 2;
    info.ppEnabledExtensionNames = extensions;
    VK_CHECK(vkCreateInstance(&info, nullptr, &instance_));
    const auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkCreateDebugUtilsMessengerEXT"));
    destroy_messenger_ = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    VK_CHECK(create(instance_, &messenger, nullptr, &messenger_));
  }

  void pickDevice(const std::string& name, bool second_queue) {
    uint32_t count = 0;
    VK_CHECK(vkEnumeratePhysicalDevices(instance_, &count, nullptr));
    std::vector<VkPhysicalDevice> devices(count);
    VK_CHECK(vkEnumeratePhysicalDevices(instance_, &count, devices.data()));
    for (VkPhysicalDevice d : devices) {
      VkPhysicalDeviceProperties props;
      vkGetPhysicalDeviceProperties(d, &props);
      if (name == props.deviceName) physical_ = d;
    }
    if (!physical_) throw Error("the two-family app found no device named " + name);
    uint32_t family_count = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(physical_, &family_count, nullptr);
    std::vector<VkQueueFamilyProperties> families(family_count);
    vkGetPhysicalDeviceQueueFamilyProperties(physical_, &family_count, families.data());
    graphics_family_ = compute_family_ = kNone;
    for (uint32_t i = 0; i < family_count; ++i) {
      const VkQueueFlags flags = families[i].queueFlags;
      const bool compute = flags & VK_QUEUE_COMPUTE_BIT, graphics = flags & VK_QUEUE_GRAPHICS_BIT;
      if (compute && graphics && graphics_family_ == kNone) graphics_family_ = i;
      if (compute && !graphics && compute_family_ == kNone) compute_family_ = i;
    }
    if (second_queue && graphics_family_ != kNone && families[graphics_family_].queueCount >= 2) {
      compute_family_ = graphics_family_;
      compute_index_ = 1;
    }
    if (graphics_family_ == kNone || compute_family_ == kNone)
      throw Error("the split layer left " + name + " without a graphics and a compute family");
  }

  void createDevice() {
    vk::EngineFeatures features(instance_, physical_, vkGetInstanceProcAddr);
    enabled_ = features.enabled();
    const float priority = 1.0f;
    VkDeviceQueueCreateInfo queues[2] = {{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO},
                                         {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO}};
    queues[0].queueFamilyIndex = graphics_family_;
    queues[1].queueFamilyIndex = compute_family_;
    for (VkDeviceQueueCreateInfo& q : queues) q.queueCount = 1, q.pQueuePriorities = &priority;
    const float priorities[] = {1.0f, 1.0f};
    if (compute_family_ == graphics_family_) {  // its second queue
      queues[0].queueCount = 2;
      queues[0].pQueuePriorities = priorities;
    }
    VkDeviceCreateInfo info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    info.pNext = features.chain();
    info.queueCreateInfoCount = compute_family_ == graphics_family_ ? 1 : 2;
    info.pQueueCreateInfos = queues;
    VK_CHECK(vkCreateDevice(physical_, &info, nullptr, &device_));
    volkLoadDeviceTable(&vk_, device_);
    vk_.vkGetDeviceQueue(device_, graphics_family_, 0, &graphics_queue_);
  }

  void createAppObjects() {
    VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pool.queueFamilyIndex = graphics_family_;
    VK_CHECK(vk_.vkCreateCommandPool(device_, &pool, nullptr, &pool_));
    VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    alloc.commandPool = pool_;
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    VK_CHECK(vk_.vkAllocateCommandBuffers(device_, &alloc, &cmd_));
    VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VK_CHECK(vk_.vkCreateFence(device_, &fence, nullptr, &fence_));
    VkSemaphoreCreateInfo semaphore{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
    VK_CHECK(vk_.vkCreateSemaphore(device_, &semaphore, nullptr, &engine_done_));
    VK_CHECK(vk_.vkCreateSemaphore(device_, &semaphore, nullptr, &app_done_));

    VkBufferCreateInfo buffer{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    buffer.size = 1 << 16;
    buffer.usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    VK_CHECK(vk_.vkCreateBuffer(device_, &buffer, nullptr, &host_buffer_));
    VkMemoryRequirements req;
    vk_.vkGetBufferMemoryRequirements(device_, host_buffer_, &req);
    VkPhysicalDeviceMemoryProperties memory;
    vkGetPhysicalDeviceMemoryProperties(physical_, &memory);
    const VkMemoryPropertyFlags want =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    VkMemoryAllocateInfo allocate{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    allocate.allocationSize = req.size;
    allocate.memoryTypeIndex = kNone;
    for (uint32_t i = 0; i < memory.memoryTypeCount && allocate.memoryTypeIndex == kNone; ++i)
      if ((req.memoryTypeBits & (1u << i)) && (memory.memoryTypes[i].propertyFlags & want) == want)
        allocate.memoryTypeIndex = i;
    VK_CHECK(vk_.vkAllocateMemory(device_, &allocate, nullptr, &host_memory_));
    VK_CHECK(vk_.vkBindBufferMemory(device_, host_buffer_, host_memory_, 0));
    VK_CHECK(vk_.vkMapMemory(device_, host_memory_, 0, VK_WHOLE_SIZE, 0, &mapped_));
  }

  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger_ = nullptr;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VolkDeviceTable vk_{};
  uint32_t graphics_family_ = kNone, compute_family_ = kNone, compute_index_ = 0;
  vk::EnabledFeatures enabled_;
  VkQueue graphics_queue_ = VK_NULL_HANDLE;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkSemaphore engine_done_ = VK_NULL_HANDLE, app_done_ = VK_NULL_HANDLE;
  VkBuffer host_buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory host_memory_ = VK_NULL_HANDLE;
  void* mapped_ = nullptr;
  mutable std::mutex mutex_;
  std::vector<std::string> messages_;
};

// x (19, 7) -> 9 -> 5 logits, trained with AdamW: every step changes the logits.
struct Classifier {
  Graph g;
  Tensor x, y, w0, logits, loss;
  explicit Classifier(graph::ParameterStore& store) {
    x = g.input("x", {19, 7});
    y = g.input("y", {19}, ops::DType::U32);
    w0 = g.parameter(store.add("w0", {7, 9}, Init::xavierUniform()));
    const Tensor b0 = g.parameter(store.add("b0", {9}, Init::uniform(-0.5f, 0.5f)));
    const Tensor w1 = g.parameter(store.add("w1", {9, 5}, Init::xavierUniform()));
    logits = g.matmul(g.gelu(g.matmul(x, w0, b0)), w1);
    loss = g.crossEntropy(logits, y);
    g.markOutput(logits);
    g.markOutput(loss);
    graph::addOptimizer(g, graph::backward(g, loss), {graph::OptimizerConfig::Kind::AdamW, 1e-2f});
  }
};

// The parameters' seed and each step's inputs and labels.
struct Steps {
  uint64_t seed = 0;
  std::vector<std::vector<float>> x;
  std::vector<std::vector<uint32_t>> y;
  Steps(Rng& rng, int steps) : seed(rng.seed()) {
    for (int s = 0; s < steps; ++s) x.push_back(rng.normal(19 * 7)), y.push_back(rng.below(19, 5));
  }
  void feed(graph::Executor& exec, const Classifier& m, size_t step) const {
    exec.setInput(m.x, x[step]);
    exec.setInput(m.y, y[step]);
  }
};

class QueueFamilyTest : public VkTest {
 protected:
  // The logits of the run's training steps on one family (the suite's Context): the bits the
  // app must see from the two-family run.
  static std::vector<std::vector<float>> oneFamilyLogits(const Steps& run) {
    graph::ParameterStore store(ctx());
    Classifier m(store);
    store.initialize(run.seed);
    graph::Executor exec(ctx(), m.g);
    std::vector<std::vector<float>> out;
    for (size_t s = 0; s < run.x.size(); ++s) {
      run.feed(exec, m, s);
      exec.step();
      out.push_back(exec.read(m.logits));
    }
    return out;
  }
  // The run's steps on the app's compute-only family; after each, the app copies the logits on
  // its graphics family (acquiring them unless `concurrent`), and the next step waits for that
  // copy. With `slice_nodes`, each step goes in pieces of that many nodes (the first waits for
  // the copy, the last signals the app). Returns the app's copies.
  static std::vector<std::vector<float>> twoFamilyLogits(TwoFamilyApp& app, bool concurrent,
                                                         const Steps& run, int slice_nodes = 0) {
    vk::Context engine(app.engineDevice(concurrent));
    graph::ParameterStore store(engine);
    Classifier m(store);
    store.initialize(run.seed);
    graph::Executor exec(engine, m.g);
    exec.releaseAfterStep(m.logits, app.graphicsFamily());  // records nothing when concurrent
    exec.slice(slice_nodes);
    if (slice_nodes > 0) {
      EXPECT_GT(exec.pieces(), 2);
    }
    std::vector<std::vector<float>> out;
    for (size_t s = 0; s < run.x.size(); ++s) {
      run.feed(exec, m, s);
      const vk::SemaphoreWait after = app.afterCopy();
      const vk::SemaphoreSignal done = app.engineDone();
      for (bool last = false; !last;) {
        const bool first = exec.nextPiece() == 0;
        last = exec.nextPiece() + 1 == exec.pieces();
        exec.submitPiece(std::span(&after, first && s > 0 ? 1 : 0), std::span(&done, last ? 1 : 0));
      }
      const bool transfer = !concurrent && engine.queueFamily() != app.graphicsFamily();
      out.push_back(app.copyOut(exec.buffer(m.logits), transfer ? engine.queueFamily() : kNone));
    }
    exec.wait();
    return out;
  }
};

TEST_F(QueueFamilyTest, TheSplitLayerAddsAComputeOnlyFamilyTheEngineRunsOn) {
  TwoFamilyApp app(ctx().info().name);
  EXPECT_NE(app.graphicsFamily(), app.computeFamily());
  vk::Context engine(app.engineDevice(false));
  EXPECT_EQ(engine.queueFamily(), app.computeFamily());
  EXPECT_TRUE(engine.info().compute_only_family);
  EXPECT_TRUE(engine.concurrentFamilies().empty());
  vk::Context shared(app.engineDevice(true));
  EXPECT_EQ(shared.concurrentFamilies(),
            (std::vector<uint32_t>{app.computeFamily(), app.graphicsFamily()}));
  EXPECT_TRUE(app.messages().empty());
}

// The engine releases the logits at the end of every step, the app acquires them on its
// graphics family and copies them out, the next step waits for the copy: the copies have the
// bits of the same training on one family, and the validation layer (core checks of the
// transfer's two halves, synchronisation across the two queues) says nothing.
TEST_F(QueueFamilyTest, ReleasedOutputsReachTheGraphicsFamilyWithTheBitsOfOneFamily) {
  Rng rng;
  const Steps run(rng, 3);
  const auto expected = oneFamilyLogits(run);
  TwoFamilyApp app(ctx().info().name);
  const auto got = twoFamilyLogits(app, false, run);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t s = 0; s < got.size(); ++s) {
    ASSERT_EQ(got[s].size(), expected[s].size());
    EXPECT_EQ(0, std::memcmp(got[s].data(), expected[s].data(), 4 * got[s].size()))
        << "step " << s << ", " << rng.describe();
  }
  EXPECT_TRUE(app.messages().empty());
}

// A step in pieces releases the logits at the end of its last piece: the same bits, no message.
TEST_F(QueueFamilyTest, ASlicedStepReleasesAfterItsLastPiece) {
  Rng rng;
  const Steps run(rng, 2);
  const auto expected = oneFamilyLogits(run);
  TwoFamilyApp app(ctx().info().name);
  const auto got = twoFamilyLogits(app, false, run, 3);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t s = 0; s < got.size(); ++s)
    EXPECT_EQ(0, std::memcmp(got[s].data(), expected[s].data(), 4 * got[s].size()))
        << "step " << s << ", " << rng.describe();
  EXPECT_TRUE(app.messages().empty());
}

// Buffers shared CONCURRENT with the graphics family: no transfer, the same bits, no message
// (a release recorded on such a buffer would be an error: releaseAfterStep records none).
TEST_F(QueueFamilyTest, ConcurrentBuffersReachTheGraphicsFamilyWithoutATransfer) {
  Rng rng;
  const Steps run(rng, 3);
  const auto expected = oneFamilyLogits(run);
  TwoFamilyApp app(ctx().info().name);
  const auto got = twoFamilyLogits(app, true, run);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t s = 0; s < got.size(); ++s)
    EXPECT_EQ(0, std::memcmp(got[s].data(), expected[s].data(), 4 * got[s].size()))
        << "step " << s << ", " << rng.describe();
  EXPECT_TRUE(app.messages().empty());
}

// Two queues of one family (the layer's second mode: the graphics family gets a second queue):
// the engine computes on the second, nothing changes owner, and the bits are the same.
TEST_F(QueueFamilyTest, ASecondQueueOfTheGraphicsFamilyNeedsNoTransfer) {
  Rng rng;
  const Steps run(rng, 3);
  const auto expected = oneFamilyLogits(run);
  TwoFamilyApp app(ctx().info().name, true);
  ASSERT_EQ(app.computeFamily(), app.graphicsFamily());
  const auto got = twoFamilyLogits(app, false, run);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t s = 0; s < got.size(); ++s)
    EXPECT_EQ(0, std::memcmp(got[s].data(), expected[s].data(), 4 * got[s].size()))
        << "step " << s << ", " << rng.describe();
  EXPECT_TRUE(app.messages().empty());
}

// What makes the two tests above able to fail: an app that acquires what the engine never
// released is reported by the validation layer.
TEST_F(QueueFamilyTest, AnAcquireWithoutTheEnginesReleaseIsReported) {
  Rng rng;
  const Steps run(rng, 1);
  TwoFamilyApp app(ctx().info().name);
  vk::Context engine(app.engineDevice(false));
  graph::ParameterStore store(engine);
  Classifier m(store);
  store.initialize(run.seed);
  graph::Executor exec(engine, m.g);  // no releaseAfterStep
  run.feed(exec, m, 0);
  testing::internal::CaptureStderr();
  const vk::SemaphoreSignal done = app.engineDone();
  exec.submit({}, std::span(&done, 1));
  app.copyOut(exec.buffer(m.logits), engine.queueFamily());
  const std::string printed = testing::internal::GetCapturedStderr();
  exec.wait();
  const std::vector<std::string> messages = app.messages();
  ASSERT_FALSE(messages.empty()) << printed;
  EXPECT_NE(messages[0].find("release"), std::string::npos) << messages[0];
}

TEST_F(QueueFamilyTest, PersistentTensorsAndUnknownFamiliesAreRefused) {
  graph::ParameterStore store(ctx());
  Classifier m(store);
  store.initialize(Rng().seed());
  graph::Executor exec(ctx(), m.g);
  try {
    exec.releaseAfterStep(m.w0, ctx().queueFamily() + 1);
    FAIL() << "a parameter was released";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("concurrent_families"), std::string::npos) << e.what();
  }
  try {
    exec.releaseAfterStep(m.logits, 1000);
    FAIL() << "a release to queue family 1000 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("queue family 1000"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vkgrad::test
