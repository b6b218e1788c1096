// The reference interpreter: runs a tile program (tile-level or lowered) with plain scalar code,
// one grid cell after another. Tiles hold f32 values (bf16 tiles are rounded on every store);
// layouts are physical and ignored here, so one program means one thing at every stage.
#include <cmath>
#include <functional>
#include <limits>

#include "compiler/bind.h"
#include "sol/error.h"
#include "sol/tile.h"

namespace sol::tile {

namespace {

struct TileValue {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<float> data;
  int64_t offset(const std::vector<int64_t>& idx) const {
    int64_t o = 0;
    for (size_t d = 0; d < shape.size(); ++d) o = o * shape[d] + idx[d];
    return o;
  }
  void store(int64_t i, double v) {
    const float f = float(v);
    data[size_t(i)] = dtype == DType::bf16 ? bf16_to_f32(f32_to_bf16(f)) : f;
  }
};

class Interpreter {
 public:
  Interpreter(const Program& p, std::span<const Tensor> args) : p_(p), args_(args), env_(bind_dims(p, args)) {}

  void run() {
    std::vector<int64_t> extent;
    int64_t cells = 1;
    for (const GridAxis& a : p_.grid) {
      extent.push_back(eval_index(a.extent, env_));
      cells *= std::max<int64_t>(extent.back(), 0);
    }
    for (int64_t c = 0; c < cells; ++c) {
      int64_t rest = c;
      for (size_t a = 0; a < p_.grid.size(); ++a) {  // the first axis varies fastest
        env_[p_.grid[a].name] = rest % extent[a];
        rest /= extent[a];
      }
      tiles_.clear();
      body(p_.body);
    }
  }

 private:
  const Tensor& tensor(const std::string& n) const {
    for (size_t i = 0; i < p_.params.size(); ++i)
      if (p_.params[i].name == n) return args_[i];
    fail("tile interpreter", "no tensor ", n);
  }

  std::vector<int64_t> index(const std::vector<Expr>& idx) {
    std::vector<int64_t> out;
    for (const Expr& e : idx) out.push_back(eval_index(e, env_));
    return out;
  }

  double value(const Expr& e) {
    switch (e->kind) {
      case ExprNode::integer: return float(e->ivalue);
      case ExprNode::real: return float(e->fvalue);
      case ExprNode::var: return float(eval_index(e, env_));
      case ExprNode::load: {
        TileValue& t = tiles_.at(e->name);
        return t.data[size_t(t.offset(index(e->args)))];
      }
      case ExprNode::binary: {
        const float a = float(value(e->args[0])), b = float(value(e->args[1]));
        const std::string& o = e->name;
        if (o == "+") return a + b;
        if (o == "-") return a - b;
        if (o == "*") return a * b;
        if (o == "/") return a / b;
        if (o == "%") return std::fmod(a, b);
        if (o == "<") return a < b;
        if (o == "<=") return a <= b;
        return a == b;
      }
      case ExprNode::call: {
        const std::string& f = e->name;
        const float a = float(value(e->args[0]));
        if (f == "select") return a != 0 ? float(value(e->args[1])) : float(value(e->args[2]));
        if (f == "exp2") return std::exp2(a);
        if (f == "exp") return std::exp(a);
        if (f == "log") return std::log(a);
        if (f == "rsqrt") return 1.0f / std::sqrt(a);
        if (f == "sqrt") return std::sqrt(a);
        if (f == "abs") return std::fabs(a);
        if (f == "float") return a;
        const float b = float(value(e->args[1]));
        if (f == "max") return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
        if (f == "min") return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
        return std::ceil(a / b);
      }
    }
    return 0;
  }

  // Visits every multi-index of a shape.
  static void for_each(const std::vector<int64_t>& shape, const std::function<void(const std::vector<int64_t>&)>& fn) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<int64_t> idx(shape.size());
    for (int64_t i = 0; i < n; ++i) {
      int64_t rest = i;
      for (size_t d = shape.size(); d-- > 0;) {
        idx[d] = rest % shape[d];
        rest /= shape[d];
      }
      fn(idx);
    }
  }

  // The tensor element a tile element maps to, or false when it lies outside the tensor.
  bool tensor_index(const Tensor& t, const std::vector<int64_t>& offset, const std::vector<int64_t>& tile_idx,
                    std::vector<int64_t>& out) {
    out = offset;
    const size_t lead = offset.size() - tile_idx.size();
    for (size_t d = 0; d < tile_idx.size(); ++d) out[lead + d] += tile_idx[d];
    for (size_t d = 0; d < out.size(); ++d)
      if (out[d] < 0 || out[d] >= t.shape(int(d))) return false;
    return true;
  }

  void copy(const Stmt& s) {
    const bool src_tile = tiles_.count(s.refs[0].name), dst_tile = tiles_.count(s.refs[1].name);
    if (src_tile && dst_tile) {
      TileValue &a = tiles_.at(s.refs[0].name), &b = tiles_.at(s.refs[1].name);
      for (size_t i = 0; i < a.data.size(); ++i) b.store(int64_t(i), a.data[i]);
      return;
    }
    TileValue& t = tiles_.at(s.refs[src_tile ? 0 : 1].name);
    const Tensor& x = tensor(s.refs[src_tile ? 1 : 0].name);
    const std::vector<int64_t> off = index(s.refs[src_tile ? 1 : 0].index);
    std::vector<int64_t> at;
    for_each(t.shape, [&](const std::vector<int64_t>& i) {
      const bool inside = tensor_index(x, off, i, at);
      if (dst_tile) {
        t.store(t.offset(i), inside ? load_as_double(x.data(), x.dtype(), size_t(x.offset_of(at) / int64_t(dtype_size(x.dtype())))) : 0.0);
      } else if (inside) {
        store_from_double(x.data(), x.dtype(), size_t(x.offset_of(at) / int64_t(dtype_size(x.dtype()))),
                          t.data[size_t(t.offset(i))]);
      }
    });
  }

