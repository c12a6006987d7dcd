# Compiles every shaders/**/*.comp to SPIR-V at build time, validates it with
# spirv-val, and embeds the words into a C++ table (engine/vkgrad/vk/shader_registry.h).
# A kernel's name is its path below shaders/ without ".comp": "matmul/naive".
# glslangValidator writes a depfile, so editing a shaders/common/*.glsl include
# rebuilds exactly the kernels that include it (its target is the .spv, so the .spv is an
# output of the rule too).
#
# A kernel whose .comp includes shaders/common/storage.glsl is compiled a second time as
# "<name>.s16" with STORAGE16 defined: its variant for 16-bit tensors (ops/storage.h picks
# it). The include is looked for when CMake configures, and every .comp is a configure
# dependency, so adding it re-runs the check.
#
# A kernel whose .comp enables GL_KHR_shader_subgroup_arithmetic (the row reductions of
# shaders/common/reduce.glsl) is compiled again as "<name>.nsa" (and "<name>.s16.nsa") with
# NO_SUBGROUP_ARITHMETIC defined: the reductions through shared memory only, for a device
# without subgroup arithmetic (ops/storage.h picks it).
#
# A kernel whose .comp includes shaders/common/fragment.glsl (tensor-core fragments) is
# compiled again as "<name>.emu" (and "<name>.emu.s16") with FRAG_EMULATED defined: the
# fragments in plain GLSL, for tests on devices without cooperative matrices.
#
# A kernel whose .comp tests FOUR_STORAGE_BUFFERS in a preprocessor line, or declares a binding
# with FLOATS_OR_TEXELS or UINTS_OR_TEXELS (shaders/common/storage_or_texels.glsl), is compiled
# again as "<name>.sb4" (and ".sb4.s16", ".sb4.nsa", ... as it has those builds) with it
# defined: its build that binds at most 4 storage buffers, for a device at Vulkan's minimum
# maxPerStageDescriptorStorageBuffers (the launcher picks it only there).

find_program(GLSLANG_VALIDATOR glslangValidator REQUIRED)
find_program(SPIRV_VAL spirv-val REQUIRED)

# Whether a line of src matches regex (a configure dependency, so editing src re-checks):
# "^#include \"common/storage.glsl\"" (a body shared with a texel variant is included after
# it), "^#extension GL_KHR_shader_subgroup_arithmetic", "^#include \"common/fragment.glsl\"".
function(vkgrad_source_has src regex out)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${src}")
  file(STRINGS "${src}" found REGEX "${regex}")
  if(found)
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()

