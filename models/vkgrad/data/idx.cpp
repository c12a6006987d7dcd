#include "vkgrad/data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>
#include <utility>

#include "vkgrad/core/error.h"
#include "vkgrad/io/safetensors.h"

namespace vkgrad::data {
namespace {

// Deflate's best ratio is 1032:1 (a 258-byte match per 2-bit code), so a gzip file of n bytes
// inflates to at most ~1032 n: a header promising more is rejected before reading on.
constexpr uint64_t kMaxDeflateRatio = 1032;
// Far above any real IDX file (Fashion-MNIST's train images are 47 MB), and low enough that
// the product of three u32 sizes is checked without overflow.
constexpr uint64_t kMaxPayload = uint64_t(1) << 40;
// Data is read in chunks and the vector grows with what really arrives, so memory follows
// the file, not the header's claims.
constexpr size_t kChunk = size_t(16) << 20;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error("idx: " + path + ": " + what);
}

std::string hex32(uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", v);
  return text;
}

uint32_t bigEndian32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

// A file's bytes, inflated when it starts with the gzip magic (1f 8b).
class Source {
 public:
  explicit Source(const std::string& path) : path_(path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) fail(path, "no such file");
    if (!std::filesystem::is_regular_file(path, ec)) fail(path, "not a regular file");
    file_bytes_ = std::filesystem::file_size(path, ec);
    if (ec) fail(path, "cannot read its size: " + ec.message());
    file_.reset(std::fopen(path.c_str(), "rb"));
    if (!file_) fail(path, std::string("cannot open: ") + std::strerror(errno));
    uint8_t magic[2] = {};
    gzip_ = std::fread(magic, 1, 2, file_.get()) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    std::rewind(file_.get());
    // 15 window bits + 16: a gzip wrapper, whose CRC-32 and length inflate() checks.
    if (gzip_ && inflateInit2(&z_, 15 + 16) != Z_OK) fail(path, "cannot start zlib");
  }
  ~Source() {
    if (gzip_) inflateEnd(&z_);
  }
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;

  bool gzip() const { return gzip_; }
  uint64_t fileBytes() const { return file_bytes_; }

  // Up to n bytes into dst; fewer only at the end of the data.
  size_t read(uint8_t* dst, size_t n) {
    if (!gzip_) {
      const size_t got = std::fread(dst, 1, n, file_.get());
      if (std::ferror(file_.get())) fail(path_, std::string("read error: ") + std::strerror(errno));
      return got;
    }
    size_t got = 0;
    while (got < n && !ended_) {
      if (z_.avail_in == 0) refill();
      z_.next_out = dst + got;
      z_.avail_out = unsigned(std::min<size_t>(n - got, UINT_MAX));
      const int rc = inflate(&z_, Z_NO_FLUSH);
      got = size_t(z_.next_out - dst);
      if (rc == Z_STREAM_END) {
        // gzip allows members back to back; anything else after one fails in the next inflate.
        if (z_.avail_in == 0) refill();
        if (z_.avail_in == 0)
          ended_ = true;
        else
          inflateReset(&z_);
      } else if (rc == Z_BUF_ERROR) {
        // No progress: with room for output, only because the input ran out mid-stream (an
        // empty refill just before).
        fail(path_, z_.avail_in == 0 ? "truncated gzip stream" : "gzip stream stalled");
      } else if (rc == Z_MEM_ERROR) {
        fail(path_, "out of memory while inflating");
      } else if (rc != Z_OK) {
        fail(path_, std::string("corrupt gzip stream (") + (z_.msg ? z_.msg : "zlib error") + ")");
      }
    }
    return got;
  }

 private:
  void refill() {
    z_.next_in = in_;
    z_.avail_in = unsigned(std::fread(in_, 1, sizeof(in_), file_.get()));
    if (std::ferror(file_.get())) fail(path_, std::string("read error: ") + std::strerror(errno));
    eof_ = z_.avail_in == 0;
  }

  std::string path_;
  std::unique_ptr<std::FILE, FileCloser> file_;
  uint64_t file_bytes_ = 0;
  bool gzip_ = false, ended_ = false, eof_ = false;
  z_stream z_{};
  uint8_t in_[1 << 16];
};

struct Idx {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};

using graph::dimsText;  // "(3,28,28)"

