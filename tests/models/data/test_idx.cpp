// The IDX reader (models/vkgrad/data/idx.h): small files written here, plain and gzip, round-trip;
// every kind of damage is an Error naming the file and the fault; and the real Fashion-MNIST
// files of the Debian package read as what they are.
#include "vkgrad/data/idx.h"

#include <zlib.h>
#include <algorithm>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/random.h"
#include "vkgrad/core/error.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

constexpr uint32_t kImagesMagic = 0x00000803, kLabelsMagic = 0x00000801;

Bytes idxBytes(uint32_t magic, const std::vector<uint32_t>& dims, const Bytes& data) {
  Bytes out;
  auto put = [&](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(uint8_t(v >> shift));
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

void writeFile(const fs::path& path, const Bytes& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  ASSERT_TRUE(f.good()) << path;
}

void writeGzip(const fs::path& path, const Bytes& bytes) {
  gzFile f = gzopen(path.string().c_str(), "wb");  // a narrow name on Windows too
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(gzwrite(f, bytes.data(), unsigned(bytes.size())), int(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

Bytes readFile(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

// f() must throw vkgrad::Error whose message names path and contains `what`.
void expectError(const std::function<void()>& f, const fs::path& path, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << "no error for " << path << ", expected: " << what;
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(path.string()), std::string::npos) << message;
    EXPECT_NE(message.find(what), std::string::npos) << message;
  }
}

class IdxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("vkgrad-idx-" + std::to_string(rng_.seed()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Bytes randomBytes(size_t n, uint32_t below = 256) {
    const auto words = rng_.below(n, below);
    return Bytes(words.begin(), words.end());
  }
  // A string, as the readers take: std::filesystem::path converts to none on Windows.
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  Rng rng_;
  fs::path dir_;
};

TEST_F(IdxTest, ImagesAndLabelsRoundTripPlainAndGzip) {
  SCOPED_TRACE(rng_.describe());
  const uint32_t count = 7, rows = 5, cols = 3;
  const Bytes pixels = randomBytes(count * rows * cols);
  const Bytes labels = randomBytes(count, 10);
  for (bool gzip : {false, true}) {
    SCOPED_TRACE(gzip ? "gzip" : "plain");
    const std::string images_path = path(gzip ? "images.gz" : "images");
    const std::string labels_path = path(gzip ? "labels.gz" : "labels");
    auto write = gzip ? writeGzip : writeFile;
    write(images_path, idxBytes(kImagesMagic, {count, rows, cols}, pixels));
    write(labels_path, idxBytes(kLabelsMagic, {count}, labels));
    const data::Images images = data::readIdxImages(images_path);
    EXPECT_EQ(images.count, count);
    EXPECT_EQ(images.rows, rows);
    EXPECT_EQ(images.cols, cols);
    EXPECT_EQ(images.imageBytes(), rows * cols);
    EXPECT_EQ(images.pixels, pixels);
    EXPECT_EQ(data::readIdxLabels(labels_path), labels);
  }
}

TEST_F(IdxTest, GzipWithSeveralMembersReadsAsOneStream) {
  SCOPED_TRACE(rng_.describe());
  const Bytes labels = randomBytes(301, 10);
  const Bytes file = idxBytes(kLabelsMagic, {301}, labels);
  const Bytes first(file.begin(), file.begin() + 100), second(file.begin() + 100, file.end());
  writeGzip(path("a.gz"), first);
  writeGzip(path("b.gz"), second);
  Bytes joined = readFile(path("a.gz"));
  const Bytes b = readFile(path("b.gz"));
  joined.insert(joined.end(), b.begin(), b.end());
  writeFile(path("labels.gz"), joined);
  EXPECT_EQ(data::readIdxLabels(path("labels.gz")), labels);
}

TEST_F(IdxTest, TruncatedFilesAreErrors) {
  SCOPED_TRACE(rng_.describe());
  const Bytes good = idxBytes(kImagesMagic, {5, 4, 3}, randomBytes(60));
  const Bytes short_data(good.begin(), good.end() - 1);
  writeFile(path("plain"), short_data);
  expectError([&] { data::readIdxImages(path("plain")); }, path("plain"),
              "truncated: the header (5,4,3) promises 60 bytes after its 16, the file has 59");
  // A well-formed gzip stream holding one byte too few.
  writeGzip(path("short.gz"), short_data);
  expectError([&] { data::readIdxImages(path("short.gz")); }, path("short.gz"),
              "truncated: the header (5,4,3) promises 60 bytes after its 16, the data has 59");
  // A gzip file cut short: the deflate stream itself ends early.
  writeGzip(path("full.gz"), good);
  const Bytes gz = readFile(path("full.gz"));
  writeFile(path("cut.gz"), Bytes(gz.begin(), gz.begin() + gz.size() / 2));
  expectError([&] { data::readIdxImages(path("cut.gz")); }, path("cut.gz"),
              "truncated gzip stream");
  // Inside the header, and an empty file.
  writeFile(path("header"), Bytes(good.begin(), good.begin() + 10));
  expectError([&] { data::readIdxImages(path("header")); }, path("header"),
              "truncated inside the header of 16 bytes");
  writeFile(path("empty"), {});
  expectError([&] { data::readIdxLabels(path("empty")); }, path("empty"),
              "shorter than the 4-byte magic");
}

TEST_F(IdxTest, TrailingDataIsAnError) {
  SCOPED_TRACE(rng_.describe());
  Bytes long_data = idxBytes(kLabelsMagic, {9}, randomBytes(9, 10));
  long_data.push_back(3);
  writeFile(path("plain"), long_data);
  expectError([&] { data::readIdxLabels(path("plain")); }, path("plain"),
              "trailing data: the header (9) promises 9 bytes after its 8, the file has 10");
  writeGzip(path("long.gz"), long_data);
  expectError([&] { data::readIdxLabels(path("long.gz")); }, path("long.gz"),
              "trailing data: the header (9) promises 9 bytes after its 8, the data has more");
  // Bytes after the gzip stream that are not another gzip member.
  writeGzip(path("good.gz"), Bytes(long_data.begin(), long_data.end() - 1));
  Bytes garbage = readFile(path("good.gz"));
  garbage.insert(garbage.end(), {'j', 'u', 'n', 'k'});
  writeFile(path("garbage.gz"), garbage);
  expectError([&] { data::readIdxLabels(path("garbage.gz")); }, path("garbage.gz"),
              "corrupt gzip stream");
}

TEST_F(IdxTest, BadMagicAndWrongDimensionsAreErrors) {
  SCOPED_TRACE(rng_.describe());
  writeFile(path("floats"), idxBytes(0x00000D03, {2, 2, 2}, randomBytes(32)));
  expectError([&] { data::readIdxImages(path("floats")); }, path("floats"),
              "bad magic 0x00000d03: not an IDX file of unsigned bytes (image files have "
              "0x00000803)");
  writeFile(path("text"), Bytes{'h', 'e', 'l', 'l', 'o', '\n'});
  expectError([&] { data::readIdxLabels(path("text")); }, path("text"), "bad magic 0x68656c6c");
  // A labels file read as images and the other way round.
  writeFile(path("labels"), idxBytes(kLabelsMagic, {4}, randomBytes(4, 10)));
  expectError([&] { data::readIdxImages(path("labels")); }, path("labels"),
              "bad magic 0x00000801: 1 dimensions, image files have 3 (0x00000803)");
  writeFile(path("images"), idxBytes(kImagesMagic, {1, 2, 2}, randomBytes(4)));
  expectError([&] { data::readIdxLabels(path("images")); }, path("images"),
              "bad magic 0x00000803: 3 dimensions, label files have 1 (0x00000801)");
  writeFile(path("zero"), idxBytes(kImagesMagic, {3, 0, 28}, {}));
  expectError([&] { data::readIdxImages(path("zero")); }, path("zero"),
              "header sizes (3,0,28) include a 0");
}

TEST_F(IdxTest, LabelsOutOfRangeAreErrors) {
  SCOPED_TRACE(rng_.describe());
  Bytes labels = randomBytes(11, 10);
  const uint32_t at = rng_.below(11);
  labels[at] = 10;
  writeFile(path("labels"), idxBytes(kLabelsMagic, {11}, labels));
  expectError([&] { data::readIdxLabels(path("labels")); }, path("labels"),
              "label 10 at index " + std::to_string(at) + " is out of range for 10 classes");
  EXPECT_EQ(data::readIdxLabels(path("labels"), 11), labels);  // 11 classes take it
  expectError([&] { data::readIdxLabels(path("labels"), 0); }, path("labels"),
              "classes 0 must be 1..256");
}

TEST_F(IdxTest, CorruptGzipIsAnError) {
  SCOPED_TRACE(rng_.describe());
  writeGzip(path("good.gz"), idxBytes(kImagesMagic, {3, 7, 5}, randomBytes(105)));
  const Bytes gz = readFile(path("good.gz"));
  // The trailer is the CRC-32 of the data, then its length: a flipped CRC bit.
  Bytes bad_crc = gz;
  bad_crc[gz.size() - 8] ^= 0x01;
  writeFile(path("crc.gz"), bad_crc);
  expectError([&] { data::readIdxImages(path("crc.gz")); }, path("crc.gz"),
              "corrupt gzip stream (incorrect data check)");
  // A header whose compression method is not deflate.
  Bytes bad_method = gz;
  bad_method[2] = 7;
  writeFile(path("method.gz"), bad_method);
  expectError([&] { data::readIdxImages(path("method.gz")); }, path("method.gz"),
              "corrupt gzip stream (unknown compression method)");
  // Noise after a valid gzip header: whatever inflate makes of it, an error.
  Bytes noise(gz.begin(), gz.begin() + 10);
  const Bytes random = randomBytes(200);
  noise.insert(noise.end(), random.begin(), random.end());
  writeFile(path("noise.gz"), noise);
  expectError([&] { data::readIdxImages(path("noise.gz")); }, path("noise.gz"), "");
}

TEST_F(IdxTest, AbsurdHeadersFailBeforeAllocating) {
  // 2^31 images of 28x28 would be 1.7 TB; the file has 10 bytes of data. A reader that
  // allocated first would die here instead of throwing.
  const Bytes data(10, 0x55);
  writeFile(path("huge"), idxBytes(kImagesMagic, {1u << 31, 28, 28}, data));
  expectError([&] { data::readIdxImages(path("huge")); }, path("huge"), "exceed");
  writeFile(path("big"), idxBytes(kImagesMagic, {1u << 20, 28, 28}, data));
  expectError([&] { data::readIdxImages(path("big")); }, path("big"),
              "promises 822083584 bytes after its 16, the file has 10");
  writeGzip(path("big.gz"), idxBytes(kImagesMagic, {1u << 20, 28, 28}, data));
  expectError([&] { data::readIdxImages(path("big.gz")); }, path("big.gz"),
              "more than a gzip file of");
  writeFile(path("max"), idxBytes(kImagesMagic, {0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, data));
  expectError([&] { data::readIdxImages(path("max")); }, path("max"), "exceed");
}

TEST_F(IdxTest, MissingFilesAreErrors) {
  expectError([&] { data::readIdxImages(path("none")); }, path("none"), "no such file");
  expectError([&] { data::readIdxLabels(dir_.string()); }, dir_, "not a regular file");
  expectError([&] { data::loadFashionMnist(dir_.string()); }, dir_,
              "neither train-images-idx3-ubyte nor train-images-idx3-ubyte.gz");
}

class FashionMnistDirTest : public IdxTest {
 protected:
  // The four files in dir_, the train files plain and the test files gzip, with n_train and
  // n_test images of 3x5 and the given label counts.
  void writeSplits(uint32_t n_train, uint32_t train_labels, uint32_t n_test, uint32_t test_labels,
                   uint32_t test_cols = 5) {
    writeFile(path("train-images-idx3-ubyte"),
              idxBytes(kImagesMagic, {n_train, 3, 5}, randomBytes(n_train * 15)));
    writeFile(path("train-labels-idx1-ubyte"),
              idxBytes(kLabelsMagic, {train_labels}, randomBytes(train_labels, 10)));
    writeGzip(path("t10k-images-idx3-ubyte.gz"),
              idxBytes(kImagesMagic, {n_test, 3, test_cols}, randomBytes(n_test * 3 * test_cols)));
    writeGzip(path("t10k-labels-idx1-ubyte.gz"),
              idxBytes(kLabelsMagic, {test_labels}, randomBytes(test_labels, 10)));
  }
};

TEST_F(FashionMnistDirTest, LoadsPlainAndGzipFiles) {
  SCOPED_TRACE(rng_.describe());
  writeSplits(13, 13, 5, 5);
  const data::ImageDataset d = data::loadFashionMnist(dir_.string());
  EXPECT_EQ(d.train_images.count, 13);
  EXPECT_EQ(d.train_labels.size(), 13u);
  EXPECT_EQ(d.test_images.count, 5);
  EXPECT_EQ(d.test_labels.size(), 5u);
  EXPECT_EQ(d.test_images.pixels.size(), 5u * 15);
}

TEST_F(FashionMnistDirTest, CountAndSizeMismatchesAreErrors) {
  SCOPED_TRACE(rng_.describe());
  writeSplits(13, 12, 5, 5);
  expectError([&] { data::loadFashionMnist(dir_.string()); }, path("train-labels-idx1-ubyte"),
              "holds 13 images but");
  writeSplits(13, 13, 5, 6);
  expectError([&] { data::loadFashionMnist(dir_.string()); }, path("t10k-labels-idx1-ubyte.gz"),
              "holds 5 images but");
  writeSplits(13, 13, 5, 5, 4);
  expectError([&] { data::loadFashionMnist(dir_.string()); }, path("t10k-images-idx3-ubyte.gz"),
              "has 3x5 images but");
  // One bad file fails the whole load: no dataset in part.
  writeSplits(13, 13, 5, 5);
  fs::remove(path("t10k-labels-idx1-ubyte.gz"));
  expectError([&] { data::loadFashionMnist(dir_.string()); }, dir_,
              "neither t10k-labels-idx1-ubyte nor t10k-labels-idx1-ubyte.gz");
}

// The Debian package dataset-fashion-mnist (scripts/setup.sh installs it): 60000 train and
// 10000 test images of 28x28, ten classes, each exactly 6000 and 1000 times.
TEST(FashionMnistTest, ReadsTheDebianPackage) {
  const std::string dir = data::kFashionMnistDir;
  const data::Images test = data::readIdxImages(dir + "/t10k-images-idx3-ubyte.gz");
  EXPECT_EQ(test.count, 10000);
  EXPECT_EQ(test.rows, 28);
  EXPECT_EQ(test.cols, 28);
  EXPECT_EQ(test.pixels.size(), 10000u * 784);
  const data::ImageDataset d = data::loadFashionMnist();
  EXPECT_EQ(d.test_images.pixels, test.pixels);
  EXPECT_EQ(d.train_images.count, 60000);
  std::vector<int> train_counts(10), test_counts(10);
  for (uint8_t label : d.train_labels) ++train_counts.at(label);
  for (uint8_t label : d.test_labels) ++test_counts.at(label);
  EXPECT_EQ(train_counts, std::vector<int>(10, 6000));
  EXPECT_EQ(test_counts, std::vector<int>(10, 1000));
  // Real images, not a blank file: most pixels are background, many are not.
  size_t lit = 0;
  for (uint8_t p : test.pixels) lit += p != 0;
  EXPECT_GT(lit, test.pixels.size() / 5);
  EXPECT_LT(lit, test.pixels.size() * 4 / 5);
}

// What the apps load: the training split cut to --limit, the images' size checked.
TEST(FashionMnistTest, ImageSetsAreCutToTheLimitAndSizeChecked) {
  const data::ImageDataset all = data::loadFashionMnist();
  const data::ImageDataset cut = data::loadImageSet(data::kFashionMnistDir, 28, 1234);
  EXPECT_EQ(cut.train_images.count, 1234);
  EXPECT_EQ(cut.train_labels.size(), 1234u);
  ASSERT_EQ(cut.train_images.pixels.size(), 1234u * 784);
  EXPECT_TRUE(std::equal(cut.train_images.pixels.begin(), cut.train_images.pixels.end(),
                         all.train_images.pixels.begin()));
  EXPECT_EQ(cut.test_images.count, 10000);
  EXPECT_EQ(data::loadImageSet(data::kFashionMnistDir, 28, 0).train_images.count, 60000);
  EXPECT_EQ(data::loadImageSet(data::kFashionMnistDir, 28, 99999).train_images.count, 60000);
  try {
    data::loadImageSet(data::kFashionMnistDir, 32, 0);
    ADD_FAILURE() << "28x28 images accepted for a 32x32 model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("images are 28x28, this model reads 32x32"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace vkgrad::test
