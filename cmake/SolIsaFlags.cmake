# ISA-specific translation units are recognised by their file-name suffix and get
# their own target flags; everything else is built for baseline x86-64, so one
# binary runs anywhere and picks its path from CPUID at run time (include/sol/hw.h).
# -ffp-contract=off: with -mfma GCC would fuse a written multiply and add into one FMA,
# rounding once where the portable code (built without FMA) rounds twice, so a kernel that
# promises the portable bits would lose them silently. An ISA file computes what its source
# says; where it wants an FMA it writes one.
set(SOL_FLAGS_AVX2 -mavx2 -mfma -mf16c -ffp-contract=off)
set(SOL_FLAGS_AVX512 ${SOL_FLAGS_AVX2} -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx512vnni)
set(SOL_FLAGS_VBMI ${SOL_FLAGS_AVX512} -mavx512vbmi)
set(SOL_FLAGS_AMX ${SOL_FLAGS_VBMI} -mamx-tile -mamx-bf16 -mamx-int8)

function(sol_apply_isa_flags sources)
  foreach(src IN LISTS sources)
    if(src MATCHES "_amx\\.cc$")
      set(flags ${SOL_FLAGS_AMX})
    elseif(src MATCHES "_vbmi\\.cc$")
      # an avx512-level variant for CPUs with AVX512-VBMI (KernelNeeds in core/kernel_table.h)
      set(flags ${SOL_FLAGS_VBMI})
    elseif(src MATCHES "_avx512\\.cc$")
      set(flags ${SOL_FLAGS_AVX512})
    elseif(src MATCHES "_avx2\\.cc$")
      set(flags ${SOL_FLAGS_AVX2})
    else()
      continue()
    endif()
    set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${flags}")
  endforeach()
endfunction()