// An IDX file of unsigned bytes with `rank` dimensions, every one at least 1.
Idx readIdx(const std::string& path, int rank, const char* kind) {
  auto source = std::make_unique<Source>(path);  // 64 KiB of input buffer: not on the stack
  Source& src = *source;
  const uint32_t want = 0x800u | uint32_t(rank);
  uint8_t head[4 + 4 * 3];
  const size_t header_bytes = 4 + 4 * size_t(rank);
  if (src.read(head, 4) != 4) fail(path, "truncated: shorter than the 4-byte magic");
  const uint32_t magic = bigEndian32(head);
  if (head[0] != 0 || head[1] != 0 || head[2] != 0x08)
    fail(path, "bad magic " + hex32(magic) + ": not an IDX file of unsigned bytes (" + kind +
                   " files have " + hex32(want) + ")");
  if (head[3] != rank)
    fail(path, "bad magic " + hex32(magic) + ": " + std::to_string(head[3]) + " dimensions, " +
                   kind + " files have " + std::to_string(rank) + " (" + hex32(want) + ")");
  if (src.read(head + 4, header_bytes - 4) != header_bytes - 4)
    fail(path, "truncated inside the header of " + std::to_string(header_bytes) + " bytes");
  Idx idx;
  uint64_t payload = 1;
  for (int i = 0; i < rank; ++i) {
    const uint64_t dim = bigEndian32(head + 4 + 4 * i);
    idx.dims.push_back(int64_t(dim));
    // Checked before multiplying: payload <= 2^40 and dim < 2^32 never overflow 64 bits.
    if (dim != 0 && payload > kMaxPayload / dim)
      fail(path, "header sizes " + dimsText(idx.dims) + "... exceed " +
                     std::to_string(kMaxPayload) + " bytes");
    payload *= dim;
  }
  if (payload == 0) fail(path, "header sizes " + dimsText(idx.dims) + " include a 0");
  const std::string promise = "the header " + dimsText(idx.dims) + " promises " +
                              std::to_string(payload) + " bytes after its " +
                              std::to_string(header_bytes);
  if (!src.gzip() && src.fileBytes() != header_bytes + payload)
    fail(path, (src.fileBytes() < header_bytes + payload ? "truncated: " : "trailing data: ") +
                   promise + ", the file has " + std::to_string(src.fileBytes() - header_bytes));
  if (src.gzip() && payload > kMaxDeflateRatio * src.fileBytes())
    fail(path, "truncated: " + promise + ", more than a gzip file of " +
                   std::to_string(src.fileBytes()) + " bytes can hold");
  while (idx.data.size() < payload) {
    const size_t have = idx.data.size();
    const size_t want_now = std::min<uint64_t>(kChunk, payload - have);
    idx.data.resize(have + want_now);
    const size_t got = src.read(idx.data.data() + have, want_now);
    if (got < want_now)
      fail(path, "truncated: " + promise + ", the data has " + std::to_string(have + got));
  }
  uint8_t extra = 0;
  if (src.read(&extra, 1) != 0) fail(path, "trailing data: " + promise + ", the data has more");
  return idx;
}

std::string findFile(const std::string& dir, const std::string& name) {
  std::error_code ec;
  for (const std::string& file : {name, name + ".gz"}) {
    const std::filesystem::path path = std::filesystem::path(dir) / file;
    if (std::filesystem::exists(path, ec)) return path.string();
  }
  throw Error("fashion-mnist: neither " + name + " nor " + name + ".gz in " + dir);
}

}  // namespace

Images readIdxImages(const std::string& path) {
  Idx idx = readIdx(path, 3, "image");
  return {idx.dims[0], idx.dims[1], idx.dims[2], std::move(idx.data)};
}

std::vector<uint8_t> readIdxLabels(const std::string& path, int classes) {
  if (classes < 1 || classes > 256)
    throw Error("idx: " + path + ": classes " + std::to_string(classes) + " must be 1..256");
  Idx idx = readIdx(path, 1, "label");
  for (size_t i = 0; i < idx.data.size(); ++i)
    if (idx.data[i] >= classes)
      fail(path, "label " + std::to_string(idx.data[i]) + " at index " + std::to_string(i) +
                     " is out of range for " + std::to_string(classes) + " classes");
  return std::move(idx.data);
}

ImageDataset loadFashionMnist(const std::string& dir, int classes) {
  ImageDataset d;
  const std::string train_images = findFile(dir, "train-images-idx3-ubyte");
  const std::string train_labels = findFile(dir, "train-labels-idx1-ubyte");
  const std::string test_images = findFile(dir, "t10k-images-idx3-ubyte");
  const std::string test_labels = findFile(dir, "t10k-labels-idx1-ubyte");
  d.train_images = readIdxImages(train_images);
  d.train_labels = readIdxLabels(train_labels, classes);
  d.test_images = readIdxImages(test_images);
  d.test_labels = readIdxLabels(test_labels, classes);
  auto checkCounts = [](const std::string& images, int64_t count, const std::string& labels,
                        size_t labels_count) {
    if (count != int64_t(labels_count))
      throw Error("fashion-mnist: " + images + " holds " + std::to_string(count) + " images but " +
                  labels + " holds " + std::to_string(labels_count) + " labels");
  };
  checkCounts(train_images, d.train_images.count, train_labels, d.train_labels.size());
  checkCounts(test_images, d.test_images.count, test_labels, d.test_labels.size());
  if (d.train_images.rows != d.test_images.rows || d.train_images.cols != d.test_images.cols)
    throw Error("fashion-mnist: " + train_images + " has " + std::to_string(d.train_images.rows) +
                "x" + std::to_string(d.train_images.cols) + " images but " + test_images + " has " +
                std::to_string(d.test_images.rows) + "x" + std::to_string(d.test_images.cols));
  return d;
}

ImageDataset loadImageSet(const std::string& dir, int64_t size, int64_t limit, int classes) {
  ImageDataset d = loadFashionMnist(dir, classes);
  if (d.train_images.rows != size || d.train_images.cols != size)
    throw Error(dir + ": images are " + std::to_string(d.train_images.rows) + "x" +
                std::to_string(d.train_images.cols) + ", this model reads " + std::to_string(size) +
                "x" + std::to_string(size));
  if (limit > 0 && limit < d.train_images.count) {
    d.train_images.count = limit;
    d.train_images.pixels.resize(size_t(limit * d.train_images.imageBytes()));
    d.train_labels.resize(size_t(limit));
  }
  return d;
}

}  // namespace vkgrad::data
