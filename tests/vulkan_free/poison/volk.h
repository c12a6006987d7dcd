// Found first on the include path of the Vulkan-free layering check (tests/vulkan_free): a
// header above engine/vkgrad/vk/ that reaches Vulkan, directly or through another header, stops the
// build here.
#error "a Vulkan-free vkgrad header includes Vulkan (see the include chain above)"
