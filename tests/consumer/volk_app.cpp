// An app that loads Vulkan with its own volk, owns its instance and device, and lends them to
// vkgrad. Checks that vkgrad neither clashes with nor changes the app's volk (its function
// pointers and its loaded instance and device), trains through the adopted device, and
// destroys nothing of the app's. The validation layer (synchronisation included) watches the
// whole run: any message fails it.
#include <volk.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <vector>

#include "train_circles.h"

namespace {

int g_messages = 0;

VKAPI_ATTR VkBool32 VKAPI_CALL onMessage(VkDebugUtilsMessageSeverityFlagBitsEXT,
                                         VkDebugUtilsMessageTypeFlagsEXT,
                                         const VkDebugUtilsMessengerCallbackDataEXT* data, void*) {
  ++g_messages;
  std::printf("consumer_volk: validation: %s\n", data->pMessage);
  return VK_FALSE;
}

int fail(const char* what) {
  std::printf("consumer_volk: %s\n", what);
  return 1;
}

}  // namespace

int main() {
  if (volkInitialize() != VK_SUCCESS) return fail("no Vulkan loader");
  const char* layer = "VK_LAYER_KHRONOS_validation";
  const char* extension = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
  const VkValidationFeatureEnableEXT sync = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
  VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = &sync;
  VkDebugUtilsMessengerCreateInfoEXT messenger_info{
      VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  messenger_info.pNext = &features;
  messenger_info.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                                   VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger_info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger_info.pfnUserCallback = onMessage;
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "consumer_volk";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo instance_info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  instance_info.pNext = &messenger_info;
  instance_info.pApplicationInfo = &app;
  instance_info.enabledLayerCount = 1;
  instance_info.ppEnabledLayerNames = &layer;
  instance_info.enabledExtensionCount = 1;
  instance_info.ppEnabledExtensionNames = &extension;
  VkInstance instance = VK_NULL_HANDLE;
  if (vkCreateInstance(&instance_info, nullptr, &instance) != VK_SUCCESS)
    return fail("vkCreateInstance failed (is vulkan-validationlayers installed?)");
  volkLoadInstance(instance);
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  messenger_info.pNext = nullptr;
  vkCreateDebugUtilsMessengerEXT(instance, &messenger_info, nullptr, &messenger);

  uint32_t count = 0;
  vkEnumeratePhysicalDevices(instance, &count, nullptr);
  if (count == 0) return fail("no Vulkan device");
  std::vector<VkPhysicalDevice> physical(count);
  vkEnumeratePhysicalDevices(instance, &count, physical.data());
  uint32_t families = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical[0], &families, nullptr);
  std::vector<VkQueueFamilyProperties> props(families);
  vkGetPhysicalDeviceQueueFamilyProperties(physical[0], &families, props.data());
  uint32_t family = 0;
  while (family < families && !(props[family].queueFlags & VK_QUEUE_COMPUTE_BIT)) ++family;
  if (family == families) return fail("no compute queue");
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue_info{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue_info.queueFamilyIndex = family;
  queue_info.queueCount = 1;
  queue_info.pQueuePriorities = &priority;
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  f12.timelineSemaphore = VK_TRUE;  // what vkgrad asks of an adopted device
  VkDeviceCreateInfo device_info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  device_info.pNext = &f12;
  device_info.queueCreateInfoCount = 1;
  device_info.pQueueCreateInfos = &queue_info;
  VkDevice device = VK_NULL_HANDLE;
  if (vkCreateDevice(physical[0], &device_info, nullptr, &device) != VK_SUCCESS)
    return fail("vkCreateDevice failed");
  volkLoadDevice(device);
  const PFN_vkQueueSubmit app_submit = vkQueueSubmit;

  bool learned = false;
  try {
    vkgrad::vk::ExternalDevice external;
    external.instance = instance;
    external.physical_device = physical[0];
    external.device = device;
    external.queue_family = family;
    external.get_instance_proc_addr = vkGetInstanceProcAddr;
    // Only timeline semaphores were enabled: the engine uses no optional feature.
    external.enabled_features = vkgrad::vk::enabledFeatures(device_info);
    vkgrad::vk::Context adopted(external);
    learned = trainCircles(adopted, "consumer_volk (adopted device)");
    // A second Context with an instance of vkgrad's own loads vkgrad's private volk again;
    // the app's stays as it was.
    vkgrad::vk::Context own;
    learned = trainCircles(own, "consumer_volk (vkgrad's own device)") && learned;
  } catch (const std::exception& e) {
    std::printf("consumer_volk: %s\n", e.what());  // the app goes on and cleans up
    learned = false;
  }
  if (volkGetLoadedInstance() != instance || volkGetLoadedDevice() != device ||
      vkQueueSubmit != app_submit)
    return fail("vkgrad changed the app's volk state");
  // The app's device and queue still work after vkgrad's Contexts are gone.
  VkQueue queue = VK_NULL_HANDLE;
  vkGetDeviceQueue(device, family, 0, &queue);
  if (queue == VK_NULL_HANDLE || vkQueueWaitIdle(queue) != VK_SUCCESS)
    return fail("the app's queue no longer works");
  vkDestroyDevice(device, nullptr);
  vkDestroyDebugUtilsMessengerEXT(instance, messenger, nullptr);
  vkDestroyInstance(instance, nullptr);
  std::printf("consumer_volk: %d validation messages\n", g_messages);
  return learned && g_messages == 0 ? 0 : 1;
}
