#version 450
// The data set as discs: one instance per point, two triangles per disc.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(set = 0, binding = 2) readonly buffer Points {
  vec4 points[];  // x, y, class, unused
};

layout(location = 0) out vec2 offset;  // from the centre, in radii
layout(location = 1) flat out uint label;

void main() {
  const vec2 corners[6] = vec2[](vec2(-1, -1), vec2(1, -1), vec2(1, 1),
                                 vec2(-1, -1), vec2(1, 1), vec2(-1, 1));
  const vec4 point = points[gl_InstanceIndex];
  // The plane's y grows upwards, Vulkan's clip space y downwards.
  const vec2 ndc = vec2((point.x - pc.plane.x) / (pc.plane.z - pc.plane.x),
                        (pc.plane.w - point.y) / (pc.plane.w - pc.plane.y)) * 2.0 - 1.0;
  // One pixel beyond the radius, for the anti-aliased rim.
  const vec2 corner = corners[gl_VertexIndex] * (pc.radius + 1.0) / pc.radius;
  offset = corner;
  label = uint(point.z);
  gl_Position = vec4(ndc + corner * pc.radius * 2.0 / pc.viewport, 0.0, 1.0);
}
