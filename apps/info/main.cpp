// vkgrad-info: every Vulkan device the loader sees, with the limits and features that
// matter for compute, and which one the default selection would use. --json prints the
// same as one JSON document.
#include <volk.h>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "common/app_main.h"
#include "common/cli.h"
#include "common/device_options.h"
#include "vkgrad/core/error.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/device_info.h"
#include "vkgrad/vk/instance.h"

namespace vkgrad::apps {
namespace {

// The device the options pick, and why.
struct Selection {
  uint32_t index = 0;
  vk::DeviceSelector selector;
};

std::string hex(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%04x", value);
  return text;
}

const char* vendorName(uint32_t vendor_id) {
  switch (vendor_id) {
    case 0x1002:
      return "AMD";
    case 0x1010:
      return "Imagination";
    case 0x106b:
      return "Apple";
    case 0x10de:
      return "NVIDIA";
    case 0x13b5:
      return "ARM";
    case 0x5143:
      return "Qualcomm";
    case 0x8086:
      return "Intel";
    case 0x10005:
      return "Mesa";
    default:
      return "";
  }
}

std::string bytesText(uint64_t bytes) {
  char text[32];
  if (bytes >= (uint64_t(1) << 30) && bytes % (uint64_t(1) << 30) != 0)
    std::snprintf(text, sizeof(text), "%.1f GiB", double(bytes) / double(uint64_t(1) << 30));
  else if (bytes >= (uint64_t(1) << 30))
    std::snprintf(text, sizeof(text), "%llu GiB", (unsigned long long)(bytes >> 30));
  else if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
    std::snprintf(text, sizeof(text), "%llu MiB", (unsigned long long)(bytes >> 20));
  else if (bytes >= (1u << 10) && bytes % (1u << 10) == 0)
    std::snprintf(text, sizeof(text), "%llu KiB", (unsigned long long)(bytes >> 10));
  else
    std::snprintf(text, sizeof(text), "%llu bytes", (unsigned long long)bytes);
  return text;
}

const char* yesNo(bool value) {
  return value ? "yes" : "no";
}

// "fixed" where every compute subgroup has subgroup_size lanes, else the range, or "range not
// reported".
std::string subgroupRange(const vk::DeviceInfo& d) {
  if (d.fixedSubgroupSize()) return "fixed";
  if (d.max_subgroup_size == 0) return "range not reported";
  return std::to_string(d.min_subgroup_size) + " to " + std::to_string(d.max_subgroup_size);
}

std::string selectionText(const Selection& s) {
  if (s.selector.text.empty()) return "automatic: first discrete GPU, else integrated, else any";
  return s.selector.source + "=" + s.selector.text;
}

void printText(const std::vector<vk::DeviceInfo>& devices, const Selection& selection,
               uint32_t loader_version) {
  std::printf("Vulkan loader %s, %zu device%s; * marks the default (%s)\n\n",
              vk::versionString(loader_version).c_str(), devices.size(),
              devices.size() == 1 ? "" : "s", selectionText(selection).c_str());
  for (const vk::DeviceInfo& d : devices) {
    const bool chosen = d.index == selection.index;
    std::printf("%c %u: %s [%s]\n", chosen ? '*' : ' ', d.index, d.name.c_str(),
                vk::deviceTypeName(d.type));
    if (!d.profile.empty())
      std::printf("    device profile   %s: the limits below are the profile's where lower\n",
                  d.profile.c_str());
    const char* vendor = vendorName(d.vendor_id);
    std::printf("    vendor %s%s%s%s, device %s\n", hex(d.vendor_id).c_str(), *vendor ? " (" : "",
                vendor, *vendor ? ")" : "", hex(d.device_id).c_str());
    std::printf("    driver           %s (%s), Vulkan %s\n", d.driver_name.c_str(),
                d.driver_info.c_str(), vk::versionString(d.api_version).c_str());
    std::printf("    subgroups        %u lanes (%s); in compute %s, shuffle %s, arithmetic %s\n",
                d.subgroup_size, subgroupRange(d).c_str(), yesNo(d.subgroup_compute),
                yesNo(d.subgroup_shuffle), yesNo(d.subgroup_arithmetic));
    std::printf("    shared memory    %s per workgroup\n", bytesText(d.max_shared_memory).c_str());
    std::printf("    workgroup        at most %u x %u x %u, %u invocations\n",
                d.max_workgroup_size[0], d.max_workgroup_size[1], d.max_workgroup_size[2],
                d.max_workgroup_invocations);
    std::printf("    storage buffer   %s per binding, offsets aligned to %llu\n",
                bytesText(d.max_storage_buffer_range).c_str(),
                (unsigned long long)d.min_storage_offset_alignment);
    std::printf("    allocation       %s per vkAllocateMemory\n",
                bytesText(d.max_allocation_bytes).c_str());
    std::printf("    texel buffer     %llu elements per view\n",
                (unsigned long long)d.max_texel_buffer_elements);
    std::printf("    push constants   %u bytes\n", d.max_push_constants);
    std::printf(
        "    descriptors      per stage %u storage buffers, %u uniform buffers, %u sampled "
        "and %u storage images (texel views), %u in all\n",
        d.max_storage_buffers, d.max_uniform_buffers, d.max_sampled_images, d.max_storage_images,
        d.max_resources);
    if (d.timestamp_valid_bits)
      std::printf("    timestamps       yes, %u valid bits, %g ns per tick\n",
                  d.timestamp_valid_bits, d.timestamp_period_ns);
    else
      std::printf("    timestamps       no (GPU times unavailable)\n");
    for (size_t i = 0; i < d.heaps.size(); ++i)
      std::printf("    memory heap %zu    %s%s\n", i, bytesText(d.heaps[i].bytes).c_str(),
                  d.heaps[i].device_local ? ", device-local" : "");
    std::printf("    shader types     fp16 %s, int8 %s, fp64 %s, int64 %s\n", yesNo(d.fp16),
                yesNo(d.int8), yesNo(d.fp64), yesNo(d.int64));
    std::printf("    buffer storage   16-bit %s, 8-bit %s\n", yesNo(d.storage_16bit),
                yesNo(d.storage_8bit));
    std::printf(
        "    coop. matrices   %s (VK_NV_cooperative_matrix: %zu shapes; VK_KHR_cooperative_matrix "
        "%s)\n",
        d.coopmat ? "yes, the coopmat matmul runs" : "no", d.coopmat_shapes.size(),
        d.khr_coopmat ? "offered" : "absent");
    for (const std::string& shape : d.coopmat_shapes)
      std::printf("                     %s\n", shape.c_str());
    if (d.portability_subset)
      std::printf("    portability      VK_KHR_portability_subset (enabled: a layered driver)\n");
    if (d.compute_family == UINT32_MAX)
      std::printf("    compute queue    none (vkgrad cannot use this device)\n");
    else
      std::printf("    compute queue    family %u (%s)\n", d.compute_family,
                  d.compute_only_family ? "compute-only" : "shared with graphics");
    for (size_t i = 0; i < d.queue_families.size(); ++i) {
      const vk::QueueFamily& f = d.queue_families[i];
      std::printf("    %s %zu: %s%s%s%u queue%s\n", i ? "                " : "queue families  ", i,
                  f.graphics ? "graphics, " : "", f.compute ? "compute, " : "",
                  f.transfer ? "transfer, " : "", f.queues, f.queues == 1 ? "" : "s");
    }
    std::printf("\n");
  }
}

graph::Json heapsJson(const vk::DeviceInfo& d) {
  graph::Json heaps = graph::Json::array();
  for (const vk::MemoryHeap& heap : d.heaps)
    heaps.push_back({{"bytes", heap.bytes}, {"device_local", heap.device_local}});
  return heaps;
}

// The queue the engine would use, and every family the device has.
graph::Json computeQueueJson(const vk::DeviceInfo& d) {
  graph::Json queue = {{"present", d.compute_family != UINT32_MAX}};
  if (d.compute_family != UINT32_MAX) {
    queue["family"] = d.compute_family;
    queue["compute_only"] = d.compute_only_family;
  }
  return queue;
}
graph::Json queueFamiliesJson(const vk::DeviceInfo& d) {
  graph::Json families = graph::Json::array();
  for (const vk::QueueFamily& f : d.queue_families)
    families.push_back({{"graphics", f.graphics},
                        {"compute", f.compute},
                        {"transfer", f.transfer},
                        {"queues", f.queues}});
  return families;
}

void printJson(const std::vector<vk::DeviceInfo>& devices, const Selection& selection,
               uint32_t loader_version) {
  graph::Json list = graph::Json::array();
  for (const vk::DeviceInfo& d : devices) {
    list.push_back({
        {"index", d.index},
        {"default", d.index == selection.index},
        {"name", d.name},
        {"type", vk::deviceTypeName(d.type)},
        {"vendor_id", d.vendor_id},
        {"vendor", vendorName(d.vendor_id)},
        {"device_id", d.device_id},
        {"driver_name", d.driver_name},
        {"driver_info", d.driver_info},
        {"driver_version", d.driver_version},  // vendor-specific encoding
        {"api_version", vk::versionString(d.api_version)},
        {"subgroup",
         {{"size", d.subgroup_size},
          {"min_size", d.min_subgroup_size},
          {"max_size", d.max_subgroup_size},
          {"compute", d.subgroup_compute},
          {"shuffle", d.subgroup_shuffle},
          {"arithmetic", d.subgroup_arithmetic}}},
        {"max_shared_memory_bytes", d.max_shared_memory},
        {"max_workgroup_size", d.max_workgroup_size},
        {"max_workgroup_invocations", d.max_workgroup_invocations},
        {"max_workgroup_count", d.max_workgroup_count},
        {"max_storage_buffer_range_bytes", d.max_storage_buffer_range},
        {"max_allocation_bytes", d.max_allocation_bytes},
        {"max_texel_buffer_elements", d.max_texel_buffer_elements},
        {"min_storage_offset_alignment", d.min_storage_offset_alignment},
        {"min_texel_offset_alignment", d.min_texel_offset_alignment},
        {"max_push_constants_bytes", d.max_push_constants},
        {"max_per_stage_descriptors",
         {{"storage_buffers", d.max_storage_buffers},
          {"uniform_buffers", d.max_uniform_buffers},
          {"sampled_images", d.max_sampled_images},
          {"storage_images", d.max_storage_images},
          {"resources", d.max_resources}}},
        {"timestamps",
         {{"supported", d.timestamp_valid_bits != 0},
          {"valid_bits", d.timestamp_valid_bits},
          {"period_ns", d.timestamp_period_ns}}},
        {"memory_heaps", heapsJson(d)},
        {"features",
         {{"fp16", d.fp16},
          {"int8", d.int8},
          {"fp64", d.fp64},
          {"int64", d.int64},
          {"storage_16bit", d.storage_16bit},
          {"storage_8bit", d.storage_8bit},
          {"vulkan_memory_model", d.vulkan_memory_model}}},
        {"cooperative_matrix",
         {{"coopmat_matmul", d.coopmat},
          {"nv_shapes", d.coopmat_shapes},
          {"khr_extension", d.khr_coopmat}}},
        {"portability_subset", d.portability_subset},
        {"device_profile", d.profile},
        {"compute_queue", computeQueueJson(d)},
        {"queue_families", queueFamiliesJson(d)},
    });
  }
  const graph::Json doc = {
      {"loader_version", vk::versionString(loader_version)},
      {"default_device",
       {{"index", selection.index},
        {"source", selection.selector.source},
        {"selector", selection.selector.text}}},
      {"devices", list},
  };
  std::printf("%s\n", graph::dumpJson(doc, 2).c_str());
}

int run(int argc, char** argv) {
  Cli cli("vkgrad-info",
          "Lists every Vulkan device with the limits and features that matter for compute,\n"
          "and marks the one vkgrad picks: --device, else VKGRAD_DEVICE, else a discrete GPU,\n"
          "else an integrated one, else any (e.g. lavapipe).");
  cli.flag("json", "print one JSON document instead of text");
  declareDeviceOptions(cli);
  cli.parse(argc, argv);

  const vk::ContextOptions options = contextOptions(cli);
  // An instance of its own rather than a Context: the devices are listed, none is created.
  // With --validation the queries run under the layer.
  const vk::Instance instance(options.validation);
  std::vector<vk::DeviceInfo> devices = vk::listDevices(instance);
  // What a Context would believe: the device profile and lowered limits applied.
  for (vk::DeviceInfo& d : devices) vk::imposeLimits(d, options.profile, options.limits);
  Selection selection;
  selection.selector = vk::deviceSelector(options);
  // Throws for an empty list, or a selector that matches nothing, listing the devices.
  selection.index = vk::selectDevice(devices, selection.selector.text, selection.selector.source);

  const uint32_t loader_version = volkGetInstanceVersion();
  if (cli.has("json"))
    printJson(devices, selection, loader_version);
  else
    printText(devices, selection, loader_version);
  return validationFailed(instance.messageCount(), "vkgrad-info") ? 1 : 0;
}

}  // namespace
}  // namespace vkgrad::apps

int main(int argc, char** argv) {
  return vkgrad::apps::guardedMain("vkgrad-info", vkgrad::apps::run, argc, argv);
}
