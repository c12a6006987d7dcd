#version 450
// Stage 3 of gradient clipping: g *= norm[1], the scale optimizer/norm computed on the device.
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) buffer Grad { float grad[]; };           // (n)
layout(set = 0, binding = 1) readonly buffer Norm { float norm[]; };  // {norm, scale}
layout(push_constant) uniform Push { uint n; } p;

void main() {
  const float scale = norm[1];
  if (scale == 1.0) return;  // below the threshold: leave the gradient untouched
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x)
    grad[i] *= scale;
}
