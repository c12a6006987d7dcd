#include "vkgrad/onnx/fusions/matcher.h"

#include <algorithm>
#include <cstring>

namespace vkgrad::onnx {

Matcher::Matcher(const Model& model) : model_(model), graph_(model.proto().graph()) {
  for (int i = 0; i < graph_.node_size(); ++i) {
    for (const auto& out : graph_.node(i).output()) producer_[out] = i;
    for (const auto& in : graph_.node(i).input()) {
      ++uses_[in];
      auto& r = readers_[in];
      if (r.empty() || r.back() != i) r.push_back(i);
    }
  }
  for (const auto& out : graph_.output()) uses_[out.name()] += 2, outputs_[out.name()] = 1;
}

std::optional<int> Matcher::producer(const std::string& value, const char* op) const {
  const auto it = producer_.find(value);
  if (it == producer_.end() || graph_.node(it->second).op_type() != op) return {};
  return it->second;
}

std::optional<int> Matcher::inner(const std::string& value, const char* op) const {
  const auto p = producer(value, op);
  if (!p || uses_.count(value) == 0 || uses_.at(value) != 1) return {};
  return p;
}

std::optional<int> Matcher::consumer(const std::string& value, const char* op) const {
  const auto it = readers_.find(value);
  if (it == readers_.end() || it->second.size() != 1 || uses_.at(value) != 1) return {};
  if (graph_.node(it->second[0]).op_type() != op) return {};
  return it->second[0];
}

const std::vector<int>& Matcher::readers(const std::string& value) const {
  static const std::vector<int> none;
  const auto it = readers_.find(value);
  return it == readers_.end() ? none : it->second;
}

std::optional<double> Matcher::scalar(const std::string& value) const {
  if (const HostTensor* t = model_.initializer(value); t && t->numel() == 1) return t->at(0);
  const auto p = producer(value, "Constant");
  if (!p) return {};
  for (const auto& a : graph_.node(*p).attribute()) {
    if (a.name() == "value_float") return a.f();
    if (a.name() == "value" && a.has_t()) {
      const auto& t = a.t();
      if (t.data_type() != ::onnx::TensorProto::FLOAT) return {};
      for (int64_t d : t.dims())
        if (d != 1) return {};
      if (t.float_data_size() == 1) return t.float_data(0);
      if (t.raw_data().size() == 4) {
        float f;
        std::memcpy(&f, t.raw_data().data(), 4);
        return f;
      }
    }
  }
  return {};
}

std::optional<std::string> Matcher::other(const ::onnx::NodeProto& n, const std::string& value) {
  if (n.input_size() != 2) return {};
  if (n.input(0) == value) return n.input(1);
  if (n.input(1) == value) return n.input(0);
  return {};
}

std::vector<int64_t> Matcher::ints(int i, const char* name) const {
  for (const auto& a : graph_.node(i).attribute())
    if (a.name() == name) return {a.ints().begin(), a.ints().end()};
  return {};
}

Operand Matcher::find(const std::vector<int>& members, const std::string& value) const {
  std::vector<int> sorted = members;
  std::sort(sorted.begin(), sorted.end());
  for (int i : sorted)
    for (int k = 0; k < graph_.node(i).input_size(); ++k)
      if (graph_.node(i).input(k) == value) return {i, k};
  return {};
}

std::vector<std::string> Matcher::externals(const std::vector<int>& members,
                                            const std::vector<std::string>& except) const {
  std::vector<std::string> out;
  for (int i : members)
    for (const auto& in : graph_.node(i).input()) {
      const auto p = producer_.find(in);
      const bool inside = p != producer_.end() &&
                          std::find(members.begin(), members.end(), p->second) != members.end();
      if (in.empty() || inside || std::find(except.begin(), except.end(), in) != except.end() ||
          std::find(out.begin(), out.end(), in) != out.end())
        continue;
      out.push_back(in);
    }
  return out;
}

std::string Matcher::label(int i) const {
  const auto& n = graph_.node(i);
  return "\"" + (n.name().empty() ? n.output(0) : n.name()) + "\"";
}

}  // namespace vkgrad::onnx
