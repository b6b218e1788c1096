#pragma once
// Strict reading of one JSON object: every key must be known, every required key present, every
// value of the right type. Messages name the origin (the file), the key, what was expected and
// what was got: "plans/x.json: key 'tp': expected a positive integer, got "8" (string)".
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "sol/dtype.h"

namespace sol::model_json {

nlohmann::json parse_document(const std::string& text, const std::string& origin);

// A file of Sol's measurement records: `sol report`'s report.json (an object) or `sol bench
// --json`'s bare array, parsed as parse_document parses (messages point into the file as it
// is); a bare array comes back as {"records": [...]} with *bare_array set. An unreadable file is an error from `who` with `hint`.
nlohmann::json read_records_file(const std::string& path, const std::string& who, const std::string& hint,
                                 bool* bare_array = nullptr);

class Fields {
 public:
  // `where` prefixes messages: the file, and the path of a nested object ("a.json: plan.ep").
  Fields(const nlohmann::json& object, std::string where);

  bool has(const std::string& key) const;  // present and not null
  // Integers are range-checked before any narrowing: at most max_value (by default what an
  // int holds), and a JSON integer beyond 64 bits is an error, never a wrapped value.
  static constexpr int64_t kIntMax = 2147483647;
  int64_t integer(const std::string& key, int64_t min_value = 1, int64_t max_value = kIntMax);
  int64_t integer_or(const std::string& key, int64_t fallback, int64_t min_value = 0, int64_t max_value = kIntMax);
  double number(const std::string& key, double min_value = 0);
  double number_or(const std::string& key, double fallback, double min_value = 0);
  bool boolean_or(const std::string& key, bool fallback);
  std::string text(const std::string& key);
  std::string text_or(const std::string& key, const std::string& fallback);
  DType dtype_or(const std::string& key, DType fallback);
  Fields object(const std::string& key);
  bool is_empty_list(const std::string& key) const;
  const std::string& where() const { return where_; }
  // Keys that describe the file but do not change the prediction (HF bookkeeping).
  void accept(std::initializer_list<const char*> keys);
  // Throws on the first key that was neither read nor accepted.
  void finish() const;

  [[noreturn]] void fail_key(const std::string& key, const std::string& expected) const;

 private:
  const nlohmann::json& value(const std::string& key, const char* expected);
  const nlohmann::json& object_;
  std::string where_;
  std::set<std::string> seen_;
};

}  // namespace sol::model_json
