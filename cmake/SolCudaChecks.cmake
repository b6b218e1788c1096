# Offline checks of the sm90 CUDA kernels, run by ctest on machines without a GPU (issue 22):
#   cuda.sm90.nvcc.<src>      nvcc for sm_90a, warnings and ptxas spills/local memory as errors, no C7511
#   cuda.sm90.nvrtc.<src>     NVRTC for sm_90a (the JIT's compiler: no host headers), no warning
#   cuda.sm90.sass.<src>.nvcc / .nvrtc   SASS and resource report against <src>.sass.txt
#   cuda.sm90.not_sm90.<src>  the same source for plain sm_90 fails because wgmma needs sm_90a
# for every tests/kernels/cuda/*.cu. Without a CUDA toolkit (or with SOL_CUDA=OFF) none are
# added; without cuobjdump (scripts/install-deps.sh installs it into .tools/) the SASS tests
# report themselves skipped. A new kernel is a .cu instantiation plus its .sass.txt table.
if(DEFINED SOL_CUDA AND SOL_CUDA STREQUAL "OFF")
  message(STATUS "sm90 offline checks: off (SOL_CUDA=OFF)")
  return()
endif()
if(NOT CUDAToolkit_FOUND)
  find_package(CUDAToolkit QUIET)
endif()
find_package(Python3 COMPONENTS Interpreter QUIET)
if(NOT CUDAToolkit_FOUND OR NOT TARGET CUDA::nvrtc OR NOT CUDAToolkit_NVCC_EXECUTABLE OR NOT Python3_FOUND)
  message(STATUS "sm90 offline checks: skipped (no CUDA toolkit with nvcc and NVRTC, or no python3)")
  return()
endif()

find_program(SOL_CUOBJDUMP cuobjdump
             HINTS ${CMAKE_SOURCE_DIR}/.tools/cuda/nvidia/cu13/bin ${CUDAToolkit_BIN_DIR})
add_executable(sol_nvrtc_check ${CMAKE_SOURCE_DIR}/tests/kernels/cuda/nvrtc_compile_check.cc)
target_compile_options(sol_nvrtc_check PRIVATE -Wall -Wextra)
target_link_libraries(sol_nvrtc_check PRIVATE CUDA::nvrtc)

set(_sol_sass_check ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/scripts/sass_check.py)
set(_sol_cubin_dir ${CMAKE_BINARY_DIR}/sm90-checks)
file(MAKE_DIRECTORY ${_sol_cubin_dir})
file(GLOB _sol_cuda_sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/kernels/cuda/*.cu)
foreach(src IN LISTS _sol_cuda_sources)
  get_filename_component(stem ${src} NAME_WE)
  get_filename_component(dir ${src} DIRECTORY)
  add_test(NAME cuda.sm90.nvcc.${stem}
           COMMAND ${_sol_sass_check} build ${src} ${_sol_cubin_dir}/${stem}.nvcc.cubin
                   --nvcc ${CUDAToolkit_NVCC_EXECUTABLE} -I ${CMAKE_SOURCE_DIR}/src)
  add_test(NAME cuda.sm90.nvrtc.${stem}
           COMMAND sol_nvrtc_check ${src} ${CMAKE_SOURCE_DIR}/src ${_sol_cubin_dir}/${stem}.nvrtc.cubin)
  file(READ ${src} _sol_cu_text)
  # The negative build is for wgmma/setmaxnreg code only: sources that use no sm90 primitive, or
  # are marked as using no sm_90a-only instruction (memory-bound kernels), skip it.
  string(FIND "${_sol_cu_text}" "sm90" _sol_uses_sm90)
  string(FIND "${_sol_cu_text}" "sol-offline: plain sm_90 builds too" _sol_plain_sm90)
  if(NOT _sol_uses_sm90 EQUAL -1 AND _sol_plain_sm90 EQUAL -1)
  add_test(NAME cuda.sm90.not_sm90.${stem}
           COMMAND ${_sol_sass_check} negative ${src} --nvcc ${CUDAToolkit_NVCC_EXECUTABLE}
                   -I ${CMAKE_SOURCE_DIR}/src)
  set_tests_properties(cuda.sm90.not_sm90.${stem} PROPERTIES LABELS cuda-offline)
  endif()
  set_tests_properties(cuda.sm90.nvcc.${stem} PROPERTIES FIXTURES_SETUP sm90_nvcc_${stem} LABELS cuda-offline)
  set_tests_properties(cuda.sm90.nvrtc.${stem} PROPERTIES FIXTURES_SETUP sm90_nvrtc_${stem} LABELS cuda-offline)
  foreach(compiler nvcc nvrtc)
    set(name cuda.sm90.sass.${stem}.${compiler})
    if(SOL_CUOBJDUMP)
      add_test(NAME ${name}
               COMMAND ${_sol_sass_check} expect ${_sol_cubin_dir}/${stem}.${compiler}.cubin
                       ${dir}/${stem}.sass.txt --cuobjdump ${SOL_CUOBJDUMP})
    else()
      add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} -E echo
               "skipped: no cuobjdump (bash scripts/install-deps.sh puts it in .tools/cuda)")
      set_tests_properties(${name} PROPERTIES SKIP_REGULAR_EXPRESSION "skipped: no cuobjdump")
    endif()
    set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED sm90_${compiler}_${stem} LABELS cuda-offline)
  endforeach()
endforeach()
