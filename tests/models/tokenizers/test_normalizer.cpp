// NFC normalization (Qwen2's normalizer) through ICU: canonical composition, text already in
// NFC and ASCII unchanged, bytes that are not UTF-8 passed through between normalized stretches.
#include <string>

#include <gtest/gtest.h>

#include "vkgrad/tokenizers/normalizer.h"

namespace vkgrad::test {
namespace {

using tokenizers::Normalization;
using tokenizers::normalize;

TEST(Normalizer, NfcComposes) {
  // e + COMBINING ACUTE ACCENT -> é; Hangul jamo ᄀ + ᅡ -> 가; Å as A + ring -> Å.
  EXPECT_EQ(normalize(Normalization::Nfc, "cafe\xcc\x81"), "caf\xc3\xa9");
  EXPECT_EQ(normalize(Normalization::Nfc, "\xe1\x84\x80\xe1\x85\xa1"), "\xea\xb0\x80");
  EXPECT_EQ(normalize(Normalization::Nfc, "A\xcc\x8a"), "\xc3\x85");
  // The ANGSTROM SIGN (U+212B) is canonically Å (U+00C5).
  EXPECT_EQ(normalize(Normalization::Nfc, "\xe2\x84\xab"), "\xc3\x85");
  // Already composed, ASCII, and no normalization at all: unchanged.
  EXPECT_EQ(normalize(Normalization::Nfc, "naïve 東京"), "naïve 東京");
  EXPECT_EQ(normalize(Normalization::Nfc, "plain ascii"), "plain ascii");
  EXPECT_EQ(normalize(Normalization::None, "cafe\xcc\x81"), "cafe\xcc\x81");
}

TEST(Normalizer, InvalidBytesPassThrough) {
  // Each valid stretch is normalized on its own; the invalid bytes stay where they were.
  EXPECT_EQ(normalize(Normalization::Nfc,
                      "e\xcc\x81\xff"
                      "e\xcc\x81"),
            "\xc3\xa9\xff\xc3\xa9");
  EXPECT_EQ(normalize(Normalization::Nfc, "\xc3"), "\xc3");
  EXPECT_EQ(normalize(Normalization::Nfc, "x\xed\xa0\x80y\xcc\x81"), "x\xed\xa0\x80\xc3\xbd");
}

}  // namespace
}  // namespace vkgrad::test
