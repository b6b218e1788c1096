// plan_gemm_sm90_persistent (gemm_sm90_persistent.h): argument checks, the chosen configuration
// and everything a launch needs, without a driver call.
#include <algorithm>
#include <vector>

#include "kernels/cuda/sm90/sm90_fp8_promotion.h"
#include "kernels/cuda/sm90/sm90_gemm_boxes.h"
#include "ops/gemm/gemm_sm90_persistent.h"
#include "sol/device.h"
#include "sol/error.h"

namespace sol {

namespace {

using namespace kernels::sm90;

void check_dense(const Tensor& t, const char* op, const char* name, std::initializer_list<int64_t> shape) {
  const bool same = t.ndim() == int(shape.size()) && std::equal(shape.begin(), shape.end(), t.shape().begin());
  if (!same) {
    std::string want = "[";
    for (int64_t s : shape) want += (want.size() > 1 ? ", " : "") + std::to_string(s);
    fail(op, name, ".shape = ", shape_text(t), " but must be ", want, "]");
  }
  check(t.is_contiguous(), op, name, " must be contiguous");
}

const char* kind_token(GemmKernelKind k, bool nn) {
  if (nn) return "bf16_nn";
  return k == GemmKernelKind::bf16 ? "bf16" : k == GemmKernelKind::e4m3 ? "e4m3" : "e4m3_scaled";
}

// A 2-d operand of `rows` rows of `k` contiguous elements, loaded in boxes of one 128-byte
// swizzled row by box_rows rows (B [k, n] of layout nn: rows = k, 64 columns by block_k rows).
TmaBox operand_box(const Tensor& t, uint64_t rows, uint64_t k, uint32_t element_bytes, uint32_t box_rows,
                   const char* op) {
  TmaBox box;
  box.global_address = reinterpret_cast<std::uintptr_t>(t.device_data());
  box.rank = 2;
  box.element_bytes = element_bytes;
  box.dims[0] = k;
  box.dims[1] = rows;
  box.strides_bytes[1] = k * element_bytes;
  box.box[0] = 128 / element_bytes;
  box.box[1] = box_rows;
  box.swizzle = Swizzle::b128;
  check_tma_box(box, op);
  return box;
}

// The epilogue's operands (as sol::gemm checks them on the host): C like D, read only when
// beta != 0 and either D itself or apart from it; bias f32 [n].
GemmEpilogueParams epilogue_params(const Tensor& d, int64_t n, const Sm90Epilogue& e, const char* op) {
  GemmEpilogueParams p;
  p.d = d.device_data();
  p.c = p.d;
  p.alpha = e.alpha;
  p.beta = e.beta;
  p.d_f32 = d.dtype() == DType::f32;
  p.silu = e.silu;
  if (e.c && e.beta != 0.0f) {
    const Tensor& c = *e.c;
    check(c.device() == d.device(), op, "c is on ", c.device(), " but d on ", d.device());
    check(c.dtype() == d.dtype(), op, "c.dtype = ", dtype_name(c.dtype()), " but d.dtype = ", dtype_name(d.dtype()),
          " (C has D's dtype)");
    check(c.ndim() == d.ndim() && std::equal(c.shape().begin(), c.shape().end(), d.shape().begin()), op,
          "c.shape = ", shape_text(c), " but d.shape = ", shape_text(d));
    check(c.is_contiguous(), op, "c must be contiguous");
    const auto begin = [](const Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.device_data()); };
    const std::uintptr_t bytes = std::uintptr_t(d.numel()) * dtype_size(d.dtype());
    check(begin(c) == begin(d) || begin(c) + bytes <= begin(d) || begin(d) + bytes <= begin(c), op,
          "c overlaps d without being d");
    p.c = c.device_data();
  }
  if (e.bias) {
    const Tensor& bias = *e.bias;
    check(bias.device() == d.device(), op, "bias is on ", bias.device(), " but d on ", d.device());
    check(bias.dtype() == DType::f32, op, "bias.dtype = ", dtype_name(bias.dtype()), " but must be f32");
    check_dense(bias, op, "bias", {n});
    p.bias = static_cast<const float*>(bias.device_data());
  }
  return p;
}

}  // namespace

// The contiguous layout's rows per group as the chooser sees them without reading the layout
// (it stays on the device): the m rows in kGroupedGemmMAlignment-row blocks, spread evenly
// over min(groups, blocks) groups, the last block partial. The kernel walks every block of the
// m rows (a padding block costs it one read of its first row), so the tile count matches the
// walk for a block_m of 128 and bounds it for 64; B's bytes count the groups that can have rows.
std::vector<int64_t> contiguous_rows_model(int64_t m, int64_t groups) {
  const int64_t block = kGroupedGemmMAlignment, blocks = (m + block - 1) / block;
  const int64_t live = std::min(groups, blocks);
  std::vector<int64_t> rows(size_t(groups), 0);
  for (int64_t g = 0; g < live; ++g) rows[size_t(g)] = (blocks / live + (g < blocks % live ? 1 : 0)) * block;
  if (live > 0) rows[size_t(live - 1)] -= blocks * block - m;
  return rows;
}

