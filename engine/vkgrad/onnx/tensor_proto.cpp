#include "vkgrad/onnx/tensor_proto.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <fstream>

#include "vkgrad/core/error.h"
#include "vkgrad/ops/reference/half.h"

namespace vkgrad::onnx {
namespace {

constexpr int64_t kMaxElements = int64_t(1) << 31;

int elementBytes(int type) {
  switch (type) {
    case kFloat:
    case kInt32:
    case kUint32:
      return 4;
    case kInt64:
    case kUint64:
    case kDouble:
      return 8;
    case kFloat16:
    case kBfloat16:
    case kInt16:
    case kUint16:
      return 2;
    case kInt8:
    case kUint8:
    case kBool:
      return 1;
    default:
      return 0;
  }
}

// The external file's bytes [offset, offset + length) (length -1: to its end).
std::string readExternal(const ::onnx::TensorProto& t, const std::filesystem::path& folder,
                         const std::string& what) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset")
      offset = std::stoll(kv.value());
    else if (kv.key() == "length")
      length = std::stoll(kv.value());
  }
  const std::filesystem::path rel(location);
  if (location.empty() || rel.is_absolute() || location.find("..") != std::string::npos)
    throw Error(what + ": external data location \"" + location +
                "\" must be a file name inside the model's folder");
  const std::filesystem::path path = folder / rel;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(what + ": its external data file " + path.string() + " is missing");
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec || offset < 0 || uint64_t(offset) > size ||
      (length >= 0 && uint64_t(offset) + uint64_t(length) > size))
    throw Error(what + ": " + path.string() + " holds " + std::to_string(size) +
                " bytes, the tensor asks for " + std::to_string(length) + " from offset " +
                std::to_string(offset));
  if (length < 0) length = int64_t(size) - offset;
  std::string bytes(size_t(length), '\0');
  in.seekg(offset);
  in.read(bytes.data(), length);
  if (!in) throw Error(what + ": reading " + path.string() + " failed");
  return bytes;
}

template <typename T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Raw little-endian bytes (checked to hold h's elements) into h's storage.
void decodeRaw(HostTensor& h, const std::string& raw, int bytes) {
  const char* p = raw.data();
  for (size_t i = 0; i < size_t(h.numel()); ++i, p += bytes) {
    switch (h.type) {
      case kFloat:
        h.floats[i] = load<float>(p);
        break;
      case kDouble:
        h.floats[i] = float(load<double>(p));
        break;
      case kFloat16:
        h.floats[i] = ops::ref::fromHalf(load<uint16_t>(p));
        break;
      case kBfloat16:
        h.floats[i] = ops::ref::fromBf16(load<uint16_t>(p));
        break;
      case kInt64:
      case kUint64:
        h.ints[i] = load<int64_t>(p);
        break;
      case kInt32:
        h.ints[i] = load<int32_t>(p);
        break;
      case kUint32:
        h.ints[i] = load<uint32_t>(p);
        break;
      case kInt16:
        h.ints[i] = load<int16_t>(p);
        break;
      case kUint16:
        h.ints[i] = load<uint16_t>(p);
        break;
      case kInt8:
        h.ints[i] = load<int8_t>(p);
        break;
      default:
        h.ints[i] = load<uint8_t>(p);
        break;  // uint8, bool
    }
  }
}

// The typed fields (float_data, int64_data, ...) into h's storage; Error naming `what` for a
// value count that is not the shape's.
void decodeTyped(HostTensor& h, const ::onnx::TensorProto& t, const std::string& what) {
  const int64_t n = h.numel();
  const auto check_count = [&](int64_t have) {
    if (have != n)
      throw Error(what + ": " + std::to_string(have) + " values for shape " + dimsText(h.dims));
  };
  switch (h.type) {
    case kFloat:
      check_count(t.float_data_size());
      std::copy(t.float_data().begin(), t.float_data().end(), h.floats.begin());
      break;
    case kDouble:
      check_count(t.double_data_size());
      for (int64_t i = 0; i < n; ++i) h.floats[size_t(i)] = float(t.double_data(int(i)));
      break;
    case kFloat16:
    case kBfloat16:  // the 16 bits in int32_data, one per value
      check_count(t.int32_data_size());
      for (int64_t i = 0; i < n; ++i) {
        const auto v = uint16_t(t.int32_data(int(i)));
        h.floats[size_t(i)] = h.type == kFloat16 ? ops::ref::fromHalf(v) : ops::ref::fromBf16(v);
      }
      break;
    case kInt64:
      check_count(t.int64_data_size());
      std::copy(t.int64_data().begin(), t.int64_data().end(), h.ints.begin());
      break;
    case kUint64:
    case kUint32:
      check_count(t.uint64_data_size());
      for (int64_t i = 0; i < n; ++i) h.ints[size_t(i)] = int64_t(t.uint64_data(int(i)));
      break;
    default:  // int32, int16, int8, uint16, uint8, bool: int32_data
      check_count(t.int32_data_size());
      std::copy(t.int32_data().begin(), t.int32_data().end(), h.ints.begin());
      break;
  }
}

}  // namespace

HostTensor readTensor(const ::onnx::TensorProto& t, const std::filesystem::path& folder,
                      const std::string& what) {
  HostTensor h;
  h.type = t.data_type();
  const int bytes = elementBytes(h.type);
  if (bytes == 0)
    throw Error(what + ": element type " + elemTypeName(h.type) + " is not supported");
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0) throw Error(what + ": negative dimension " + std::to_string(d));
    h.dims.push_back(d);
    if (d > kMaxElements || (d > 0 && n > kMaxElements / d))
      throw Error(what + ": more than 2^31 elements");
    n *= d;
  }
  const bool external = t.data_location() == ::onnx::TensorProto::EXTERNAL;
  std::string external_bytes;
  if (external) external_bytes = readExternal(t, folder, what);
  const std::string& raw = external ? external_bytes : t.raw_data();
  const bool use_raw = external || t.has_raw_data();
  if (use_raw && int64_t(raw.size()) != n * bytes)
    throw Error(what + ": " + std::to_string(raw.size()) + " data bytes for " + std::to_string(n) +
                " " + elemTypeName(h.type) + " elements");

  if (h.isFloat())
    h.floats.resize(size_t(n));
  else
    h.ints.resize(size_t(n));
  if (use_raw)
    decodeRaw(h, raw, bytes);
  else
    decodeTyped(h, t, what);
  return h;
}

void writeFloats(::onnx::TensorProto& t, const std::vector<float>& values) {
  const int type = t.data_type();
  std::string raw;
  if (type == kFloat) {
    raw.assign(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  } else if (type == kDouble) {
    raw.resize(values.size() * 8);
    for (size_t i = 0; i < values.size(); ++i) {
      const double d = values[i];
      std::memcpy(&raw[i * 8], &d, 8);
    }
  } else if (type == kFloat16 || type == kBfloat16) {
    raw.resize(values.size() * 2);
    for (size_t i = 0; i < values.size(); ++i) {
      const uint16_t h =
          type == kFloat16 ? ops::ref::toHalf(values[i]) : ops::ref::toBf16(values[i]);
      std::memcpy(&raw[i * 2], &h, 2);
    }
  } else {
    throw Error(std::string("writeFloats: ") + elemTypeName(type) + " is not a float type");
  }
  t.clear_float_data();
  t.clear_double_data();
  t.clear_int32_data();
  t.clear_external_data();
  t.set_data_location(::onnx::TensorProto::DEFAULT);
  t.set_raw_data(std::move(raw));
}

}  // namespace vkgrad::onnx
