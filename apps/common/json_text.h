// JSON text for the programs' --json output.
#pragma once

#include <string>

namespace vkgrad::apps {

// text as a JSON string literal: quotes, backslashes and control characters escaped, bytes
// that are not well-formed UTF-8 (drivers fill some strings) as U+FFFD, so the output always
// parses.
std::string jsonQuote(const std::string& text);

}  // namespace vkgrad::apps
