// Unit tests of json::Value: the value type of non-tensor entries and of stored meta.json files.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include <tensordict/errors.h>
#include <tensordict/json.h>

using namespace tensordict;
using json::Value;

TEST_CASE("parse reads both Python writers' styles to the same value", "[json]") {
  // orjson: compact; stdlib json.dumps: ", " and ": "; json.dump(indent=4): newlines.
  const Value compact = json::parse(R"({"shape":[3,4],"dtype":"torch.float32","ok":true,"none":null})");
  const Value spaced = json::parse(R"({"shape": [3, 4], "dtype": "torch.float32", "ok": true, "none": null})");
  const Value pretty = json::parse(
      "{\n    \"shape\": [\n        3,\n        4\n    ],\n    \"dtype\": \"torch.float32\",\n"
      "    \"ok\": true,\n    \"none\": null\n}\n");
  CHECK(compact == spaced);
  CHECK(compact == pretty);
  REQUIRE(compact.is_object());
  CHECK(compact.find("shape")->as_array().size() == 2);
  CHECK(compact.find("shape")->as_array()[1].as_int() == 4);
  CHECK(compact.find("dtype")->as_string() == "torch.float32");
  CHECK(compact.find("ok")->as_bool());
  CHECK(compact.find("none")->is_null());
  CHECK(compact.find("missing") == nullptr);
  CHECK((compact.dump() == R"({"shape":[3,4],"dtype":"torch.float32","ok":true,"none":null})"));
}

TEST_CASE("numbers: ints stay ints, floats stay floats", "[json]") {
  CHECK(json::parse("42").is_int());
  CHECK(json::parse("-7").as_int() == -7);
  CHECK(json::parse("9223372036854775807").as_int() == INT64_MAX);
  CHECK(json::parse("1.5").is_double());
  CHECK(json::parse("1e3").as_double() == 1000.0);
  CHECK(json::parse("-2.5E-3").as_double() == -0.0025);
  CHECK(json::parse("1.0").dump() == "1.0");
  CHECK(json::parse("123456789012345678901234567890").is_double());  // beyond int64
  CHECK(Value(3) == Value(3.0));  // numeric equality like Python
  CHECK(Value(0.1).dump() == "0.1");
}

TEST_CASE("floats print like Python's repr", "[json]") {
  CHECK(Value(1.0).python_str() == "1.0");
  CHECK(Value(0.5).python_str() == "0.5");
  CHECK(Value(100.0).python_str() == "100.0");
  CHECK(Value(0.0001).python_str() == "0.0001");
  CHECK(Value(1e-05).python_str() == "1e-05");
  CHECK(Value(1.5e-07).python_str() == "1.5e-07");
  CHECK(Value(1e15).python_str() == "1000000000000000.0");
  CHECK(Value(1e16).python_str() == "1e+16");
  CHECK(Value(1.25e100).python_str() == "1.25e+100");
  CHECK(Value(-123.456).python_str() == "-123.456");
  CHECK(Value(0.0001).dump() == "0.0001");
  CHECK(Value(1e16).dump() == "1e+16");
}

TEST_CASE("NaN and Infinity: parsed from the stdlib style, written only with allow_nan", "[json]") {
  Value v = json::parse("[NaN, Infinity, -Infinity, 1]");
  const auto& a = v.as_array();
  CHECK(std::isnan(a[0].as_double()));
  CHECK(a[1].as_double() == INFINITY);
  CHECK(a[2].as_double() == -INFINITY);
  CHECK(v.dump(/*allow_nan=*/true) == "[NaN,Infinity,-Infinity,1]");
  CHECK(v.dump() == "[null,null,null,1]");  // orjson writes null
  CHECK(v.python_str() == "[nan, inf, -inf, 1]");
}

