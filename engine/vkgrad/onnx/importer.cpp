#include "vkgrad/onnx/importer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <set>

#include "vkgrad/io/safetensors.h"
#include "vkgrad/onnx/fusions.h"
#include "vkgrad/onnx/node_context.h"
#include "vkgrad/runtime/op.h"
#include "vkgrad/runtime/parameters.h"

namespace vkgrad::onnx {

// --- the op table

const OpTable& opTable() {
  static const OpTable table = [] {
    OpTable t;
    registerElementwise(t);
    registerShapeOps(t);
    registerConstantOps(t);
    registerNnOps(t);
    return t;
  }();
  return table;
}

std::vector<std::string> supportedOps() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : opTable()) names.push_back(name);
  return names;
}

std::vector<std::string> unsupportedNodes(const Model& model) {
  std::vector<std::string> out;
  int i = 0;
  for (const auto& node : model.proto().graph().node()) {
    const bool default_domain = node.domain().empty() || node.domain() == "ai.onnx";
    if (!default_domain || !opTable().count(node.op_type()))
      out.push_back((default_domain ? "" : node.domain() + ".") + node.op_type() + " (node \"" +
                    (node.name().empty() ? "#" + std::to_string(i) : node.name()) + "\")");
    ++i;
  }
  return out;
}

// --- the import

