#include "onnx/node_tests.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "vkgrad/core/error.h"
#include "vkgrad/onnx/importer.h"
#include "vkgrad/onnx/tensor_proto.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/parameters.h"

namespace vkgrad::test {
namespace {

onnx::HostTensor readPb(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  ::onnx::TensorProto t;
  if (!t.ParseFromString(ss.str())) throw Error(path.string() + ": not a TensorProto");
  return onnx::readTensor(t, path.parent_path(), path.string());
}

std::vector<std::filesystem::path> numbered(const std::filesystem::path& dir, const char* prefix) {
  std::vector<std::filesystem::path> files;
  for (int i = 0;; ++i) {
    const auto p = dir / (std::string(prefix) + std::to_string(i) + ".pb");
    if (!std::filesystem::exists(p)) break;
    files.push_back(p);
  }
  return files;
}

}  // namespace

namespace {
NodeTestResult runChecked(vk::Context& context, const std::filesystem::path& dir);
}

NodeTestResult runNodeTest(vk::Context& context, const std::filesystem::path& dir) {
  try {
    return runChecked(context, dir);
  } catch (const std::exception& e) {
    // A kernel the device (or a smaller device profile) cannot run is refused by name
    // ("needs 5 storage buffers; ... allows 4 (maxPerStageDescriptorStorageBuffers)"):
    // not a wrong answer.
    const std::string what = e.what();
    const bool limit =
        (what.find(" allows ") != std::string::npos && what.find("(max") != std::string::npos) ||
        what.find("does not offer") != std::string::npos;
    return {dir.filename().string(),
            limit ? NodeTestResult::Outcome::Refused : NodeTestResult::Outcome::Failed, what};
  }
}

namespace {
NodeTestResult runChecked(vk::Context& context, const std::filesystem::path& dir) {
  using Outcome = NodeTestResult::Outcome;
  NodeTestResult r{dir.filename().string()};
  std::unique_ptr<onnx::Model> model;
  try {
    model = std::make_unique<onnx::Model>(onnx::Model::load(dir / "model.onnx"));
  } catch (const Error& e) {
    r.outcome = Outcome::NotSupported;
    r.detail = e.what();
    return r;
  }
  if (const auto bad = onnx::unsupportedNodes(*model); !bad.empty()) {
    r.detail = bad[0];
    return r;
  }
  std::vector<std::filesystem::path> sets;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  double worst = 0;
  for (const auto& set : sets) {
    const auto in_files = numbered(set, "input_"), out_files = numbered(set, "output_");
    std::vector<onnx::HostTensor> inputs, wants;
    try {
      for (const auto& f : in_files) inputs.push_back(readPb(f));
      for (const auto& f : out_files) wants.push_back(readPb(f));
    } catch (const Error& e) {  // strings: a type vkgrad has no use for
      r.outcome = Outcome::Refused;
      r.detail = e.what();
      return r;
    }
    for (size_t i = 0; i < wants.size() && i < model->outputs().size(); ++i)
      if (onnx::isFloatType(model->outputs()[i].type) && !wants[i].isFloat()) {
        r.outcome = Outcome::Refused;
        r.detail = std::string("expected output ") + std::to_string(i) + " stored as " +
                   onnx::elemTypeName(wants[i].type) + " (bfloat16 test data is stored as uint16)";
        return r;
      }
    std::unique_ptr<graph::Graph> g;
    std::unique_ptr<graph::ParameterStore> store;
    onnx::Imported imported;
    // Integer inputs go to the device as u32 ids where the ops read them there (Gather's
    // indices); where an op needs them when importing (axes, shapes: the node tests feed
    // those as inputs, exporters as constants), or they hold negative indices, they are given
    // as known values.
    bool known_ints = false, known_floats = false;
    for (const auto& h : inputs)
      for (int64_t v : h.ints) known_ints = known_ints || v < 0 || v > int64_t(UINT32_MAX);
    for (int attempt = 0;; ++attempt) {
      g = std::make_unique<graph::Graph>();
      onnx::ImportOptions options;
      try {
        if (inputs.size() != model->inputs().size())
          throw Error("the test gives " + std::to_string(inputs.size()) + " inputs");
        for (size_t i = 0; i < inputs.size(); ++i) {
          const auto& info = model->inputs()[i];
          if (onnx::isFloatType(info.type) && !inputs[i].isFloat())
            throw Error(std::string("input \"") + info.name + "\" is " +
                        onnx::elemTypeName(info.type) + ", its test data " +
                        onnx::elemTypeName(inputs[i].type));
          if (onnx::dimsNumel(inputs[i].dims) == 0) throw Error("an empty input tensor");
          options.input_dims[info.name] = inputs[i].dims;
          if (known_ints && (!inputs[i].isFloat() || known_floats))
            options.known_inputs[info.name] = inputs[i];
        }
        for (const auto& o : model->outputs())
          if (!onnx::isFloatType(o.type))
            throw Error(std::string("output \"") + o.name + "\" is " + onnx::elemTypeName(o.type) +
                        ": the device computes floats");
        store = std::make_unique<graph::ParameterStore>(context);
        onnx::addParameters(*store, *model, onnx::deviceInitializers(*model, options));
        imported = onnx::importGraph(*g, *model, *store, options);
        break;
      } catch (const Error& e) {
        if (!known_floats && std::string(e.what()).find("must be known") != std::string::npos) {
          // First the integer inputs, then every input: a float input in a slot that must be
          // known (Pad's value, Pow's exponents) makes the whole test a constant.
          known_floats = known_ints;
          known_ints = true;
          continue;
        }
        r.outcome = Outcome::Refused;
        r.detail = e.what();
        return r;
      }
    }
    graph::Executor ex(context, *g);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const onnx::HostTensor& h = inputs[i];
      if (!imported.inputs[i].used) continue;
      if (h.isFloat()) {
        ex.setInput(imported.inputs[i].tensor, h.floats.empty() ? std::vector<float>{0} : h.floats);
      } else {
        std::vector<uint32_t> ids;
        for (int64_t v : h.ints) {
          if (v < 0 || v > int64_t(UINT32_MAX)) {
            r.outcome = Outcome::Refused;
            r.detail = "integer input outside 0..2^32-1";
            return r;
          }
          ids.push_back(uint32_t(v));
        }
        ex.setInput(imported.inputs[i].tensor, ids);
      }
    }
    ex.step();
    for (size_t i = 0; i < wants.size() && i < imported.outputs.size(); ++i) {
      std::vector<float> got;
      if (g->tensor(imported.outputs[i].tensor).dtype == graph::DType::U32) {
        for (uint32_t w : ex.readWords(imported.outputs[i].tensor)) got.push_back(float(w));
      } else {
        got = ex.read(imported.outputs[i].tensor);
      }
      const std::vector<float> want = wants[i].toFloats();
      if (imported.outputs[i].dims != wants[i].dims || got.size() != want.size()) {
        r.outcome = Outcome::Failed;
        r.detail = "output " + std::to_string(i) + " has shape " +
                   onnx::dimsText(imported.outputs[i].dims) + ", expected " +
                   onnx::dimsText(wants[i].dims);
        return r;
      }
      for (size_t k = 0; k < got.size(); ++k) {
        const double w = want[k], d = std::fabs(double(got[k]) - w);
        const bool same_special =
            (std::isnan(w) && std::isnan(got[k])) || (std::isinf(w) && got[k] == w);
        if (!same_special && !(d <= 1e-7 + 1e-3 * std::fabs(w))) {
          r.outcome = Outcome::Failed;
          r.detail = set.filename().string() + " output " + std::to_string(i) + " element " +
                     std::to_string(k) + ": got " + std::to_string(got[k]) + ", want " +
                     std::to_string(w);
          return r;
        }
        if (std::isfinite(w)) worst = std::max(worst, d / (1e-7 + 1e-3 * std::fabs(w)));
      }
    }
  }
  r.outcome = Outcome::Passed;
  r.detail = "worst error " + std::to_string(worst) + " of the tolerance";
  return r;
}
}  // namespace

}  // namespace vkgrad::test
