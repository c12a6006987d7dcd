#include "vkgrad/vk/instance.h"

#include <volk.h>

#include <cstdio>
#include <cstring>

#include "vkgrad/vk/error.h"

namespace vkgrad::vk {
namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

bool hasLayer(const char* name) {
  uint32_t count = 0;
  VK_CHECK(vkEnumerateInstanceLayerProperties(&count, nullptr));
  std::vector<VkLayerProperties> layers(count);
  VK_CHECK(vkEnumerateInstanceLayerProperties(&count, layers.data()));
  for (const auto& layer : layers)
    if (std::strcmp(layer.layerName, name) == 0) return true;
  return false;
}

bool hasExtension(const char* name) {
  uint32_t count = 0;
  VK_CHECK(vkEnumerateInstanceExtensionProperties(nullptr, &count, nullptr));
  std::vector<VkExtensionProperties> extensions(count);
  VK_CHECK(vkEnumerateInstanceExtensionProperties(nullptr, &count, extensions.data()));
  for (const auto& extension : extensions)
    if (std::strcmp(extension.extensionName, name) == 0) return true;
  return false;
}

// vkgrad's private volk keeps Vulkan's entry points in globals, so they are set once per
// process, never again while other threads may call them (Contexts on several threads share
// nothing else): the global-level ones by the first Context, from the system loader or, for
// an adopted instance, from the app's vkGetInstanceProcAddr; the instance-level ones from the
// first instance. The instance-level pointers the loader hands out are its trampolines, which
// dispatch on the object passed, so they serve every instance of that loader.
std::once_flag g_loader_once;
VkResult g_loader_result = VK_SUCCESS;

void loadLoader(PFN_vkGetInstanceProcAddr custom) {
  std::call_once(g_loader_once, [custom] {
    if (custom) {
      volkInitializeCustom(custom);
    } else {
      g_loader_result = volkInitialize();
    }
  });
  if (g_loader_result != VK_SUCCESS)
    throw Error(
        "the Vulkan loader (libvulkan.so.1) was not found; install it (Debian: libvulkan1) "
        "and a driver (a GPU's, or mesa-vulkan-drivers for the CPU driver lavapipe)");
}

void loadInstanceFunctions(VkInstance instance) {
  static std::once_flag once;
  std::call_once(once, [instance] { volkLoadInstanceOnly(instance); });
}

}  // namespace

void loadVulkanLoader() {
  loadLoader(nullptr);
}

