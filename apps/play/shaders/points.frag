#version 450
// A data point: its class colour with a dark rim, edges blended over the regions, and not
// over the loss panel.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(location = 0) in vec2 offset;
layout(location = 1) flat in uint label;
layout(location = 0) out vec4 colour;

void main() {
  const float r = length(offset) * pc.radius;  // pixels from the centre
  const float alpha = clamp(pc.radius + 0.5 - r, 0.0, 1.0);
  if (alpha <= 0.0 || inPanel(panelPixel(gl_FragCoord))) discard;
  const vec3 fill = kPoint[min(label, uint(kClasses - 1))];
  colour = vec4(mix(fill, vec3(0.1), clamp(r - (pc.radius - 1.8), 0.0, 1.0)), alpha);
}
