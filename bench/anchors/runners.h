#pragma once
// The implementations compared. Each factory prepares one case at the current thread count
// (set with set_*_threads first) or returns null and says why it cannot run the case.
#include <memory>
#include <string>

#include "gemm_case.h"

namespace sol_bench {

// Sol: sol::gemm with B pre-packed by sol::pack_b. Null when this build of Sol rejects the
// case's dtypes (sol::Error), with the reason.
std::unique_ptr<GemmRunner> make_sol_runner(const GemmCase& c, std::string* why_not);

// oneDNN matmul, one primitive per group created once, weights reordered once to the layout
// the primitive asks for (format_tag::any). Null when oneDNN was not found at build time.
std::unique_ptr<GemmRunner> make_onednn_runner(const GemmCase& c, std::string* why_not);
void set_onednn_threads(int threads);  // OpenMP runtime: omp_set_num_threads
std::string onednn_description();      // version and the ISA it dispatches to, or "not built"

// OpenBLAS cblas_sgemm (f32) / cblas_sbgemm (bf16, f32 output, when the library exports it).
std::unique_ptr<GemmRunner> make_openblas_runner(const GemmCase& c, std::string* why_not);
void set_openblas_threads(int threads);
std::string openblas_description();  // configuration and core name, or "not built"
// Debian's OpenBLAS picks Haswell (AVX2) kernels on CPUs it does not know (Zen 5, Emerald Rapids)
// and reads OPENBLAS_CORETYPE only when it is loaded. "auto": unless the variable was set when
// this program started, sets it to the best AVX-512 core this CPU can run and re-executes this
// program; a core name: the same with that name, even over the environment's; "native": nothing.
void openblas_select_core(const std::string& core, char** argv);

}  // namespace sol_bench
