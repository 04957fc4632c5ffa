# Tier 3 (kernels/cuda/cluster*.cu): the self-checking harness tests/gpu/cluster_check.cu and
# its tests. Included from tests/gpu/CMakeLists.txt (CUDA builds only).
#   cluster_emulate   the kernel's per-thread code run on the host for every thread of every CTA,
#                     race- and bounds-checked, bitwise against a CPU reference (no GPU needed)
#   cluster_plans     host only: which faces the 3D warp-row plans read through, and which
#                     plans launch plane ranges
#   gpu_cluster       the fused kernel against a one-step GPU kernel, bitwise, with shared memory
#                     poisoned (exit 77 = skipped without a GPU)
# Not built by default: cluster_check_bug1 (every other pipeline step skips its cluster barrier)
# and cluster_check_bug2 (a CTA reads its neighbour's edge cells one step early), which show that
# the checks fail (docs/cluster-kernel.md); `cmake --build B --target cluster_check_bug1`.
# tools/cluster-bench.sh runs all of it and the benchmark on a GPU machine.
set(_cluster_flags -fmad=false -lineinfo -Xcompiler=-ffp-contract=off)

add_executable(cluster_check cluster_check.cu $<TARGET_OBJECTS:stencil_cluster>)
target_include_directories(cluster_check PRIVATE ${PROJECT_SOURCE_DIR})
target_compile_options(cluster_check PRIVATE ${_cluster_flags})
set_target_properties(cluster_check PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)

foreach(_bug 1 2)
  add_library(stencil_cluster_bug${_bug} OBJECT EXCLUDE_FROM_ALL
              ${PROJECT_SOURCE_DIR}/kernels/cuda/cluster.cu
              ${PROJECT_SOURCE_DIR}/kernels/cuda/cluster_f32.cu
              ${PROJECT_SOURCE_DIR}/kernels/cuda/cluster_f64.cu
              ${PROJECT_SOURCE_DIR}/kernels/cuda/strip2d.cu)
  target_include_directories(stencil_cluster_bug${_bug} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_definitions(stencil_cluster_bug${_bug} PRIVATE CLUSTER_INJECT_BUG=${_bug}
                             CLUSTER_BUILD_STEPS=4 CLUSTER_BUILD_ROWS2=0)
  target_compile_options(stencil_cluster_bug${_bug} PRIVATE ${_cluster_flags})
  set_target_properties(stencil_cluster_bug${_bug} PROPERTIES CUDA_STANDARD 17)
  add_executable(cluster_check_bug${_bug} EXCLUDE_FROM_ALL cluster_check.cu
                 $<TARGET_OBJECTS:stencil_cluster_bug${_bug}>)
  target_include_directories(cluster_check_bug${_bug} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(cluster_check_bug${_bug} PRIVATE ${_cluster_flags})
  set_target_properties(cluster_check_bug${_bug} PROPERTIES CUDA_STANDARD 17)
endforeach()

add_test(NAME cluster_emulate COMMAND cluster_check emulate 300 2026)
set_tests_properties(cluster_emulate PROPERTIES LABELS unit TIMEOUT 300)
add_test(NAME cluster_plans COMMAND cluster_check plans)
set_tests_properties(cluster_plans PROPERTIES LABELS unit TIMEOUT 60)
add_test(NAME gpu_cluster COMMAND cluster_check check 300 2026)
set_tests_properties(gpu_cluster PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300
                     ENVIRONMENT "STENCIL_CLUSTER_POISON=1")

# Not built by default: tier2_lab, one-step 3D kernels on the device layout timed side by side
# (each first checked bit for bit against a host reference); docs/performance.md, tier 2.
add_executable(tier2_lab EXCLUDE_FROM_ALL tier2_lab.cu)
target_include_directories(tier2_lab PRIVATE ${PROJECT_SOURCE_DIR})
target_compile_options(tier2_lab PRIVATE ${_cluster_flags})
set_target_properties(tier2_lab PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)

