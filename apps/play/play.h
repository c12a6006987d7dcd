// vkgrad-play's frame loop: one window, one device, one queue shared by the engine's
// training and inference and the app's drawing (or, with --compute-queue separate, a queue of
// the engine's own), and no frame ever waiting for the engine.
#pragma once

#include <cstdint>
#include <string>

namespace vkgrad::play {

struct PlayOptions {
  int width = 640, height = 480;  // the window, pixels
  int64_t frames = 0;             // stop after this many frames; 0: when the window closes
  int steps_per_frame = 1;        // training steps submitted per frame (see play.cpp)
  int points_per_class = 100;     // spiral points per class
  int grid = 128;                 // inference points across the plane (down: by the aspect)
  float lr = 0.02f;
  int hidden = 32;          // the MLP's hidden width: a bigger model makes a longer step
  double slice_ms = 0.0;    // > 0: engine work in pieces of about this much GPU time, one a frame
  uint64_t seed = 1;        // data and initial weights
  bool validation = false;  // the app's instance gets the Khronos layer
  std::string screenshot;   // non-empty: the last frame as a PNG
  std::string device;       // --device: an index or part of a name (else VKGRAD_DEVICE)
  bool separate_queue = false;      // --compute-queue separate: the engine on a queue of its own
  bool concurrent_sharing = false;  // --sharing concurrent: no ownership transfers
};

// Runs until the window closes or after options.frames frames, prints a summary line, and
// writes the screenshot. Returns the exit status: 1 when validation reported anything.
// Throws Error when the window or the device cannot be had.
int play(const PlayOptions& options);

}  // namespace vkgrad::play
