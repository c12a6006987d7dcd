#version 450
// Adds p.steps to the 64-bit offset of an rng state buffer, on the device, so a recorded
// command buffer draws fresh randomness each time it is replayed. One invocation.
layout(local_size_x = 1) in;

layout(set = 0, binding = 0) buffer Rng { uint rng[]; };  // {seed_lo, seed_hi, offset_lo, offset_hi}
layout(push_constant) uniform Push { uint steps; } p;

void main() {
  uint carry;
  rng[2] = uaddCarry(rng[2], p.steps, carry);
  rng[3] += carry;
}
