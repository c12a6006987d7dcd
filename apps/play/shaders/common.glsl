// What both of vkgrad-play's pipelines share: the push constants (renderer.cpp's Push, in
// the same order), the loss panel (renderer.cpp's PanelHeader and pixels) and the class
// colours.
#ifndef PLAY_COMMON_GLSL
#define PLAY_COMMON_GLSL

layout(push_constant) uniform Push {
  vec4 plane;     // the plane's left, bottom, right, top edges (as classifier.h's Plane)
  vec2 viewport;  // pixels
  uvec2 grid;     // inference points across and down
  uint first;     // the logits' first float in binding 0 (its range starts aligned below)
  float radius;   // of a data point, pixels
} pc;

// The loss panel, a small plot the app draws on the CPU (renderer.cpp's setCurve), covering
// the bottom-right corner: field.frag shows it, points.frag keeps the points off it.
layout(set = 0, binding = 1) readonly buffer Panel {
  ivec2 origin;   // the panel's top-left pixel in the window
  ivec2 size;     // pixels; (0, 0): no panel
  uint pixels[];  // size.y rows of size.x, top first, each 0x00RRGGBB (cairo's RGB24)
} panel;

// A fragment's pixel in the panel, from its gl_FragCoord (Vulkan's: y grows downwards).
ivec2 panelPixel(vec4 frag_coord) {
  return ivec2(frag_coord.xy) - panel.origin;
}
bool inPanel(ivec2 p) {
  return all(greaterThanEqual(p, ivec2(0))) && all(lessThan(p, panel.size));
}

const int kClasses = 3;

// Light colours for the regions, strong ones for the points of each class.
const vec3 kRegion[kClasses] =
    vec3[](vec3(0.98, 0.72, 0.66), vec3(0.70, 0.90, 0.68), vec3(0.68, 0.78, 0.98));
const vec3 kPoint[kClasses] =
    vec3[](vec3(0.85, 0.18, 0.12), vec3(0.16, 0.62, 0.20), vec3(0.16, 0.35, 0.85));

#endif
