# Configures, builds and runs tests/consumer against the vkgrad source tree in a fresh build
# folder: cmake -DVKGRAD_SOURCE_DIR=... -DWORK_DIR=... -P run.cmake (tests/CMakeLists.txt).
file(REMOVE_RECURSE ${WORK_DIR})
foreach(step configure build run)
  if(step STREQUAL configure)
    set(command ${CMAKE_COMMAND} -S ${CMAKE_CURRENT_LIST_DIR} -B ${WORK_DIR}
                -DVKGRAD_SOURCE_DIR=${VKGRAD_SOURCE_DIR} -DCMAKE_BUILD_TYPE=Release)
  elseif(step STREQUAL build)
    set(command ${CMAKE_COMMAND} --build ${WORK_DIR} -j2 --target consumer)
  else()
    set(command ${WORK_DIR}/consumer)
  endif()
  execute_process(COMMAND ${command} RESULT_VARIABLE result OUTPUT_VARIABLE out
                  ERROR_VARIABLE out)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "consumer ${step} failed (${result}):\n${out}")
  endif()
endforeach()
message("${out}")
