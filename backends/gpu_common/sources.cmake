# The one kernel source set of the GPU backend modules: backends/cuda compiles it with nvcc,
# backends/hip with hipcc (PI_GPU_HIP selects the vendor mapping of gpu_runtime.hpp).
set(PI_GPU_COMMON_DIR ${CMAKE_CURRENT_LIST_DIR})
set(PI_GPU_SOURCES
  ${PI_GPU_COMMON_DIR}/gpu_backend.cu
  ${PI_GPU_COMMON_DIR}/gpu_module.cu
  ${PI_GPU_COMMON_DIR}/kernels_attention.cu
  ${PI_GPU_COMMON_DIR}/kernels_elementwise.cu
  ${PI_GPU_COMMON_DIR}/kernels_matmul.cu
  ${PI_GPU_COMMON_DIR}/kernels_norm_rope.cu
  ${PI_GPU_COMMON_DIR}/kernels_sparse.cu)
set(PI_GPU_INCLUDE_DIRS ${PROJECT_SOURCE_DIR}/lib ${PI_GPU_COMMON_DIR})
set(PI_GPU_EXPORTS_MAP ${PI_GPU_COMMON_DIR}/module_exports.map)
# Modules sit next to libpowerinfer.so, where the core looks for them.
set(PI_GPU_MODULE_DIR ${PROJECT_BINARY_DIR}/lib)
