#version 450
// The model's decision regions: each pixel mixes the class colours by the predicted class
// probabilities, softmax of the logits the engine's inference graph wrote (read in place from
// the engine's buffer), interpolated bilinearly between the grid's points. The loss panel, a
// small plot the app draws on the CPU (renderer.cpp), sits in the bottom-right corner.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(set = 0, binding = 0) readonly buffer Logits {
  float logits[];  // (grid.y, grid.x, kClasses) from pc.first
};

layout(location = 0) out vec4 colour;

vec3 probabilities(ivec2 point) {
  // Pixels within half a cell of the border have no point beyond them: clamp to the edge.
  point = clamp(point, ivec2(0), ivec2(pc.grid) - 1);
  const uint at = pc.first + (uint(point.y) * pc.grid.x + uint(point.x)) * kClasses;
  const vec3 z = vec3(logits[at], logits[at + 1], logits[at + 2]);
  const vec3 e = exp(z - max(z.x, max(z.y, z.z)));  // shifted: no overflow for large logits
  return e / (e.x + e.y + e.z);
}

// The loss panel's pixel where it covers this one (its outermost pixels a dark border), else c.
vec3 overPanel(vec3 c) {
  const ivec2 p = panelPixel(gl_FragCoord);
  if (!inPanel(p)) return c;
  if (any(equal(p, ivec2(0))) || any(equal(p, panel.size - 1))) return vec3(0.3);
  const uint v = panel.pixels[p.y * panel.size.x + p.x];
  return vec3((v >> 16) & 0xffu, (v >> 8) & 0xffu, v & 0xffu) / 255.0;
}

void main() {
  const vec2 g = gl_FragCoord.xy / pc.viewport * vec2(pc.grid) - 0.5;  // grid coordinates
  const ivec2 i = ivec2(floor(g));
  const vec2 f = g - floor(g);
  const vec3 p = mix(mix(probabilities(i), probabilities(i + ivec2(1, 0)), f.x),
                     mix(probabilities(i + ivec2(0, 1)), probabilities(i + ivec2(1, 1)), f.x), f.y);
  vec3 c = p.x * kRegion[0] + p.y * kRegion[1] + p.z * kRegion[2];
  colour = vec4(overPanel(c), 1.0);
}
