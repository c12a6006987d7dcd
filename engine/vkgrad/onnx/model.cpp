#include "vkgrad/onnx/model.h"

#include <onnx/onnx_pb.h>

#include <fstream>
#include <set>
#include <sstream>

#include "vkgrad/core/error.h"
#include "vkgrad/io/atomic_file.h"
#include "vkgrad/onnx/tensor_proto.h"

namespace vkgrad::onnx {
namespace {

ValueInfo readValueInfo(const ::onnx::ValueInfoProto& v) {
  ValueInfo info;
  info.name = v.name();
  if (v.type().has_tensor_type()) {
    const auto& tt = v.type().tensor_type();
    info.type = tt.elem_type();
    if (tt.has_shape())
      for (const auto& d : tt.shape().dim()) {
        info.dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
        info.dim_names.push_back(d.has_dim_param() ? d.dim_param() : "");
      }
  }
  return info;
}

}  // namespace

std::string ValueInfo::str() const {
  std::string s = name + " " + elemTypeName(type) + " (";
  for (size_t i = 0; i < dims.size(); ++i) {
    s += i ? "," : "";
    s += dims[i] >= 0 ? std::to_string(dims[i])
                      : (dim_names[i].empty() ? std::string("?") : dim_names[i]);
  }
  return s + ")";
}

Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

Model Model::load(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open");
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) throw Error(path.string() + ": " + ec.message());
  // protobuf refuses messages of 2 GiB or more; bigger weights go in external data files.
  if (size >= (uint64_t(1) << 31))
    throw Error(path.string() + ": " + std::to_string(size) +
                " bytes: an .onnx file holds under 2 GiB (larger models keep their weights "
                "in external data files)");
  std::string bytes(size, '\0');
  in.read(bytes.data(), std::streamsize(size));
  if (!in) throw Error(path.string() + ": read failed");
  return parse(bytes, path.string(), path.parent_path());
}

Model Model::parse(std::string_view bytes, const std::string& source,
                   const std::filesystem::path& folder) {
  Model m;
  m.source_ = source;
  m.folder_ = folder.empty() ? std::filesystem::path(".") : folder;
  m.proto_ = std::make_unique<::onnx::ModelProto>();
  if (bytes.empty() || !m.proto_->ParseFromArray(bytes.data(), int(bytes.size())))
    throw Error(source +
                ": not an ONNX model (the protobuf does not parse: truncated or "
                "corrupt)");
  if (!m.proto_->has_graph() || m.proto_->graph().node_size() == 0)
    throw Error(source + ": not an ONNX model (no graph, or a graph without nodes)");
  m.check();
  return m;
}

void Model::check() {
  const auto& graph = proto_->graph();
  for (const auto& op : proto_->opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") opset_ = op.version();
  if (opset_ < kMinOpset || opset_ > kMaxOpset)
    throw Error(source_ + ": opset " + std::to_string(opset_) +
                " of the default domain: " + "vkgrad imports opsets " + std::to_string(kMinOpset) +
                " to " + std::to_string(kMaxOpset) + " (export with opset_version=17)");

  std::set<std::string> known;
  for (int i = 0; i < graph.initializer_size(); ++i) {
    const auto& t = graph.initializer(i);
    if (t.name().empty() || initializers_.count(t.name()))
      throw Error(source_ + ": initializer " + std::to_string(i) +
                  (t.name().empty() ? " has no name" : " \"" + t.name() + "\" appears twice"));
    initializers_.emplace(t.name(),
                          readTensor(t, folder_, source_ + ": initializer \"" + t.name() + "\""));
    initializer_names_.push_back(t.name());
    known.insert(t.name());
  }
  for (const auto& v : graph.input())
    if (!v.type().has_tensor_type())
      throw Error(source_ + ": input \"" + v.name() +
                  "\" is a sequence, map or optional: vkgrad imports tensors only");
  for (const auto& v : graph.output())
    if (!v.type().has_tensor_type())
      throw Error(source_ + ": output \"" + v.name() +
                  "\" is a sequence, map or optional: vkgrad imports tensors only");
  for (const auto& v : graph.input())
    if (!initializers_.count(v.name())) {
      inputs_.push_back(readValueInfo(v));
      known.insert(v.name());
    }
  for (const auto& v : graph.output()) outputs_.push_back(readValueInfo(v));

  // ONNX requires nodes in topological order: a name read before it is written is either a
  // cycle or nothing at all.
  std::set<std::string> produced_later;
  for (const auto& node : graph.node())
    for (const auto& out : node.output()) produced_later.insert(out);
  for (int i = 0; i < graph.node_size(); ++i) {
    const auto& node = graph.node(i);
    const std::string what = node.op_type() + " node \"" +
                             (node.name().empty() ? "#" + std::to_string(i) : node.name()) + "\"";
    for (const auto& in : node.input()) {
      if (in.empty() || known.count(in)) continue;
      throw Error(source_ + ": " + what + " reads \"" + in + "\", " +
                  (produced_later.count(in) ? "which a later node writes (a cycle, or nodes "
                                              "out of order)"
                                            : "which nothing defines (a dangling input)"));
    }
    for (const auto& out : node.output())
      if (!out.empty()) known.insert(out);
  }
  for (const auto& out : outputs_)
    if (!known.count(out.name))
      throw Error(source_ + ": graph output \"" + out.name + "\" is never written");
}

std::string Model::producer() const {
  return proto_->producer_name() +
         (proto_->producer_version().empty() ? "" : " " + proto_->producer_version());
}

const HostTensor* Model::initializer(const std::string& name) const {
  const auto it = initializers_.find(name);
  return it == initializers_.end() ? nullptr : &it->second;
}

int64_t Model::nodeCount() const {
  return proto_->graph().node_size();
}

std::map<std::string, int> Model::opHistogram() const {
  std::map<std::string, int> h;
  for (const auto& node : proto_->graph().node()) ++h[node.op_type()];
  return h;
}

void Model::save(const std::filesystem::path& path,
                 const std::map<std::string, std::vector<float>>& values) const {
  ::onnx::ModelProto copy = *proto_;
  std::set<std::string> done;
  for (auto& t : *copy.mutable_graph()->mutable_initializer()) {
    const auto it = values.find(t.name());
    if (it == values.end()) {
      // Weights from external files go inline, so the saved model stands alone.
      if (t.data_location() == ::onnx::TensorProto::EXTERNAL) {
        const HostTensor& h = initializers_.at(t.name());
        if (!h.isFloat())
          throw Error(path.string() + ": initializer \"" + t.name() +
                      "\" is external and not float: vkgrad saves it inline only as float");
        writeFloats(t, h.floats);
      }
      continue;
    }
    const HostTensor& h = initializers_.at(t.name());
    if (!h.isFloat() || int64_t(it->second.size()) != h.numel())
      throw Error(path.string() + ": initializer \"" + t.name() + "\" is " + elemTypeName(h.type) +
                  " " + dimsText(h.dims) + ", given " + std::to_string(it->second.size()) +
                  " floats");
    writeFloats(t, it->second);
    done.insert(t.name());
  }
  for (const auto& [name, v] : values)
    if (!done.count(name))
      throw Error(path.string() + ": \"" + name + "\" is not an initializer of " + source_);
  std::string bytes;
  if (!copy.SerializeToString(&bytes))
    throw Error(path.string() + ": the model does not serialise (over 2 GiB?)");
  graph::writeFileAtomically(path, bytes);
}

}  // namespace vkgrad::onnx