namespace {

// The inputs of an op that no gradient flows through: shapes, axes, indices, conditions,
// exponents; every input of a comparison or of a cast to integers.
bool gradientFree(const ::onnx::NodeProto& node, int input) {
  const std::string& op = node.op_type();
  if (op == "Equal" || op == "Less" || op == "Greater" || op == "Not" || op == "Shape" ||
      op == "ConstantOfShape" || op == "Range")
    return true;
  if (op == "Cast") {
    for (const auto& a : node.attribute())
      if (a.name() == "to") return !isFloatType(int(a.i()));
  }
  if (op == "Where") return input == 0;
  if (op == "Gather" || op == "Pow" || op == "Reshape" || op == "Expand" || op == "Squeeze" ||
      op == "Unsqueeze" || op == "Split" || op == "ReduceSum" || op == "Tile")
    return input == 1;
  if (op == "Slice") return input >= 1;
  if (op == "Pad") return input >= 1;
  if (op == "Dropout") return input >= 1;
  return false;
}

// The values a gradient from the outputs can reach: a float initializer among them is a
// parameter; one that only feeds shapes, masks and comparisons (a registered buffer such as
// a causal mask) is a constant and folds on the host.
std::set<std::string> gradientReach(const Model& model) {
  std::set<std::string> reach;
  for (const auto& out : model.outputs()) reach.insert(out.name);
  const auto& nodes = model.proto().graph().node();
  for (int n = nodes.size() - 1; n >= 0; --n) {
    const auto& node = nodes[n];
    bool live = false;
    for (const auto& out : node.output()) live = live || reach.count(out);
    if (!live) continue;
    for (int i = 0; i < node.input_size(); ++i)
      if (!node.input(i).empty() && !gradientFree(node, i)) reach.insert(node.input(i));
  }
  return reach;
}

// Refuses unsupported ops and shapes for inputs the model lacks, before any work.
void checkModel(const Model& model, const ImportOptions& options) {
  if (const auto bad = unsupportedNodes(model); !bad.empty()) {
    std::string list;
    for (size_t i = 0; i < bad.size() && i < 12; ++i) list += (i ? ", " : "") + bad[i];
    if (bad.size() > 12) list += ", and " + std::to_string(bad.size() - 12) + " more";
    throw Error(model.source() + ": unsupported ops: " + list);
  }
  for (const auto& given : options.input_dims) {
    const std::string& name = given.first;  // a plain reference: lambdas capture it
    const auto& ins = model.inputs();
    if (std::none_of(ins.begin(), ins.end(), [&](const ValueInfo& v) { return v.name == name; }))
      throw Error(model.source() + ": the model has no input \"" + name + "\"");
  }
}

// Every initializer as a host value; a float one the outputs' gradients reach is a parameter.
std::map<std::string, Value> initializerValues(const Model& model) {
  std::map<std::string, Value> values;
  const std::set<std::string> reach = gradientReach(model);
  for (const std::string& name : model.initializerNames()) {
    const HostTensor* h = model.initializer(name);
    Value v;
    v.dims = h->dims;
    v.type = h->type;
    v.host = std::shared_ptr<const HostTensor>(std::shared_ptr<void>(), h);  // the Model's
    // A non-finite initializer (a -inf fill for masks) is a constant: no weight is infinite.
    v.parameter =
        h->isFloat() && reach.count(name) &&
        std::all_of(h->floats.begin(), h->floats.end(), [](float f) { return std::isfinite(f); });
    values[name] = std::move(v);
  }
  return values;
}

// Input `in` as a value: known on the host, a given device tensor, or a new graph input.
void addInput(graph::Graph& g, const Model& model, const ImportOptions& options,
              const ValueInfo& in, std::map<std::string, Value>& values, Imported& imported) {
  std::vector<int64_t> dims = in.dims;
  if (const auto it = options.input_dims.find(in.name); it != options.input_dims.end()) {
    bool agrees = it->second.size() == in.dims.size();
    for (size_t k = 0; agrees && k < dims.size(); ++k)
      agrees = in.dims[k] < 0 || in.dims[k] == it->second[k];
    if (!agrees)
      throw Error(model.source() + ": input " + in.str() + " cannot take shape " +
                  dimsText(it->second) +
                  ": the file fixes its axes (export with dynamic_axes to vary them)");
    dims = it->second;
  }
  for (int64_t d : dims)
    if (d <= 0)
      throw Error(model.source() + ": input " + in.str() +
                  " has open axes: give its shape (an input array of that shape, or "
                  "ImportOptions::input_dims)");
  if (dimsNumel(dims) > (int64_t(1) << 31))
    throw Error(model.source() + ": input " + in.name + " " + dimsText(dims) +
                " has more than 2^31 elements");
  if (const auto it = options.known_inputs.find(in.name); it != options.known_inputs.end()) {
    if (it->second.dims != dims)
      throw Error(model.source() + ": the value given for input " + in.str() + " is " +
                  dimsText(it->second.dims));
    Value v;
    v.dims = dims;
    v.type = in.type;
    HostTensor given = it->second;
    given.type = in.type;
    v.host = std::make_shared<const HostTensor>(std::move(given));
    values[in.name] = std::move(v);
    imported.inputs.push_back({in.name, {}, dims, in.type, false});
    return;
  }
  const bool is_float = isFloatType(in.type);
  if (!is_float && !isIntegerType(in.type))
    throw Error(model.source() + ": input " + in.str() + ": vkgrad takes float or integer inputs");
  graph::Tensor t;
  if (const auto it = options.provided.find(in.name); it != options.provided.end()) {
    t = it->second;
    if (!(g.shape(t) == deviceShape(dims)) || (g.tensor(t).dtype == graph::DType::U32) == is_float)
      throw Error(model.source() + ": the tensor given for input " + in.str() + " is " +
                  ops::dtypeName(g.tensor(t).dtype) + " " + g.shape(t).str());
  } else {
    t = g.input(in.name, deviceShape(dims), is_float ? graph::DType::F32 : graph::DType::U32);
  }
  Value v;
  v.dims = dims;
  v.type = in.type;
  v.device = t;
  values[in.name] = v;
  imported.inputs.push_back({in.name, t, dims, in.type});
}

// Every node in file order, fused patterns as their one op (or, where a check on shapes or
// host values refuses the pattern, its members one by one at its last node).
void importNodes(graph::Graph& g, const Model& model, const ImportOptions& options,
                 std::map<std::string, Value>& values, const NodeContext::ParameterFn& record,
                 Imported& imported) {
  const FusionPlan plan = options.fuse ? findFusions(model) : FusionPlan{};
  const auto& nodes = model.proto().graph().node();
  auto importNode = [&](int index) {
    NodeContext ctx(g, nodes[index], values, record);
    try {
      opTable().at(nodes[index].op_type())(ctx);
    } catch (const ShapeError& e) {
      throw ShapeError(model.source() + ": " + ctx.name() + ": " + e.what());
    } catch (const Error& e) {
      const std::string what = e.what();
      if (what.rfind(ctx.name(), 0) == 0) throw Error(model.source() + ": " + what);
      throw Error(model.source() + ": " + ctx.name() + ": " + what);
    }
  };
  for (int index = 0; index < nodes.size(); ++index) {
    if (plan.skipped.count(index)) continue;
    const auto fused = plan.at.find(index);
    if (fused == plan.at.end()) {
      importNode(index);
      continue;
    }
    const Fusion& f = fused->second;
    const bool trains = std::any_of(f.constants.begin(), f.constants.end(), [&](const auto& c) {
      const auto it = values.find(c);
      return it == values.end() || it->second.parameter;
    });
    if (trains) {
      for (int member : f.members) importNode(member);
      continue;
    }
    std::map<int, std::unique_ptr<NodeContext>> contexts;
    FusionSite site{g,
                    [&](int i) -> NodeContext& {
                      auto& c = contexts[i];
                      if (!c) c = std::make_unique<NodeContext>(g, nodes[i], values, record);
                      return *c;
                    },
                    importNode};
    bool emitted = false;
    try {
      emitted = f.emit(site);
    } catch (const Error& e) {
      throw Error(model.source() + ": " + f.description + ": " + e.what());
    }
    if (emitted) {
      imported.fusions.push_back(f.description);
    } else {
      for (int member : f.members) importNode(member);
    }
  }
}

// Output `out` as a port: on the device, and an activation of its own when marked.
Port outputPort(graph::Graph& g, const Model& model, const ImportOptions& options,
                const ValueInfo& out, std::map<std::string, Value>& values) {
  if (!values.count(out.name))
    throw Error(model.source() + ": graph output \"" + out.name +
                "\" is an output its node does not support (a BatchNormalization's saved "
                "statistics, a Dropout's mask, ...)");
  Value& v = values.at(out.name);
  Port p{out.name, {}, v.dims, v.type};
  if (!v.onDevice()) {
    // An output known on the host (a constant): put it on the device so it reads alike.
    const HostTensor& h = *v.host;
    v.device = g.constant(out.name, deviceShape(h.dims), h.toFloats());
    p.type = h.isFloat() ? h.type : kFloat;
  }
  // An output that is an input, a parameter or a constant (Identity, Flatten, Dropout at
  // inference), or a view of one, gets a copy of its own: marked outputs are activations.
  if (options.mark_outputs &&
      g.tensor(g.tensor(v.device).root).kind != graph::TensorKind::Activation)
    v.device = g.expand(v.device, g.shape(v.device));
  p.tensor = v.device;
  if (options.mark_outputs) g.markOutput(p.tensor);
  return p;
}

Imported run(graph::Graph& g, const Model& model, const ImportOptions& options,
             const NodeContext::ParameterFn& param) {
  checkModel(model, options);
  std::map<std::string, Value> values = initializerValues(model);
  Imported imported;
  for (const ValueInfo& in : model.inputs()) addInput(g, model, options, in, values, imported);
  std::vector<std::string> params;
  const NodeContext::ParameterFn record = [&](const std::string& name, const HostTensor& h) {
    params.push_back(name);
    return param(name, h);
  };
  importNodes(g, model, options, values, record, imported);
  for (const ValueInfo& out : model.outputs())
    imported.outputs.push_back(outputPort(g, model, options, out, values));
  for (Port& in : imported.inputs) {
    if (!in.tensor) continue;
    in.used = false;
    for (const graph::Node& n : g.nodes())
      for (int id : n.inputs)
        if (id == in.tensor.id) in.used = true;
  }
  imported.parameters = params;
  return imported;
}

}  // namespace

