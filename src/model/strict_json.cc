#include "model/strict_json.h"

#include <fstream>
#include <sstream>

#include "core/escaped_text.h"
#include "sol/error.h"

namespace sol::model_json {

using nlohmann::json;

namespace {
std::string number_text(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// Input echoed in a message is ASCII: a JSON value as JSON with \uXXXX escapes (cut where
// it cannot split a character), anything else with \xNN for each unprintable byte.
std::string ascii_json(const json& v) { return v.dump(-1, ' ', true); }

std::string ascii_text(const std::string& text) { return escaped_bytes(text, true); }

std::string describe(const json& v) {
  std::string text = ascii_json(v);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text + " (" + std::string(v.type_name()) + ")";
}

json parse_bounded(const std::string& text, const std::string& origin) {
  // Sol's inputs nest three levels; a deeper document is refused while it is read, because
  // printing it (dump, in messages) recurses once per level and would exhaust the stack.
  constexpr int kMaxDepth = 64;
  const auto bounded = [&](int depth, json::parse_event_t, json&) {
    check(depth <= kMaxDepth, origin, "not valid JSON: nested deeper than ", kMaxDepth, " levels");
    return true;
  };
  json doc;
  try {
    doc = json::parse(text, bounded);
  } catch (const json::exception& e) {
    // parse_error, or out_of_range.406 for a number too large for a double (1e400). The
    // message quotes the bytes last read, which may be anything.
    fail(origin, "not valid JSON: ", ascii_text(e.what()));
  }
  return doc;
}
}  // namespace

json parse_document(const std::string& text, const std::string& origin) {
  json doc = parse_bounded(text, origin);
  check(doc.is_object(), origin, "expected a JSON object at the top, got ", describe(doc));
  return doc;
}

json read_records_file(const std::string& path, const std::string& who, const std::string& hint,
                       bool* bare_array) {
  std::ifstream in(path);
  check(in.good(), who, "cannot read '", path, "' (", hint, ")");
  std::stringstream text;
  text << in.rdbuf();
  json doc = parse_bounded(text.str(), path);
  const bool bare = doc.is_array();
  if (bare_array) *bare_array = bare;
  if (bare) return json{{"records", std::move(doc)}};
  check(doc.is_object(), path, "expected a JSON object or an array of records at the top, got ", describe(doc));
  return doc;
}

Fields::Fields(const json& object, std::string where) : object_(object), where_(std::move(where)) {
  check(object_.is_object(), where_, "expected a JSON object, got ", describe(object_));
}

bool Fields::has(const std::string& key) const {
  auto it = object_.find(key);
  return it != object_.end() && !it->is_null();
}

void Fields::fail_key(const std::string& key, const std::string& expected) const {
  auto it = object_.find(key);
  if (it == object_.end()) fail(where_, "missing key '", key, "' (expected ", expected, ")");
  fail(where_, "key '", key, "': expected ", expected, ", got ", describe(*it));
}

const json& Fields::value(const std::string& key, const char* expected) {
  seen_.insert(key);
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) fail_key(key, expected);
  return *it;
}

int64_t Fields::integer(const std::string& key, int64_t min_value, int64_t max_value) {
  const std::string expected = "an integer >= " + std::to_string(min_value) + " and <= " + std::to_string(max_value);
  const json& v = value(key, expected.c_str());
  if (!v.is_number_integer()) fail_key(key, expected);
  // nlohmann keeps a non-negative integer as a uint64 (up to 2^64 - 1): compare it as one, since
  // read as int64 it would wrap.
  const bool below_max = v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t(max_value) : v.get<int64_t>() <= max_value;
  if (!below_max || v.get<int64_t>() < min_value) fail_key(key, expected);
  return v.get<int64_t>();
}

int64_t Fields::integer_or(const std::string& key, int64_t fallback, int64_t min_value, int64_t max_value) {
  seen_.insert(key);
  return has(key) ? integer(key, min_value, max_value) : fallback;
}

double Fields::number(const std::string& key, double min_value) {
  std::string expected = "a number >= " + number_text(min_value);
  const json& v = value(key, expected.c_str());
  if (!v.is_number() || v.get<double>() < min_value) fail_key(key, expected);
  return v.get<double>();
}

double Fields::number_or(const std::string& key, double fallback, double min_value) {
  seen_.insert(key);
  return has(key) ? number(key, min_value) : fallback;
}

bool Fields::boolean_or(const std::string& key, bool fallback) {
  seen_.insert(key);
  if (!has(key)) return fallback;
  const json& v = value(key, "true or false");
  if (!v.is_boolean()) fail_key(key, "true or false");
  return v.get<bool>();
}

std::string Fields::text(const std::string& key) {
  const json& v = value(key, "a string");
  if (!v.is_string()) fail_key(key, "a string");
  return v.get<std::string>();
}

std::string Fields::text_or(const std::string& key, const std::string& fallback) {
  seen_.insert(key);
  return has(key) ? text(key) : fallback;
}

DType Fields::dtype_or(const std::string& key, DType fallback) {
  seen_.insert(key);
  if (!has(key)) return fallback;
  std::string name = text(key);
  try {
    return parse_dtype(name, key);
  } catch (const Error&) {
    fail_key(key, "a dtype (bf16, f8e4m3, f32, ...)");
  }
}

bool Fields::is_empty_list(const std::string& key) const {
  auto it = object_.find(key);
  return it != object_.end() && it->is_array() && it->empty();
}

Fields Fields::object(const std::string& key) {
  const json& v = value(key, "an object");
  if (!v.is_object()) fail_key(key, "an object");
  return Fields(v, where_ + " " + key);
}

void Fields::accept(std::initializer_list<const char*> keys) {
  for (const char* k : keys) seen_.insert(k);
}

void Fields::finish() const {
  for (auto it = object_.begin(); it != object_.end(); ++it) {
    if (seen_.count(it.key()) == 0) {
      std::string known;
      for (const std::string& k : seen_) known += (known.empty() ? "" : ", ") + k;
      const std::string key = ascii_json(it.key());  // "..." with the quotes
      fail(where_, "unknown key '", key.substr(1, key.size() - 2), "' (known keys: ", known, ")");
    }
  }
}

}  // namespace sol::model_json
