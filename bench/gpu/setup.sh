# Sourced first on a lent GPU machine, in the repository root, with .gl and .gpu carried
# (bench/gpu/pack.sh made them): unpacks the build at the path it was configured for
# (/work/main/build), the loader, the validation layer and the data (the GPT's corpus at
# /tmp/licenses.txt), and points Vulkan at NVIDIA's driver. Leaves VKGRAD_BUILD set.
export VKGRAD_BUILD=/work/main/build
# Once per machine and build: a later script on the same machine and build only exports.
stamp=$(md5sum < .gpu/build.tar.xz)
if [[ "$(cat /tmp/vkgrad-gpu-setup 2>/dev/null)" != "$stamp" ]]; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
  mkdir -p /opt/vkgrad-vl && dpkg -x .gpu/vulkan-validationlayers_*.deb /opt/vkgrad-vl
  for f in .gpu/lib/*; do  # only what the image lacks: its own copies stay in use
    ldconfig -p | grep -q "^[[:space:]]*$(basename "$f") " || cp "$f" /usr/local/lib/
  done
  ldconfig
  [[ -e /etc/fonts/fonts.conf ]] || dpkg -x .gpu/fontconfig-config_*.deb /
  ls /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf >/dev/null 2>&1 || dpkg -x .gpu/fonts-dejavu-core_*.deb /
  mkdir -p /usr/share/datasets && ln -sfn "$PWD/.gpu/fashion-mnist" /usr/share/datasets/fashion-mnist
  cp .gpu/licenses.txt /tmp/licenses.txt
  mkdir -p "$VKGRAD_BUILD" && tar -C "$VKGRAD_BUILD" -xJf .gpu/build.tar.xz
  echo "$stamp" > /tmp/vkgrad-gpu-setup
fi
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VK_ICD_FILENAMES=$VK_DRIVER_FILES
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
export VK_LAYER_PATH=/opt/vkgrad-vl/usr/share/vulkan/explicit_layer.d
export LD_LIBRARY_PATH=/opt/vkgrad-vl/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export VKGRAD_APPS_DIR=$VKGRAD_BUILD/apps
