#include "vkgrad/io/npy.h"

#include <cstring>
#include <fstream>
#include <string_view>

#include "vkgrad/core/error.h"
#include "vkgrad/io/atomic_file.h"
#include "vkgrad/ops/reference/half.h"

namespace vkgrad::graph {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr int64_t kMaxElements = int64_t(1) << 31;

[[noreturn]] void fail(const std::string& source, const std::string& why) {
  throw Error(source + ": not a readable .npy file: " + why);
}

// The value of 'key' in the header dict np.save writes: {'descr': '<f4', 'fortran_order':
// False, 'shape': (2, 3), }. Returns the text after "'key':", spaces skipped.
std::string_view field(std::string_view header, std::string_view key, const std::string& source) {
  const std::string quoted = "'" + std::string(key) + "'";
  const size_t at = header.find(quoted);
  if (at == std::string_view::npos) fail(source, "its header has no " + quoted);
  size_t i = at + quoted.size();
  while (i < header.size() && header[i] == ' ') ++i;
  if (i >= header.size() || header[i] != ':') fail(source, "a malformed header near " + quoted);
  ++i;
  while (i < header.size() && header[i] == ' ') ++i;
  return header.substr(i);
}

std::vector<int64_t> parseShape(std::string_view text, const std::string& source) {
  if (text.empty() || text[0] != '(') fail(source, "the shape is not a tuple");
  const size_t close = text.find(')');
  if (close == std::string_view::npos) fail(source, "the shape tuple is not closed");
  std::vector<int64_t> shape;
  std::string_view body = text.substr(1, close - 1);
  int64_t numel = 1;
  while (!body.empty()) {
    size_t i = 0;
    while (i < body.size() && (body[i] == ' ' || body[i] == ',')) ++i;
    body.remove_prefix(i);
    if (body.empty()) break;
    int64_t value = 0;
    size_t digits = 0;
    while (digits < body.size() && body[digits] >= '0' && body[digits] <= '9') {
      value = value * 10 + (body[digits] - '0');
      if (value > kMaxElements) fail(source, "a dimension past 2^31");
      ++digits;
    }
    if (digits == 0) fail(source, "the shape holds something other than numbers");
    body.remove_prefix(digits);
    numel *= value;
    if (numel > kMaxElements) fail(source, "more than 2^31 elements");
    shape.push_back(value);
  }
  return shape;
}

struct Descr {
  NpyArray::Kind kind;
  int bytes;
  char code;  // 'f', 'i', 'u', 'b'
};

Descr parseDescr(const std::string& d, const std::string& source) {
  if (d.size() == 3 && (d[0] == '<' || d[0] == '|' || d[0] == '=')) {
    const char code = d[1];
    const int bytes = d[2] - '0';
    if (code == 'f' && (bytes == 2 || bytes == 4 || bytes == 8))
      return {NpyArray::Kind::Float, bytes, code};
    if (code == 'i' && (bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8))
      return {NpyArray::Kind::Int, bytes, code};
    if (code == 'u' && (bytes == 1 || bytes == 2 || bytes == 4))
      return {NpyArray::Kind::Int, bytes, code};
    if (code == 'b' && bytes == 1) return {NpyArray::Kind::Int, 1, code};
  }
  fail(source,
       "dtype '" + d + "' is not supported (little-endian f2/f4/f8, i1..i8, u1..u4 or bool)");
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

NpyArray parseNpy(const std::vector<uint8_t>& bytes, const std::string& source) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), kMagic, 6) != 0)
    fail(source, "it does not start with the .npy magic");
  const int major = bytes[6];
  size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = size_t(bytes[8]) | size_t(bytes[9]) << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) fail(source, "truncated header");
    header_len = size_t(load<uint32_t>(&bytes[8]));
    start = 12;
  } else {
    fail(source, "format version " + std::to_string(major) + " (1 to 3 are read)");
  }
  if (bytes.size() < start + header_len) fail(source, "truncated header");
  const std::string_view header(reinterpret_cast<const char*>(&bytes[start]), header_len);
  if (header.empty() || header[0] != '{') fail(source, "the header is not a dict");

  std::string_view d = field(header, "descr", source);
  if (d.empty() || (d[0] != '\'' && d[0] != '"')) fail(source, "descr is not a string");
  const size_t end_quote = d.find(d[0], 1);
  if (end_quote == std::string_view::npos) fail(source, "descr is not closed");
  NpyArray a;
  a.descr = std::string(d.substr(1, end_quote - 1));
  const Descr descr = parseDescr(a.descr, source);
  if (field(header, "fortran_order", source).substr(0, 5) != "False")
    fail(source, "Fortran order (save it with np.ascontiguousarray)");
  a.shape = parseShape(field(header, "shape", source), source);
  a.kind = descr.kind;

  const int64_t n = a.numel();
  const size_t data = start + header_len;
  const uint64_t want = uint64_t(n) * uint64_t(descr.bytes);
  if (bytes.size() - data != want)
    fail(source, "shape " + std::to_string(n) + " elements of " + a.descr + " need " +
                     std::to_string(want) + " data bytes, the file has " +
                     std::to_string(bytes.size() - data));
  const uint8_t* p = bytes.data() + data;
  if (descr.kind == NpyArray::Kind::Float) {
    a.floats.resize(size_t(n));
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t* q = p + i * descr.bytes;
      a.floats[size_t(i)] = descr.bytes == 2   ? ops::ref::fromHalf(load<uint16_t>(q))
                            : descr.bytes == 4 ? load<float>(q)
                                               : float(load<double>(q));
    }
  } else {
    a.ints.resize(size_t(n));
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t* q = p + i * descr.bytes;
      int64_t v = 0;
      if (descr.code == 'i')
        v = descr.bytes == 1   ? load<int8_t>(q)
            : descr.bytes == 2 ? load<int16_t>(q)
            : descr.bytes == 4 ? load<int32_t>(q)
                               : load<int64_t>(q);
      else
        v = descr.bytes == 1   ? load<uint8_t>(q)
            : descr.bytes == 2 ? load<uint16_t>(q)
                               : load<uint32_t>(q);
      a.ints[size_t(i)] = v;
    }
  }
  return a;
}