// Warnings and errors of every kind go to onMessage with this Instance.
VkDebugUtilsMessengerCreateInfoEXT Instance::messengerInfo() {
  VkDebugUtilsMessengerCreateInfoEXT info{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  info.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  info.pfnUserCallback = &Instance::onMessage;
  info.pUserData = this;
  return info;
}

Instance::Instance(bool validation) : owned_(true) {
  loadVulkanLoader();
  if (volkGetInstanceVersion() < VK_API_VERSION_1_2)
    throw Error("the Vulkan loader is older than 1.2; vkgrad needs Vulkan 1.2");

  std::vector<const char*> layers;
  std::vector<const char*> extensions;
  // The layer is named where the loader lists it. Where it does not, it may still be on: a
  // layer forced through VK_INSTANCE_LAYERS is enabled by the loader unnamed, and under Wine,
  // which lists no layers and hides VK_* variables from the program, that is the only way
  // (the host's loader runs it inside winevulkan). The instance is then asked for the
  // extension the layer provides, and refused only if nothing provides it.
  const bool listed = validation && hasLayer(kValidationLayer);
  if (validation) {
    if (listed) layers.push_back(kValidationLayer);
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    extensions.push_back(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);  // the layer provides it
  }
  VkInstanceCreateFlags flags = 0;
  // Lets the loader list portability drivers (MoltenVK); harmless elsewhere.
  if (hasExtension(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
    extensions.push_back(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
    flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
  }

  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "vkgrad";
  app.pEngineName = "vkgrad";
  app.apiVersion = VK_API_VERSION_1_2;

  const VkDebugUtilsMessengerCreateInfoEXT messenger_info = messengerInfo();

  // Synchronisation validation next to the core checks: a missing or wrong barrier in the
  // recorder, the executor's replays or the uploads is a hazard message, and so a failure.
  const VkValidationFeatureEnableEXT enabled[] = {
      VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = enabled;
  features.pNext = &messenger_info;

  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  // Chaining the messenger also catches messages from vkCreateInstance itself.
  info.pNext = validation ? static_cast<const void*>(&features) : nullptr;
  info.flags = flags;
  info.pApplicationInfo = &app;
  info.enabledLayerCount = static_cast<uint32_t>(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  const VkResult result = vkCreateInstance(&info, nullptr, &instance_);
  if (validation && !listed && result == VK_ERROR_EXTENSION_NOT_PRESENT)
    throw Error(
        "validation was requested but VK_LAYER_KHRONOS_validation is not installed "
        "(Debian: vulkan-validationlayers)");
  // The loader answers INCOMPATIBLE_DRIVER when it finds no driver at all.
  if (result != VK_SUCCESS)
    throwVulkanError("vkCreateInstance", result,
                     result == VK_ERROR_INCOMPATIBLE_DRIVER
                         ? "no Vulkan driver found; install a GPU driver, or "
                           "mesa-vulkan-drivers for the CPU driver lavapipe"
                         : "");
  loadInstanceFunctions(instance_);

  if (validation) {
    // This instance's own: the global ones came from the process's first instance, which may
    // not have enabled debug utils.
    const auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkCreateDebugUtilsMessengerEXT"));
    destroy_messenger_ = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    const VkResult result = create && destroy_messenger_
                                ? create(instance_, &messenger_info, nullptr, &messenger_)
                                : VK_ERROR_EXTENSION_NOT_PRESENT;
    if (result != VK_SUCCESS) {
      vkDestroyInstance(instance_, nullptr);
      throwVulkanError("vkCreateDebugUtilsMessengerEXT", result);
    }
  }
}

Instance::Instance(VkInstance adopted, PFN_vkGetInstanceProcAddr get_instance_proc_addr)
    : instance_(adopted) {
  if (adopted == VK_NULL_HANDLE || get_instance_proc_addr == nullptr)
    throw Error("adopting an instance needs a VkInstance and its vkGetInstanceProcAddr");
  loadLoader(get_instance_proc_addr);
  loadInstanceFunctions(instance_);
}

Instance::~Instance() {
  if (messenger_ != VK_NULL_HANDLE) destroy_messenger_(instance_, messenger_, nullptr);
  if (owned_) vkDestroyInstance(instance_, nullptr);
}

std::vector<VkPhysicalDevice> Instance::physicalDevices() const {
  uint32_t count = 0;
  VK_CHECK(vkEnumeratePhysicalDevices(instance_, &count, nullptr));
  std::vector<VkPhysicalDevice> devices(count);
  VK_CHECK(vkEnumeratePhysicalDevices(instance_, &count, devices.data()));
  devices.resize(count);
  return devices;
}

size_t Instance::messageCount() const {
  std::lock_guard lock(mutex_);
  return messages_.size();
}

std::vector<std::string> Instance::messages() const {
  std::lock_guard lock(mutex_);
  return messages_;
}

VkBool32 Instance::onMessage(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                             VkDebugUtilsMessageTypeFlagsEXT,
                             const VkDebugUtilsMessengerCallbackDataEXT* data, void* self) {
  auto* instance = static_cast<Instance*>(self);
  std::string text =
      (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) ? "error: " : "warning: ";
  text += data->pMessage ? data->pMessage : "(no message)";
  std::fprintf(stderr, "vkgrad validation %s\n", text.c_str());
  std::lock_guard lock(instance->mutex_);
  instance->messages_.push_back(std::move(text));
  return VK_FALSE;
}

}  // namespace vkgrad::vk