  // c[c0 + i, c1 + j] (+)= sum_k op(a)[a0 + i, k] * op(b)[k, b1 + j] over an m x n x k box.
  void gemm(const Stmt& s, int64_t m, int64_t n, int64_t k, const std::vector<int64_t>& ao,
            const std::vector<int64_t>& bo, const std::vector<int64_t>& co) {
    TileValue &a = tiles_.at(s.refs[0].name), &b = tiles_.at(s.refs[1].name), &c = tiles_.at(s.refs[2].name);
    const bool ta = s.has("trans_a"), tb = s.has("trans_b"), clear = s.has("clear");
    // Element (i, q) of op(a) and (q, j) of op(b), as strides over the stored row-major tiles.
    const int64_t a_i = ta ? 1 : a.shape[1], a_q = ta ? a.shape[1] : 1;
    const int64_t b_q = tb ? 1 : b.shape[1], b_j = tb ? b.shape[1] : 1;
    const float* pa = a.data.data() + a.offset(ao);
    const float* pb = b.data.data() + b.offset(bo);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < k; ++q) acc += double(pa[i * a_i + q * a_q]) * double(pb[q * b_q + j * b_j]);
        const int64_t at = c.offset({co[0] + i, co[1] + j});
        c.store(at, clear ? acc : c.data[size_t(at)] + acc);
      }
  }

  void reduce(const Stmt& s) {
    TileValue &a = tiles_.at(s.refs[0].name), &r = tiles_.at(s.refs[1].name);
    const size_t axis = size_t(s.int_attr("axis", 0));
    const bool is_max = s.name == "max";
    std::vector<double> acc(r.data.size());
    for (size_t i = 0; i < acc.size(); ++i)
      acc[i] = s.has("clear") ? (is_max ? -std::numeric_limits<double>::infinity() : 0.0) : r.data[i];
    for_each(a.shape, [&](const std::vector<int64_t>& i) {
      std::vector<int64_t> ri = i;
      ri.erase(ri.begin() + int64_t(axis));
      if (ri.empty()) ri = {0};
      double& x = acc[size_t(r.offset(ri))];
      const double v = a.data[size_t(a.offset(i))];
      x = is_max ? (std::isnan(v) || std::isnan(x) ? NAN : std::max(x, v)) : float(x + v);
    });
    for (size_t i = 0; i < acc.size(); ++i) r.store(int64_t(i), acc[i]);
  }

  void body(const std::vector<Stmt>& stmts) {
    for (const Stmt& s : stmts) stmt(s);
  }

  void stmt(const Stmt& s) {
    switch (s.kind) {
      case Stmt::alloc: {
        TileValue t;
        t.dtype = s.dtype;
        t.shape = s.shape;
        int64_t n = 1;
        for (int64_t d : s.shape) n *= d;
        t.data.assign(size_t(n), NAN);  // never read before written in a correct program
        tiles_[s.name] = std::move(t);
        return;
      }
      case Stmt::fill: {
        TileValue& t = tiles_.at(s.refs[0].name);
        const double v = value(s.exprs[0]);
        for (size_t i = 0; i < t.data.size(); ++i) t.store(int64_t(i), v);
        return;
      }
      case Stmt::copy:
      case Stmt::cast: copy(s); return;
      case Stmt::prefetch: return;
      case Stmt::gemm: {
        const TileValue& c = tiles_.at(s.refs[2].name);
        const TileValue& a = tiles_.at(s.refs[0].name);
        const int64_t k = a.shape[s.has("trans_a") ? 0 : 1];
        gemm(s, c.shape[0], c.shape[1], k, {0, 0}, {0, 0}, {0, 0});
        return;
      }
      case Stmt::ukernel:
        gemm(s, s.int_attr("m", 0), s.int_attr("n", 0), s.int_attr("k", 0), index(s.refs[0].index),
             index(s.refs[1].index), index(s.refs[2].index));
        return;
      case Stmt::reduce: reduce(s); return;
      case Stmt::loop: {
        const int64_t lo = eval_index(s.exprs[0], env_), hi = eval_index(s.exprs[1], env_);
        for (int64_t i = lo; i < hi; ++i) {
          env_[s.name] = i;
          body(s.body);
        }
        env_.erase(s.name);
        return;
      }
      case Stmt::parallel:
        for_each(tiles_.at(s.refs[0].name).shape, [&](const std::vector<int64_t>& i) {
          for (size_t v = 0; v < s.vars.size(); ++v) env_[s.vars[v]] = i[v];
          body(s.body);
        });
        for (const std::string& v : s.vars) env_.erase(v);
        return;
      case Stmt::assign: {
        TileValue& t = tiles_.at(s.refs[0].name);
        t.store(t.offset(index(s.refs[0].index)), value(s.exprs[0]));
        return;
      }
    }
  }

  const Program& p_;
  std::span<const Tensor> args_;
  Env env_;
  std::map<std::string, TileValue> tiles_;
};

}  // namespace

void interpret(const Program& p, std::span<const Tensor> args) {
  verify(p);
  Interpreter(p, args).run();
}

}  // namespace sol::tile
