// Parser of the textual tile IR: a hand-written lexer and recursive descent, one statement
// per line. Every statement remembers its line; errors read "FILE:LINE: expected ... got ...".
// Nesting is bounded (kMaxExprDepth, kMaxBlockDepth) so that no input can exhaust the stack,
// here or in the passes that walk the tree recursively; numbers are read whole and range-checked.
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "compiler/ir/text_limits.h"
#include "sol/error.h"
#include "sol/tile_ir.h"

namespace sol::tile {

namespace {

struct Token {
  enum Kind { ident, integer, real, punct, newline, end } kind = end;
  std::string text;
  int line = 0;
};

std::vector<Token> lex(const std::string& src, const std::string& file) {
  std::vector<Token> out;
  int line = 1;
  size_t i = 0;
  auto push = [&](Token::Kind k, std::string t) { out.push_back({k, std::move(t), line}); };
  while (i < src.size()) {
    const char c = src[i];
    if (c == '\n') {
      push(Token::newline, "newline");
      ++line, ++i;
    } else if (c == '#') {
      while (i < src.size() && src[i] != '\n') ++i;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < src.size() && (std::isalnum(static_cast<unsigned char>(src[j])) || src[j] == '_'))
        ++j;
      push(Token::ident, src.substr(i, j - i));
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < src.size() && std::isdigit(static_cast<unsigned char>(src[j]))) ++j;
      bool is_real = false;
      if (j + 1 < src.size() && src[j] == '.' && std::isdigit(static_cast<unsigned char>(src[j + 1]))) {
        is_real = true;
        for (++j; j < src.size() && std::isdigit(static_cast<unsigned char>(src[j]));) ++j;
      }
      if (j < src.size() && (src[j] == 'e' || src[j] == 'E')) {
        is_real = true;
        ++j;
        if (j < src.size() && (src[j] == '+' || src[j] == '-')) ++j;
        while (j < src.size() && std::isdigit(static_cast<unsigned char>(src[j]))) ++j;
      }
      push(is_real ? Token::real : Token::integer, src.substr(i, j - i));
      i = j;
    } else {
      static const char* two[] = {"->", "..", "<=", "=="};
      std::string t(1, c);
      for (const char* p : two)
        if (src.compare(i, 2, p) == 0) t = p;
      if (t.size() == 1 && std::string("()[]{},:=+-*/%<").find(c) == std::string::npos)
        fail(file + ":" + std::to_string(line), "unexpected character '", escaped(t), "'");
      push(Token::punct, t);
      i += t.size();
    }
  }
  push(Token::end, "end of input");
  return out;
}

class Parser {
 public:
  Parser(const std::string& src, std::string file) : file_(std::move(file)), toks_(lex(src, file_)) {}

  Program program() {
    skip_newlines();
    Program p;
    p.line = peek().line;
    expect("kernel");
    p.name = ident("kernel name");
    expect("(");
    if (!accept(")")) {
      do p.params.push_back(param());
      while (accept(","));
      expect(")");
    }
    expect("grid");
    expect("(");
    do {
      GridAxis a;
      a.name = ident("grid axis name");
      expect("=");
      a.extent = expr();
      p.grid.push_back(std::move(a));
    } while (accept(","));
    expect(")");
    p.attrs = attrs();
    expect("{");
    p.body = block();
    skip_newlines();
    if (peek().kind != Token::end) error("expected end of input after the kernel");
    return p;
  }

