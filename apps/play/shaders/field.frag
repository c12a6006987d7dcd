#version 450
// The model's decision regions: each pixel mixes the class colours by the predicted class
// probabilities, softmax of the logits the engine's inference graph wrote (read in place from
// the engine's buffer), interpolated bilinearly between the grid's points. The loss curve
// sits in the bottom-right corner.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(set = 0, binding = 0) readonly buffer Logits {
  float logits[];  // (grid.y, grid.x, kClasses) from pc.first
};
layout(set = 0, binding = 1) readonly buffer Curve {
  uint count;        // values in use
  float top;         // the value drawn at the panel's top edge
  float values[];    // the data set's loss after each inference, oldest first
} curve;

layout(location = 0) out vec4 colour;

vec3 probabilities(ivec2 point) {
  // Pixels within half a cell of the border have no point beyond them: clamp to the edge.
  point = clamp(point, ivec2(0), ivec2(pc.grid) - 1);
  const uint at = pc.first + (uint(point.y) * pc.grid.x + uint(point.x)) * kClasses;
  const vec3 z = vec3(logits[at], logits[at + 1], logits[at + 2]);
  const vec3 e = exp(z - max(z.x, max(z.y, z.z)));  // shifted: no overflow for large logits
  return e / (e.x + e.y + e.z);
}

float curveAt(float t) {  // the curve at fractional index t, linearly interpolated
  const uint i = min(uint(t), curve.count - 1), j = min(i + 1, curve.count - 1);
  return mix(curve.values[i], curve.values[j], fract(t));
}

// The loss panel: a dark box with the curve in white. Returns the colour blended over c.
vec3 lossPanel(vec3 c) {
  const vec2 lo = pc.viewport * vec2(0.68, 0.78), hi = pc.viewport - 6.0;
  const vec2 p = gl_FragCoord.xy;
  if (any(lessThan(p, lo)) || any(greaterThan(p, hi)) || curve.count < 2) return c;
  c = mix(c, vec3(0.08), 0.7);
  // The curve's span over this pixel column, so a steep stretch is a solid line, not dots.
  const float scale = float(curve.count - 1) / (hi.x - lo.x);
  const float a = curveAt(max(p.x - 0.5 - lo.x, 0.0) * scale);
  const float b = curveAt(min(p.x + 0.5 - lo.x, hi.x - lo.x) * scale);
  const float y0 = hi.y - min(a, b) / curve.top * (hi.y - lo.y);
  const float y1 = hi.y - max(a, b) / curve.top * (hi.y - lo.y);
  const float d = max(max(y1 - p.y, p.y - y0), 0.0);  // pixels from the span
  return mix(c, vec3(1.0), clamp(1.5 - d, 0.0, 1.0));
}

void main() {
  const vec2 g = gl_FragCoord.xy / pc.viewport * vec2(pc.grid) - 0.5;  // grid coordinates
  const ivec2 i = ivec2(floor(g));
  const vec2 f = g - floor(g);
  const vec3 p = mix(mix(probabilities(i), probabilities(i + ivec2(1, 0)), f.x),
                     mix(probabilities(i + ivec2(0, 1)), probabilities(i + ivec2(1, 1)), f.x), f.y);
  vec3 c = p.x * kRegion[0] + p.y * kRegion[1] + p.z * kRegion[2];
  colour = vec4(lossPanel(c), 1.0);
}
