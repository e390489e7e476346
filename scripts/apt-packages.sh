# Debian packages the test suite needs (sourced by setup.sh).
# clang: the MSL syntax check; the later targets add pocl-opencl-icd, mesa-vulkan-drivers,
# libvulkan1, spirv-tools and hipcc here.
APT_PACKAGES=()
