#!/usr/bin/env bash
# Sets up (packages, build) and runs the demo: the device list, then the kernel checks.
set -euo pipefail
# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

"$VKGRAD_BUILD/apps/vkgrad-info"
echo
"$VKGRAD_BUILD/apps/vkgrad-demo" "$@"