 private:
  const Token& peek(size_t ahead = 0) const { return toks_[std::min(pos_ + ahead, toks_.size() - 1)]; }
  const Token& next() { return toks_[std::min(pos_++, toks_.size() - 1)]; }
  bool is(const std::string& t) const { return peek().kind != Token::end && peek().text == t && peek().kind != Token::newline; }
  bool accept(const std::string& t) {
    if (!is(t)) return false;
    ++pos_;
    return true;
  }
  [[noreturn]] void error(const std::string& what) const {
    fail(where(peek().line), what, ", got '", escaped(peek().text), "'");
  }
  std::string where(int line) const { return file_ + ":" + std::to_string(line); }
  void expect(const std::string& t) {
    if (!accept(t)) error("expected '" + t + "'");
  }
  std::string ident(const std::string& what) {
    if (peek().kind != Token::ident) error("expected " + what);
    return next().text;
  }
  int64_t integer(const std::string& what) {
    const bool neg = accept("-");
    if (peek().kind != Token::integer) error("expected " + what);
    const int64_t v = integer_literal();
    return neg ? -v : v;
  }
  // The current integer token, whole; one that does not fit 64 bits is an error, not a clamp.
  int64_t integer_literal() {
    const Token& t = next();
    int64_t v = 0;
    if (!parse_whole_int(t.text, v))
      fail(where(t.line), "integer ", t.text, " is out of range (at most ", INT64_MAX, ")");
    return v;
  }
  double real_literal() {
    const Token& t = next();
    double v = 0;
    const auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (r.ptr != t.text.data() + t.text.size()) fail(where(t.line), "malformed number '", t.text, "'");
    if (r.ec == std::errc::result_out_of_range) {
      // from_chars leaves v alone here; strtod tells overflow (inf) from underflow (0 or subnormal).
      v = std::strtod(t.text.c_str(), nullptr);
      if (std::isinf(v)) fail(where(t.line), "number ", t.text, " is out of the range of a double");
    }
    return v;
  }
  void skip_newlines() {
    while (peek().kind == Token::newline) ++pos_;
  }
  void end_of_line() {
    if (peek().kind != Token::newline) error("expected end of line");
    skip_newlines();
  }

  Param param() {
    Param q;
    q.name = ident("parameter name");
    expect(":");
    q.dtype = dtype();
    expect("[");
    do q.shape.push_back(peek().kind == Token::ident ? make_var(next().text) : make_int(integer("dimension")));
    while (accept(","));
    expect("]");
    return q;
  }

  DType dtype() {
    const Token& t = peek();
    const std::string name = ident("dtype");
    try {
      return parse_dtype(name);
    } catch (const Error&) {
      fail(where(t.line), "unknown dtype '", name, "'");
    }
  }

  std::map<std::string, std::string> attrs() {
    std::map<std::string, std::string> out;
    while (peek().kind == Token::ident) {
      std::string key = next().text, value;
      if (accept("=")) {
        const bool neg = accept("-");
        if (peek().kind == Token::newline || peek().kind == Token::end || peek().kind == Token::punct)
          error("expected the value of attribute " + key);
        value = (neg ? "-" : "") + next().text;
      }
      out[key] = value;
    }
    return out;
  }

  std::vector<Stmt> block() {
    Nesting guard(block_depth_, kMaxBlockDepth, *this, "blocks");
    end_of_line();
    std::vector<Stmt> body;
    while (!accept("}")) {
      if (peek().kind == Token::end) error("expected '}'");
      body.push_back(stmt());
    }
    return body;
  }

  Ref ref() {
    Ref r;
    r.name = ident("tensor or tile name");
    if (accept("[")) {
      do r.index.push_back(expr());
      while (accept(","));
      expect("]");
    }
    return r;
  }

  Stmt stmt() {
    Stmt s;
    s.line = peek().line;
    const std::string head = peek().kind == Token::ident ? peek().text : "";
    const bool assignment = peek(1).text == "[" || peek(1).text == "=";
    if (head.empty()) error("expected a statement");
    if (!assignment) ++pos_;
    if (assignment) {
      s.kind = Stmt::assign;
      s.refs.push_back(ref());
      expect("=");
      s.exprs.push_back(expr());
    } else if (head == "alloc") {
      s.kind = Stmt::alloc;
      s.name = ident("tile name");
      expect(":");
      const std::string scope = ident("scope (fragment or scratch)");
      if (scope != "fragment" && scope != "scratch")
        fail(where(s.line), "unknown scope '", scope, "' (fragment or scratch)");
      s.scope = scope == "fragment" ? Scope::fragment : Scope::scratch;
      s.dtype = dtype();
      expect("[");
      do s.shape.push_back(integer("tile dimension (an integer)"));
      while (accept(","));
      expect("]");
    } else if (head == "fill") {
      s.kind = Stmt::fill;
      s.refs.push_back(ref());
      expect(",");
      s.exprs.push_back(expr());
    } else if (head == "copy" || head == "cast" || head == "prefetch") {
      s.kind = head == "copy" ? Stmt::copy : head == "cast" ? Stmt::cast : Stmt::prefetch;
      s.refs.push_back(ref());
      expect("->");
      s.refs.push_back(ref());
    } else if (head == "gemm" || head == "ukernel") {
      s.kind = head == "gemm" ? Stmt::gemm : Stmt::ukernel;
      s.refs.push_back(ref());
      expect(",");
      s.refs.push_back(ref());
      expect("->");
      s.refs.push_back(ref());
    } else if (head == "reduce") {
      s.kind = Stmt::reduce;
      s.name = ident("reduction (sum or max)");
      s.refs.push_back(ref());
      expect("->");
      s.refs.push_back(ref());
    } else if (head == "for") {
      s.kind = Stmt::loop;
      s.name = ident("loop variable");
      expect("in");
      s.exprs.push_back(expr());
      expect("..");
      s.exprs.push_back(expr());
    } else if (head == "parallel") {
      s.kind = Stmt::parallel;
      do s.vars.push_back(ident("loop variable"));
      while (accept(","));
      expect("in");
      s.refs.push_back(ref());
    } else {
      fail(where(s.line), "unknown op '", head, "'");
    }
    s.attrs = attrs();
    if (s.kind == Stmt::loop || s.kind == Stmt::parallel) {
      expect("{");
      s.body = block();
    }
    end_of_line();
    return s;
  }

