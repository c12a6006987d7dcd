#version 450
// Random shift and mirror of each image (B,H,W), drawn on the device from the Philox stream
// (engine/vkgrad/ops/augment.h has the contract). Image b's draws are block b of the stream: word 0
// the horizontal shift dx, word 1 the vertical dy, word 2's top bit the mirror. Mirror first,
// then shift: out[y][x] = in[sy][flip ? W-1-sx : sx] at (sy, sx) = (y+dy, x+dx), `fill`
// where (sy, sx) falls outside. One invocation per output pixel, grid-stride; an invocation
// draws the block again only when its image changes (10 Philox rounds per pixel would cost
// more than the copy). images and out in any float format (common/storage.glsl): a value
// (or the fill) is rounded once, as out stores it.
#extension GL_GOOGLE_include_directive : require
#include "common/storage.glsl"
#include "common/philox.glsl"
layout(local_size_x_id = 0) in;

FLOATS(0, images, readonly)    // (B,H,W)
FLOATS(1, augmented, writeonly)  // (B,H,W)
layout(set = 0, binding = 2) readonly buffer Rng { uint rng[]; };  // {seed_lo, seed_hi, offset_lo, offset_hi}
layout(push_constant) uniform Push {
  uint n;          // B*H*W
  uint height, width;
  uint pad;        // shifts in [-pad, pad]
  uint flip;       // 0: never mirror; else with probability 1/2
  uint stream;
  float fill;      // the value shifted in from outside the image
  uint images_skip, out_skip;  // first elements inside the bindings (ops/binding.h)
} p;

// Uniform in [-pad, pad] by multiply-shift: the high word of bits * (2*pad + 1). Its bias,
// below (2*pad + 1) / 2^32, is far below anything a test or a model could see.
int shift(uint bits) {
  uint hi, lo;
  umulExtended(bits, 2u * p.pad + 1u, hi, lo);
  return int(hi) - int(p.pad);
}

void main() {
  const uvec4 state = uvec4(rng[0], rng[1], rng[2], rng[3]);
  const uint per_image = p.height * p.width;
  uint drawn = 0xFFFFFFFFu;  // no image has this index: B*H*W < 2^31
  int dx = 0, dy = 0;
  bool mirror = false;
  // The loop condition is the bounds guard for the grid rounded up to whole workgroups.
  for (uint e = gl_GlobalInvocationID.x; e < p.n; e += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint b = e / per_image, r = e - b * per_image;
    if (b != drawn) {
      const uvec4 bits = philoxBlock(state, p.stream, b);
      dx = shift(bits.x);
      dy = shift(bits.y);
      mirror = p.flip != 0u && (bits.z >> 31) != 0u;
      drawn = b;
    }
    const uint y = r / p.width, x = r - y * p.width;
    const int sy = int(y) + dy, sx = int(x) + dx;
    float v = p.fill;
    // Outside the image: the zero-padded (fill-padded) border the crop reaches into.
    if (sy >= 0 && sy < int(p.height) && sx >= 0 && sx < int(p.width)) {
      const uint cx = mirror ? p.width - 1u - uint(sx) : uint(sx);
      v = LOAD(images, p.images_skip + b * per_image + uint(sy) * p.width + cx);
    }
    STORE(augmented, p.out_skip + e, v);
  }
}
