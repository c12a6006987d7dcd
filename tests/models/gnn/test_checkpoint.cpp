// models/gnn/checkpoint: config.json written and read back field for field, and the files a
// reader must refuse refused with the path and the problem.
#include "vkgrad/gnn/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "common/temp_dir.h"
#include "vkgrad/core/error.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;

class GnnCheckpointTest : public TempDirTest {
 protected:
  // The Error message readConfig gives for DIR/config.json holding `text`.
  std::string readError(const std::string& text) {
    std::ofstream(dir_ / gnn::kConfigFile) << text;
    try {
      gnn::readConfig(dir_);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  }
};

TEST_F(GnnCheckpointTest, RoundTrips) {
  gnn::GnnCheckpoint cp;
  cp.config.model = gnn::Model::Gat;
  cp.config.in = 7;
  cp.config.hidden = 5;
  cp.config.classes = 3;
  cp.config.layers = 3;
  cp.config.heads = 2;
  cp.config.graph_level = true;
  cp.config.dropout = 0.25f;
  cp.class_names = {"a", "b", "c"};
  cp.training = {{"epochs", 17}};
  gnn::writeConfig(dir_, cp);
  const gnn::GnnCheckpoint back = gnn::readConfig(dir_);
  EXPECT_EQ(back.config.model, gnn::Model::Gat);
  EXPECT_EQ(back.config.in, 7);
  EXPECT_EQ(back.config.hidden, 5);
  EXPECT_EQ(back.config.classes, 3);
  EXPECT_EQ(back.config.layers, 3);
  EXPECT_EQ(back.config.heads, 2);
  EXPECT_TRUE(back.config.graph_level);
  EXPECT_EQ(back.config.dropout, 0.25f);
  EXPECT_EQ(back.class_names, cp.class_names);
  EXPECT_EQ(back.training, cp.training);
}

TEST_F(GnnCheckpointTest, RefusesWhatItCannotRead) {
  gnn::GnnCheckpoint cp;
  cp.config.in = 4;
  cp.class_names = {"only one"};
  EXPECT_THROW(gnn::writeConfig(dir_, cp), Error);  // 2 classes, 1 name
  const std::string model =
      R"("model": {"model": "gcn", "in": 4, "hidden": 16, "classes": 2, "layers": 2, )"
      R"("heads": 4, "graph_level": false})";
  EXPECT_NE(readError(R"({"format": "vkgrad-vit", "version": 1, )" + model +
                      R"(, "class_names": ["a", "b"]})")
                .find("format is not \"vkgrad-gnn\""),
            std::string::npos);
  EXPECT_NE(
      readError(R"({"format": "vkgrad-gnn", "version": 1, )" + model + R"(, "class_names": ["a"]})")
          .find("\"class_names\" must be an array of 2 strings"),
      std::string::npos);
  const std::string gin = readError(
      R"({"format": "vkgrad-gnn", "version": 1, "model": {"model": "gin", "in": 4, "hidden": 16, )"
      R"("classes": 2, "layers": 2, "heads": 4, "graph_level": false}, "class_names": ["a", "b"]})");
  EXPECT_NE(gin.find("config.json: unknown model 'gin'"), std::string::npos) << gin;
  EXPECT_NE(readError("{not json").find("config.json"), std::string::npos);
  try {
    gnn::readConfig(dir_ / "nowhere");
    ADD_FAILURE() << "a missing directory was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no such checkpoint directory"), std::string::npos);
  }
}

}  // namespace
}  // namespace vkgrad::test
