// The Vulkan that vkgrad's public headers show: types only. vkgrad loads its entry points
// through a private copy of volk whose globals are renamed (cmake/VolkNames.cmake), so an
// application may load Vulkan any way it likes (its own volk, the loader's prototypes) and
// include this before or after its own Vulkan headers. An app that uses volk defines
// VK_NO_PROTOTYPES for its whole build, as volk asks.
#pragma once

#include <vulkan/vulkan_core.h>

// A Context's device-level entry points (volk's VolkDeviceTable under vkgrad's private name;
// complete only inside vkgrad, where volk.h is included).
struct vkgrad_VolkDeviceTable;
