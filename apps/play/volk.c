// The app's own volk (Debian ships it as source): the Vulkan entry points vkgrad-play calls.
// vkgrad's private copy is renamed (vkgrad_vk...), so the two never meet at link time.
#define VOLK_IMPLEMENTATION
#include <volk.h>