  // expr := cmp; cmp := sum (('<' | '<=' | '==') sum)?; sum := prod (('+'|'-') prod)*;
  // prod := unary (('*'|'/'|'%') unary)*; unary := '-' unary | atom
  Expr expr() {
    Expr a = sum();
    for (const char* op : {"<=", "<", "=="})
      if (accept(op)) return binary(op, a, sum());
    return a;
  }
  Expr sum() {
    Expr a = product();
    for (;;) {
      if (accept("+")) a = binary("+", a, product());
      else if (accept("-")) a = binary("-", a, product());
      else return a;
    }
  }
  Expr product() {
    Expr a = unary();
    for (;;) {
      if (accept("*")) a = binary("*", a, unary());
      else if (accept("/")) a = binary("/", a, unary());
      else if (accept("%")) a = binary("%", a, unary());
      else return a;
    }
  }
  // Every nested expression (parentheses, minus signs, arguments, indices) passes here.
  Expr unary() {
    Nesting guard(expr_nesting_, kMaxExprDepth, *this, "expressions");
    if (!accept("-")) return atom();
    Expr a = unary();
    if (a->kind == ExprNode::integer) return make_int(-a->ivalue);
    if (a->kind == ExprNode::real) return make_real(-a->fvalue);
    return binary("-", make_int(0), a);
  }
  Expr atom() {
    const Token& t = peek();
    if (t.kind == Token::integer) return make_int(integer_literal());
    if (t.kind == Token::real) return make_real(real_literal());
    if (accept("(")) {
      Expr e = expr();
      expect(")");
      return e;
    }
    if (t.kind != Token::ident) error("expected an expression");
    const std::string name = next().text;
    if (name == "inf") return make_real(HUGE_VAL);
    if (accept("(")) {
      if (call_arity(name) < 0) fail(where(t.line), "unknown function '", name, "'");
      std::vector<Expr> args;
      if (!accept(")")) {
        do args.push_back(expr());
        while (accept(","));
        expect(")");
      }
      return tracked(make_call(name, std::move(args)));
    }
    if (accept("[")) {
      std::vector<Expr> index;
      do index.push_back(expr());
      while (accept(","));
      expect("]");
      return tracked(make_load(name, std::move(index)));
    }
    return make_var(name);
  }

  // The depth of a tree, not only of the recursion that read it: `1 + 1 + ... + 1` is read by
  // a loop but makes a left-leaning tree as deep as it is long.
  int depth(const Expr& e) const {
    auto it = depth_.find(e.get());
    return it == depth_.end() ? 1 : it->second;
  }
  Expr tracked(Expr e) {
    int d = 0;
    for (const Expr& a : e->args) d = std::max(d, depth(a));
    if (d + 1 > kMaxExprDepth)
      fail(where(peek().line), "expression nests deeper than ", kMaxExprDepth, " levels");
    depth_[e.get()] = d + 1;
    return e;
  }
  Expr binary(const char* op, Expr a, Expr b) { return tracked(make_binary(op, std::move(a), std::move(b))); }

  // Counts one level of nesting while alive; fails past the limit.
  struct Nesting {
    Nesting(int& level, int limit, const Parser& p, const char* what) : level_(level) {
      if (++level_ > limit) {
        --level_;
        fail(p.where(p.peek().line), what, " nest deeper than ", limit, " levels");
      }
    }
    ~Nesting() { --level_; }
    int& level_;
  };

  std::string file_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
  int expr_nesting_ = 0, block_depth_ = 0;
  std::unordered_map<const ExprNode*, int> depth_;
};

}  // namespace

Program parse(const std::string& text, const std::string& file) { return Parser(text, file).program(); }

}  // namespace sol::tile