TEST_CASE("strings: escapes, raw UTF-8 and surrogate pairs", "[json]") {
  CHECK(json::parse(R"("a\"b\\c\/d\n\t\r\b\f")").as_string() == "a\"b\\c/d\n\t\r\b\f");
  CHECK(json::parse(R"("\u00e9")").as_string() == "\xC3\xA9");          // é (stdlib json escapes it)
  CHECK(json::parse("\"\xC3\xA9\"").as_string() == "\xC3\xA9");          // orjson writes it raw
  CHECK(json::parse(R"("\u20ac")").as_string() == "\xE2\x82\xAC");      // €
  CHECK(json::parse(R"("\ud83d\ude00")").as_string() == "\xF0\x9F\x98\x80");  // 😀 from a surrogate pair
  CHECK(json::parse(R"("\uD83D\uDE00")").as_string() == "\xF0\x9F\x98\x80");
  CHECK(Value("\xC3\xA9").dump() == "\"\xC3\xA9\"");
  CHECK(Value(std::string("q\"\\\n\x01")).dump() == R"("q\"\\\n\u0001")");
  // Round trip.
  const std::string tricky = "tab\there \xF0\x9F\x98\x80 \"quoted\" back\\slash";
  CHECK(json::parse(Value(tricky).dump()).as_string() == tricky);
}

TEST_CASE("object key order is kept through parse and dump", "[json]") {
  const std::string text = R"({"zeta":1,"alpha":{"y":2,"b":3},"mid":[]})";
  Value v = json::parse(text);
  const auto& obj = v.as_object();
  REQUIRE(obj.size() == 3);
  CHECK(obj[0].first == "zeta");
  CHECK(obj[1].first == "alpha");
  CHECK(obj[2].first == "mid");
  CHECK(obj[1].second.as_object()[0].first == "y");
  CHECK(v.dump() == text);
  // A duplicated key keeps the last value at the first position, like Python's json.loads.
  Value dup = json::parse(R"({"a":1,"b":2,"a":3})");
  CHECK((dup.dump() == R"({"a":3,"b":2})"));
}

TEST_CASE("duplicated keys keep the last value at the first position, in objects of any size", "[json]") {
  // Against a model of Python's json.loads: objects of up to 200 keys (past the size where the
  // parser stops scanning and hashes the keys), keys drawn from pools small enough to repeat.
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    const int pool = 1 + static_cast<int>(rng() % 120);
    const int count = static_cast<int>(rng() % 201);
    std::vector<std::pair<std::string, int64_t>> model;
    std::string text = "{";
    for (int i = 0; i < count; ++i) {
      const std::string key = "k" + std::to_string(rng() % pool);
      const int64_t value = i;
      text += (i ? "," : "") + std::string("\"") + key + "\":" + std::to_string(value);
      auto it = std::find_if(model.begin(), model.end(), [&](const auto& kv) { return kv.first == key; });
      if (it != model.end()) {
        it->second = value;
      } else {
        model.emplace_back(key, value);
      }
    }
    text += "}";
    const Value v = json::parse(text);
    const auto& obj = v.as_object();
    REQUIRE(obj.size() == model.size());
    for (size_t i = 0; i < model.size(); ++i) {
      REQUIRE(obj[i].first == model[i].first);
      REQUIRE(obj[i].second.as_int() == model[i].second);
    }
  }
}

TEST_CASE("nested arrays of every length parse to their elements in order", "[json]") {
  const std::string text = R"([[1,[2,3]],[],[4,[5,[6]],[[]]],"s",[true,null,[1.5,[-2]]],{"a":[7,8],"b":[]},9])";
  const Value v = json::parse(text);
  CHECK(v.dump() == text);
  REQUIRE(v.as_array().size() == 7);
  CHECK(v.as_array()[2].as_array()[1].as_array()[1].as_array()[0].as_int() == 6);
  CHECK(v.as_array()[5].find("a")->as_array()[1].as_int() == 8);
  // A long array, and one inside a long array.
  std::string long_text = "[";
  for (int i = 0; i < 1000; ++i) long_text += (i ? "," : "") + (i % 100 == 0 ? "[" + std::to_string(i) + ",[]]" : std::to_string(i));
  long_text += "]";
  const Value w = json::parse(long_text);
  REQUIRE(w.as_array().size() == 1000);
  CHECK(w.as_array()[999].as_int() == 999);
  CHECK(w.as_array()[300].as_array()[0].as_int() == 300);
  CHECK(w.dump() == long_text);
}

