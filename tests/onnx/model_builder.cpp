#include "onnx/model_builder.h"

namespace vkgrad::test {

ModelBuilder::ModelBuilder(int64_t opset) {
  model_.set_ir_version(8);
  model_.set_producer_name("vkgrad-tests");
  auto* op = model_.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  model_.mutable_graph()->set_name("g");
}

ModelBuilder& ModelBuilder::input(const std::string& name, std::vector<int64_t> dims, int type) {
  auto* v = model_.mutable_graph()->add_input();
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(type);
  for (int64_t d : dims) {
    auto* dim = t->mutable_shape()->add_dim();
    if (d >= 0)
      dim->set_dim_value(d);
    else
      dim->set_dim_param("batch");
  }
  return *this;
}

ModelBuilder& ModelBuilder::output(const std::string& name, int type) {
  auto* v = model_.mutable_graph()->add_output();
  v->set_name(name);
  v->mutable_type()->mutable_tensor_type()->set_elem_type(type);
  return *this;
}

ModelBuilder& ModelBuilder::floats(const std::string& name, std::vector<int64_t> dims,
                                   std::vector<float> values) {
  auto* t = model_.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(::onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float v : values) t->add_float_data(v);
  return *this;
}

ModelBuilder& ModelBuilder::ints(const std::string& name, std::vector<int64_t> dims,
                                 std::vector<int64_t> values) {
  auto* t = model_.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(::onnx::TensorProto::INT64);
  for (int64_t d : dims) t->add_dims(d);
  for (int64_t v : values) t->add_int64_data(v);
  return *this;
}

ModelBuilder& ModelBuilder::constant(const std::string& name, float value) {
  auto* a = node("Constant", {}, {name}).add_attribute();
  a->set_name("value_float");
  a->set_type(::onnx::AttributeProto::FLOAT);
  a->set_f(value);
  return *this;
}

::onnx::NodeProto& ModelBuilder::node(const std::string& op, std::vector<std::string> inputs,
                                      std::vector<std::string> outputs) {
  auto* n = model_.mutable_graph()->add_node();
  n->set_op_type(op);
  n->set_name(op + "_" + std::to_string(model_.graph().node_size()));
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return *n;
}

void ModelBuilder::attrInt(::onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(v);
}

void ModelBuilder::attrInts(::onnx::NodeProto& n, const std::string& name, std::vector<int64_t> v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

void ModelBuilder::attrFloat(::onnx::NodeProto& n, const std::string& name, float v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

std::string ModelBuilder::bytes() const {
  std::string out;
  model_.SerializeToString(&out);
  return out;
}

onnx::Model ModelBuilder::build(const std::string& source) const {
  return onnx::Model::parse(bytes(), source);
}

}  // namespace vkgrad::test
