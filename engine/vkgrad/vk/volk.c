// Volk's implementation, compiled into vkgrad_vk (Debian ships volk as source).
#define VOLK_IMPLEMENTATION
#include <volk.h>
