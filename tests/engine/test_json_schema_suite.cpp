// Strict calls against the official JSON Schema Test Suite (Debian's json-schema-test-suite,
// draft 7; another copy through CC_JSON_SCHEMA_TEST_SUITE=DIR): for every schema of the keyword
// files that strict calls compile, the plain validator gives the suite's verdict on every value,
// and the matcher never accepts a value the suite calls invalid (a strict call writes only values
// the schema accepts). Schemas strict calls refuse (uniqueItems, not, patternProperties, remote
// $refs, oneOf of overlapping branches, ...) are counted and skipped: refusing is their contract.
#include "core/engine/json_schema_constraint.h"
#include "core/engine/schema_pattern.h"
#include "tests/test_support.h"

#include <cstdlib>
#include <filesystem>

namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

fs::path suite_dir() {
    if (const char* dir = std::getenv("CC_JSON_SCHEMA_TEST_SUITE")) return dir;
    return "/usr/share/json-schema-test-suite/tests/draft7";
}

// A format the suite asserts but strict calls leave as an annotation (regex, uri, ipv6, ...): a
// schema that names one is not followed whole, so its verdicts are not ours to match.
bool names_an_unchecked_format(const json& schema) {
    if (schema.is_object())
        for (auto it = schema.begin(); it != schema.end(); ++it)
            if ((it.key() == "format" && it.value().is_string() &&
                 !cc::SchemaPattern::format_regex(it.value().get<std::string>())) ||
                names_an_unchecked_format(it.value()))
                return true;
    if (schema.is_array())
        for (const auto& v : schema)
            if (names_an_unchecked_format(v)) return true;
    return false;
}

TEST(JsonSchemaSuite, CompiledSchemasGiveTheSuitesVerdicts) {
    const fs::path dir = suite_dir();
    if (!fs::exists(dir / "type.json"))
        GTEST_SKIP() << dir << " is absent (Debian's json-schema-test-suite; or set CC_JSON_SCHEMA_TEST_SUITE)";
    const char* const files[] = {"type.json",
                                 "enum.json",
                                 "const.json",
                                 "pattern.json",
                                 "anyOf.json",
                                 "oneOf.json",
                                 "allOf.json",
                                 "minLength.json",
                                 "maxLength.json",
                                 "minimum.json",
                                 "maximum.json",
                                 "exclusiveMinimum.json",
                                 "exclusiveMaximum.json",
                                 "multipleOf.json",
                                 "items.json",
                                 "minItems.json",
                                 "maxItems.json",
                                 "required.json",
                                 "properties.json",
                                 "additionalProperties.json",
                                 "ref.json",
                                 "definitions.json",
                                 "boolean_schema.json",
                                 "default.json",
                                 "uniqueItems.json",
                                 "not.json",
                                 "optional/ecmascript-regex.json",
                                 "optional/format/date.json",
                                 "optional/format/time.json",
                                 "optional/format/date-time.json",
                                 "optional/format/email.json",
                                 "optional/format/hostname.json",
                                 "optional/format/ipv4.json"};
    size_t n_groups = 0, n_compiled = 0, n_values = 0, n_accepted_valid = 0, n_valid = 0;
    for (const char* name : files) {
        const fs::path file = dir / name;
        if (!fs::exists(file)) continue;  // an older or newer suite without it
        const json groups = json::parse(cc::test::read_file(file));
        for (const auto& group : groups) {
            ++n_groups;
            const json& schema = group["schema"];
            std::unique_ptr<cc::JsonSchemaGrammar> g;
            try {
                g = std::make_unique<cc::JsonSchemaGrammar>(schema, "", "suite");
            } catch (const std::invalid_argument&) {
                continue;  // refused by name
            }
            if (names_an_unchecked_format(schema)) continue;
            ++n_compiled;
            for (const auto& t : group["tests"]) {
                const bool valid = t["valid"].get<bool>();
                const std::string where = std::string(name) + ": " + group["description"].get<std::string>() + " / " +
                                          t["description"].get<std::string>() + ": " + t["data"].dump();
                ++n_values;
                EXPECT_EQ(cc::json_schema_valid(schema, t["data"]), valid) << where;
                const bool accepted = g->accepts(cc::py_json_dumps(t["data"]));
                if (accepted && !valid) ADD_FAILURE() << "the matcher accepts what the suite refuses: " << where;
                n_valid += valid;
                n_accepted_valid += accepted && valid;
            }
        }
    }
    std::printf(
        "JSON Schema Test Suite (%s): %zu of %zu schemas compiled, %zu values checked; the matcher "
        "writes %zu of the %zu valid ones (it closes objects and limits number forms)\n",
        dir.string().c_str(), n_compiled, n_groups, n_values, n_accepted_valid, n_valid);
    EXPECT_GT(n_compiled, 50u);  // the suite is the one this test reads
}

}  // namespace
