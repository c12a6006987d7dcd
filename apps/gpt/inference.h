// vkgrad-gpt's commands that run a model without training it: sample and eval, on a
// checkpoint of `vkgrad-gpt train` or a Hugging Face folder (model_source.h).
#pragma once

namespace vkgrad::apps {

int sample(int argc, char** argv);
int eval(int argc, char** argv);

}  // namespace vkgrad::apps
