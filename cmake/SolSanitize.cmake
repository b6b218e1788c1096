# SOL_SANITIZE: AddressSanitizer + UBSan over everything built here, carried to consumers of
# the installed library, and the environment each test runs under: tests set their ENVIRONMENT
# property from SOL_SANITIZER_TEST_ENV (the gtests of sol_tests from SOL_SANITIZER_GTEST_ENV,
# python ones from SOL_SANITIZER_PYTHON_ENV); all are empty without SOL_SANITIZE.
# UBSan without the checks that ASan already makes (null: a null access faults and ASan reports
# it; object-size: redzones) or that matter little here (vptr: few polymorphic types;
# pointer-overflow: wrapping pointer arithmetic). Those four double GCC's compile time of a test
# file under ASan; the rest of UBSan (shifts, signed overflow, bounds, alignment, nonnull
# arguments, enums and bools, ...) costs a third more. docs/sanitizers.md, "CI's time".
set(SOL_SANITIZER_FLAGS -fsanitize=address,undefined -fno-sanitize=vptr,pointer-overflow,null,object-size
    -fno-sanitize-recover=undefined)
set(SOL_SANITIZER_TEST_ENV "")
set(SOL_SANITIZER_GTEST_ENV "")
set(SOL_SANITIZER_PYTHON_ENV "")

# The installed libsol.a holds instrumented code: whoever links it needs the runtimes too.
function(sol_sanitize_exported target)
  if(SOL_SANITIZE)
    target_compile_options(${target} INTERFACE ${SOL_SANITIZER_FLAGS} -fno-omit-frame-pointer)
    target_link_options(${target} INTERFACE ${SOL_SANITIZER_FLAGS} -Wl,--as-needed)
  endif()
endfunction()

if(NOT SOL_SANITIZE)
  return()
endif()

add_compile_options(${SOL_SANITIZER_FLAGS} -fno-omit-frame-pointer)
# GCC's flow analysis under -fsanitize=address reports -Wmaybe-uninitialized inside libstdc++'s
# own <regex> (std::function moved into an NFA state) at -O1. The release build compiles the
# same sources with the warning on, so turning it off here hides nothing of Sol's.
add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>)
# Debian's GCC links with --as-needed except under -fsanitize; without it the CUDA driver stub
# that CUDA::nvrtc drags in (FindCUDAToolkit's cuda_driver) becomes a NEEDED library, and every
# program fails to load where no driver is installed (Sol reaches the driver by dlopen only).
# The sanitizer runtimes are linked with --no-as-needed by GCC itself, so they stay.
add_link_options(${SOL_SANITIZER_FLAGS} -Wl,--as-needed)

# Leaks inside Open MPI, hwloc and PMIx (start-up state they never free) are suppressed by
# those libraries' own frames only (scripts/sanitize/openmpi-lsan.supp); a leak in Sol's code
# still fails. They are built without frame pointers, so allocation stacks are taken with the
# slow unwinder, which follows them into those libraries. UBSan stops at its first finding.
# docs/sanitizers.md.
#
# intercept_tls_get_addr=0 in every leak-checked run: the runtimes of GCC up to 13 and LLVM up
# to 16 take a dynamic TLS block (a dlopen'ed module's thread_local: the tile JIT's kernels)
# that starts 16 bytes into a page for a pre-2.25 glibc block, read a bogus size and start from
# the heap chunk's header, and LeakSanitizer's tracer dies on SIGSEGV scanning them (1 block in
# 128). With glibc >= 2.25 the block is a malloc chunk that LSan reaches anyway, so no root is
# lost (docs/sanitizers.md: the reproduction, and when to drop it).
set(SOL_SANITIZER_LEAK_OPTIONS "detect_leaks=1:intercept_tls_get_addr=0")
set(SOL_SANITIZER_GTEST_ENV "ASAN_OPTIONS=${SOL_SANITIZER_LEAK_OPTIONS}")
set(SOL_SANITIZER_TEST_ENV
    "ASAN_OPTIONS=${SOL_SANITIZER_LEAK_OPTIONS}:fast_unwind_on_malloc=0"
    "LSAN_OPTIONS=suppressions=${CMAKE_SOURCE_DIR}/scripts/sanitize/openmpi-lsan.supp:print_suppressions=0"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")

# The Python interpreter is not instrumented, so the ASan runtime must be the first library
# loaded into it: preload the compiler's own. CPython frees little at exit by design and its
# allocations carry no frames of ours, so leak checking stays with the C++ tests.
execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libasan.so
                OUTPUT_VARIABLE asan_runtime OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT EXISTS "${asan_runtime}")
  message(FATAL_ERROR "SOL_SANITIZE: '${CMAKE_CXX_COMPILER} -print-file-name=libasan.so' gave "
                      "'${asan_runtime}', not a file")
endif()
set(SOL_SANITIZER_PYTHON_ENV
    "LD_PRELOAD=${asan_runtime}"
    "ASAN_OPTIONS=detect_leaks=0"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
