# Lists a GoogleTest program's tests and writes a ctest file that runs them in batches: one
# ctest test per test suite ("Suite.*"), or per run of at most BATCH_SIZE of its tests
# ("Suite.[2/3]") in a large suite. Run after each build of the program (tests/CMakeLists.txt):
#   cmake -DTEST_EXECUTABLE=... -DCTEST_FILE=... -DBATCH_SIZE=12 -DTEST_ENVIRONMENT=K=V
#         -DTEST_TIMEOUT=600 [-DTEST_LAUNCHER=...] [-DTEST_EXCLUDE=REGEX] -P gtest_batches.cmake
# TEST_LAUNCHER runs the program (a cross build's emulator: Wine); TEST_EXCLUDE leaves out the
# tests whose full names it matches (scripts/test-windows.sh: what cannot run under Wine).
# Why batches: every test of vkgrad_tests shares its process's Context, and starting a
# process that creates one on lavapipe (loading Mesa and LLVM, creating the device under the
# validation layer) costs about 0.35 s of CPU: a third of the suite's time, paid five times per
# CI run, when each test was its own process. Each test still starts with no validation
# message pending and fails alone (tests/common/vk_test.h); gtest prints every test's result
# inside its batch's output.
execute_process(COMMAND ${TEST_LAUNCHER} ${TEST_EXECUTABLE} --gtest_list_tests
                OUTPUT_VARIABLE listing RESULT_VARIABLE result ERROR_VARIABLE errors)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "gtest_batches: ${TEST_EXECUTABLE} --gtest_list_tests failed (${result}):\n"
                      "${errors}${listing}")
endif()

# --gtest_list_tests prints "Suite." and then each test indented, a parameter's value after
# a "  # " comment.
string(REPLACE "\n" ";" lines "${listing}")
set(suites)
foreach(line IN LISTS lines)
  string(REGEX REPLACE "  #.*" "" line "${line}")
  if(line MATCHES "^([^ ].*)\\.$")
    set(suite "${CMAKE_MATCH_1}")
    list(APPEND suites "${suite}")
    string(MAKE_C_IDENTIFIER "${suite}" key)
    set(tests_${key})
  elseif(line MATCHES "^  ([^ ]+)$")
    set(test "${suite}.${CMAKE_MATCH_1}")
    if(NOT TEST_EXCLUDE OR NOT test MATCHES "${TEST_EXCLUDE}")
      list(APPEND tests_${key} "${test}")
    endif()
  endif()
endforeach()

set(out "# Written by cmake/gtest_batches.cmake from ${TEST_EXECUTABLE} --gtest_list_tests\n")
set(count 0)
foreach(suite IN LISTS suites)
  string(MAKE_C_IDENTIFIER "${suite}" key)
  list(LENGTH tests_${key} n)
  if(n EQUAL 0)
    continue()
  endif()
  math(EXPR parts "(${n} + ${BATCH_SIZE} - 1) / ${BATCH_SIZE}")
  math(EXPR last_part "${parts} - 1")
  foreach(part RANGE ${last_part})
    if(parts EQUAL 1 AND NOT TEST_EXCLUDE)
      set(name "${suite}.*")
      set(filter "${suite}.*")
    else()
      math(EXPR first "${part} * ${n} / ${parts}")
      math(EXPR end "(${part} + 1) * ${n} / ${parts}")
      math(EXPR length "${end} - ${first}")
      list(SUBLIST tests_${key} ${first} ${length} chunk)
      math(EXPR label "${part} + 1")
      set(name "${suite}.[${label}/${parts}]")
      if(parts EQUAL 1)
        set(name "${suite}.*")
      endif()
      string(JOIN ":" filter ${chunk})
    endif()
    set(command)
    foreach(word IN LISTS TEST_LAUNCHER ITEMS ${TEST_EXECUTABLE})
      string(APPEND command " [=[${word}]=]")
    endforeach()
    string(APPEND out "add_test([=[${name}]=]${command} [=[--gtest_filter=${filter}]=])\n"
                      "set_tests_properties([=[${name}]=] PROPERTIES "
                      "ENVIRONMENT [=[${TEST_ENVIRONMENT}]=] TIMEOUT ${TEST_TIMEOUT})\n")
    math(EXPR count "${count} + 1")
  endforeach()
endforeach()
if(count EQUAL 0)
  message(FATAL_ERROR "gtest_batches: ${TEST_EXECUTABLE} lists no tests")
endif()
file(WRITE "${CTEST_FILE}" "${out}")
