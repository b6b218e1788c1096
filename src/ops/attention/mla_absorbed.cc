// MLA decode with absorbed up-projections (sol/mla_absorbed.h): the checks, then the layer's
// five steps as Sol's own gemm and softmax over views of the operands and of per-thread
// scratch. One call per layer instead of five keeps a decode step's host work (argument
// plumbing and views between ops) out of the token's latency.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/common/thread_workspace.h"
#include "ops/common/validate.h"
#include "sol/dtype.h"
#include "sol/error.h"
#include "sol/mla_absorbed.h"
#include "sol/softmax.h"

namespace sol {

namespace {

constexpr const char* kOp = "mla_decode_absorbed";

// A [rows, cols] view of t's memory starting `offset` elements in, rows `row_stride` apart.
Tensor matrix(const Tensor& t, int64_t offset, int64_t rows, int64_t cols, int64_t row_stride) {
  char* base = static_cast<char*>(t.data()) + offset * int64_t(dtype_size(t.dtype()));
  const int64_t shape[2] = {rows, cols}, strides[2] = {row_stride, 1};
  return Tensor(base, t.dtype(), shape, strides);
}

// The widths every head's packs must share; named in the errors.
struct Packs {
  int64_t k = 0, n = 0;
};

Packs check_packs(std::span<const PackedMatrix> w, const char* name, int64_t heads, DType dtype) {
  check(int64_t(w.size()) == heads, kOp, name, " holds ", w.size(), " packed matrices but q has H = ", heads,
        " heads (one per head)");
  Packs p{w[0].k(), w[0].n()};
  for (size_t h = 0; h < w.size(); ++h) {
    check(!w[h].empty(), kOp, name, "[", h, "] is an empty PackedMatrix");
    check(w[h].dtype() == dtype, kOp, name, "[", h, "].dtype = ", dtype_name(w[h].dtype()), " but q is ",
          dtype_name(dtype));
    check(w[h].k() == p.k && w[h].n() == p.n, kOp, name, "[", h, "] is k = ", w[h].k(), ", n = ", w[h].n(),
          " but ", name, "[0] is k = ", p.k, ", n = ", p.n, " (every head's widths are the same)");
  }
  return p;
}

void check_rows(const char* name, const Tensor& t, DType dtype) {
  check(t.ndim() == 3, kOp, name, " must be 3-d but is ", describe_text(t));
  check(t.dtype() == dtype, kOp, name, ".dtype = ", dtype_name(t.dtype()), " but q is ", dtype_name(dtype));
  check(t.empty() || t.stride(2) == 1, kOp, name, " rows must be dense (stride(2) = 1) but its strides are ",
        t.stride(0), ", ", t.stride(1), ", ", t.stride(2));
  require_data(kOp, name, t);
}

int64_t align64(int64_t n) { return (n + 63) / 64 * 64; }

}  // namespace

void mla_decode_absorbed(const Tensor& q, std::span<const PackedMatrix> w_uk, const Tensor& latent,
                         std::span<const PackedMatrix> w_uv, float softmax_scale, const Tensor& out) {
  check(q.ndim() == 3, kOp, "q must be 3-d [B, H, Dq] but is ", describe_text(q));
  const DType t = q.dtype();
  check(t == DType::bf16 || t == DType::f32, kOp, "q.dtype = ", dtype_name(t), " but must be bf16 or f32");
  check_rows("q", q, t);
  const int64_t batch = q.shape(0), heads = q.shape(1), dq = q.shape(2);
  check(heads >= 1, kOp, "q.shape = ", shape_text(q), " but H must be >= 1");
  const Packs uk = check_packs(w_uk, "w_uk", heads, t), uv = check_packs(w_uv, "w_uv", heads, t);
  check(uk.k == dq, kOp, "w_uk has k = ", uk.k, " but q's head width Dq = ", dq);
  check_rows("latent", latent, t);
  check(latent.shape(0) == batch && latent.shape(2) == uk.n, kOp, "latent.shape = ", shape_text(latent),
        " but expected [", batch, ", L, ", uk.n, "] (B of q, Dk = w_uk's n)");
  check(uv.k <= uk.n, kOp, "w_uv has k = ", uv.k, " (the c_kv width Dl) but a latent row is only ", uk.n,
        " wide");
  check_rows("out", out, t);
  check(out.shape(0) == batch && out.shape(1) == heads && out.shape(2) == uv.n, kOp, "out.shape = ",
        shape_text(out), " but expected [", batch, ", ", heads, ", ", uv.n, "] (Dv = w_uv's n)");
  check(std::isfinite(softmax_scale), kOp, "softmax_scale = ", softmax_scale, " but must be finite");
  require_no_overlap(kOp, "out", out, "q", q);
  require_no_overlap(kOp, "out", out, "latent", latent);
  if (batch == 0) return;

  const int64_t len = latent.shape(1), dk = uk.n, dl = uv.k, dv = uv.n;
  const int64_t os0 = out.stride(0), os1 = out.stride(1);
  if (len == 0) {  // no row to attend to: every output is 0
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        std::memset(static_cast<char*>(out.data()) + (b * os0 + h * os1) * int64_t(dtype_size(t)), 0,
                    size_t(dv) * dtype_size(t));
    return;
  }

  const int64_t esize = int64_t(dtype_size(t)), rows = batch * heads;
  const int64_t q_lat_bytes = align64(rows * dk * esize), scores_bytes = align64(rows * len * 4);
  const int64_t p_bytes = t == DType::f32 ? 0 : align64(rows * len * esize);
  char* scratch = thread_workspace(size_t(q_lat_bytes + scores_bytes + p_bytes + rows * dl * esize));
  const Tensor q_lat(scratch, t, {batch, heads, dk});
  const Tensor scores(scratch + q_lat_bytes, DType::f32, {rows, len});
  // f32: the probabilities overwrite the scores (softmax in place).
  const Tensor p = t == DType::f32 ? scores : Tensor(scratch + q_lat_bytes + scores_bytes, t, {rows, len});
  const Tensor o_lat(scratch + q_lat_bytes + scores_bytes + p_bytes, t, {batch, heads, dl});

  const int64_t qs0 = q.stride(0), qs1 = q.stride(1), ls0 = latent.stride(0), ls1 = latent.stride(1);
  for (int64_t h = 0; h < heads; ++h)  // every sequence's query of head h into the latent space
    gemm(matrix(q, h * qs1, batch, dq, qs0), w_uk[size_t(h)], matrix(q_lat, h * dk, batch, dk, heads * dk));
  GemmOptions scaled;
  scaled.alpha = softmax_scale;
  scaled.layout = Layout::nt;
  for (int64_t b = 0; b < batch; ++b)  // scores of every head against the sequence's rows
    gemm(matrix(q_lat, b * heads * dk, heads, dk, dk), matrix(latent, b * ls0, len, dk, ls1),
         matrix(scores, b * heads * len, heads, len, len), scaled);
  softmax(scores, p);
  for (int64_t b = 0; b < batch; ++b)  // probabilities . c_kv
    gemm(matrix(p, b * heads * len, heads, len, len), matrix(latent, b * ls0, len, dl, ls1),
         matrix(o_lat, b * heads * dl, heads, dl, dl));
  for (int64_t h = 0; h < heads; ++h)  // head h's latent output through its W_UV
    gemm(matrix(o_lat, h * dl, batch, dl, heads * dl), w_uv[size_t(h)], matrix(out, h * os1, batch, dv, os0));
}

}  // namespace sol
