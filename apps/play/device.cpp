#include "play/device.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/platform.h"

namespace vkgrad::play {
namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

std::string glfw_error;  // GLFW's last complaint, for our own error messages

void onGlfwError(int, const char* description) {
  glfw_error = description ? description : "";
}

bool hasLayer(const char* name) {
  uint32_t count = 0;
  VK_CHECK(vkEnumerateInstanceLayerProperties(&count, nullptr));
  std::vector<VkLayerProperties> layers(count);
  VK_CHECK(vkEnumerateInstanceLayerProperties(&count, layers.data()));
  for (const VkLayerProperties& layer : layers)
    if (std::strcmp(layer.layerName, name) == 0) return true;
  return false;
}

// Synchronisation validation checks each command buffer on its own unless told to follow
// hazards across submissions too; this app's every hazard is across submissions (the engine's
// writes, the frame's reads). This layer version (1.3.239) takes the switch only from the
// environment (VK_EXT_layer_settings came later), read when the instance is created.
void enableSubmitTimeSyncValidation() {
  const std::string check = "VALIDATION_CHECK_ENABLE_SYNCHRONIZATION_VALIDATION_QUEUE_SUBMIT";
  const char* set = std::getenv("VK_LAYER_ENABLES");
  std::string enables = set ? set : "";
  if (enables.find(check) != std::string::npos) return;
  enables += (enables.empty() ? "" : ":") + check;  // the layer splits on ':' here
  apps::setEnvironment("VK_LAYER_ENABLES", enables);
}

bool hasDeviceExtension(VkPhysicalDevice physical, const char* name) {
  uint32_t count = 0;
  VK_CHECK(vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, nullptr));
  std::vector<VkExtensionProperties> extensions(count);
  VK_CHECK(vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, extensions.data()));
  for (const VkExtensionProperties& e : extensions)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

// Discrete before integrated before the rest (lavapipe): the same order vkgrad uses.
int preference(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return 1;
    default:
      return 2;
  }
}

}  // namespace

Device::Device(int width, int height, const std::string& title, bool validation,
               const vk::DeviceSelector& selector, ComputeQueue compute,
               std::atomic<size_t>& messages)
    : compute_(compute), messages_(messages) {
  glfwSetErrorCallback(onGlfwError);
  if (!glfwInit())
    throw Error("cannot open a window (" + glfw_error +
                "): no display? Without one, run under Xvfb: xvfb-run -a vkgrad-play ...");
  try {
    if (!glfwVulkanSupported())
      throw Error(
          "GLFW found no Vulkan loader (libvulkan.so.1); install it (Debian: libvulkan1) and a "
          "driver (a GPU's, or mesa-vulkan-drivers for the CPU driver lavapipe)");
    glfwWindowHint(GLFW_CLIENT_API, GLFW_NO_API);
    window_ = glfwCreateWindow(width, height, title.c_str(), nullptr, nullptr);
    if (!window_)
      throw Error("cannot create a " + std::to_string(width) + "x" + std::to_string(height) +
                  " window (" + glfw_error + ")");
    createInstance(validation);
    VK_CHECK(glfwCreateWindowSurface(instance_, window_, nullptr, &surface_));
    pickPhysicalDevice(selector);
    chooseComputeQueue();
    createDevice();
  } catch (...) {
    release();
    throw;
  }
}

Device::~Device() {
  release();
}

void Device::release() {
  if (device_) vkDestroyDevice(device_, nullptr);
  if (surface_) vkDestroySurfaceKHR(instance_, surface_, nullptr);
  if (messenger_) vkDestroyDebugUtilsMessengerEXT(instance_, messenger_, nullptr);
  if (instance_) vkDestroyInstance(instance_, nullptr);
  if (window_) glfwDestroyWindow(window_);
  glfwTerminate();
}

