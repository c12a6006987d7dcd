// VK_LAYER_VKGRAD_split_queue_family: a test layer that shows a device with one queue family
// (lavapipe) as one with a second, compute-only family, so that the engine's queue-family
// ownership transfers run and are validated on any machine. Enabled below the validation
// layer (the app lists it after VK_LAYER_KHRONOS_validation), it makes the layer above see
// what a GPU with an async compute family looks like:
//
//   - vkGetPhysicalDeviceQueueFamilyProperties(2) reports the real families and then one
//     more: a copy of the first compute family without the graphics bit, one queue;
//   - vkCreateDevice maps that family's queues onto the real family (sharing its queues where
//     it has too few, as lavapipe's one queue); vkGetDeviceQueue hands out a distinct queue
//     handle for it, which the layer unwraps on the way down;
//   - command pools, buffer and image sharing lists, and barriers' family indices are mapped
//     back to the real family on the way down, so the driver sees only what it offers.
//
// With VKGRAD_SPLIT_QUEUE_FAMILY=queues it adds no family but a second queue to the first
// compute family (handed out and unwrapped the same way): a device like those whose graphics
// family has several queues and no other family computes.
//
// Both "families" (or queues) execute on one real queue in submission order: an app that waits on a
// semaphore that a later submission to the other family signals deadlocks here (a real device
// would run it). Submissions to a shared real queue are serialised by a mutex, as Vulkan's
// external synchronisation rule asks. Test-only: never installed.
#include <vulkan/vk_layer.h>
#include <vulkan/vulkan.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace {

bool secondQueueMode() {
  const char* mode = std::getenv("VKGRAD_SPLIT_QUEUE_FAMILY");
  return mode && std::strcmp(mode, "queues") == 0;
}

void* key(const void* dispatchable) {
  return *static_cast<void* const*>(dispatchable);  // the loader's dispatch table
}

struct InstanceData {
  VkInstance instance = VK_NULL_HANDLE;
  PFN_vkGetInstanceProcAddr next_gipa = nullptr;
  PFN_vkDestroyInstance destroy = nullptr;
  PFN_vkGetPhysicalDeviceQueueFamilyProperties families = nullptr;
  PFN_vkGetPhysicalDeviceQueueFamilyProperties2 families2 = nullptr;
};

// A queue of the added family: its first word is the loader's dispatch pointer, as for any
// dispatchable handle, so the layers above treat it as a queue of this device.
struct FakeQueue {
  void* dispatch;
  VkQueue real;
};

struct DeviceData {
  PFN_vkGetDeviceProcAddr next_gdpa = nullptr;
  // The added family's index (UINT32_MAX: none, the second-queue mode), and the real one that
  // it and the real family's queues past its own count map to.
  uint32_t added = 0, real = 0;
  std::unordered_map<uint64_t, std::unique_ptr<FakeQueue>> fakes;  // by family << 32 | index
  std::unordered_map<VkQueue, std::unique_ptr<std::mutex>> locks;  // per real queue
  PFN_vkDestroyDevice destroy = nullptr;
  PFN_vkGetDeviceQueue get_queue = nullptr;
  PFN_vkQueueSubmit submit = nullptr;
  PFN_vkQueueWaitIdle wait_idle = nullptr;
  PFN_vkCreateCommandPool create_pool = nullptr;
  PFN_vkCreateBuffer create_buffer = nullptr;
  PFN_vkCreateImage create_image = nullptr;
  PFN_vkCmdPipelineBarrier barrier = nullptr;
  uint32_t real_queue_count = 1;
  uint32_t real_requested = 0;  // queues the app asked of the real family itself
};

std::mutex mutex;  // guards the maps below and each DeviceData's
std::unordered_map<void*, InstanceData> instances;
std::unordered_map<void*, DeviceData> devices;

InstanceData& instanceOf(const void* dispatchable) {
  std::lock_guard lock(mutex);
  return instances.at(key(dispatchable));
}
DeviceData& deviceOf(const void* dispatchable) {
  std::lock_guard lock(mutex);
  return devices.at(key(dispatchable));
}

