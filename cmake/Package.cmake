# The libraries as a package. In the build tree (add_subdirectory) and once installed
# (cmake --install build --prefix P; find_package(vkgrad 0.2 REQUIRED)) the same names:
# vkgrad::vk, vkgrad::ops, vkgrad::io (safetensors, JSON, bundles), vkgrad::runtime (graphs,
# execution, parameters), vkgrad::training (autograd, optimizer, Trainer on top of it;
# vkgrad::graph is its old name, kept one release), vkgrad::inference (nn blocks, the GPT's forward pass and sampler,
# on vkgrad::runtime alone), vkgrad::models, vkgrad::tokenizers (byte-level BPE, on the CPU; PCRE2),
# vkgrad::hf (Hugging Face model folders onto vkgrad's models),
# and vkgrad::vkgrad for all of them; vkgrad::onnx (the
# ONNX importer) where VKGRAD_ONNX builds it, in an export set of its own.
# Headers install to P/include/vkgrad/<layer>/, included as "vkgrad/training/trainer.h".
include(CMakePackageConfigHelpers)

# The tokenizers where PCRE2 and ICU were found (models/CMakeLists.txt).
set(VKGRAD_LAYERS vk ops io runtime training graph inference models hf)
set(VKGRAD_WITH_TOKENIZERS OFF)
if(TARGET vkgrad_tokenizers)
  list(APPEND VKGRAD_LAYERS tokenizers)
  set(VKGRAD_WITH_TOKENIZERS ON)
endif()
add_library(vkgrad_all INTERFACE)
target_link_libraries(vkgrad_all INTERFACE vkgrad_models vkgrad_hf
                      $<TARGET_NAME_IF_EXISTS:vkgrad_tokenizers>)
foreach(layer ${VKGRAD_LAYERS} all)
  set(export_name ${layer})
  if(layer STREQUAL all)
    set(export_name vkgrad)
  endif()
  set_target_properties(vkgrad_${layer} PROPERTIES EXPORT_NAME ${export_name})
  add_library(vkgrad::${export_name} ALIAS vkgrad_${layer})
endforeach()

list(TRANSFORM VKGRAD_LAYERS PREPEND vkgrad_)
install(TARGETS ${VKGRAD_LAYERS} vkgrad_all
        EXPORT vkgradTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(root engine/vkgrad models/vkgrad)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${root}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/vkgrad
          FILES_MATCHING PATTERN "*.h")
endforeach()

set(VKGRAD_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/vkgrad)
install(EXPORT vkgradTargets NAMESPACE vkgrad:: DESTINATION ${VKGRAD_CMAKE_DIR})
# vkgrad::onnx, the ONNX importer (VKGRAD_ONNX), in an export set of its own: the package
# config loads it, and finds Debian's onnx and protobuf for it, only where it was installed.
if(TARGET vkgrad_onnx)
  set_target_properties(vkgrad_onnx PROPERTIES EXPORT_NAME onnx)
  add_library(vkgrad::onnx ALIAS vkgrad_onnx)
  install(TARGETS vkgrad_onnx EXPORT vkgradOnnxTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(EXPORT vkgradOnnxTargets NAMESPACE vkgrad:: DESTINATION ${VKGRAD_CMAKE_DIR})
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/vkgradConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/vkgradConfig.cmake
                              INSTALL_DESTINATION ${VKGRAD_CMAKE_DIR})
# 0.x: a minor version may break the API, so only the same 0.minor satisfies a request.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/vkgradConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/vkgradConfig.cmake ${PROJECT_BINARY_DIR}/vkgradConfigVersion.cmake
        DESTINATION ${VKGRAD_CMAKE_DIR})