void Device::createInstance(bool validation) {
  if (volkInitialize() != VK_SUCCESS)
    throw Error("the Vulkan loader (libvulkan.so.1) was not found (Debian: libvulkan1)");
  if (volkGetInstanceVersion() < VK_API_VERSION_1_2)
    throw Error("the Vulkan loader is older than 1.2; vkgrad needs Vulkan 1.2");

  uint32_t glfw_count = 0;
  const char** glfw_extensions = glfwGetRequiredInstanceExtensions(&glfw_count);
  if (!glfw_extensions)
    throw Error("GLFW cannot present with Vulkan here (" + glfw_error +
                "): the loader lacks the window-system surface extensions");
  std::vector<const char*> extensions(glfw_extensions, glfw_extensions + glfw_count);
  std::vector<const char*> layers;
  if (validation) {
    if (!hasLayer(kValidationLayer))
      throw Error(
          "validation was requested but VK_LAYER_KHRONOS_validation is not installed "
          "(Debian: vulkan-validationlayers)");
    layers.push_back(kValidationLayer);
    // This layer version follows binary semaphores across queues but not timeline ones, which
    // order the engine's queue and the frames': on two queues it would report every frame's
    // reads as racing the engine. There, each command buffer's synchronisation and the core
    // checks (the ownership transfers' release and acquire pairs among them) stay on.
    if (!compute_.separate) enableSubmitTimeSyncValidation();
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    extensions.push_back(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);  // the layer provides it
  }

  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "vkgrad-play";
  app.pEngineName = "vkgrad";
  app.apiVersion = VK_API_VERSION_1_2;

  VkDebugUtilsMessengerCreateInfoEXT messenger_info{
      VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  messenger_info.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                                   VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger_info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger_info.pfnUserCallback = &Device::onMessage;
  messenger_info.pUserData = this;
  // Synchronisation validation too: the frame loop's semaphores between the engine's compute
  // and this app's drawing are exactly what it checks.
  const VkValidationFeatureEnableEXT enabled[] = {
      VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = enabled;
  features.pNext = &messenger_info;  // also catches messages from vkCreateInstance itself

  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  info.pNext = validation ? &features : nullptr;
  info.pApplicationInfo = &app;
  info.enabledLayerCount = uint32_t(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = uint32_t(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  VK_CHECK(vkCreateInstance(&info, nullptr, &instance_));
  volkLoadInstance(instance_);
  if (validation)
    VK_CHECK(vkCreateDebugUtilsMessengerEXT(instance_, &messenger_info, nullptr, &messenger_));
}

void Device::pickPhysicalDevice(const vk::DeviceSelector& selector) {
  uint32_t count = 0;
  VK_CHECK(vkEnumeratePhysicalDevices(instance_, &count, nullptr));
  std::vector<VkPhysicalDevice> devices(count);
  VK_CHECK(vkEnumeratePhysicalDevices(instance_, &count, devices.data()));
  const std::string& want = selector.text;
  if (!want.empty() && want.find_first_not_of(" \t") == std::string::npos)
    throw Error(selector.source + "='" + want +
                "' is blank: give a device index or part of a name");
  const bool by_index = !want.empty() && want.find_first_not_of("0123456789") == std::string::npos;
  auto lower = [](std::string s) {
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  bool matched = false;
  std::string seen;  // each device and why it was passed over, for the error
  int best = 3;
  for (uint32_t index = 0; index < count; ++index) {
    VkPhysicalDevice d = devices[index];
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(d, &props);
    const bool chosen =
        want.empty() || (by_index ? std::to_string(index) == want
                                  : lower(props.deviceName).find(lower(want)) != std::string::npos);
    if (!chosen) {
      seen += "\n  " + std::to_string(index) + ": " + props.deviceName + ": not " +
              selector.source + "='" + want + "'";
      continue;
    }
    matched = true;
    VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    features.pNext = &f12;
    if (props.apiVersion >= VK_API_VERSION_1_2) vkGetPhysicalDeviceFeatures2(d, &features);
    uint32_t family_count = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(d, &family_count, nullptr);
    std::vector<VkQueueFamilyProperties> families(family_count);
    vkGetPhysicalDeviceQueueFamilyProperties(d, &family_count, families.data());
    int family = -1;
    // One family for everything: the engine's compute and the drawing share one queue, so
    // their order on it is their submission order and no buffer changes queue family.
    const VkQueueFlags needed = VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT;
    for (uint32_t i = 0; i < family_count && family < 0; ++i) {
      VkBool32 present = VK_FALSE;
      VK_CHECK(vkGetPhysicalDeviceSurfaceSupportKHR(d, i, surface_, &present));
      if ((families[i].queueFlags & needed) == needed && present) family = int(i);
    }
    const char* why = props.apiVersion < VK_API_VERSION_1_2 ? "Vulkan older than 1.2"
                      : !f12.timelineSemaphore              ? "no timeline semaphores"
                      : !hasDeviceExtension(d, VK_KHR_SWAPCHAIN_EXTENSION_NAME) ? "no swapchain"
                      : family < 0 ? "no queue family with graphics, compute and present"
                                   : nullptr;
    seen += "\n  " + std::to_string(index) + ": " + props.deviceName +
            (why ? std::string(": ") + why : "");
    if (!why && preference(props.deviceType) < best) {
      best = preference(props.deviceType);
      physical_ = d;
      family_ = uint32_t(family);
      properties_ = props;
    }
  }
  if (!matched)
    throw Error(selector.source + "='" + want +
                "' matches no Vulkan device (give an index or part of a name); devices:" + seen);
  if (!physical_)
    throw Error(
        "no Vulkan device can draw to this window and train (it needs Vulkan 1.2, "
        "timeline semaphores and one queue family with graphics, compute and present):" +
        (seen.empty() ? std::string("\n  (no devices)") : seen));
}

void Device::chooseComputeQueue() {
  compute_family_ = family_;
  compute_index_ = 0;
  if (!compute_.separate) return;
  uint32_t count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &count, families.data());
  int other = -1;  // a family other than the graphics one that computes, compute-only first
  for (uint32_t i = 0; i < count; ++i) {
    const VkQueueFlags flags = families[i].queueFlags;
    if (i == family_ || !(flags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (other < 0 || !(flags & VK_QUEUE_GRAPHICS_BIT)) other = int(i);
    if (!(flags & VK_QUEUE_GRAPHICS_BIT)) break;
  }
  const std::string name = properties_.deviceName;
  if (other >= 0) {
    compute_family_ = uint32_t(other);
    const bool only = !(families[compute_family_].queueFlags & VK_QUEUE_GRAPHICS_BIT);
    compute_note_ = "the engine computes on queue family " + std::to_string(compute_family_) +
                    (only ? " (compute-only)" : "") + ", frames draw on family " +
                    std::to_string(family_) + "; the results reach them " +
                    (compute_.concurrent ? "in buffers shared by both families (concurrent)"
                                         : "by queue-family ownership transfers");
  } else if (families[family_].queueCount >= 2) {
    compute_index_ = 1;
    compute_note_ = "the engine computes on a second queue of family " + std::to_string(family_) +
                    " (" + name +
                    " has no other family that computes); no transfers within one family";
  } else {
    compute_note_ = name + " has one queue that computes (" + std::to_string(count) +
                    " queue famil" + (count == 1 ? "y" : "ies") + ", " +
                    std::to_string(families[family_].queueCount) + " queue in family " +
                    std::to_string(family_) +
                    "): --compute-queue separate falls back to the graphics queue";
  }
}

void Device::createDevice() {
  // The optional features vkgrad's kernels use, where the device has them, and timeline
  // semaphores (the engine's submission counter); vkgrad is told what was enabled.
  vk::EngineFeatures features(instance_, physical_, vkGetInstanceProcAddr);
  enabled_ = features.enabled();

  const float priorities[] = {1.0f, 1.0f};
  VkDeviceQueueCreateInfo queue_info[2] = {{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO},
                                           {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO}};
  queue_info[0].queueFamilyIndex = family_;
  queue_info[0].queueCount = compute_family_ == family_ ? compute_index_ + 1 : 1;
  queue_info[0].pQueuePriorities = priorities;
  queue_info[1].queueFamilyIndex = compute_family_;
  queue_info[1].queueCount = 1;
  queue_info[1].pQueuePriorities = priorities;
  const char* extensions[] = {VK_KHR_SWAPCHAIN_EXTENSION_NAME};
  VkDeviceCreateInfo info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  info.pNext = features.chain();
  info.queueCreateInfoCount = compute_family_ == family_ ? 1 : 2;
  info.pQueueCreateInfos = queue_info;
  info.enabledExtensionCount = 1;
  info.ppEnabledExtensionNames = extensions;
  VK_CHECK(vkCreateDevice(physical_, &info, nullptr, &device_));
  volkLoadDevice(device_);
  vkGetDeviceQueue(device_, family_, 0, &queue_);
}

vk::ExternalDevice Device::externalDevice() const {
  vk::ExternalDevice external;
  external.instance = instance_;
  external.physical_device = physical_;
  external.device = device_;
  external.queue_family = compute_family_;
  external.queue_index = compute_index_;
  if (compute_family_ != family_ && compute_.concurrent) external.concurrent_families = {family_};
  external.get_instance_proc_addr = vkGetInstanceProcAddr;  // this app's volk's
  external.enabled_features = enabled_;
  return external;
}

uint32_t Device::memoryType(uint32_t types, VkMemoryPropertyFlags flags) const {
  VkPhysicalDeviceMemoryProperties memory;
  vkGetPhysicalDeviceMemoryProperties(physical_, &memory);
  for (uint32_t i = 0; i < memory.memoryTypeCount; ++i)
    if ((types & (1u << i)) && (memory.memoryTypes[i].propertyFlags & flags) == flags) return i;
  throw Error("the device has no memory type with the properties the app needs");
}

VkBool32 Device::onMessage(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                           VkDebugUtilsMessageTypeFlagsEXT,
                           const VkDebugUtilsMessengerCallbackDataEXT* data, void* self) {
  const bool error = severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  std::fprintf(stderr, "vkgrad-play validation %s: %s\n", error ? "error" : "warning",
               data->pMessage ? data->pMessage : "(no message)");
  ++static_cast<Device*>(self)->messages_;
  return VK_FALSE;
}

}  // namespace vkgrad::play
