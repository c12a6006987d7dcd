// JSON in vkgrad is nlohmann::json (Debian's nlohmann-json3-dev). This file holds the few
// rules vkgrad adds, in one place for checkpoints, configs and the programs' --json output:
// a parse error is a vkgrad::Error naming the file, never one of nlohmann's exceptions; a key
// given twice is an error (a header that says two things about one tensor is corrupt, where
// nlohmann would keep the last); written text is always valid UTF-8.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace vkgrad::graph {

// Objects keep their members in the order they were added or read: a header lists tensors in
// file order, and a --json line reads in the order its fields were built.
using Json = nlohmann::ordered_json;

// Exactly one document, surrounding whitespace allowed. Throws Error "<where>: invalid JSON:
// <nlohmann's message>" for anything else, a key twice in one object, or nesting deeper than 64.
Json parseJson(std::string_view text, const std::string& where);
// The same into nlohmann::json, whose objects are std::maps: for documents looked up by key
// more than read in order (a tokenizer's vocabulary of 150,000 tokens).
nlohmann::json parseJsonMapped(std::string_view text, const std::string& where);

// Compact text, or with indent >= 0 one member per line. Numbers print as the shortest text
// that reads back to the same double (so a float round-trips), NaN and infinities as null,
// bytes that are not UTF-8 (a file name, a driver's string) as U+FFFD.
std::string dumpJson(const Json& value, int indent = -1);

// value as an integer in [0, max] (3.0 counts: JSON has one number type). Throws Error
// "<what> must be an integer in [0, <max>], got <value>" otherwise.
uint64_t jsonUint(const Json& value, std::string_view what, uint64_t max = uint64_t(1) << 53);

// A JSON file read whole and parsed. Throws Error "<path>: cannot open" or parseJson's error.
Json readJsonFile(const std::filesystem::path& path);

// DIR/file of a checkpoint directory, read and parsed, after io/bundle.h's checkBundle(DIR).
// Throws Error "<dir>: no such checkpoint directory", "<path>: missing (is this a <format>
// checkpoint directory?)", checkBundle's or readJsonFile's.
Json readCheckpointFile(const std::filesystem::path& dir, const std::string& file,
                        const std::string& format);
// The envelope of every model's config.json, written atomically (io/atomic_file.h) to
// DIR/file as one line and a newline: {"format": format, "version": version, "model": model,
// then `sections`' members in order (a model's own: its vocabulary, its class names),
// "training": training}, as readCheckpointFile and jsonCheckFormat read it.
void writeCheckpointFile(const std::filesystem::path& dir, const std::string& file,
                         const std::string& format, uint64_t version, const Json& model,
                         const Json& training, const Json& sections = Json::object());

// Typed members of a config object. Each throws Error naming the key and what it got:
// "missing \"width\"", "\"model\" must be an object, got 3".
const Json& jsonMember(const Json& object, const std::string& key);
const Json& jsonObject(const Json& parent, const std::string& key);
std::string jsonString(const Json& object, const std::string& key);
bool jsonBool(const Json& object, const std::string& key);
double jsonNumber(const Json& object, const std::string& key);
// root is an object whose "format" is format and whose "version" is version; Error otherwise.
void jsonCheckFormat(const Json& root, const std::string& format, uint64_t version);
// An array of exactly `count` strings ("class_names").
std::vector<std::string> jsonStrings(const Json& object, const std::string& key, size_t count);
// An integer in [1, max].
int64_t jsonPositive(const Json& object, const std::string& key, int64_t max = int64_t(1) << 31);

}  // namespace vkgrad::graph
