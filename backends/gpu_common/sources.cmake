# The one kernel source set of the GPU backend modules: backends/cuda compiles it with nvcc,
# backends/hip with hipcc (PI_GPU_HIP selects the vendor mapping of gpu_runtime.hpp).
set(PI_GPU_COMMON_DIR ${CMAKE_CURRENT_LIST_DIR})
set(PI_GPU_SOURCES
  ${PI_GPU_COMMON_DIR}/gpu_backend.cu
  ${PI_GPU_COMMON_DIR}/gpu_blas.cu
  ${PI_GPU_COMMON_DIR}/gpu_graph.cu
  ${PI_GPU_COMMON_DIR}/gpu_module.cu
  ${PI_GPU_COMMON_DIR}/kernels_attention.cu
  ${PI_GPU_COMMON_DIR}/kernels_elementwise.cu
  ${PI_GPU_COMMON_DIR}/kernels_matmul.cu
  ${PI_GPU_COMMON_DIR}/kernels_norm_rope.cu
  ${PI_GPU_COMMON_DIR}/kernels_sparse.cu)
# Only the backend interface, lib/quant's headers and this folder (backends/CMakeLists.txt); as
# plain folders, because backends/hip passes them to hipcc itself.
get_target_property(_pi_gpu_interface_dirs powerinfer_backend_interface INTERFACE_INCLUDE_DIRECTORIES)
get_target_property(_pi_gpu_quant_dirs powerinfer_quant_headers INTERFACE_INCLUDE_DIRECTORIES)
set(PI_GPU_INCLUDE_DIRS ${_pi_gpu_interface_dirs} ${_pi_gpu_quant_dirs} ${PI_GPU_COMMON_DIR})
set(PI_GPU_EXPORTS_MAP ${PI_GPU_COMMON_DIR}/module_exports.map)
# Modules sit next to libpowerinfer.so, where the core looks for them.
set(PI_GPU_MODULE_DIR ${PROJECT_BINARY_DIR}/lib)