TEST_CASE("python_str and python_repr print what Python prints", "[json]") {
  CHECK(Value("hello").python_str() == "hello");
  CHECK(Value("hello").python_repr() == "'hello'");
  CHECK(Value("it's").python_repr() == "\"it's\"");
  CHECK(Value(true).python_str() == "True");
  CHECK(Value().python_str() == "None");
  CHECK((Value(json::Array{"a", 1, json::Value()}).python_str() == "['a', 1, None]"));
  CHECK((Value(json::Object{{"k", 1}, {"s", "v"}}).python_str() == "{'k': 1, 's': 'v'}"));
  CHECK(Value(json::Array{}).python_str() == "[]");
}

TEST_CASE("typed accessors name the actual kind", "[json][errors]") {
  Value v = json::parse(R"({"a":[1]})");
  REQUIRE_THROWS_AS(v.as_array(), TypeError);
  REQUIRE_THROWS_WITH(v.as_array(), Catch::Contains("expected a JSON array but got a JSON object"));
  REQUIRE_THROWS_WITH(Value("x").as_int(), Catch::Contains("expected a JSON int but got a JSON string"));
  CHECK(Value(2).as_double() == 2.0);
  // Copies share arrays until one is modified.
  Value copy = v;
  copy.mutable_object()[0].second.mutable_array().push_back(2);
  CHECK(v.dump() == R"({"a":[1]})");
  CHECK((copy.dump() == R"({"a":[1,2]})"));
}

TEST_CASE("parse errors name the source, line and column", "[json][errors]") {
  REQUIRE_THROWS_AS(json::parse("{\n  \"a\": x}", "meta.json"), ValueError);
  REQUIRE_THROWS_WITH(json::parse("{\n  \"a\": x}", "meta.json"),
                      Catch::Contains("meta.json:2:8: invalid JSON") && Catch::Contains("unexpected character 'x'"));
  REQUIRE_THROWS_WITH(json::parse("[1, 2"), Catch::Contains("<json>:1:6") && Catch::Contains("end of input"));
  REQUIRE_THROWS_WITH(json::parse("[1 2]"), Catch::Contains("1:4") && Catch::Contains("expected ',' or ']'"));
  REQUIRE_THROWS_WITH(json::parse("{\"a\" 1}"), Catch::Contains("1:6") && Catch::Contains("expected ':'"));
  REQUIRE_THROWS_WITH(json::parse("{1: 2}"), Catch::Contains("1:2") && Catch::Contains("expected a string key"));
  REQUIRE_THROWS_WITH(json::parse("\"abc"), Catch::Contains("unterminated string"));
  REQUIRE_THROWS_WITH(json::parse("\"\\q\""), Catch::Contains("bad escape"));
  REQUIRE_THROWS_WITH(json::parse("\"\\u12G4\""), Catch::Contains("bad hex digit"));
  REQUIRE_THROWS_WITH(json::parse("1 2"), Catch::Contains("1:3") && Catch::Contains("trailing characters"));
  REQUIRE_THROWS_WITH(json::parse("1.2.3"), Catch::Contains("bad number"));
  // A minus sign starts a number unless -Infinity follows; what is neither is a bad number.
  for (const char* bad : {"-", "[-]", "-Inf", "-Infinit", "-x", "[1,-]"})
    REQUIRE_THROWS_WITH(json::parse(bad), Catch::Contains("bad number"));
  REQUIRE_THROWS_WITH(json::parse("nul"), Catch::Contains("unexpected character 'n'"));
  REQUIRE_THROWS_WITH(json::parse("Inf"), Catch::Contains("unexpected character 'I'"));
  CHECK(json::parse("-0").as_int() == 0);
  CHECK(json::parse("-12").as_int() == -12);
  CHECK(json::parse("-2.5e1").as_double() == -25.0);
  CHECK(json::parse("[-Infinity,-1]").dump(/*allow_nan=*/true) == "[-Infinity,-1]");
  REQUIRE_THROWS_WITH(json::parse(""), Catch::Contains("end of input"));
  REQUIRE_THROWS_WITH(json::parse("\"a\nb\""), Catch::Contains("control character"));
  REQUIRE_THROWS_WITH(json::parse(std::string(600, '[')), Catch::Contains("nesting too deep"));
}
