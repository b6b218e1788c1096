# The CUDA backend. SOL_CUDA=AUTO (default) turns it on when a toolkit is found (/usr/local/cuda
# or wherever FindCUDAToolkit looks), ON requires one, OFF leaves it out: Sol then builds exactly
# as without a toolkit and sol/device.h reports "built without CUDA".
# Only NVRTC is linked. The driver API (libcuda) is reached through dlopen at run time
# (src/device/cuda/driver.cc); linking the toolkit's stub would make a binary that fails to load
# on a machine without a driver. cudart is not used.
set(SOL_CUDA AUTO CACHE STRING "CUDA backend: AUTO (on when a toolkit is found), ON, OFF")
set_property(CACHE SOL_CUDA PROPERTY STRINGS AUTO ON OFF)
set(SOL_HAS_CUDA OFF)
if(NOT SOL_CUDA STREQUAL "OFF")
  if(NOT DEFINED CUDAToolkit_ROOT AND NOT DEFINED ENV{CUDAToolkit_ROOT} AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND AND TARGET CUDA::nvrtc)
    set(SOL_HAS_CUDA ON)
    message(STATUS "Sol: CUDA backend on (toolkit ${CUDAToolkit_VERSION} at ${CUDAToolkit_BIN_DIR}/..)")
  elseif(SOL_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SOL_CUDA=ON but no CUDA toolkit with NVRTC was found (set CUDAToolkit_ROOT)")
  else()
    message(STATUS "Sol: CUDA backend off (no CUDA toolkit with NVRTC found)")
  endif()
endif()

# Called after the library target exists: picks the runtime's sources and links NVRTC.
function(sol_configure_cuda target sources_var)
  set(sources ${${sources_var}})
  if(SOL_HAS_CUDA)
    list(FILTER sources EXCLUDE REGEX "/src/device/cuda_absent\\.cc$")
  else()
    list(FILTER sources EXCLUDE REGEX "/src/device/cuda/")
    list(FILTER sources EXCLUDE REGEX "_cuda\\.cc$")
  endif()
  set(${sources_var} ${sources} PARENT_SCOPE)
endfunction()

function(sol_link_cuda target)
  if(NOT SOL_HAS_CUDA)
    return()
  endif()
  target_compile_definitions(${target} PRIVATE SOL_HAS_CUDA=1)
  # cuda.h is read for the driver's types only; nothing from libcuda is linked.
  target_include_directories(${target} PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(${target} PRIVATE CUDA::nvrtc)
  include(${CMAKE_SOURCE_DIR}/cmake/SolCudaKernels.cmake)
endfunction()
