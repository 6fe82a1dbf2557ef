// py_json_dumps against goldens written by Python's json.dumps (tools/gen_json_goldens.py).
#include "core/base/json_text.h"
#include "tests/test_support.h"

#include <sstream>

namespace {

TEST(JsonText, MatchesPythonJsonDumpsGoldens) {
    std::istringstream lines(cc::test::read_file(cc::test::data_dir() / "json_dumps_goldens.jsonl"));
    std::string line;
    int n_cases = 0;
    while (std::getline(lines, line)) {
        const auto golden = nlohmann::json::parse(line);
        const auto value = cc::parse_json_text(golden["input"].get<std::string>(), "golden");
        EXPECT_EQ(cc::py_json_dumps(value), golden["compact"].get<std::string>()) << "input: " << golden["input"];
        EXPECT_EQ(cc::py_json_dumps(value, 4), golden["indent4"].get<std::string>()) << "input: " << golden["input"];
        ++n_cases;
    }
    EXPECT_GE(n_cases, 30);
}

TEST(JsonText, KeepsKeyOrderAsGiven) {
    const auto v = cc::parse_json_text(R"({"z": 1, "a": 2, "m": {"y": true, "b": false}})", "t");
    EXPECT_EQ(cc::py_json_dumps(v), R"({"z": 1, "a": 2, "m": {"y": true, "b": false}})");
}

TEST(JsonText, RefusesDeepNestingBeforeParsing) {
    const std::string deep = std::string(65, '[') + std::string(65, ']');
    try {
        cc::parse_json_text(deep, "deep.json", 64);
        FAIL() << "expected an error";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("deep.json: JSON nesting deeper than 64"), std::string::npos) << e.what();
    }
    const std::string ok = std::string(64, '[') + std::string(64, ']');
    EXPECT_NO_THROW(cc::parse_json_text(ok, "ok.json", 64));
    // Brackets inside strings do not count.
    EXPECT_NO_THROW(cc::parse_json_text("\"" + std::string(200, '[') + "\"", "s.json", 64));
}

TEST(JsonText, InvalidJsonNamesTheSourceAndPosition) {
    try {
        cc::parse_json_text("{\"a\": 1,,}", "bad.json");
        FAIL() << "expected an error";
    } catch (const std::runtime_error& e) {
        const std::string what = e.what();
        EXPECT_TRUE(what.starts_with("bad.json: invalid JSON: ")) << what;
        EXPECT_NE(what.find("column"), std::string::npos) << what;
    }
}

}  // namespace

namespace {

TEST(JsonText, NumberOverflowIsAnErrorNotACrash) {
    // Found by fuzz/fuzz_tool_set: nlohmann throws out_of_range (not parse_error) for 1e999.
    try {
        cc::parse_json_text("[1e999]", "big.json");
        FAIL() << "expected an error";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("big.json: invalid JSON: number overflow"), std::string::npos) << e.what();
    }
}

}  // namespace
