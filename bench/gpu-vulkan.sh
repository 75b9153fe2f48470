# Sourced by the bench/*-gpu.sh scripts on the lent GPU: installs the carried Vulkan loader debs
# (.gl; see the device tool's README) and points the loader at NVIDIA's ICD.
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
f=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -f $f ]; then export VK_DRIVER_FILES=$f; fi
