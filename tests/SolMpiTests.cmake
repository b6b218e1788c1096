# How every MPI test program here is built and run: one mpirun line, one thread per rank (the
# ranks already cover the cores), and a comm timeout well under the ctest limit so that a hung
# peer is named by the program instead of being killed by ctest. Time limits leave room for a
# loaded shared machine.
set(SOL_MPIRUN mpirun --allow-run-as-root --oversubscribe --bind-to none)
set(SOL_MPI_TEST_ENV SOL_NUM_THREADS=1 SOL_COMM_TIMEOUT_S=30)

# sol_add_mpi_program(<name> <source> [<include dir>...])
function(sol_add_mpi_program name source)
  add_executable(${name} ${source})
  target_compile_options(${name} PRIVATE -Wall -Wextra)
  target_link_libraries(${name} PRIVATE sol)
  if(ARGN)
    target_include_directories(${name} PRIVATE ${ARGN})
  endif()
endfunction()

# sol_add_mpi_test(<test name> PROGRAM <target> RANKS <n> TIMEOUT <s>
#                  [LOCAL_SIZE <ranks per emulated node>] [ENV VAR=value...] [ARGS <arg>...])
# LOCAL_SIZE sets SOL_LOCAL_SIZE; it and each ENV variable are exported to every rank (-x).
function(sol_add_mpi_test name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "PROGRAM;RANKS;TIMEOUT;LOCAL_SIZE" "ENV;ARGS")
  if(NOT arg_PROGRAM OR NOT arg_RANKS OR NOT arg_TIMEOUT OR arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "sol_add_mpi_test(${name}): needs PROGRAM, RANKS and TIMEOUT "
                        "(unparsed: '${arg_UNPARSED_ARGUMENTS}')")
  endif()
  set(env ${arg_ENV})
  if(DEFINED arg_LOCAL_SIZE)
    list(PREPEND env SOL_LOCAL_SIZE=${arg_LOCAL_SIZE})
  endif()
  set(exported)
  foreach(assignment IN LISTS env)
    string(REGEX REPLACE "=.*" "" variable "${assignment}")
    list(APPEND exported -x ${variable})
  endforeach()
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} -E env ${SOL_MPI_TEST_ENV} ${env}
                   ${SOL_MPIRUN} -np ${arg_RANKS} ${exported} $<TARGET_FILE:${arg_PROGRAM}> ${arg_ARGS})
  sol_set_test_properties(${name} TIMEOUT ${arg_TIMEOUT} LABELS mpi)
endfunction()

# sol_set_test_properties(<test> TIMEOUT <s> [LABELS <label>...]): the time limit, the
# sanitizer build's environment (cmake/SolSanitize.cmake; nothing otherwise), and labels:
# each test given here is in CI's `sanitize` stage (docs/sanitizers.md).
function(sol_set_test_properties name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "TIMEOUT" "LABELS")
  set_tests_properties(${name} PROPERTIES TIMEOUT ${arg_TIMEOUT} LABELS "sanitize;${arg_LABELS}")
  if(SOL_SANITIZER_TEST_ENV)
    set_tests_properties(${name} PROPERTIES ENVIRONMENT "${SOL_SANITIZER_TEST_ENV}")
  endif()
endfunction()

# sol_add_mpi_tests(<prefix> PROGRAM <target> RANKS <n>... TIMEOUT <s>): <prefix>.np<n> per n.
function(sol_add_mpi_tests prefix)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "PROGRAM;TIMEOUT" "RANKS")
  foreach(ranks IN LISTS arg_RANKS)
    sol_add_mpi_test(${prefix}.np${ranks} PROGRAM ${arg_PROGRAM} RANKS ${ranks} TIMEOUT ${arg_TIMEOUT})
  endforeach()
endfunction()
