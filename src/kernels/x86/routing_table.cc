// Routing's kernel table (kernels/route.h).
#include "kernels/route.h"

namespace sol::kernels {
namespace {

constexpr RoutingKernels kScalar{sigmoid_row_scalar, softmax_row_scalar, nullptr, nullptr, nullptr, nullptr};
constexpr RoutingKernels kAvx2{sigmoid_row_avx2, softmax_row_avx2, nullptr, nullptr, nullptr, nullptr};
constexpr RoutingKernels kAvx512{sigmoid_row_avx512, softmax_row_avx512,        route_keys_avx512,
                                 route_topk_avx512,  route_sigmoid_rows_avx512, route_softmax_lanes_avx512};
constexpr KernelEntry<RoutingKernels> kTable[] = {{Backend::cpu, Isa::scalar, &kScalar},
                                                  {Backend::cpu, Isa::avx2, &kAvx2},
                                                  {Backend::cpu, Isa::avx512, &kAvx512}};

}  // namespace

KernelTable<RoutingKernels> routing_kernel_table() { return kTable; }

}  // namespace sol::kernels
