// A drawn graph (vkgrad-gnn's graph.png): a force-directed layout computed here, nodes
// coloured by class, training labels and wrong predictions marked, edges beneath.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace vkgrad::apps {

// Node positions in [0, 1]^2 by Fruchterman-Reingold: springs along edges, repulsion between
// every pair (the layout is for pictures of up to a few thousand nodes), a cooling schedule;
// seeded, so the same graph and seed give the same picture.
std::vector<std::pair<double, double>> layoutGraph(
    int64_t nodes, const std::vector<std::pair<uint32_t, uint32_t>>& edges, uint64_t seed);

struct GraphPicture {
  std::string title;
  std::vector<std::pair<double, double>> positions;  // layoutGraph's, one per node
  std::vector<std::pair<uint32_t, uint32_t>> edges;
  std::vector<int> node_class;           // colour per node (categoricalColour)
  std::vector<std::string> class_names;  // the legend
  std::vector<bool> labelled;            // a thick black ring: a training label
  std::vector<bool> wrong;               // a red ring: a wrong prediction
};

// Writes the picture as a PNG (through a temporary file renamed over path): the drawing, as
// large as fits width x height beside its legend, keeps the layout's aspect, and the picture
// is cut to what it draws. Node numbers are drawn when there are at most 60 nodes. Throws
// std::runtime_error on mismatched sizes or an unwritable path.
void writeGraphPng(const std::filesystem::path& path, const GraphPicture& picture, int width = 900,
                   int height = 800);

}  // namespace vkgrad::apps
