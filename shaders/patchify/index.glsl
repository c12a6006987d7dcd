// Shared by patchify/forward.comp and patchify/backward.comp: the push constants and where
// element e of patches (B,P,patch*patch) sits in images (B,H,W). Patches run row-major over
// the (H/patch, W/patch) grid, pixels row-major within a patch; the map is a bijection, so
// each direction touches every element exactly once.

layout(push_constant) uniform Push {
  uint n;           // B*H*W elements, both sides
  uint side;        // patch side (`patch` is a GLSL keyword)
  uint grid_w;      // W / patch: patches per grid row
  uint per_image;   // H*W = P * patch*patch
  uint width;       // W
  uint images_skip, patches_skip;  // first elements inside the bindings (ops/binding.h)
} p;

uint imageIndex(uint e) {
  const uint pixels = p.side * p.side;
  const uint r = e % p.per_image;  // inside image e / per_image, which starts at e - r
  const uint q = r / pixels, k = r - q * pixels;  // patch q of the image, pixel k of the patch
  const uint py = q / p.grid_w, px = q - py * p.grid_w;
  const uint ky = k / p.side, kx = k - ky * p.side;
  return e - r + (py * p.side + ky) * p.width + px * p.side + kx;
}
