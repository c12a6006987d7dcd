// Shared by pad/forward.comp and pad/backward.comp: the push constants and the reflection of
// an index about the edges of its axis. x is seen as (B,H,W), y as (B,Ho,Wo) with
// Ho = top + H + bottom and Wo = left + W + right.

layout(push_constant) uniform Push {
  uint count;      // elements of the output (forward: y) or of dx (backward)
  uint h, w;       // x's last two axes
  uint ho, wo;     // y's
  uint top, left;  // elements added before each axis (bottom, right: ho - h - top, ...)
  float value;     // Constant's fill
  uint x_skip, y_skip;  // first elements inside the bindings (ops/binding.h)
} p;

// Reflect: i in [-n + 1, 2n - 2] (the host keeps each amount below n) to [0, n): mirrored
// about 0 and about n - 1, the edges not repeated.
int reflectIndex(int i, int n) {
  if (i < 0) return -i;
  if (i >= n) return 2 * (n - 1) - i;
  return i;
}
