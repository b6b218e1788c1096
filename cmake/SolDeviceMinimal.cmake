# SOL_DEVICE_MINIMAL: the library without the layers that need MPI (comm and what is built on
# it) or nlohmann-json (profile cache, records, model), so a device machine without Sol's Debian
# dependencies can build the device runtime, the copy/cast ops and the gpu tests.
function(sol_minimal_sources sources_var)
  set(kept)
  foreach(src ${${sources_var}})
    if(src MATCHES "/src/(comm|ep|cp|pp|engram|model|compiler)/")
      continue()
    endif()
    file(READ ${src} text)
    string(FIND "${text}" "nlohmann" uses_json)
    string(FIND "${text}" "<mpi.h>" uses_mpi)
    if(uses_json EQUAL -1 AND uses_mpi EQUAL -1)
      list(APPEND kept ${src})
    endif()
  endforeach()
  set(${sources_var} ${kept} PARENT_SCOPE)
endfunction()
