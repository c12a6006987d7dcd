// An ONNX model file as vkgrad reads it (Debian's onnx protobuf schema and protobuf runtime:
// no hand-written parser): opsets 13 to 17 of the default domain, initializers inline or in
// external data files beside the model. Loading checks the file; importing it into a graph
// is onnx/importer.h's.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "vkgrad/onnx/host_tensor.h"

namespace onnx {
class ModelProto;
}

namespace vkgrad::onnx {

constexpr int64_t kMinOpset = 13, kMaxOpset = 17;

struct ValueInfo {
  std::string name;
  int type = kUndefined;      // ElemType
  std::vector<int64_t> dims;  // -1 where the file names the axis (dim_params) or leaves it open
  std::vector<std::string> dim_names;  // the names of those axes ("batch"), "" elsewhere
  std::string str() const;             // "input_ids int64 (batch,8)"
};

class Model {
 public:
  // Reads and checks a model: the protobuf parses, the default domain's opset is 13 to 17,
  // every node input is a graph input, an initializer or an earlier node's output (ONNX
  // orders nodes so: a cycle or a dangling name is an error naming the node), every
  // initializer is readable (types, sizes, external files inside the model's folder) and
  // under 2^31 elements. Throws Error "<path>: <what>" otherwise.
  static Model load(const std::filesystem::path& path);
  // The same from bytes in memory; external data is looked for in `folder`.
  static Model parse(std::string_view bytes, const std::string& source,
                     const std::filesystem::path& folder = {});
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  const std::string& source() const { return source_; }
  int64_t opset() const { return opset_; }
  std::string producer() const;                                     // "pytorch 1.13.1"
  const std::vector<ValueInfo>& inputs() const { return inputs_; }  // without initializers
  const std::vector<ValueInfo>& outputs() const { return outputs_; }
  // Initializers (and nothing else), in file order.
  const std::vector<std::string>& initializerNames() const { return initializer_names_; }
  const HostTensor* initializer(const std::string& name) const;  // null when there is none
  int64_t nodeCount() const;
  std::map<std::string, int> opHistogram() const;  // op type -> nodes

  // Writes the same model with the named float initializers' values replaced (f32 values,
  // stored in the initializer's own float type, inline), atomically. Throws Error naming a
  // name that is not a float initializer or a value count that is not its size.
  void save(const std::filesystem::path& path,
            const std::map<std::string, std::vector<float>>& values) const;

  const ::onnx::ModelProto& proto() const { return *proto_; }

 private:
  Model() = default;
  void check();

  std::string source_;
  std::filesystem::path folder_;
  std::unique_ptr<::onnx::ModelProto> proto_;
  int64_t opset_ = 0;
  std::vector<ValueInfo> inputs_, outputs_;
  std::vector<std::string> initializer_names_;
  std::map<std::string, HostTensor> initializers_;
};

}  // namespace vkgrad::onnx
