#!/usr/bin/env bash
# The threading tests under ThreadSanitizer: builds the test binary into build-tsan/
# (RelWithDebInfo, -DVKGRAD_SANITIZE=thread) and runs the tests that drive Contexts from
# several threads, submit without waiting, adopt an app's device or share it across queue
# families (README, "Threads" and "Queues").
# Every report fails its test (halt_on_error). scripts/tsan.supp lists what is suppressed and
# why.
#   scripts/test-threads.sh        (after scripts/setup.sh's packages are installed)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${VKGRAD_TSAN_BUILD_DIR:-$root/build-tsan}"
# The apps are not needed: the tests run here drive the library directly.
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVKGRAD_SANITIZE=thread \
  -DVKGRAD_BUILD_APPS=OFF >/dev/null
cmake --build "$build" --target vkgrad_tests -j"$(nproc)"
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$root/scripts/tsan.supp"
"$build/tests/vkgrad_tests" --gtest_filter='ThreadsTest.*:AsyncTest.*:QueueFamilyTest.*:Context.AdoptsAnExternalDevice*:Context.ExternalDeviceIsCheckedBeforeUse'