// The real families, and which one the added family copies (the first with compute).
std::vector<VkQueueFamilyProperties> realFamilies(VkPhysicalDevice physical, uint32_t& copied) {
  InstanceData& data = instanceOf(physical);
  uint32_t count = 0;
  data.families(physical, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  data.families(physical, &count, families.data());
  copied = 0;
  while (copied < count && !(families[copied].queueFlags & VK_QUEUE_COMPUTE_BIT)) ++copied;
  return families;
}

VkQueueFamilyProperties addedFamily(const VkQueueFamilyProperties& copied) {
  VkQueueFamilyProperties added = copied;
  added.queueFlags = (copied.queueFlags & ~VK_QUEUE_GRAPHICS_BIT) | VK_QUEUE_COMPUTE_BIT;
  added.queueCount = 1;
  return added;
}

VKAPI_ATTR void VKAPI_CALL GetPhysicalDeviceQueueFamilyProperties(
    VkPhysicalDevice physical, uint32_t* count, VkQueueFamilyProperties* properties) {
  uint32_t copied = 0;
  std::vector<VkQueueFamilyProperties> families = realFamilies(physical, copied);
  if (copied < families.size()) {
    if (secondQueueMode())
      families[copied].queueCount = std::max(families[copied].queueCount, 2u);
    else
      families.push_back(addedFamily(families[copied]));
  }
  if (!properties) {
    *count = uint32_t(families.size());
    return;
  }
  *count = std::min(*count, uint32_t(families.size()));
  std::copy_n(families.begin(), *count, properties);
}

VKAPI_ATTR void VKAPI_CALL GetPhysicalDeviceQueueFamilyProperties2(
    VkPhysicalDevice physical, uint32_t* count, VkQueueFamilyProperties2* properties) {
  InstanceData& data = instanceOf(physical);
  uint32_t copied = 0;
  const std::vector<VkQueueFamilyProperties> families = realFamilies(physical, copied);
  const uint32_t real = uint32_t(families.size());
  const uint32_t total = real + (copied < real && !secondQueueMode() ? 1 : 0);
  if (!properties) {
    *count = total;
    return;
  }
  uint32_t asked = std::min(*count, real);
  data.families2(physical, &asked, properties);  // fills the structures the app chained
  if (secondQueueMode() && copied < asked) {
    uint32_t& queues = properties[copied].queueFamilyProperties.queueCount;
    queues = std::max(queues, 2u);
  }
  if (*count > real && total > real) {
    properties[real].queueFamilyProperties = addedFamily(families[copied]);
    *count = total;
  } else {
    *count = asked;
  }
}

template <typename T>
T next(PFN_vkGetDeviceProcAddr gdpa, VkDevice device, const char* name) {
  return reinterpret_cast<T>(gdpa(device, name));
}

VKAPI_ATTR VkResult VKAPI_CALL CreateDevice(VkPhysicalDevice physical,
                                            const VkDeviceCreateInfo* info,
                                            const VkAllocationCallbacks* allocator,
                                            VkDevice* device) {
  auto* link = static_cast<VkLayerDeviceCreateInfo*>(const_cast<void*>(info->pNext));
  while (link && !(link->sType == VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO &&
                   link->function == VK_LAYER_LINK_INFO))
    link = static_cast<VkLayerDeviceCreateInfo*>(const_cast<void*>(link->pNext));
  if (!link) return VK_ERROR_INITIALIZATION_FAILED;
  const PFN_vkGetInstanceProcAddr gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
  const PFN_vkGetDeviceProcAddr gdpa = link->u.pLayerInfo->pfnNextGetDeviceProcAddr;
  link->u.pLayerInfo = link->u.pLayerInfo->pNext;

  uint32_t copied = 0;
  const std::vector<VkQueueFamilyProperties> families = realFamilies(physical, copied);
  const uint32_t added = secondQueueMode() ? UINT32_MAX : uint32_t(families.size());
  // Queue create infos with the added family's requests folded into the real family's.
  std::vector<VkDeviceQueueCreateInfo> queues;
  uint32_t real_requested = 0, added_requested = 0;
  for (uint32_t i = 0; i < info->queueCreateInfoCount; ++i) {
    const VkDeviceQueueCreateInfo& q = info->pQueueCreateInfos[i];
    if (q.queueFamilyIndex == added)
      added_requested = q.queueCount;
    else if (q.queueFamilyIndex == copied)
      real_requested = q.queueCount;
    else
      queues.push_back(q);
  }
  const uint32_t real_count = copied < families.size() ? families[copied].queueCount : 0;
  const uint32_t count = std::min(real_count, std::max(1u, real_requested + added_requested));
  const std::vector<float> priorities(count, 1.0f);
  if (real_requested + added_requested > 0) {
    VkDeviceQueueCreateInfo q{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    q.queueFamilyIndex = copied;
    q.queueCount = count;
    q.pQueuePriorities = priorities.data();
    queues.push_back(q);
  }
  VkDeviceCreateInfo down = *info;
  down.queueCreateInfoCount = uint32_t(queues.size());
  down.pQueueCreateInfos = queues.data();
  const auto create =
      reinterpret_cast<PFN_vkCreateDevice>(gipa(instanceOf(physical).instance, "vkCreateDevice"));
  const VkResult result = create(physical, &down, allocator, device);
  if (result != VK_SUCCESS) return result;

  DeviceData data;
  data.next_gdpa = gdpa;
  data.added = added;
  data.real = copied;
  data.real_queue_count = count;
  data.real_requested = real_requested;
  data.destroy = next<PFN_vkDestroyDevice>(gdpa, *device, "vkDestroyDevice");
  data.get_queue = next<PFN_vkGetDeviceQueue>(gdpa, *device, "vkGetDeviceQueue");
  data.submit = next<PFN_vkQueueSubmit>(gdpa, *device, "vkQueueSubmit");
  data.wait_idle = next<PFN_vkQueueWaitIdle>(gdpa, *device, "vkQueueWaitIdle");
  data.create_pool = next<PFN_vkCreateCommandPool>(gdpa, *device, "vkCreateCommandPool");
  data.create_buffer = next<PFN_vkCreateBuffer>(gdpa, *device, "vkCreateBuffer");
  data.create_image = next<PFN_vkCreateImage>(gdpa, *device, "vkCreateImage");
  data.barrier = next<PFN_vkCmdPipelineBarrier>(gdpa, *device, "vkCmdPipelineBarrier");
  std::lock_guard lock(mutex);
  devices[key(*device)] = std::move(data);
  return VK_SUCCESS;
}

VKAPI_ATTR void VKAPI_CALL DestroyDevice(VkDevice device, const VkAllocationCallbacks* allocator) {
  const PFN_vkDestroyDevice destroy = deviceOf(device).destroy;
  {
    std::lock_guard lock(mutex);
    devices.erase(key(device));
  }
  destroy(device, allocator);
}

VKAPI_ATTR void VKAPI_CALL GetDeviceQueue(VkDevice device, uint32_t family, uint32_t index,
                                          VkQueue* queue) {
  DeviceData& data = deviceOf(device);
  const bool beyond = family == data.real && index >= data.real_queue_count;
  if (family != data.added && !beyond) {
    data.get_queue(device, family, index, queue);
  } else {  // after the app's own queues of the real family, or sharing the last one
    const uint32_t real_index =
        beyond ? data.real_queue_count - 1
               : std::min(data.real_requested + index, data.real_queue_count - 1);
    VkQueue real = VK_NULL_HANDLE;
    data.get_queue(device, data.real, real_index, &real);
    std::lock_guard lock(mutex);
    std::unique_ptr<FakeQueue>& fake = data.fakes[uint64_t(family) << 32 | index];
    if (!fake) fake = std::make_unique<FakeQueue>(FakeQueue{key(real), real});
    *queue = reinterpret_cast<VkQueue>(fake.get());
  }
  std::lock_guard lock(mutex);
  VkQueue real = *queue;
  for (auto& [i, fake] : data.fakes)
    if (reinterpret_cast<VkQueue>(fake.get()) == *queue) real = fake->real;
  std::unique_ptr<std::mutex>& queue_lock = data.locks[real];
  if (!queue_lock) queue_lock = std::make_unique<std::mutex>();
}

// The real queue behind `queue`, and the lock of that real queue.
VkQueue unwrap(DeviceData& data, VkQueue queue, std::mutex*& queue_lock) {
  std::lock_guard lock(mutex);
  for (auto& [i, fake] : data.fakes)
    if (reinterpret_cast<VkQueue>(fake.get()) == queue) queue = fake->real;
  queue_lock = data.locks.at(queue).get();
  return queue;
}

VKAPI_ATTR VkResult VKAPI_CALL QueueSubmit(VkQueue queue, uint32_t count,
                                           const VkSubmitInfo* submits, VkFence fence) {
  DeviceData& data = deviceOf(queue);
  std::mutex* queue_lock = nullptr;
  const VkQueue real = unwrap(data, queue, queue_lock);
  std::lock_guard lock(*queue_lock);
  return data.submit(real, count, submits, fence);
}

VKAPI_ATTR VkResult VKAPI_CALL QueueWaitIdle(VkQueue queue) {
  DeviceData& data = deviceOf(queue);
  std::mutex* queue_lock = nullptr;
  const VkQueue real = unwrap(data, queue, queue_lock);
  std::lock_guard lock(*queue_lock);
  return data.wait_idle(real);
}

VKAPI_ATTR VkResult VKAPI_CALL CreateCommandPool(VkDevice device,
                                                 const VkCommandPoolCreateInfo* info,
                                                 const VkAllocationCallbacks* allocator,
                                                 VkCommandPool* pool) {
  DeviceData& data = deviceOf(device);
  VkCommandPoolCreateInfo down = *info;
  if (down.queueFamilyIndex == data.added) down.queueFamilyIndex = data.real;
  return data.create_pool(device, &down, allocator, pool);
}

// A sharing list with the added family mapped to the real one; exclusive once it names only
// one family.
template <typename Info>
Info mapSharing(const DeviceData& data, const Info& info, std::vector<uint32_t>& families) {
  Info down = info;
  if (info.sharingMode != VK_SHARING_MODE_CONCURRENT) return down;
  for (uint32_t i = 0; i < info.queueFamilyIndexCount; ++i) {
    const uint32_t f =
        info.pQueueFamilyIndices[i] == data.added ? data.real : info.pQueueFamilyIndices[i];
    if (std::find(families.begin(), families.end(), f) == families.end()) families.push_back(f);
  }
  down.queueFamilyIndexCount = uint32_t(families.size());
  down.pQueueFamilyIndices = families.data();
  if (families.size() < 2) {
    down.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    down.queueFamilyIndexCount = 0;
    down.pQueueFamilyIndices = nullptr;
  }
  return down;
}

VKAPI_ATTR VkResult VKAPI_CALL CreateBuffer(VkDevice device, const VkBufferCreateInfo* info,
                                            const VkAllocationCallbacks* allocator,
                                            VkBuffer* buffer) {
  DeviceData& data = deviceOf(device);
  std::vector<uint32_t> families;
  const VkBufferCreateInfo down = mapSharing(data, *info, families);
  return data.create_buffer(device, &down, allocator, buffer);
}

VKAPI_ATTR VkResult VKAPI_CALL CreateImage(VkDevice device, const VkImageCreateInfo* info,
                                           const VkAllocationCallbacks* allocator, VkImage* image) {
  DeviceData& data = deviceOf(device);
  std::vector<uint32_t> families;
  const VkImageCreateInfo down = mapSharing(data, *info, families);
  return data.create_image(device, &down, allocator, image);
}

VKAPI_ATTR void VKAPI_CALL CmdPipelineBarrier(VkCommandBuffer cmd, VkPipelineStageFlags src,
                                              VkPipelineStageFlags dst, VkDependencyFlags flags,
                                              uint32_t memory_count, const VkMemoryBarrier* memory,
                                              uint32_t buffer_count,
                                              const VkBufferMemoryBarrier* buffers,
                                              uint32_t image_count,
                                              const VkImageMemoryBarrier* images) {
  DeviceData& data = deviceOf(cmd);
  auto map = [&](uint32_t& family) {
    if (family == data.added) family = data.real;
  };
  std::vector<VkBufferMemoryBarrier> b(buffers, buffers + buffer_count);
  for (VkBufferMemoryBarrier& x : b) map(x.srcQueueFamilyIndex), map(x.dstQueueFamilyIndex);
  std::vector<VkImageMemoryBarrier> i(images, images + image_count);
  for (VkImageMemoryBarrier& x : i) map(x.srcQueueFamilyIndex), map(x.dstQueueFamilyIndex);
  data.barrier(cmd, src, dst, flags, memory_count, memory, buffer_count, b.data(), image_count,
               i.data());
}

VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL GetDeviceProcAddr(VkDevice device, const char* name);

PFN_vkVoidFunction deviceHook(const char* name) {
  struct Hook {
    const char* name;
    PFN_vkVoidFunction function;
  };
#define VKGRAD_HOOK(f) \
  { "vk" #f, reinterpret_cast<PFN_vkVoidFunction>(&f) }
  static const Hook hooks[] = {
      VKGRAD_HOOK(DestroyDevice), VKGRAD_HOOK(GetDeviceQueue),     VKGRAD_HOOK(QueueSubmit),
      VKGRAD_HOOK(QueueWaitIdle), VKGRAD_HOOK(CreateCommandPool),  VKGRAD_HOOK(CreateBuffer),
      VKGRAD_HOOK(CreateImage),   VKGRAD_HOOK(CmdPipelineBarrier), VKGRAD_HOOK(GetDeviceProcAddr),
  };
  for (const Hook& hook : hooks)
    if (std::strcmp(hook.name, name) == 0) return hook.function;
  return nullptr;
}

VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL GetDeviceProcAddr(VkDevice device, const char* name) {
  // vkGetDeviceQueue2, vkQueueSubmit2 and the synchronization2 barriers are not mapped: the
  // engine and its tests use the Vulkan 1.0 forms, and the layer refuses to hand out the others
  // rather than pass the added family's index to the driver.
  if (std::strcmp(name, "vkGetDeviceQueue2") == 0 || std::strcmp(name, "vkQueueSubmit2") == 0 ||
      std::strcmp(name, "vkCmdPipelineBarrier2") == 0)
    return nullptr;
  if (PFN_vkVoidFunction hook = deviceHook(name)) return hook;
  PFN_vkGetDeviceProcAddr next_gdpa = nullptr;
  {
    std::lock_guard lock(mutex);
    const auto found = devices.find(device ? key(device) : nullptr);
    if (found != devices.end()) next_gdpa = found->second.next_gdpa;
  }
  return next_gdpa ? next_gdpa(device, name) : nullptr;
}

VKAPI_ATTR VkResult VKAPI_CALL CreateInstance(const VkInstanceCreateInfo* info,
                                              const VkAllocationCallbacks* allocator,
                                              VkInstance* instance) {
  auto* link = static_cast<VkLayerInstanceCreateInfo*>(const_cast<void*>(info->pNext));
  while (link && !(link->sType == VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO &&
                   link->function == VK_LAYER_LINK_INFO))
    link = static_cast<VkLayerInstanceCreateInfo*>(const_cast<void*>(link->pNext));
  if (!link) return VK_ERROR_INITIALIZATION_FAILED;
  const PFN_vkGetInstanceProcAddr gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
  link->u.pLayerInfo = link->u.pLayerInfo->pNext;
  const auto create =
      reinterpret_cast<PFN_vkCreateInstance>(gipa(VK_NULL_HANDLE, "vkCreateInstance"));
  const VkResult result = create(info, allocator, instance);
  if (result != VK_SUCCESS) return result;
  InstanceData data;
  data.instance = *instance;
  data.next_gipa = gipa;
  data.destroy = reinterpret_cast<PFN_vkDestroyInstance>(gipa(*instance, "vkDestroyInstance"));
  data.families = reinterpret_cast<PFN_vkGetPhysicalDeviceQueueFamilyProperties>(
      gipa(*instance, "vkGetPhysicalDeviceQueueFamilyProperties"));
  data.families2 = reinterpret_cast<PFN_vkGetPhysicalDeviceQueueFamilyProperties2>(
      gipa(*instance, "vkGetPhysicalDeviceQueueFamilyProperties2"));
  std::lock_guard lock(mutex);
  instances[key(*instance)] = data;
  return VK_SUCCESS;
}

VKAPI_ATTR void VKAPI_CALL DestroyInstance(VkInstance instance,
                                           const VkAllocationCallbacks* allocator) {
  const PFN_vkDestroyInstance destroy = instanceOf(instance).destroy;
  {
    std::lock_guard lock(mutex);
    instances.erase(key(instance));
  }
  destroy(instance, allocator);
}

VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL GetInstanceProcAddr(VkInstance instance,
                                                             const char* name) {
  struct Hook {
    const char* name;
    PFN_vkVoidFunction function;
  };
  static const Hook hooks[] = {
      VKGRAD_HOOK(GetInstanceProcAddr),
      VKGRAD_HOOK(CreateInstance),
      VKGRAD_HOOK(DestroyInstance),
      VKGRAD_HOOK(CreateDevice),
      VKGRAD_HOOK(GetDeviceProcAddr),
      VKGRAD_HOOK(GetPhysicalDeviceQueueFamilyProperties),
      VKGRAD_HOOK(GetPhysicalDeviceQueueFamilyProperties2),
      {"vkGetPhysicalDeviceQueueFamilyProperties2KHR",
       reinterpret_cast<PFN_vkVoidFunction>(&GetPhysicalDeviceQueueFamilyProperties2)},
  };
  for (const Hook& hook : hooks)
    if (std::strcmp(hook.name, name) == 0) return hook.function;
  if (PFN_vkVoidFunction hook = deviceHook(name)) return hook;
  if (instance == VK_NULL_HANDLE) return nullptr;
  return instanceOf(instance).next_gipa(instance, name);
}
#undef VKGRAD_HOOK

}  // namespace

extern "C" VK_LAYER_EXPORT VKAPI_ATTR VkResult VKAPI_CALL
vkNegotiateLoaderLayerInterfaceVersion(VkNegotiateLayerInterface* version) {
  if (version->loaderLayerInterfaceVersion < 2) return VK_ERROR_INITIALIZATION_FAILED;
  version->loaderLayerInterfaceVersion = 2;
  version->pfnGetInstanceProcAddr = &GetInstanceProcAddr;
  version->pfnGetDeviceProcAddr = &GetDeviceProcAddr;
  version->pfnGetPhysicalDeviceProcAddr = nullptr;
  return VK_SUCCESS;
}
