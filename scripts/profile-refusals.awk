# Reads ctest's LastTest.log and prints one line per failed test: its name and the limit or
# feature its output names as the reason it was refused ("-" where it names none, which is a
# real failure). Used by scripts/test-profiles.sh; POSIX awk (Debian's mawk).
/^[0-9]+\/[0-9]+ Testing: / { name = $3; reason = ""; next }
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
/^Test Failed\./ { print name, (reason == "" ? "-" : reason) }
