# Reads ctest's LastTest.log and prints one line per test: its name, "pass", "skip" or
# "fail", and for a failure the limit or feature its output names as the reason it was
# refused ("-" where it names none, which is a real failure). A ctest test that runs a batch
# of GoogleTest tests (cmake/gtest_batches.cmake) gives one line per GoogleTest test, read
# from gtest's "[ RUN ]" ... "[  FAILED  ]" lines; a batch that dies inside a test gives that
# test "fail -"; any other ctest test gives one line. Used by scripts/test-profiles.sh;
# POSIX awk (Debian's mawk).
function finish(status) {
  print running, status, (status == "fail" ? (reason == "" ? "-" : reason) : "")
  running = ""; reason = ""; ++gtests
}
/^[0-9]+\/[0-9]+ Testing: / { ctest = $3; running = ""; reason = ""; gtests = 0; next }
/^\[ RUN      \] / { running = $0; sub(/^\[ RUN      \] /, "", running); reason = ""; next }
running != "" && /^\[       OK \] .* \([0-9]+ ms\)$/ { finish("pass"); next }
running != "" && /^\[  SKIPPED \] .* \([0-9]+ ms\)$/ { finish("skip"); next }
running != "" && /^\[  FAILED  \] .* \([0-9]+ ms\)$/ { finish("fail"); next }
reason == "" && /allows [0-9]+ \(max[A-Za-z0-9]/ {
  s = $0; sub(/.*allows [0-9]+ \(/, "", s); sub(/\).*/, "", s); reason = s
}
reason == "" && /needs? [A-Za-z0-9]+[^;]*, which .* does not offer/ {
  s = $0; sub(/.* needs? /, "", s); sub(/[ ,(].*/, "", s); reason = s
}
reason == "" && /has no subgroup arithmetic in compute shaders/ { reason = "subgroupArithmetic" }
reason == "" && /needs subgroup shuffle in compute shaders, which/ { reason = "subgroupShuffle" }
reason == "" && /needs a CPU device with subgroup shuffle/ { reason = "subgroupShuffle" }
reason == "" && /maxTexelBufferElements|texel-buffer limits/ { reason = "maxTexelBufferElements" }
reason == "" && /invocations, and the tiles at most [0-9]+ bytes of shared memory/ {
  reason = "maxComputeWorkGroupInvocations|maxComputeSharedMemorySize"
}
/^Test (Passed|Failed)\./ {
  passed = ($0 ~ /^Test Passed/)
  if (running != "") { reason = ""; finish("fail") }  # the batch died inside this test
  else if (gtests == 0) { running = ctest; finish(passed ? "pass" : "fail") }
}
