#version 450
// Stage 2 of the global gradient norm, one workgroup: adds all partial sums of squares in
// a fixed order and writes {norm, clip scale} for optimizer/scale to read on the device:
//   norm[0] = sqrt(sum),  norm[1] = min(1, max_norm / (norm[0] + 1e-6))
layout(local_size_x_id = 0) in;  // a power of two (the tree halves it)

layout(set = 0, binding = 0) readonly buffer Partial { float partial[]; };
layout(set = 0, binding = 1) writeonly buffer Norm { float norm[]; };  // (2)
layout(push_constant) uniform Push { uint count; float max_norm; } p;

shared float sums[gl_WorkGroupSize.x];

void main() {
  const uint t = gl_LocalInvocationID.x;
  float s = 0.0;
  for (uint i = t; i < p.count; i += gl_WorkGroupSize.x) s += partial[i];
  sums[t] = s;
  for (uint half_size = gl_WorkGroupSize.x / 2; half_size > 0; half_size /= 2) {
    barrier();  // the previous level's sums are in shared memory
    if (t < half_size) sums[t] += sums[t + half_size];
  }
  if (t == 0) {
    const float total = sqrt(sums[0]);
    norm[0] = total;
    norm[1] = min(1.0, p.max_norm / (total + 1e-6));
  }
}
