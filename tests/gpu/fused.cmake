# The fused kernels (kernels/cuda/fused.h): the self-checking harness tests/gpu/fused_check.cu
# and its tests. Included from tests/gpu/CMakeLists.txt (CUDA builds only).
#   fused_plans   host only: which faces the 3D warp-row plans read through, which plans launch
#                 plane ranges, and the wave model of the chunks
#   gpu_fused     the fused kernels against a one-step GPU kernel, bitwise (exit 77 = skipped
#                 without a GPU)
add_executable(fused_check fused_check.cu $<TARGET_OBJECTS:stencil_fused>)
target_include_directories(fused_check PRIVATE ${PROJECT_SOURCE_DIR})
target_compile_options(fused_check PRIVATE -fmad=false -lineinfo -Xcompiler=-ffp-contract=off)
set_target_properties(fused_check PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)

add_test(NAME fused_plans COMMAND fused_check plans)
set_tests_properties(fused_plans PROPERTIES LABELS unit TIMEOUT 60)
add_test(NAME gpu_fused COMMAND fused_check check 300 2026)
set_tests_properties(gpu_fused PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