function(vkgrad_embed_shaders target shader_root)
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS "${shader_root}/*.comp")
  list(SORT sources)
  set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/shaders")
  set(embedded)
  set(table_decls "")
  set(table_rows "")
  set(index 0)
  set(variants)
  foreach(src IN LISTS sources)
    file(RELATIVE_PATH rel "${shader_root}" "${src}")
    string(REGEX REPLACE "\\.comp$" "" name "${rel}")
    list(LENGTH variants first_count)
    list(APPEND variants "${src}|${name}|")
    vkgrad_source_has("${src}" "^#include \"common/storage.glsl\"" has_storage)
    vkgrad_source_has("${src}" "^#extension GL_KHR_shader_subgroup_arithmetic" has_arithmetic)
    vkgrad_source_has("${src}" "^#include \"common/fragment.glsl\"" has_fragment)
    vkgrad_source_has("${src}" "^(#if.*FOUR_STORAGE_BUFFERS|(FLOATS|UINTS)_OR_TEXELS\\()" has_four)
    if(has_storage)
      list(APPEND variants "${src}|${name}.s16|-DSTORAGE16")
    endif()
    if(has_arithmetic)
      list(APPEND variants "${src}|${name}.nsa|-DNO_SUBGROUP_ARITHMETIC")
    endif()
    if(has_storage AND has_arithmetic)
      list(APPEND variants "${src}|${name}.s16.nsa|-DSTORAGE16,-DNO_SUBGROUP_ARITHMETIC")
    endif()
    if(has_fragment)
      list(APPEND variants "${src}|${name}.emu|-DFRAG_EMULATED")
    endif()
    if(has_fragment AND has_storage)
      list(APPEND variants "${src}|${name}.emu.s16|-DFRAG_EMULATED,-DSTORAGE16")
    endif()
    if(has_four)
      # Each of this source's builds again, ".sb4" after the kernel's name.
      list(SUBLIST variants ${first_count} -1 own)
      foreach(build IN LISTS own)
        string(REPLACE "|" ";" build_parts "${build}")
        list(GET build_parts 1 build_name)
        list(LENGTH build_parts build_n)
        set(build_defines "-DFOUR_STORAGE_BUFFERS")
        if(build_n GREATER 2)
          list(GET build_parts 2 more)
          if(more)
            string(APPEND build_defines ",${more}")
          endif()
        endif()
        string(REPLACE "${name}" "${name}.sb4" build_name "${build_name}")
        list(APPEND variants "${src}|${build_name}|${build_defines}")
      endforeach()
    endif()
  endforeach()
  foreach(variant IN LISTS variants)
    string(REPLACE "|" ";" parts "${variant}")
    list(GET parts 0 src)
    list(GET parts 1 name)
    list(LENGTH parts n_parts)
    set(defines)
    if(n_parts GREATER 2)
      list(GET parts 2 defines)
      string(REPLACE "," ";" defines "${defines}")
    endif()
    # A source is the main dependency of one rule only: its f32 build.
    set(dependency MAIN_DEPENDENCY)
    if(defines)
      set(dependency DEPENDS)
    endif()
    string(MAKE_C_IDENTIFIER "${name}" ident)
    set(spv "${out_dir}/${name}.spv")
    set(cpp "${out_dir}/${name}.spv.cpp")
    get_filename_component(spv_dir "${spv}" DIRECTORY)
    add_custom_command(
      OUTPUT "${spv}" "${cpp}"
      COMMAND ${CMAKE_COMMAND} -E make_directory "${spv_dir}"
      COMMAND ${GLSLANG_VALIDATOR} --quiet --target-env vulkan1.2 ${defines}
              -I${shader_root} --depfile "${spv}.d" -o "${spv}" "${src}"
      COMMAND ${SPIRV_VAL} --target-env vulkan1.2 "${spv}"
      COMMAND ${CMAKE_COMMAND} -DSPV=${spv} -DOUT=${cpp} -DIDENT=kSpv_${ident}
              -P "${PROJECT_SOURCE_DIR}/cmake/embed_spirv.cmake"
      ${dependency} "${src}"
      DEPFILE "${spv}.d"
      COMMENT "GLSL ${name}"
      VERBATIM)
    list(APPEND embedded "${cpp}")
    string(APPEND table_decls "extern const uint32_t kSpv_${ident}[];\nextern const size_t kSpv_${ident}_words;\n")
    string(APPEND table_rows "    {\"${name}\", kSpv_${ident}, kSpv_${ident}_words},\n")
    math(EXPR index "${index} + 1")
  endforeach()
  set(table "${out_dir}/shader_table.cpp")
  file(WRITE "${table}.in"
    "// Generated by cmake/Shaders.cmake: every kernel compiled into this build.\n"
    "#include \"vkgrad/vk/shader_registry.h\"\n\nnamespace vkgrad::vk {\n${table_decls}\n"
    "std::span<const EmbeddedShader> embeddedShaders() {\n"
    "  static const EmbeddedShader kTable[] = {\n${table_rows}  };\n"
    "  return kTable;\n}\n\n}  // namespace vkgrad::vk\n")
  configure_file("${table}.in" "${table}" COPYONLY)
  target_sources(${target} PRIVATE ${embedded} "${table}")
endfunction()
