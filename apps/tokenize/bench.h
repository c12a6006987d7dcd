// vkgrad-tokenize bench: encoding speed of a byte-level BPE tokenizer on one CPU thread.
#pragma once

namespace vkgrad::apps {

int bench(int argc, char** argv);

}  // namespace vkgrad::apps