Sm90PersistentPlan plan_gemm_sm90_persistent(GemmGrouping grouping, const Tensor& a, const Tensor& b, const Tensor& d,
                                             const Tensor* group_info, const Tensor* a_scales, const Tensor* b_scales,
                                             const Sm90Target& target,
                                             const char* op, const Sm90Epilogue& epilogue, Layout b_layout,
                                             const std::string& forced_config_spec) {
  check(!a.device().is_cpu() && b.device() == a.device() && d.device() == a.device(), op, "a, b, d are on ",
        a.device(), ", ", b.device(), ", ", d.device(), " but must share one CUDA device");
  check(a.dtype() == b.dtype() && (a.dtype() == DType::bf16 || a.dtype() == DType::f8e4m3), op, "a, b dtypes = ",
        dtype_name(a.dtype()), ", ", dtype_name(b.dtype()), " but on the device both must be bf16 or both f8e4m3");
  check(d.dtype() == DType::bf16 || d.dtype() == DType::f32, op, "d.dtype = ", dtype_name(d.dtype()),
        " but on the device d must be bf16 or f32");
  const bool single = grouping == GemmGrouping::single, masked = grouping == GemmGrouping::masked;
  const bool nn = b_layout == Layout::nn;
  check(!nn || single, op, "layout nn is for one GEMM: the grouped GEMMs take B [G, N, K]");
  check(!nn || a.dtype() == DType::bf16, op, "layout nn with ", dtype_name(a.dtype()),
        ": fp8 wgmma reads K-major operands only, so an f8e4m3 b must be stored [N, K] (layout nt)");
  check(a.ndim() == (masked ? 3 : 2) && b.ndim() == (single ? 2 : 3), op, "a, b have ", a.ndim(), " and ", b.ndim(),
        " dims (", shape_text(a), ", ", shape_text(b), ")");
  const int64_t groups = single ? 1 : b.shape(0), n = b.shape(single ? (nn ? 1 : 0) : 1),
                k = b.shape(single ? (nn ? 0 : 1) : 2);
  const int64_t m = masked ? a.shape(1) : a.shape(0), rows = masked ? groups * m : m;
  check(a.shape(a.ndim() - 1) == k, op, "a's K = ", a.shape(a.ndim() - 1), " but b's K = ", k);
  if (masked) {
    check(a.shape(0) == groups, op, "a has ", a.shape(0), " groups but b has ", groups);
    check_dense(d, op, "d", {groups, m, n});
  } else {
    check_dense(d, op, "d", {m, n});
  }
  check_dense(a, op, "a", masked ? std::initializer_list<int64_t>{groups, m, k} : std::initializer_list<int64_t>{m, k});
  check_dense(b, op, "b",
              nn       ? std::initializer_list<int64_t>{k, n}
              : single ? std::initializer_list<int64_t>{n, k}
                       : std::initializer_list<int64_t>{groups, n, k});
  if (!single) {
    check(group_info != nullptr && group_info->dtype() == DType::i32 && group_info->device() == a.device(), op,
          masked ? "masked_m" : "grouped_layout", " must be an int32 tensor on ", a.device());
    check_dense(*group_info, op, masked ? "masked_m" : "grouped_layout", {masked ? groups : m});
  }
  check((a_scales == nullptr) == (b_scales == nullptr), op, "give both a_scales and b_scales, or neither");
  const bool scaled = a_scales != nullptr;
  check(!scaled || a.dtype() == DType::f8e4m3, op, "block scales are for f8e4m3 operands");
  check(scaled || a.dtype() != DType::f8e4m3, op, "f8e4m3 operands need a_scales and b_scales (block scales)");
  if (scaled) {
    check(k % sol::kFp8ScaleBlock == 0, op, "k = ", k, " but fp8 block scales need a multiple of ", sol::kFp8ScaleBlock);
    const int64_t kb = k / sol::kFp8ScaleBlock, nb = (n + sol::kFp8ScaleBlock - 1) / sol::kFp8ScaleBlock;
    for (const Tensor* s : {a_scales, b_scales})
      check(s->dtype() == DType::f32 && s->device() == a.device(), op, "scales must be f32 on ", a.device());
    // One scale per row of a and 128 K: [rows, k/128], or [G, m, k/128] for masked (the CPU API's
    // shape there; the same bytes).
    check_dense(*a_scales, op, "a_scales",
                masked ? std::initializer_list<int64_t>{groups, m, kb} : std::initializer_list<int64_t>{rows, kb});
    check_dense(*b_scales, op, "b_scales",
                single ? std::initializer_list<int64_t>{nb, kb} : std::initializer_list<int64_t>{groups, nb, kb});
  }
  check(rows <= 0x7FFFFFFF && n <= 0x7FFFFFFF && k <= 0x7FFFFFFF && groups * n <= 0x7FFFFFFF, op,
        "the kernel indexes rows, n and k with 32 bits");

  Sm90PersistentPlan plan;
  plan.epilogue = epilogue_params(d, n, epilogue, op);
  if (rows == 0 || n == 0 || groups == 0) return plan;
  check(k > 0, op, "k = 0: D would be all zeros, which the device path does not write");
  plan.kind = a.dtype() == DType::bf16 ? GemmKernelKind::bf16 : GemmKernelKind::e4m3_block_scaled;
  GemmProblem shape;
  shape.n = n;
  shape.k = k;
  shape.kind = plan.kind;
  shape.out_bytes = uint32_t(dtype_size(d.dtype()));
  shape.b_major = nn ? OperandMajor::mn : OperandMajor::k;
  shape.grouped = !single;
  if (grouping == GemmGrouping::contiguous) {
    shape.group_m = contiguous_rows_model(m, groups);
  } else {
    shape.group_m.assign(size_t(groups), m);  // masked: the valid rows live on the device
  }
  plan.config = forced_config_spec.empty() ? choose_config(shape, target)
                                           : forced_config(shape, target, forced_config_spec);
  const uint32_t eb = element_bytes(plan.kind);
  plan.a = operand_box(a, uint64_t(rows), uint64_t(k), eb, plan.config.block_m, op);
  plan.b = nn ? operand_box(b, uint64_t(k), uint64_t(n), eb, plan.config.block_k, op)
              : operand_box(b, uint64_t(groups * n), uint64_t(k), eb, plan.config.block_n / plan.config.cluster_m, op);
  plan.d = gemm_store_box(d.device_data(), uint64_t(rows), uint64_t(n), uint32_t(dtype_size(d.dtype())), op);
  plan.rows = uint32_t(rows);
  GemmProblemView& p = plan.problem;
  p.grouping = grouping;
  p.m = uint32_t(m);
  p.n = uint32_t(n);
  p.k_blocks = uint32_t((k + plan.config.block_k - 1) / plan.config.block_k);
  p.groups = uint32_t(groups);
  p.split_k = plan.config.split_k;
  const uint64_t tiles = uint64_t(masked ? groups : 1) * ((m + plan.config.block_m - 1) / plan.config.block_m) *
                         ((n + plan.config.block_n - 1) / plan.config.block_n) * plan.config.split_k;
  // Whole clusters: check_config made the row tiles, so the tiles, a multiple of the cluster.
  const uint32_t cluster = plan.config.cluster_m;
  plan.ctas = uint32_t(std::max<uint64_t>(std::min<uint64_t>(tiles, target.sms) / cluster * cluster, cluster));
  plan.workspace_bytes = plan.config.split_k > 1 ? uint64_t(plan.config.split_k) * rows * n * 4 : 0;
  const std::string token = kind_token(plan.kind, nn);
  const std::string tag = token + "_" + std::to_string(plan.config.block_m) + "x" +
                          std::to_string(plan.config.block_n) + "_s" + std::to_string(plan.config.stages) +
                          (cluster > 1 ? "_c" + std::to_string(cluster) : "");
  plan.kernel = "sol_sm90_gemm_persistent_" + tag;
  const std::string common = token + ", " + std::to_string(plan.config.block_m) + ", " +
                             std::to_string(plan.config.block_n) + ", " + std::to_string(plan.config.stages) + ", " +
                             std::to_string(eb) + ", " +
                             (plan.kind == GemmKernelKind::e4m3_block_scaled ? "true" : "false");
  plan.instantiation = cluster > 1 ? "SOL_SM90_PERSISTENT_CLUSTER_KERNEL(" + common + ", " + std::to_string(cluster) + ")"
                                   : "SOL_SM90_PERSISTENT_KERNEL(" + common + ", " + (nn ? "mn" : "k") + ")";
  return plan;
}

#if !SOL_HAS_CUDA
void gemm_sm90_persistent(GemmGrouping, const Tensor& a, const Tensor&, const Tensor&, const Tensor*, const Tensor*,
                          const Tensor*, const char* op, const Sm90Epilogue&, Layout) {
  fail(op, "operands are on ", a.device(), " but ", cuda_discovery().reason);
}
void check_sm90_contiguous_layouts(Device device, const char* op) {
  fail(op, device, " but ", cuda_discovery().reason);
}
#endif

}  // namespace sol
