#!/usr/bin/env bash
# The whole suite again on smaller devices than this one, by believing the device offers less
# (vk/device_limits.h): the mobile profile (256 invocations, 32 KiB of shared memory, no fp64,
# no 16-bit storage), workgroups of 128 invocations with 16 KiB of shared memory and no
# subgroup arithmetic (the Vulkan minimums for compute, every other limit this device's),
# and the vulkan12-minimum profile
# (every limit at the Vulkan 1.2 minimum, no optional feature). Kernels pick variants that
# fit, or the engine refuses by name; a test that fails must fail with such a refusal.
#
# Prints, per run, the passes and the refusals by the limit or feature named; exits 1 if a
# test failed without naming one (a crash, a wrong answer or a vague error). Reuses the build
# of scripts/test.sh (build/, or $VKGRAD_BUILD) and skips the consumer builds and the apps'
# tests (*App, *AppTest, DeviceOptions*: a program's options, files and output, which no limit
# changes; the models they train run under every profile in their own tests, GptTest, VitTest,
# VaeTest, GnnTest...): a third of the suite's time, run three times. VKGRAD_PROFILE_APPS=1
# runs them too.
#   scripts/test-profiles.sh              (after scripts/test.sh)
#   scripts/test-profiles.sh mobile       (one run: mobile, small-workgroups or vulkan12-minimum)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${VKGRAD_BUILD:-$root/build}"
if (($#)); then runs=("$@"); else runs=(mobile small-workgroups vulkan12-minimum); fi
exclude='^Consumer\.|App\.|AppTest\.|^DeviceOptions'
[[ "${VKGRAD_PROFILE_APPS:-0}" == 1 ]] && exclude='^Consumer\.'
status=0
for run in "${runs[@]}"; do
  unset VKGRAD_DEVICE_PROFILE VKGRAD_LIMITS
  case "$run" in
    mobile | vulkan12-minimum) export VKGRAD_DEVICE_PROFILE="$run" ;;
    small-workgroups) export VKGRAD_LIMITS="invocations=128,shared=16K,subgroup-arithmetic=off" ;;
    *) echo "test-profiles.sh: unknown run '$run'" >&2; exit 2 ;;
  esac
  echo "== $run (VKGRAD_DEVICE_PROFILE=${VKGRAD_DEVICE_PROFILE:-} VKGRAD_LIMITS=${VKGRAD_LIMITS:-})"
  "$build/apps/vkgrad-info" | sed -n '/^\*/,/^$/p' |
    grep -E "profile|subgroups|shared memory|workgroup|descriptors|buffer storage" || true
  start=$(date +%s)
  ctest --test-dir "$build" -E "$exclude" --no-tests=error -j2 >"$build/profile-$run.txt" 2>&1
  log="$build/profile-$run.log"
  cp "$build/Testing/Temporary/LastTest.log" "$log"
  results="$(awk -f "$root/scripts/profile-refusals.awk" "$log")"
  failed="$(printf '%s\n' "$results" | awk '$2 == "fail" {print $1, $3}')"
  total=$(printf '%s\n' "$results" | grep -c . || true)
  refused=$(printf '%s' "$failed" | grep -c . || true)
  seconds=$(($(date +%s) - start))
  echo "$run: $((total - refused)) of $total tests passed, $refused refused, in $seconds s"
  if ((total == 0)); then
    echo "$run: no test results in $log" >&2
    status=1
  fi
  if [[ -n "$failed" ]]; then
    echo "  refusals by what they name:"
    printf '%s\n' "$failed" | awk '{print $2}' | sort | uniq -c | sort -rn | sed 's/^/   /'
  fi
  unexplained="$(printf '%s\n' "$failed" | awk '$2 == "-" {print $1}')"
  if [[ -n "$unexplained" ]]; then
    echo "$run: failed without naming a limit or feature (see $log):" >&2
    printf '  %s\n' $unexplained >&2
    status=1
  fi
done
exit $status
