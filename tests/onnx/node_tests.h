// Runs ONNX's own node tests (Debian's libonnx-testdata: a model.onnx per test with its
// inputs and expected outputs as TensorProto files) through the importer on a device.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace vkgrad::vk {
class Context;
}

namespace vkgrad::test {

// Where Debian's libonnx-testdata puts the node tests.
inline const std::filesystem::path kNodeTestDir = "/usr/share/libonnx-testdata/data/node";

struct NodeTestResult {
  enum class Outcome { Passed, Failed, NotSupported, Refused };
  std::string name;  // "test_add_bcast"
  Outcome outcome = Outcome::NotSupported;
  std::string detail;  // the unsupported ops, the import error, or the worst mismatch
};

// One test folder: every test_data_set_* run and compared at ONNX's backend tolerance
// (|got - want| <= atol + rtol |want|, rtol 1e-3, atol 1e-7). NotSupported: an op the
// importer does not claim; Refused: the importer threw Error on something it claims (a type
// or attribute vkgrad lacks: detail says which).
NodeTestResult runNodeTest(vk::Context& context, const std::filesystem::path& dir);

}  // namespace vkgrad::test
