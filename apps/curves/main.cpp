// vkgrad-curves: the curves that training runs saved in their states (the training loss,
// evaluation losses, accuracies: DIR/train_state.safetensors) drawn in one picture, one line
// per run, so runs that differ in one option (precision, learning rate) can be compared. No
// device is used.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "common/app_main.h"
#include "common/cli.h"
#include "common/figures.h"
#include "common/plot.h"
#include "vkgrad/core/error.h"
#include "vkgrad/io/bundle.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/io/safetensors.h"

namespace vkgrad::apps {
namespace {

// The curves a run state holds (common/resume.cpp writes them as "run.curves").
graph::Json savedCurves(const std::string& dir) {
  graph::checkBundle(dir);
  const std::string where = dir + "/train_state.safetensors";
  const graph::Checkpoint state = graph::loadSafetensors(where);
  const auto it = state.metadata.find("run.curves");
  if (it == state.metadata.end()) throw Error(where + ": no curves saved (run.curves)");
  return graph::parseJson(it->second, where);
}

int run(int argc, char** argv) {
  Cli cli("vkgrad-curves",
          "Draws one curve of several training runs in one picture: each RUN is LABEL=DIR,\n"
          "DIR a run's --out directory. Example:\n"
          "  vkgrad-curves --curve \"val loss\" --out gpt-precision.png fp32=a bf16=b fp16=c");
  cli.positional("RUN...", "LABEL=DIR, one or more");
  cli.option("curve", "the curve's name as the run's picture labels it (e.g. \"train loss\")",
             "train loss");
  cli.option("out", "the picture (PNG)", "curves.png");
  cli.option("title", "the picture's title (default: the curve's name)", "");
  cli.option("x-label", "the x axis's label", "step or epoch");
  cli.flag("log-y", "y on a log axis");
  cli.parse(argc, argv);
  if (cli.positionals().empty()) cli.fail("no RUN given");
  const std::string curve = cli.get("curve");
  std::vector<Series> series;
  for (const std::string& run : cli.positionals()) {
    const size_t eq = run.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == run.size())
      cli.fail("RUN \"" + run + "\" is not LABEL=DIR");
    const std::string label = run.substr(0, eq), dir = run.substr(eq + 1);
    const graph::Json curves = savedCurves(dir);
    const auto it = curves.find(curve);
    if (it == curves.end() || !it->is_array()) {
      std::string names;
      for (const auto& [name, points] : curves.items()) names += " \"" + name + "\"";
      throw Error(dir + ": no curve \"" + curve + "\"; it has" + names);
    }
    Series s{label, {}, {}, {}, false};
    std::copy_n(categoricalColour(int(series.size())), 3, s.rgb);
    for (const graph::Json& p : *it)
      if (p.is_array() && p.size() == 2 && p[0].is_number() && p[1].is_number()) {
        s.x.push_back(p[0].get<double>());
        s.y.push_back(p[1].get<double>());
      }
    s.markers = s.x.size() <= 40;
    std::printf("%s: %zu points, last %g\n", label.c_str(), s.x.size(),
                s.y.empty() ? 0.0 : s.y.back());
    series.push_back(std::move(s));
  }
  PlotOptions plot;
  plot.title = cli.get("title").empty() ? curve : cli.get("title");
  plot.x_label = cli.get("x-label");
  plot.y_label = curve;
  plot.log_y = cli.has("log-y");
  writeLinePlot(cli.get("out"), series, plot);
  std::printf("wrote %s\n", cli.get("out").c_str());
  return 0;
}

}  // namespace
}  // namespace vkgrad::apps

int main(int argc, char** argv) {
  return vkgrad::apps::guardedMain("vkgrad-curves", vkgrad::apps::run, argc, argv);
}
