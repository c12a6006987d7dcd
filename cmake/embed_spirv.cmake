# cmake -DSPV=in.spv -DOUT=out.cpp -DIDENT=name -P embed_spirv.cmake
# Writes the SPIR-V words of SPV as a uint32_t array (SPIR-V is little-endian words).
file(READ "${SPV}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR rem "${n} % 8")
if(n EQUAL 0 OR NOT rem EQUAL 0)
  message(FATAL_ERROR "${SPV}: not a SPIR-V binary (${n} hex digits)")
endif()
string(REGEX REPLACE "([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])"
       "0x\\4\\3\\2\\1u," words "${hex}")
string(REGEX REPLACE "(0x[0-9a-f]+u,0x[0-9a-f]+u,0x[0-9a-f]+u,0x[0-9a-f]+u,0x[0-9a-f]+u,0x[0-9a-f]+u,0x[0-9a-f]+u,0x[0-9a-f]+u,)"
       "\\1\n" words "${words}")
math(EXPR count "${n} / 8")
file(WRITE "${OUT}" "#include <cstddef>\n#include <cstdint>\nnamespace vkgrad::vk {\n"
  "extern const uint32_t ${IDENT}[] = {\n${words}\n};\n"
  "extern const size_t ${IDENT}_words = ${count};\n}  // namespace vkgrad::vk\n")