NpyArray readNpy(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open");
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw Error(path.string() + ": " + ec.message());
  // The largest array read (2^31 f8 elements) plus a header: anything larger is refused
  // before it is read.
  if (size > (uint64_t(kMaxElements) << 3) + 65536)
    fail(path.string(), "larger than any array it may hold");
  std::vector<uint8_t> bytes(size);
  in.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(size));
  if (!in) throw Error(path.string() + ": read failed");
  return parseNpy(bytes, path.string());
}

std::vector<uint8_t> encodeNpy(const std::vector<int64_t>& shape,
                               const std::vector<float>& values) {
  std::string dims;  // NumPy's tuple: "()", "(5,)", "(2, 3)"
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    dims += (i ? ", " : "") + std::to_string(shape[i]);
    n *= shape[i];
  }
  if (shape.size() == 1) dims += ",";
  if (n != int64_t(values.size()))
    throw Error("writeNpy: shape holds " + std::to_string(n) + " elements, given " +
                std::to_string(values.size()));
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Padded with spaces and a newline so the data starts on a 64-byte boundary.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::vector<uint8_t> out(kMagic, kMagic + 6);
  out.push_back(1);
  out.push_back(0);
  out.push_back(uint8_t(header.size() & 0xff));
  out.push_back(uint8_t(header.size() >> 8));
  out.insert(out.end(), header.begin(), header.end());
  const auto* p = reinterpret_cast<const uint8_t*>(values.data());
  out.insert(out.end(), p, p + values.size() * 4);
  return out;
}

void writeNpy(const std::filesystem::path& path, const std::vector<int64_t>& shape,
              const std::vector<float>& values) {
  const std::vector<uint8_t> bytes = encodeNpy(shape, values);
  writeFileAtomically(path,
                      std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

}  // namespace vkgrad::graph
