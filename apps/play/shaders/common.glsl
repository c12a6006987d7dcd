// What both of vkgrad-play's pipelines share: the push constants (renderer.cpp's Push, in
// the same order) and the class colours.
#ifndef PLAY_COMMON_GLSL
#define PLAY_COMMON_GLSL

layout(push_constant) uniform Push {
  vec4 plane;     // the plane's left, bottom, right, top edges (as classifier.h's Plane)
  vec2 viewport;  // pixels
  uvec2 grid;     // inference points across and down
  uint first;     // the logits' first float in binding 0 (its range starts aligned below)
  float radius;   // of a data point, pixels
} pc;

const int kClasses = 3;

// Light colours for the regions, strong ones for the points of each class.
const vec3 kRegion[kClasses] =
    vec3[](vec3(0.98, 0.72, 0.66), vec3(0.70, 0.90, 0.68), vec3(0.68, 0.78, 0.98));
const vec3 kPoint[kClasses] =
    vec3[](vec3(0.85, 0.18, 0.12), vec3(0.16, 0.62, 0.20), vec3(0.16, 0.35, 0.85));

#endif
