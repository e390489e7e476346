# Debian packages the test suite needs (sourced by setup.sh).
# pocl-opencl-icd + ocl-icd-libopencl1: the OpenCL runtime on the CPU (PoCL);
# mesa-vulkan-drivers + libvulkan1: wgpu on lavapipe; spirv-tools: spirv-val;
# hipcc: the HIP codegen check; clang: the MSL syntax check with a Metal shim.
APT_PACKAGES=(pocl-opencl-icd ocl-icd-libopencl1 mesa-vulkan-drivers libvulkan1 spirv-tools hipcc clang)
