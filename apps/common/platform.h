// What the programs ask of the operating system, behind one small interface: a POSIX
// implementation (platform_posix.cpp) and a Windows one (platform_windows.cpp), each
// compiling to nothing on the other.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace vkgrad::apps {

// Whether stream writes to a terminal (a progress bar redraws its line there; a file or a
// pipe gets whole lines).
bool isTerminal(std::FILE* stream);

// The machine's physical memory and this process's resident set in bytes; 0 where unknown.
uint64_t physicalMemoryBytes();
uint64_t residentBytes();

// Sets the environment variable name to value for this process and the children it starts
// (and for the Vulkan loader, which reads the environment when an instance is created).
void setEnvironment(const char* name, const std::string& value);

// Empty if this process may create files in dir, else the system's reason it may not.
std::string writeAccessProblem(const std::filesystem::path& dir);

}  // namespace vkgrad::apps
