#include "common/resume.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "vkgrad/core/error.h"
#include "vkgrad/io/bundle.h"

namespace vkgrad::apps {
namespace {

namespace fs = std::filesystem;

constexpr const char* kProgramKey = "run.program";
constexpr const char* kOptionsKey = "run.options";
constexpr const char* kRngKey = "run.rng";
constexpr const char* kCurvesKey = "run.curves";
constexpr const char* kDataKey = "run.data";

// Two spellings of one option value ("3e-3" and "0.003") agree.
bool sameValue(const std::string& a, const std::string& b) {
  if (a == b) return true;
  char *end_a = nullptr, *end_b = nullptr;
  const double x = std::strtod(a.c_str(), &end_a), y = std::strtod(b.c_str(), &end_b);
  return !a.empty() && !b.empty() && *end_a == 0 && *end_b == 0 && x == y;
}

const std::string& metadata(const graph::Checkpoint& saved, const char* key,
                            const std::string& where) {
  const auto it = saved.metadata.find(key);
  if (it == saved.metadata.end()) throw Error(where + ": no " + key + " in the training state");
  return it->second;
}

}  // namespace

void declareResumeOptions(Cli& cli, const char* unit) {
  cli.option("resume",
             "continue the run saved in DIR from its last checkpoint, with its options and "
             "data; the weights end as those of a run that never stopped");
  cli.option("stop-at",
             std::string("stop after this ") + unit +
                 ", saving what --resume continues from (0: run to the end)",
             "0");
}

std::optional<graph::Checkpoint> resumeRun(Cli& cli, const RunOptions& run, const char* program) {
  if (!cli.given("resume")) return std::nullopt;
  const fs::path dir = cli.get("resume");
  if (!fs::is_directory(dir)) throw Error(dir.string() + ": no such checkpoint directory");
  graph::checkBundle(dir);  // a save that a crash interrupted is settled; a mix refused
  const std::string where = (dir / kTrainStateFile).string();
  if (!fs::exists(where))
    throw Error(where +
                ": no training state to resume (a run writes it as it goes and at the end)");
  graph::Checkpoint saved = graph::loadSafetensors(where);
  if (metadata(saved, kProgramKey, where) != program)
    throw Error(where + ": a training state of " + saved.metadata[kProgramKey] + ", not " +
                program);
  const graph::Json options = graph::parseJson(metadata(saved, kOptionsKey, where), where);
  auto savedValue = [&](const char* name) -> std::optional<std::string> {
    const auto it = options.find(name);
    if (it == options.end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
  };
  for (const char* name : run.rhythm)
    if (const auto value = savedValue(name); value && !cli.given(name)) cli.set(name, *value, where);
  for (const char* name : run.fixed) {
    const std::optional<std::string> value = savedValue(name);
    if (!value) {  // a flag that was off, an option without a default that was not given
      if (cli.given(name))
        cli.fail("--" + std::string(name) + " was not given to the resumed run (" + where +
                 "); a resumed run keeps the options that define it");
      continue;
    }
    if (cli.given(name) && !cli.isFlag(name) && !sameValue(cli.get(name), *value))
      cli.fail("--" + std::string(name) + " " + cli.get(name) + " differs from the resumed run's " +
               *value + " (" + where + "); a resumed run keeps the options that define it");
    if (!cli.given(name)) cli.set(name, *value, where);
  }
  if (!cli.given("out")) cli.set("out", dir.string());
  return saved;
}

std::map<std::string, std::string> runMetadata(const Cli& cli, const RunOptions& run,
                                               const char* program, const RunState& state) {
  graph::Json options = graph::Json::object();
  for (const std::vector<const char*>* list : {&run.fixed, &run.rhythm})
    for (const char* name : *list)
      if (cli.has(name)) options[name] = cli.get(name);
  graph::Json curves = graph::Json::object();
  for (const Series* s : state.curves) {
    graph::Json points = graph::Json::array();
    for (size_t i = 0; i < s->x.size(); ++i) points.push_back({s->x[i], s->y[i]});
    curves[s->label] = std::move(points);
  }
  std::ostringstream rng;
  rng << state.rng;
  return {{kProgramKey, program},
          {kOptionsKey, graph::dumpJson(options)},
          {kRngKey, rng.str()},
          {kCurvesKey, graph::dumpJson(curves)},
          {kDataKey, state.data}};
}

void readRunState(const graph::Checkpoint& saved, const std::string& where, RunState& state) {
  const std::string& data = metadata(saved, kDataKey, where);
  if (data != state.data)
    throw Error(where + ": the data changed since the run was saved (it had " + data + ", now " +
                state.data + ")");
  std::istringstream rng(metadata(saved, kRngKey, where));
  rng >> state.rng;
  if (!rng) throw Error(where + ": " + kRngKey + " is not a generator state");
  const graph::Json curves = graph::parseJson(metadata(saved, kCurvesKey, where), where);
  for (Series* s : state.curves) {
    s->x.clear();
    s->y.clear();
    const auto it = curves.find(s->label);
    if (it == curves.end() || !it->is_array()) continue;
    for (const graph::Json& p : *it)
      if (p.is_array() && p.size() == 2 && p[0].is_number() && p[1].is_number()) {
        s->x.push_back(p[0].get<double>());
        s->y.push_back(p[1].get<double>());
      }
  }
}

int64_t lastUnit(const Cli& cli, int64_t done, int64_t total, const char* unit) {
  const int64_t stop_at = cli.getInt("stop-at", 0, int64_t(1) << 40);
  if (stop_at == 0) return total;
  if (stop_at <= done)
    cli.fail("--stop-at " + std::to_string(stop_at) + " is not after " + unit + " " +
             std::to_string(done) + ", where the resumed run is");
  return std::min(stop_at, total);
}

void printStopped(const std::string& program, const std::string& out, const char* unit,
                  int64_t done, int64_t total) {
  std::printf("stopped after %s %lld of %lld (--stop-at); continue with: %s train --resume %s\n",
              unit, static_cast<long long>(done), static_cast<long long>(total), program.c_str(),
              out.c_str());
}

std::string fingerprint(std::span<const uint8_t> bytes) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a, 64 bits
  for (uint8_t c : bytes) h = (h ^ c) * 0x100000001b3ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::to_string(bytes.size()) + " bytes, fnv1a " + hex;
}

}  // namespace vkgrad::apps
