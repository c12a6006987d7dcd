// Bytes to floats: out[i] = float(byte i) * scale + shift, for u8 data (image pixels) kept on
// the device 4 bytes per u32 word, little-endian: byte i is bits 8 * (i % 4) of word i / 4,
// the layout a host memcpy of the bytes into words gives. Data stays u8 until a batch is
// used: Fashion-MNIST's 60000 train images are 47 MB as bytes and would be 188 MB as f32,
// above lavapipe's 128 MiB maxStorageBufferRange. scale 1/255, shift 0 maps pixels to [0,1].
#pragma once

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// The shape rule, Vulkan-free (the graph builder uses it too): words (W0, ...) u32 and out
// with 4x the elements and the same leading dim W0 (the rows: images, a batch), at most 2^31
// elements. Returns out. Throws ShapeError
// "bytesToFloat: words (3,5), out (3,19): out must hold 4 x 15 = 60 elements".
Shape bytesToFloatShape(const Shape& words, DType words_dtype, const Shape& out);

// words: (..., n/4) u32; out: (..., n) f32, f16 or bf16 (the rule above), out = bytes * scale
// + shift computed in f32 and rounded once, as it is stored. Any view offsets that are
// multiples of the element size; the views must not overlap.
void bytesToFloat(vk::Recorder& rec, const TensorView& words, const TensorView& out, float scale,
                  float shift = 0.0f);

}  // namespace vkgrad::ops