std::vector<std::string> deviceInitializers(const Model& model, const ImportOptions& options) {
  graph::Graph g;
  std::vector<std::string> names;
  run(g, model, options, [&](const std::string& name, const HostTensor& h) {
    names.push_back(name);
    return g.input(name, deviceShape(h.dims));
  });
  return names;
}

void addParameters(graph::ParameterStore& store, const Model& model,
                   const std::vector<std::string>& names) {
  std::vector<graph::SavedTensor> tensors;
  for (const std::string& name : names) {
    const HostTensor* h = model.initializer(name);
    if (!h || !h->isFloat())
      throw Error(model.source() + ": \"" + name + "\" is not a float initializer");
    const graph::Shape shape = deviceShape(h->dims);
    store.add(name, shape, graph::Init::zeros());
    graph::SavedTensor t;
    t.name = name;
    t.dtype = ops::DType::F32;
    for (int k = 0; k < shape.rank(); ++k) t.shape.push_back(shape[k]);
    t.data.resize(h->floats.size());
    std::memcpy(t.data.data(), h->floats.data(), h->floats.size() * 4);
    tensors.push_back(std::move(t));
  }
  if (store.planning()) return;
  std::vector<const graph::SavedTensor*> ptrs;
  for (const auto& t : tensors) ptrs.push_back(&t);
  // upload() wants every parameter of the store: those added before keep their values.
  std::vector<graph::SavedTensor> kept;
  if (store.all().size() != tensors.size()) {
    for (auto& t : store.download())
      if (std::none_of(names.begin(), names.end(),
                       [&](const std::string& n) { return n == t.name; }))
        kept.push_back(std::move(t));
    for (const auto& t : kept) ptrs.push_back(&t);
  }
  store.upload(ptrs, model.source());
}

Imported importGraph(graph::Graph& g, const Model& model, const graph::ParameterStore& store,
                     const ImportOptions& options) {
  return run(g, model, options, [&](const std::string& name, const HostTensor&) {
    const graph::Parameter* p = store.find(name);
    if (!p)
      throw Error("initializer \"" + name +
                  "\" is not a parameter of the store (onnx::addParameters first)");
    return g.parameter(*p);
  });
}

}  // namespace vkgrad::onnx
