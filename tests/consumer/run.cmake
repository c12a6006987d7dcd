# Configures, builds and runs tests/consumer in a fresh folder (tests/CMakeLists.txt):
#   cmake -DWORK_DIR=... [-DVKGRAD_SOURCE_DIR=...] [-DVKGRAD_BUILD_DIR=...] -P run.cmake
# With VKGRAD_SOURCE_DIR the consumer adds vkgrad's source tree as a subdirectory and builds
# it as shared libraries; with VKGRAD_BUILD_DIR it first installs that (static) build into
# WORK_DIR/prefix and finds it there.
file(REMOVE_RECURSE ${WORK_DIR})
set(configure_command ${CMAKE_COMMAND} -S ${CMAKE_CURRENT_LIST_DIR} -B ${WORK_DIR}/build
                      -DCMAKE_BUILD_TYPE=Release)
set(steps)
if(VKGRAD_SOURCE_DIR)
  # Unoptimised (a consumer's debug build), which also compiles the libraries again in three
  # quarters of Release's time: this test's minutes are most of a CI stage's longest test.
  list(APPEND configure_command -DVKGRAD_SOURCE_DIR=${VKGRAD_SOURCE_DIR} -DBUILD_SHARED_LIBS=ON
       -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG=-O0 -DCMAKE_CXX_FLAGS_DEBUG=-O0)
else()
  list(APPEND configure_command -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
  list(APPEND steps install)
endif()
list(APPEND steps configure build consumer consumer_volk)
foreach(step ${steps})
  if(step STREQUAL "install")
    set(command ${CMAKE_COMMAND} --install ${VKGRAD_BUILD_DIR} --prefix ${WORK_DIR}/prefix)
  elseif(step STREQUAL "configure")
    set(command ${configure_command})
  elseif(step STREQUAL "build")
    set(command ${CMAKE_COMMAND} --build ${WORK_DIR}/build -j2 --target consumer consumer_volk)
  else()
    set(command ${WORK_DIR}/build/${step})
  endif()
  execute_process(COMMAND ${command} RESULT_VARIABLE result OUTPUT_VARIABLE out
                  ERROR_VARIABLE out)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "consumer: ${step} failed (${result}):\n${out}")
  endif()
  if(step MATCHES "^consumer")
    message("${out}")
  endif()
endforeach()
