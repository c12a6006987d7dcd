#include "vkgrad/io/safetensors.h"
#include "vkgrad/io/input_file.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include "vkgrad/core/error.h"
#include "vkgrad/io/atomic_file.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/ops/reference/half.h"

namespace vkgrad::graph {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

constexpr uint64_t kMaxHeader = 100'000'000;  // the format's own limit on N

const char* dtypeTag(ops::DType dtype) {
  switch (dtype) {
    case ops::DType::F32:
      return "F32";
    case ops::DType::U32:
      return "U32";
    case ops::DType::F16:
      return "F16";
    case ops::DType::BF16:
      return "BF16";
  }
  return "?";
}

uint64_t elements(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= uint64_t(d);
  return n;
}

std::string errnoText() {
  return std::error_code(errno, std::generic_category()).message();
}

}  // namespace

void saveSafetensors(const std::filesystem::path& path, const Checkpoint& checkpoint) {
  const std::string where = path.string();
  Json header = Json::object();
  uint64_t offset = 0;
  for (const SavedTensor& t : checkpoint.tensors) {
    if (t.name.empty() || t.name == "__metadata__")
      throw Error(where + ": tensor name \"" + t.name + "\" is not allowed");
    if (header.contains(t.name)) throw Error(where + ": tensor \"" + t.name + "\" twice");
    for (int64_t d : t.shape)
      if (d < 0) throw Error(where + ": tensor \"" + t.name + "\" has a negative dim");
    if (savedWords(t.dtype, elements(t.shape)) != t.data.size())
      throw Error(where + ": tensor \"" + t.name + "\" has " + std::to_string(t.data.size()) +
                  " words for a shape of " + std::to_string(elements(t.shape)) + " " +
                  ops::dtypeName(t.dtype) + " elements");
    const uint64_t end = offset + t.bytes();
    header[t.name] = {
        {"dtype", dtypeTag(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  if (!checkpoint.metadata.empty()) header["__metadata__"] = checkpoint.metadata;
  // Strict UTF-8 here, not dumpJson's replacement: a name must read back as it was saved.
  std::string text;
  try {
    text = header.dump();
  } catch (const Json::exception& e) {
    throw Error(where + ": tensor names and metadata must be UTF-8: " + e.what());
  }
  text.resize((text.size() + 7) / 8 * 8, ' ');
  const uint64_t length = text.size();

  std::vector<std::string_view> pieces{std::string_view(reinterpret_cast<const char*>(&length), 8),
                                       text};
  for (const SavedTensor& t : checkpoint.tensors)
    pieces.emplace_back(reinterpret_cast<const char*>(t.data.data()), t.bytes());
  writeFileAtomically(path, pieces);
}

namespace {

// One tensor's header entry, checked: its dtype, shape and [begin, end) in the data region of
// data_bytes. Error without the file's name (the caller adds it).
std::pair<SavedTensor, std::pair<uint64_t, uint64_t>> headerTensor(const std::string& name,
                                                                   const Json& entry,
                                                                   uint64_t data_bytes) {
  if (!entry.is_object() || entry.size() != 3 || !entry.contains("dtype") ||
      !entry.contains("shape") || !entry.contains("data_offsets"))
    throw Error("tensor \"" + name + "\" needs exactly dtype, shape and data_offsets");
  const Json& dtype = entry.at("dtype");
  const Json& shape = entry.at("shape");
  const Json& offsets = entry.at("data_offsets");
  SavedTensor t;
  t.name = name;
  if (dtype == "F32")
    t.dtype = ops::DType::F32;
  else if (dtype == "U32")
    t.dtype = ops::DType::U32;
  else if (dtype == "F16")
    t.dtype = ops::DType::F16;
  else if (dtype == "BF16")
    t.dtype = ops::DType::BF16;
  else
    throw Error("tensor \"" + name + "\" has dtype " +
                (dtype.is_string() ? dtype.get<std::string>() : dumpJson(dtype)) +
                " (vkgrad reads F32, F16, BF16 and U32)");
  if (!shape.is_array()) throw Error("tensor \"" + name + "\": shape is not an array");
  // Each dim at most 2^53 and their product at most 2^62 bytes' worth: the size check
  // below must not wrap around.
  uint64_t count = 1;
  for (const Json& d : shape) {
    const uint64_t dim = jsonUint(d, "tensor \"" + name + "\": a dim");
    if (dim != 0 && count > (uint64_t(1) << 60) / dim)
      throw Error("tensor \"" + name + "\": shape " + dumpJson(shape) + " is too large");
    count *= dim;
    t.shape.push_back(int64_t(dim));
  }
  if (!offsets.is_array() || offsets.size() != 2)
    throw Error("tensor \"" + name + "\": data_offsets needs 2 numbers");
  const uint64_t begin = jsonUint(offsets[0], "tensor \"" + name + "\": data_offsets"),
                 end = jsonUint(offsets[1], "tensor \"" + name + "\": data_offsets");
  if (begin > end || end > data_bytes)
    throw Error("tensor \"" + name + "\": data_offsets [" + std::to_string(begin) + ", " +
                std::to_string(end) + "] outside the " + std::to_string(data_bytes) +
                " data bytes (truncated file?)");
  if (end - begin != ops::dtypeBytes(t.dtype) * count)
    throw Error("tensor \"" + name + "\": " + std::to_string(end - begin) +
                " bytes for a shape of " + std::to_string(count) + " elements");
  return {std::move(t), {begin, end}};
}

// The data region must be exactly the tensors, packed: no holes, no overlaps, no tail.
void checkPacked(std::vector<std::pair<uint64_t, uint64_t>> ranges, uint64_t data_bytes,
                 const std::string& where) {
  std::sort(ranges.begin(), ranges.end());
  uint64_t covered = 0;
  for (const auto& [begin, end] : ranges) {
    if (begin != covered)
      throw Error(where + ": data bytes " + (begin < covered ? "overlap" : "have a hole") + " at " +
                  std::to_string(std::min(begin, covered)));
    covered = end;
  }
  if (covered != data_bytes)
    throw Error(where + ": " + std::to_string(data_bytes - covered) +
                " bytes after the last tensor's data");
}

}  // namespace

Checkpoint loadSafetensors(const std::filesystem::path& path) {
  const std::string where = path.string();
  checkInputFile(path, "a safetensors file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(where + ": cannot open: " + errnoText());
  in.seekg(0, std::ios::end);
  const uint64_t size = uint64_t(in.tellg());
  in.seekg(0);
  if (size < 8) throw Error(where + ": truncated: " + std::to_string(size) + " bytes, no header");
  uint64_t length = 0;
  in.read(reinterpret_cast<char*>(&length), 8);
  if (length > kMaxHeader)
    throw Error(where + ": header length " + std::to_string(length) + " is above 100 MB");
  if (length > size - 8)
    throw Error(where + ": truncated: header of " + std::to_string(length) + " bytes, file has " +
                std::to_string(size - 8) + " after the length");
  std::string text(length, '\0');
  in.read(text.data(), std::streamsize(length));
  const uint64_t data_bytes = size - 8 - length;

  const Json header = parseJson(text, where + ": bad header");
  if (!header.is_object()) throw Error(where + ": bad header: not a JSON object");

  Checkpoint checkpoint;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // [begin, end) per tensor, file order
  try {
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        if (!entry.is_object()) throw Error("__metadata__ is not an object");
        for (const auto& [k, v] : entry.items()) {
          if (!v.is_string()) throw Error("__metadata__ \"" + k + "\" is not a string");
          checkpoint.metadata[k] = v.get<std::string>();
        }
        continue;
      }
      auto [t, range] = headerTensor(name, entry, data_bytes);
      ranges.push_back(range);
      checkpoint.tensors.push_back(std::move(t));
    }
  } catch (const Error& e) {
    throw Error(where + ": bad header: " + e.what());
  }
  checkPacked(ranges, data_bytes, where);
  for (size_t i = 0; i < ranges.size(); ++i) {
    SavedTensor& t = checkpoint.tensors[i];
    t.data.resize(savedWords(t.dtype, elements(t.shape)));
    in.seekg(std::streamoff(8 + length + ranges[i].first));
    in.read(reinterpret_cast<char*>(t.data.data()), std::streamsize(t.bytes()));
    if (!in) throw Error(where + ": read failed in tensor \"" + t.name + "\"");
  }
  return checkpoint;
}

std::vector<int64_t> savedDims(const ops::Shape& shape) {
  std::vector<int64_t> dims;
  for (int i = 0; i < shape.rank(); ++i) dims.push_back(shape[i]);
  return dims;
}

std::string dimsText(const std::vector<int64_t>& dims) {
  std::string text = "(";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? "," : "") + std::to_string(dims[i]);
  return text + ")";
}

uint64_t SavedTensor::bytes() const {
  return elements(shape) * ops::dtypeBytes(dtype);
}

size_t savedWords(ops::DType dtype, uint64_t elements) {
  return size_t((elements * ops::dtypeBytes(dtype) + 3) / 4);
}

namespace {

std::vector<float> savedValues(const SavedTensor& t) {
  return ops::ref::decode(
      t.dtype, std::span(reinterpret_cast<const uint8_t*>(t.data.data()), size_t(t.bytes())));
}

}  // namespace

SavedTensor convertSaved(const SavedTensor& t, ops::DType dtype) {
  if (!ops::isFloat(t.dtype) || !ops::isFloat(dtype))
    throw Error("tensor \"" + t.name + "\": " + ops::dtypeName(t.dtype) + " does not convert to " +
                ops::dtypeName(dtype));
  if (t.dtype == dtype) return t;
  const std::vector<uint8_t> bytes = ops::ref::encode(dtype, savedValues(t));
  SavedTensor out{t.name, dtype, t.shape, std::vector<uint32_t>(savedWords(dtype, elements(t.shape)))};
  std::memcpy(out.data.data(), bytes.data(), bytes.size());
  return out;
}

std::string nonFiniteText(const SavedTensor& t) {
  if (t.dtype == ops::DType::F16 || t.dtype == ops::DType::BF16) {
    const std::vector<float> v = savedValues(t);
    const auto bad = std::find_if(v.begin(), v.end(), [](float x) { return !std::isfinite(x); });
    if (bad == v.end()) return "";
    return std::string("holds ") + (std::isnan(*bad) ? "NaN" : "inf") + " at element " +
           std::to_string(bad - v.begin());
  }
  if (t.dtype != ops::DType::F32) return "";
  const auto bad = std::find_if(t.data.begin(), t.data.end(), [](uint32_t bits) {
    return (bits & 0x7f800000u) == 0x7f800000u;  // all exponent bits: inf or NaN
  });
  if (bad == t.data.end()) return "";
  return std::string("holds ") + ((*bad & 0x007fffffu) ? "NaN" : "inf") + " at element " +
         std::to_string(bad - t.data.begin());
}

}  // namespace vkgrad::graph
