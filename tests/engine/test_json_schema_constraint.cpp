// The strict-call matcher (core/engine/json_schema_constraint.h): whole texts and prefixes that a
// schema accepts or refuses, the keywords it refuses by name, the token mask against a brute force
// over a small vocabulary, and random masked walks that always end in a schema-valid value.
#include "core/engine/json_schema_constraint.h"
#include "tests/test_support.h"

#include <random>

namespace {

using cc::JsonSchemaGrammar;
using cc::SchemaMasker;
using cc::SchemaState;
using cc::TokenTrie;
using json = nlohmann::ordered_json;

JsonSchemaGrammar grammar(const char* schema, std::string tail = "") {
    return JsonSchemaGrammar(json::parse(schema), std::move(tail), "tool \"t\"");
}

// Compiling `schema` is refused with an error that contains `what`.
void expect_refused(const char* schema, const char* what) {
    try {
        grammar(schema);
        ADD_FAILURE() << schema << ": not refused";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
}

const char* const kWeather = R"({"type": "object", "properties": {
    "city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]},
    "days": {"type": "integer"}}, "required": ["city"], "additionalProperties": false})";

TEST(JsonSchemaGrammar, ScalarsAndLiterals) {
    const auto s = grammar(R"({"type": "string"})");
    for (const char* ok : {R"("")", R"("abc")", R"("a\"b\\c\u00e9\n")", "\"\xc3\xa9t\xc3\xa9\"", R"( "x")"})
        EXPECT_TRUE(s.accepts(ok)) << ok;
    for (const char* bad : {R"(abc)", R"("abc)", R"("a"b")", "\"a\x01\"", R"("\q")", R"("\u12G4")", "\"\xc3\"", "\"\xff\"", "1",
                            R"(  "x")"})
        EXPECT_FALSE(s.accepts(bad)) << bad;

    const auto n = grammar(R"({"type": "number"})");
    for (const char* ok : {"0", "-0", "12", "-3.25", "1e5", "1.5E-3", "0.0"}) EXPECT_TRUE(n.accepts(ok)) << ok;
    for (const char* bad : {"01", "-", "1.", ".5", "1e", "+1", "1.2.3", "\"1\"", "NaN", "1e123"}) EXPECT_FALSE(n.accepts(bad)) << bad;

    const auto i = grammar(R"({"type": "integer"})");
    EXPECT_TRUE(i.accepts("-42"));
    EXPECT_FALSE(i.accepts("4.2"));
    EXPECT_FALSE(i.accepts("4e2"));
    EXPECT_FALSE(i.is_prefix("4."));

    const auto b = grammar(R"({"type": ["boolean", "null"]})");
    for (const char* ok : {"true", "false", "null"}) EXPECT_TRUE(b.accepts(ok)) << ok;
    for (const char* bad : {"tru", "nul", "True", "0", "truee"}) EXPECT_FALSE(b.accepts(bad)) << bad;

    const auto e = grammar(R"({"enum": ["red", "green", 1, 12, null]})");
    for (const char* ok : {R"("red")", R"("green")", "1", "12", "null"}) EXPECT_TRUE(e.accepts(ok)) << ok;
    for (const char* bad : {R"("re")", R"("blue")", "2", "123", R"("red" )"}) EXPECT_FALSE(e.accepts(bad)) << bad;
    EXPECT_TRUE(e.is_prefix(R"("gr)"));
    EXPECT_FALSE(e.is_prefix(R"("gx)"));

    const auto c = grammar(R"({"const": {"a": [1, 2]}})");
    EXPECT_TRUE(c.accepts(R"({"a": [1, 2]})"));
    EXPECT_FALSE(c.accepts(R"({"a": [1, 3]})"));
}

TEST(JsonSchemaGrammar, Objects) {
    const auto g = grammar(kWeather);
    for (const char* ok : {R"({"city": "Oslo"})", R"({"unit": "c", "city": "Oslo", "days": 3})", R"({"city":"Oslo","days":-1})",
                           "{\n  \"city\": \"Oslo\",\n  \"unit\": \"f\"\n}"})
        EXPECT_TRUE(g.accepts(ok)) << ok;
    for (const char* bad : {R"({})", R"({"unit": "c"})", R"({"city": "Oslo", "country": "NO"})", R"({"city": 3})",
                            R"({"city": "Oslo", "unit": "k"})", R"({"city": "Oslo", "days": 1.5})",
                            R"({"city": "Oslo", "city": "Bergen"})", R"({"city": "Oslo",})", R"({"city": "Oslo"}})"})
        EXPECT_FALSE(g.accepts(bad)) << bad;
    // No dead ends: a closed object's keys stay on the way to a property not given yet, and a ","
    // needs one left.
    EXPECT_FALSE(g.is_prefix(R"({"ci)") == false);
    EXPECT_FALSE(g.is_prefix(R"({"co)"));
    EXPECT_FALSE(g.is_prefix(R"({"city": "a", "ci)"));
    EXPECT_FALSE(g.is_prefix(R"({"city": "a", "unit": "c", "days": 1,)"));
    EXPECT_TRUE(g.is_prefix(R"({"city": "a", "unit": "c",)"));

    // An object that lists properties and says nothing of others takes only those.
    const auto listed = grammar(R"({"type": "object", "properties": {"a": {"type": "integer"}}})");
    EXPECT_TRUE(listed.accepts(R"({"a": 2})"));
    EXPECT_FALSE(listed.accepts(R"({"a": 2, "b": 1})"));
    EXPECT_TRUE(grammar(R"({"type": "object"})").accepts(R"({"b": 1})"));
    EXPECT_FALSE(grammar(R"({"type": "object", "properties": {}})").accepts(R"({"b": 1})"));
    EXPECT_TRUE(grammar(R"({"type": "object", "properties": {}})").accepts(R"({})"));
    // Open objects take any other key, with any value unless additionalProperties says.
    const auto open = grammar(R"({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": true})");
    EXPECT_TRUE(open.accepts(R"({"b": [1, {"x": null}], "a": 2, "ab": "s"})"));
    EXPECT_FALSE(open.accepts(R"({"a": "s"})"));
    EXPECT_FALSE(open.accepts(R"({"a": 1, "a": 2})"));
    const auto typed = grammar(R"({"type": "object", "additionalProperties": {"type": "string"}})");
    EXPECT_TRUE(typed.accepts(R"({"x": "1", "y": "2"})"));
    EXPECT_FALSE(typed.accepts(R"({"x": 1})"));

    const auto nested = grammar(R"({"type": "object", "properties": {"to": {"type": "object",
        "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["name"], "additionalProperties": false}}, "required": ["to"], "additionalProperties": false})");
    EXPECT_TRUE(nested.accepts(R"({"to": {"name": "Ana", "tags": ["a", "b"]}})"));
    EXPECT_FALSE(nested.accepts(R"({"to": {"tags": []}})"));
    EXPECT_FALSE(nested.accepts(R"({"to": {"name": "Ana", "tags": [1]}})"));
}

TEST(JsonSchemaGrammar, ArraysAnyOfAndAny) {
    const auto a = grammar(R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})");
    for (const char* ok : {"[1]", "[1, 2, 3]", "[ 1,2 ]", "[\n  1\n]"}) EXPECT_TRUE(a.accepts(ok)) << ok;
    for (const char* bad : {"[]", "[1, 2, 3, 4]", "[1,]", "[\"1\"]", "[1 2]"}) EXPECT_FALSE(a.accepts(bad)) << bad;
    EXPECT_FALSE(a.is_prefix("[1, 2, 3,"));

    const auto u = grammar(R"({"anyOf": [{"type": "string"}, {"type": "object", "properties": {"k": {"type": "integer"}},
        "required": ["k"], "additionalProperties": false}, {"type": "array", "items": {"type": "boolean"}}]})");
    for (const char* ok : {R"("s")", R"({"k": 1})", "[true, false]"}) EXPECT_TRUE(u.accepts(ok)) << ok;
    for (const char* bad : {"1", R"({"k": "1"})", "[1]", "null"}) EXPECT_FALSE(u.accepts(bad)) << bad;

    // Two object branches both alive until a key tells them apart.
    const auto two = grammar(R"({"anyOf": [
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false},
        {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"], "additionalProperties": false}]})");
    EXPECT_TRUE(two.accepts(R"({"a": "x"})"));
    EXPECT_TRUE(two.accepts(R"({"b": "x"})"));
    EXPECT_FALSE(two.accepts(R"({"a": "x", "b": "y"})"));
    EXPECT_FALSE(two.accepts(R"({})"));

    const auto any = grammar("{}");
    for (const char* ok : {"1", "\"s\"", "[1, [2, {\"a\": null}]]", "{\"k\": {\"k\": true}}", "-0.5e+3"})
        EXPECT_TRUE(any.accepts(ok)) << ok;
    EXPECT_FALSE(any.accepts("{\"a\" 1}"));
}

TEST(JsonSchemaGrammar, NumberBounds) {
    const auto pct = grammar(R"({"type": "integer", "minimum": 0, "maximum": 100})");
    for (const char* ok : {"0", "7", "42", "100"}) EXPECT_TRUE(pct.accepts(ok)) << ok;
    for (const char* bad : {"-1", "101", "1000", "-0.5", "1e2"}) EXPECT_FALSE(pct.accepts(bad)) << bad;
    // A digit is refused as soon as no completion fits: no dead ends. (-0 is 0, so "-" may start.)
    EXPECT_TRUE(pct.accepts("-0"));
    EXPECT_FALSE(grammar(R"({"type": "integer", "minimum": 1})").is_prefix("-"));
    EXPECT_FALSE(pct.is_prefix("101"));
    EXPECT_TRUE(pct.is_prefix("10"));
    EXPECT_FALSE(pct.is_prefix("1000"));
    const auto temp = grammar(R"({"type": "number", "minimum": -50.5, "exclusiveMaximum": 60})");
    for (const char* ok : {"-50.5", "-50", "0.25", "59.999", "-0"}) EXPECT_TRUE(temp.accepts(ok)) << ok;
    for (const char* bad : {"-50.6", "60", "60.0", "-51", "1e1"}) EXPECT_FALSE(temp.accepts(bad)) << bad;
    EXPECT_FALSE(temp.is_prefix("-50.6"));
    EXPECT_FALSE(temp.is_prefix("60."));
    EXPECT_TRUE(temp.is_prefix("59."));
    const auto tenth = grammar(R"({"type": "number", "minimum": 0.1, "maximum": 0.1})");
    EXPECT_TRUE(tenth.accepts("0.1"));
    EXPECT_TRUE(tenth.accepts("0.10"));
    EXPECT_FALSE(tenth.accepts("0.11"));
    EXPECT_FALSE(tenth.is_prefix("0.2"));
    const auto big = grammar(R"({"type": "integer", "minimum": 1000})");
    EXPECT_TRUE(big.accepts("1000"));
    EXPECT_TRUE(big.accepts("99999"));
    EXPECT_FALSE(big.accepts("999"));
    EXPECT_TRUE(big.is_prefix("9"));
    EXPECT_FALSE(big.is_prefix("-"));
    EXPECT_FALSE(big.is_prefix("1234567890123456"));  // 16 digits
}

TEST(JsonSchemaGrammar, MultipleOf) {
    const auto half = grammar(R"({"type": "number", "minimum": 10, "maximum": 30, "multipleOf": 0.5})");
    for (const char* ok : {"10", "21.5", "30", "22.50", "15.0"}) EXPECT_TRUE(half.accepts(ok)) << ok;
    for (const char* bad : {"21.3", "30.5", "9.5", "21.25"}) EXPECT_FALSE(half.accepts(bad)) << bad;
    EXPECT_FALSE(half.is_prefix("21.3"));
    EXPECT_TRUE(half.is_prefix("21."));
    const auto five = grammar(R"({"type": "integer", "multipleOf": 5, "maximum": 12})");
    for (const char* ok : {"0", "5", "10", "-15"}) EXPECT_TRUE(five.accepts(ok)) << ok;
    for (const char* bad : {"7", "15", "12"}) EXPECT_FALSE(five.accepts(bad)) << bad;
    const auto tenth = grammar(R"({"type": "number", "multipleOf": 0.1})");
    EXPECT_TRUE(tenth.accepts("0.3"));
    EXPECT_FALSE(tenth.accepts("0.35"));
    EXPECT_TRUE(cc::json_schema_valid(json::parse(R"({"multipleOf": 0.1})"), json(0.3)));
}

TEST(JsonSchemaGrammar, StringLengths) {
    const auto g = grammar(R"({"type": "string", "minLength": 2, "maxLength": 3})");
    for (const char* ok : {R"("ab")", R"("abc")", "\"\xc3\xa9\xc3\xa9\"", R"("a\n")"}) EXPECT_TRUE(g.accepts(ok)) << ok;
    for (const char* bad : {R"("a")", R"("abcd")", R"("")"}) EXPECT_FALSE(g.accepts(bad)) << bad;
    EXPECT_FALSE(g.is_prefix(R"("abcd)"));
}

TEST(JsonSchemaGrammar, Whitespace) {
    const auto g = grammar(R"({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": false})");
    EXPECT_TRUE(g.accepts(R"( { "a" : 1 } )") == false);  // the top level takes its leading space only
    EXPECT_TRUE(g.accepts(R"( { "a" : 1 })"));
    EXPECT_FALSE(g.accepts(R"({  "a": 1})"));  // two spaces: one space, or a newline and an indent
    EXPECT_TRUE(g.accepts("{\n\t\"a\": 1\n}"));
    EXPECT_FALSE(g.is_prefix("{\n                     "));  // 21 spaces
}

TEST(JsonSchemaGrammar, Tail) {
    const auto g = grammar(kWeather, "}\n</tool_call>");
    SchemaState s = g.start();
    ASSERT_TRUE(g.advance(s, R"( {"city": "Oslo"})"));
    EXPECT_FALSE(g.complete(s));
    ASSERT_TRUE(g.advance(s, "}\n</tool_"));
    EXPECT_FALSE(g.complete(s));
    ASSERT_TRUE(g.advance(s, "call>"));
    EXPECT_TRUE(g.complete(s));
    EXPECT_FALSE(g.advance(s, "\n"));
    // A number ends where the tail begins.
    const auto n = grammar(R"({"type": "integer"})", "}");
    EXPECT_TRUE(n.accepts("12}"));
    EXPECT_FALSE(n.accepts("12"));
}

TEST(JsonSchemaGrammar, RefusesUnsupportedKeywordsByName) {
    const auto refused = [](const char* schema, const std::string& keyword) {
        try {
            JsonSchemaGrammar(json::parse(schema), "", "tool \"get_weather\"");
            ADD_FAILURE() << schema << ": not refused";
        } catch (const std::invalid_argument& e) {
            const std::string what = e.what();
            EXPECT_NE(what.find("tool \"get_weather\""), std::string::npos) << what;
            EXPECT_NE(what.find(keyword), std::string::npos) << what;
        }
    };
    refused(R"({"type": "object", "properties": {"zip": {"type": "string", "not": {"const": "0"}}}})",
            "\"not\" at parameters.properties.zip");
    // A pattern strict calls cannot read: what and where, in the pattern and in the schema.
    refused(R"j({"type": "object", "properties": {"zip": {"type": "string", "pattern": "^(?=[0-9])"}}})j",
            "pattern \"^(?=[0-9])\": lookahead groups (?= (?! are not supported (at character 2) at "
            "parameters.properties.zip.pattern");
    refused(R"({"type": "string", "pattern": "^[0-9]{3}$", "maxLength": 2})",
            "no string of a length within minLength and maxLength");
    refused(R"({"type": "string", "pattern": 5})", "pattern must be a string");
    // One compile budget for all the patterns of a schema: 15 costly ones pass, 17 do not.
    const auto costly = [](int n) {
        json schema = {{"type", "object"}, {"properties", json::object()}};
        for (int i = 0; i < n; ++i)
            schema["properties"]["p" + std::to_string(i)] = {{"type", "string"}, {"pattern", "[a-z]{0,150}x"}};
        return schema.dump();
    };
    EXPECT_NO_THROW(grammar(costly(15).c_str()));
    refused(costly(17).c_str(), "too complex to compile (not supported) at parameters.properties.p1");
    refused(R"({"type": "string", "pattern": "^x", "format": "date"})",
            "pattern \"^x\" and format \"date\": no string a call can write matches it at parameters.pattern");
    refused(R"({"type": "string", "enum": ["ab", "cd"], "pattern": "^x"})", "no value of its enum or const satisfies");
    refused(R"({"type": "integer", "const": "1"})", "no value of its enum or const satisfies");
    refused(R"({"$ref": "#/$defs/x"})", "$ref \"#/$defs/x\" does not resolve within the schema");
    refused(R"({"$ref": "https://example.com/s.json"})", "only \"#/...\" is supported");
    refused(R"({"type": "object", "properties": {"a": {"$ref": "#/$defs/a", "type": "string"}}, "$defs": {"a": {}}})",
            "$ref together with \"type\" is not supported");
    // A reference that reaches itself with no value in between, and an object that requires itself.
    refused(R"({"$ref": "#/$defs/a", "$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "string"}]}}})",
            "the schema refers to itself through anyOf or $ref alone");
    refused(R"({"$ref": "#"})", "the schema refers to itself through anyOf or $ref alone");
    refused(R"({"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]})",
            "has no finite value (it requires itself) at parameters");
    // Inside a referenced schema, the path names the definition.
    refused(
        R"({"type": "object", "properties": {"z": {"$ref": "#/$defs/Zip"}}, "$defs": {"Zip": {"type": "string", "not": {"const": "0"}}}})",
        "\"not\" at parameters.$defs.Zip");
    refused(R"({"type": "string", "not": {"const": "x"}})", "\"not\"");
    refused(R"({"type": "integer", "multipleOf": 0.5})", "multipleOf of an integer must be an integer");
    refused(R"({"type": "number", "minimum": 0.1, "maximum": 0.4, "multipleOf": 0.5})", "no number lies within");
    refused(R"({"type": "array", "uniqueItems": true})", "\"uniqueItems\"");
    refused(R"({"type": "integer", "minimum": 1, "maximum": 0})", "no number lies within");
    refused(R"({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 1})", "no number lies within");
    refused(R"({"type": "string", "minLength": 3, "maxLength": 2})", "minLength is greater than maxLength");
    refused(R"({"type": "object", "required": ["x"], "properties": {}})", "required names \"x\"");
    refused(R"({"type": "array", "minItems": 3, "maxItems": 1})", "minItems is greater than maxItems");
    refused(R"({"type": "date"})", "unknown type \"date\"");
    refused(R"({"enum": []})", "non-empty");
    // Annotations are read past.
    EXPECT_NO_THROW(grammar(R"({"type": "string", "description": "d", "title": "t", "default": "x", "format": "date",
                                "examples": ["a"]})"));
}

// pattern: the string's characters (escapes decoded) keep a match possible, and it closes only on a
// match within its lengths. The two patterns of tools_100.json first.
TEST(JsonSchemaGrammar, Patterns) {
    const auto time = grammar(R"({"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$"})");
    for (const char* ok : {R"("09:30")", R"("23:59")", R"("29:00")"}) EXPECT_TRUE(time.accepts(ok)) << ok;
    for (const char* bad : {R"("9:30")", R"("09:60")", R"("09:30 ")", R"("")", R"("x09:30")"})
        EXPECT_FALSE(time.accepts(bad)) << bad;
    EXPECT_TRUE(time.is_prefix(R"("1)"));
    EXPECT_FALSE(time.is_prefix(R"("3)"));
    EXPECT_FALSE(time.is_prefix(R"("09:3")"));   // closing before the match ends
    EXPECT_FALSE(time.is_prefix(R"("\u0030)"));  // no \u escape under a pattern

    const auto phone =
        grammar(R"({"type": "object", "properties": {"to": {"type": "string", "pattern": "^\\+[1-9][0-9]{6,14}$"}},
        "required": ["to"], "additionalProperties": false})");
    EXPECT_TRUE(phone.accepts(R"({"to": "+4712345678"})"));
    EXPECT_FALSE(phone.accepts(R"({"to": "+47123"})"));
    EXPECT_FALSE(phone.accepts(R"({"to": "+4712345678901234"})"));
    EXPECT_FALSE(phone.is_prefix(R"({"to": "+0)"));
    EXPECT_FALSE(phone.is_prefix(R"({"to": "+4712345678901234)"));  // 16 digits: no match can end

    // Unanchored, a pattern is searched for; escapes are read as the characters they stand for.
    const auto quote = grammar(R"({"type": "string", "pattern": "a\"b|\\\\n"})");  // the regex a"b|\\n
    for (const char* ok : {R"("xa\"by")", R"("\\n")", R"("x\\ny")"}) EXPECT_TRUE(quote.accepts(ok)) << ok;
    for (const char* bad : {R"("ab")", R"("\n")", R"("a\\\"b")"}) EXPECT_FALSE(quote.accepts(bad)) << bad;
    const auto newline = grammar(R"({"type": "string", "pattern": "^a\\nb$"})");  // the regex ^a\nb$
    EXPECT_TRUE(newline.accepts(R"("a\nb")"));
    EXPECT_FALSE(newline.is_prefix(R"("a\t)"));

    // With lengths: a character is taken only while a match within them can still end.
    const auto bounded = grammar(R"({"type": "string", "pattern": "^a+b?$", "minLength": 2, "maxLength": 3})");
    for (const char* ok : {R"("aa")", R"("ab")", R"("aaa")", R"("aab")"}) EXPECT_TRUE(bounded.accepts(ok)) << ok;
    for (const char* bad : {R"("a")", R"("b")", R"("aaaa")"}) EXPECT_FALSE(bounded.accepts(bad)) << bad;
    EXPECT_FALSE(bounded.is_prefix(R"("aaab)"));
    const auto ends_b = grammar(R"({"type": "string", "pattern": "b$", "minLength": 3})");
    EXPECT_TRUE(ends_b.accepts(R"("xyb")"));
    EXPECT_FALSE(ends_b.accepts(R"("xb")"));
    EXPECT_TRUE(ends_b.is_prefix(R"("b)"));

    // Code points: UTF-8 bytes step the pattern once the character is whole.
    const auto accented = grammar("{\"type\": \"string\", \"pattern\": \"^\xc3\xa9+$\"}");
    EXPECT_TRUE(accented.accepts("\"\xc3\xa9\xc3\xa9\""));
    EXPECT_TRUE(accented.is_prefix("\"\xc3"));
    EXPECT_FALSE(accented.is_prefix("\"\xc3\xa8"));  // è
    EXPECT_FALSE(accented.is_prefix("\"\xc4"));

    // An enum keeps only the values its other keywords accept; the validator checks patterns too.
    const auto colours = grammar(R"({"type": "string", "enum": ["red", "green", "blue"], "pattern": "^[rg]"})");
    EXPECT_TRUE(colours.accepts(R"("red")"));
    EXPECT_FALSE(colours.accepts(R"("blue")"));
    const auto short_enum = grammar(R"({"type": "string", "enum": ["ab", "abcd"], "maxLength": 3})");
    EXPECT_TRUE(short_enum.accepts(R"("ab")"));
    EXPECT_FALSE(short_enum.accepts(R"("abcd")"));
    EXPECT_TRUE(cc::json_schema_valid(json::parse(R"({"pattern": "^[0-9]{5}$"})"), json("12345")));
    EXPECT_FALSE(cc::json_schema_valid(json::parse(R"({"pattern": "^[0-9]{5}$"})"), json("1234")));
    EXPECT_TRUE(cc::json_schema_valid(json::parse(R"({"pattern": "^[0-9]{5}$"})"), json(12)));  // strings only
    EXPECT_FALSE(cc::json_schema_valid(json::parse(R"({"enum": ["ab", "abcd"], "maxLength": 3})"), json("abcd")));
}

// allOf of several schemas, and keywords beside anyOf/oneOf, merged into one schema that means the
// same (types intersected, required and properties joined, bounds tightened, enums intersected);
// what cannot be merged exactly is refused by name.
TEST(JsonSchemaGrammar, AllOfAndBaseKeywordsAreMerged) {
    const auto short_string = grammar(R"({"allOf": [{"type": "string"}, {"maxLength": 3}]})");
    EXPECT_TRUE(short_string.accepts(R"("abc")"));
    EXPECT_FALSE(short_string.accepts(R"("abcd")"));
    EXPECT_FALSE(short_string.accepts("12"));
    const auto beside = grammar(R"({"allOf": [{"type": "string"}], "maxLength": 3})");
    EXPECT_TRUE(beside.accepts(R"("ab")"));
    EXPECT_FALSE(beside.accepts(R"("abcd")"));

    // zod's .and() / an OpenAPI composition: a referenced model and more properties.
    const auto both =
        grammar(R"({"allOf": [{"$ref": "#/$defs/A"}, {"properties": {"b": {"type": "integer"}}, "required": ["b"]}],
        "$defs": {"A": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}}})");
    EXPECT_TRUE(both.accepts(R"({"a": "x", "b": 1})"));
    EXPECT_FALSE(both.accepts(R"({"a": "x"})"));
    EXPECT_FALSE(both.accepts(R"({"b": 1})"));
    const auto integer =
        grammar(R"({"allOf": [{"type": ["number", "string"]}, {"type": "integer", "minimum": 2}, {"maximum": 9}]})");
    EXPECT_TRUE(integer.accepts("3"));
    for (const char* bad : {R"("x")", "1.5", "1", "10"}) EXPECT_FALSE(integer.accepts(bad)) << bad;
    const auto property = grammar(R"({"allOf": [{"properties": {"n": {"type": "integer"}}, "required": ["n"]},
        {"properties": {"n": {"minimum": 5}}}]})");
    EXPECT_TRUE(property.accepts(R"({"n": 5})"));
    EXPECT_FALSE(property.accepts(R"({"n": 4})"));
    EXPECT_FALSE(property.accepts(R"({"n": 5.5})"));

    // Beside anyOf / oneOf: the base holds in every branch.
    const auto text = grammar(R"({"type": "string", "anyOf": [{"maxLength": 2}, {"pattern": "^x"}]})");
    for (const char* ok : {R"("ab")", R"("xyzw")"}) EXPECT_TRUE(text.accepts(ok)) << ok;
    for (const char* bad : {R"("abc")", "12"}) EXPECT_FALSE(text.accepts(bad)) << bad;
    const auto tagged = grammar(R"({"type": "object", "required": ["kind"], "additionalProperties": false,
        "properties": {"kind": {"type": "string"}, "n": {"type": "integer"}},
        "oneOf": [{"properties": {"kind": {"const": "a"}}}, {"properties": {"kind": {"const": "b"}}, "required": ["n"]}]})");
    EXPECT_TRUE(tagged.accepts(R"({"kind": "a"})"));
    EXPECT_TRUE(tagged.accepts(R"({"kind": "b", "n": 1})"));
    EXPECT_FALSE(tagged.accepts(R"({"kind": "b"})"));
    EXPECT_FALSE(tagged.accepts(R"({"kind": "c"})"));
    EXPECT_FALSE(cc::json_schema_valid(json::parse(R"({"type": "string", "anyOf": [{"maxLength": 2}]})"), json(12)));

    expect_refused(R"({"allOf": [{"type": "string"}, {"type": "integer"}]})",
                   "no type in common at parameters.allOf[1].type");
    expect_refused(R"({"allOf": [{"pattern": "^a"}, {"pattern": "b$"}]})",
                   "\"pattern\" in more than one schema of an allOf");
    expect_refused(R"({"allOf": [{"additionalProperties": false}, {"properties": {"a": {}}}]})",
                   "lists a property it does not (\"a\")");
    expect_refused(R"({"allOf": [{"enum": [1, 2]}, {"enum": [3]}]})", "no enum value in common");
    expect_refused(R"({"allOf": []})", "allOf must be a non-empty array");
    expect_refused(R"({"allOf": [{"$ref": "#/$defs/x"}, {}]})", "does not resolve within the schema");
}

// oneOf whose branches no value can match twice: by kind, by enum/const values, by bounded numbers
// that do not meet, or by a required tag property (pydantic's discriminated unions). Anything else
// is refused, since the matcher cannot rule out a value that matches two branches.
TEST(JsonSchemaGrammar, OneOfOfExclusiveBranches) {
    // pydantic: pet: Union[Cat, Dog] = Field(discriminator="pet_type")
    const auto pets = grammar(R"({"$defs": {
        "Cat": {"properties": {"pet_type": {"const": "cat", "title": "Pet Type", "type": "string"},
                "meows": {"title": "Meows", "type": "integer"}}, "required": ["pet_type", "meows"], "title": "Cat", "type": "object"},
        "Dog": {"properties": {"pet_type": {"const": "dog", "title": "Pet Type", "type": "string"},
                "barks": {"title": "Barks", "type": "number"}}, "required": ["pet_type", "barks"], "title": "Dog", "type": "object"}},
        "properties": {"pet": {"discriminator": {"mapping": {"cat": "#/$defs/Cat", "dog": "#/$defs/Dog"}, "propertyName": "pet_type"},
                "oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}], "title": "Pet"}},
        "required": ["pet"], "title": "Model", "type": "object"})");
    EXPECT_TRUE(pets.accepts(R"({"pet": {"pet_type": "cat", "meows": 3}})"));
    EXPECT_TRUE(pets.accepts(R"({"pet": {"barks": 1.5, "pet_type": "dog"}})"));
    EXPECT_FALSE(pets.accepts(R"({"pet": {"pet_type": "cat", "barks": 1}})"));
    EXPECT_FALSE(pets.accepts(R"({"pet": {"pet_type": "cow", "meows": 1}})"));

    const auto kinds =
        grammar(R"({"oneOf": [{"type": "string", "maxLength": 3}, {"type": "integer"}, {"type": "null"}]})");
    for (const char* ok : {R"("abc")", "12", "null"}) EXPECT_TRUE(kinds.accepts(ok)) << ok;
    for (const char* bad : {R"("abcd")", "1.5", "true"}) EXPECT_FALSE(kinds.accepts(bad)) << bad;
    const auto values =
        grammar(R"({"oneOf": [{"enum": ["a", "b"]}, {"const": "c"}, {"type": "number", "minimum": 5}]})");
    for (const char* ok : {R"("a")", R"("c")", "7"}) EXPECT_TRUE(values.accepts(ok)) << ok;
    EXPECT_FALSE(values.accepts("4"));
    const auto ranges =
        grammar(R"({"oneOf": [{"type": "integer", "maximum": 0}, {"type": "number", "exclusiveMinimum": 0}]})");
    EXPECT_TRUE(ranges.accepts("-3"));
    EXPECT_TRUE(ranges.accepts("0.5"));

    expect_refused(R"({"oneOf": [{"type": "number"}, {"type": "integer"}]})",
                   "branches 0 and 1 may both match one value");
    expect_refused(
        R"({"type": "object", "properties": {"x": {"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 2}]}}})",
        "branches 0 and 1 may both match one value (supported: a oneOf whose branches cannot");
    expect_refused(R"({"oneOf": [{"enum": ["a", 1]}, {"type": "integer"}]})", "at parameters.oneOf");
    expect_refused(
        R"({"oneOf": [{"type": "object", "properties": {"t": {"const": 1}}}, {"type": "object", "properties": {"t": {"const": 2}}}]})",
        "branches 0 and 1");  // the tag is not required: {} matches both
    expect_refused(R"({"oneOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/A"}], "$defs": {"A": {"type": "string"}}})",
                   "branches 0 and 1");
    expect_refused(R"({"oneOf": [{"type": "string"}, {}]})", "branches 0 and 1");
    expect_refused(R"({"oneOf": [{"type": "string"}], "anyOf": [{"type": "string"}]})", "together with");
    expect_refused(R"({"oneOf": []})", "oneOf must be a non-empty array");

    const json kinds_schema = json::parse(R"({"oneOf": [{"type": "number"}, {"type": "integer"}]})");
    EXPECT_TRUE(cc::json_schema_valid(kinds_schema, json(1.5)));
    EXPECT_FALSE(cc::json_schema_valid(kinds_schema, json(2)));  // both match
    EXPECT_FALSE(cc::json_schema_valid(kinds_schema, json("x")));
    // format (date, date-time, ...: SchemaPattern::format_regex) is checked as a pattern is.
    const auto day = grammar(R"({"type": "string", "format": "date"})");
    EXPECT_TRUE(day.accepts(R"("2024-02-29")"));
    EXPECT_FALSE(day.accepts(R"("2023-02-29")"));
    EXPECT_TRUE(day.is_prefix(R"("2023-02-2)"));
    EXPECT_FALSE(day.is_prefix(R"("2023-02-29)"));
    EXPECT_TRUE(day.is_prefix(R"("2023-1)"));
    EXPECT_FALSE(day.is_prefix(R"("2023-13)"));
    const auto day_2026 = grammar(R"({"type": "string", "format": "date", "pattern": "^2026-"})");
    EXPECT_TRUE(day_2026.accepts(R"("2026-01-31")"));
    EXPECT_FALSE(day_2026.accepts(R"("2025-01-31")"));
    EXPECT_NO_THROW(grammar(R"({"type": "string", "format": "ipv6"})"));  // an annotation: any string
    EXPECT_TRUE(grammar(R"({"type": "string", "format": "ipv6"})").accepts(R"("x")"));
    EXPECT_TRUE(cc::json_schema_valid(json::parse(R"({"format": "date-time"})"), json("2026-12-07T06:02:51Z")));
    EXPECT_FALSE(cc::json_schema_valid(json::parse(R"({"format": "date-time"})"), json("2026-12-07")));
    EXPECT_TRUE(cc::json_schema_valid(json::parse(R"({"format": "ipv6"})"), json("x")));
}

// Strings are valid UTF-8: no overlong form, no surrogate, nothing past U+10FFFF.
TEST(JsonSchemaGrammar, StringsAreValidUtf8) {
    const auto s = grammar(R"({"type": "string"})");
    for (const char* ok : {"\"\xe2\x82\xac\"", "\"\xf0\x9f\x98\x80\"", "\"\xed\x9f\xbf\"", "\"\xf4\x8f\xbf\xbf\""})
        EXPECT_TRUE(s.accepts(ok)) << ok;
    for (const char* bad : {"\"\xe0\x80", "\"\xe0\x9f", "\"\xed\xa0", "\"\xf0\x80", "\"\xf4\x90", "\"\xc1"})
        EXPECT_FALSE(s.is_prefix(bad)) << bad;
    // \u escapes: any but a surrogate (a lone one is not JSON nlohmann reads; a pair is written raw).
    EXPECT_TRUE(s.accepts(R"("\u00e9\uD7FF\uE000")"));
    EXPECT_FALSE(s.is_prefix(R"("\ud8)"));
    EXPECT_FALSE(s.is_prefix(R"("\uDF)"));
    EXPECT_THROW(
        {
            const json lone = json::parse(R"("\ud800")");
            ADD_FAILURE() << lone.dump();
        },
        json::parse_error);
}

// $ref into $defs / definitions (pydantic's model_json_schema(), FastMCP's tool schemas), shared
// and recursive definitions.
TEST(JsonSchemaGrammar, References) {
    // pydantic: class Address(BaseModel): street: str; city: str
    //           class Order(BaseModel): ship_to: Address; bill_to: Optional[Address] = None; tags: list[str]
    const auto order = grammar(R"({"$defs": {"Address": {"properties": {"street": {"title": "Street", "type": "string"},
        "city": {"title": "City", "type": "string"}}, "required": ["street", "city"], "title": "Address", "type": "object"}},
        "properties": {"ship_to": {"$ref": "#/$defs/Address"}, "bill_to": {"anyOf": [{"$ref": "#/$defs/Address"},
        {"type": "null"}], "default": null}, "tags": {"items": {"type": "string"}, "title": "Tags", "type": "array"}},
        "required": ["ship_to", "tags"], "title": "Order", "type": "object"})");
    for (const char* ok :
         {R"({"ship_to": {"street": "1 Main", "city": "Oslo"}, "tags": []})",
          R"({"ship_to": {"street": "a", "city": "b"}, "bill_to": null, "tags": ["x"]})",
          R"({"bill_to": {"city": "b", "street": "a"}, "ship_to": {"street": "a", "city": "b"}, "tags": []})"})
        EXPECT_TRUE(order.accepts(ok)) << ok;
    for (const char* bad : {R"({"ship_to": {"street": "1 Main"}, "tags": []})", R"({"ship_to": null, "tags": []})",
                            R"({"ship_to": {"street": "a", "city": "b", "zip": "1"}, "tags": []})",
                            R"({"ship_to": {"street": "a", "city": "b"}, "bill_to": 3, "tags": []})"})
        EXPECT_FALSE(order.accepts(bad)) << bad;

    // pydantic v1: a field that refers to a model and describes it wraps the $ref in allOf.
    const auto v1 = grammar(R"({"definitions": {"Unit": {"title": "Unit", "enum": ["c", "f"], "type": "string"}},
        "properties": {"unit": {"allOf": [{"$ref": "#/definitions/Unit"}], "description": "scale", "default": "c"}},
        "required": ["unit"], "type": "object"})");
    EXPECT_TRUE(v1.accepts(R"({"unit": "f"})"));
    EXPECT_FALSE(v1.accepts(R"({"unit": "k"})"));
    EXPECT_TRUE(cc::json_schema_valid(json::parse(R"({"allOf": [{"type": "string"}, {"maxLength": 2}]})"), json("ab")));
    EXPECT_FALSE(
        cc::json_schema_valid(json::parse(R"({"allOf": [{"type": "string"}, {"maxLength": 2}]})"), json("abc")));

    // Recursive: a tree whose children are trees (draft-07 "definitions"), and "#" itself.
    const auto tree = grammar(R"({"$ref": "#/definitions/Node", "definitions": {"Node": {"type": "object",
        "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/definitions/Node"}}},
        "required": ["name"], "additionalProperties": false}}})");
    EXPECT_TRUE(tree.accepts(
        R"({"name": "a", "children": [{"name": "b"}, {"name": "c", "children": [{"name": "d", "children": []}]}]})"));
    EXPECT_FALSE(tree.accepts(R"({"name": "a", "children": [{"name": "b", "children": [{}]}]})"));
    EXPECT_TRUE(
        tree.is_prefix(R"({"name": "a", "children": [{"name": "b", "children": [{"name": "c", "children": [{"na)"));
    const auto list =
        grammar(R"({"type": "object", "properties": {"v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#"},
        {"type": "null"}]}}, "required": ["v", "next"], "additionalProperties": false})");
    EXPECT_TRUE(list.accepts(R"({"v": 1, "next": {"v": 2, "next": null}})"));
    EXPECT_FALSE(list.accepts(R"({"v": 1, "next": {"v": 2}})"));

    // The plain validator follows the same references.
    const json tree_schema = json::parse(R"({"$ref": "#/$defs/N", "$defs": {"N": {"type": "object", "properties": {
        "k": {"type": "array", "items": {"$ref": "#/$defs/N"}}}, "additionalProperties": false}}})");
    EXPECT_TRUE(cc::json_schema_valid(tree_schema, json::parse(R"({"k": [{}, {"k": [{}]}]})")));
    EXPECT_FALSE(cc::json_schema_valid(tree_schema, json::parse(R"({"k": [{}, {"k": [1]}]})")));
}

// A toy vocabulary: every printable ASCII byte, JSON-ish multi-byte pieces, and a few UTF-8 ones.
std::vector<std::string> toy_vocab() {
    std::vector<std::string> v = {""};  // id 0: a special token (never allowed)
    for (int c = 0x20; c < 0x7f; ++c) v.emplace_back(1, static_cast<char>(c));
    for (const char* t : {"\n", "\t", "{\"", "\":", "\": \"", "\", \"", "\"}", "\"}}", "}}", "},", "true", "false", "null",
                          "city", "unit", "days", " \"", "Oslo", "12", "3.5", "\\n", "\\u00", "e9", "\xc3\xa9", "\xc3", "\xa9",
                          ", ", "\n  ", "],", " [", "[\"", "\"]", "}\n", "</tool_call>", "\n</tool_call>", "}\n</tool_call>",
                          "ab\"cd", "\"\"", "{}", "[]", "-1", "e+"})
        v.emplace_back(t);
    v.emplace_back("city");  // the same text under two ids
    return v;
}

std::vector<uint32_t> brute_force(const JsonSchemaGrammar& g, const SchemaState& state, const std::vector<std::string>& vocab) {
    std::vector<uint32_t> out;
    for (size_t id = 0; id < vocab.size(); ++id) {
        if (vocab[id].empty()) continue;
        SchemaState s = state;
        if (g.advance(s, vocab[id])) out.push_back(static_cast<uint32_t>(id));
    }
    return out;
}

std::vector<uint32_t> from_bits(const std::vector<uint64_t>& bits, size_t n) {
    std::vector<uint32_t> out;
    for (size_t id = 0; id < n; ++id)
        if (bits[id / 64] >> (id % 64) & 1) out.push_back(static_cast<uint32_t>(id));
    return out;
}

const char* const kSchemas[] = {
    kWeather,
    R"({"type": "object", "properties": {"to": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "body": {"type": "string"}, "urgent": {"type": "boolean"}, "n": {"type": ["number", "null"]}},
        "required": ["to", "body"], "additionalProperties": false})",
    R"({"type": "object", "properties": {"q": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        "opts": {"type": "object"}}, "required": ["q"], "additionalProperties": true})",
    R"({"type": "object", "properties": {}, "additionalProperties": false})",
    R"({"type": "object", "properties": {"city": {"$ref": "#/$defs/C"}, "days": {"type": "array",
        "items": {"anyOf": [{"$ref": "#/$defs/C"}, {"$ref": "#"}, {"type": "null"}]}, "maxItems": 2}},
        "required": ["city"], "additionalProperties": false, "$defs": {"C": {"type": "string", "enum": ["Oslo", "ab\"cd"]}}})",
    R"({"type": "object", "properties": {"time": {"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$"},
        "to": {"type": "string", "pattern": "^\\+[1-9][0-9]{6,14}$"}, "tag": {"type": "string", "pattern": "x[a-c]", "maxLength": 4},
        "w": {"type": "string", "pattern": "\u00e9|\\n", "minLength": 2}}, "required": ["time", "to", "tag", "w"],
        "additionalProperties": false})",
    R"({"type": "object", "properties": {"pet": {"oneOf": [{"type": "object", "properties": {"t": {"const": "cat"},
        "n": {"type": "integer"}}, "required": ["t"], "additionalProperties": false}, {"type": "object", "properties":
        {"t": {"const": "dog"}}, "required": ["t"], "additionalProperties": false}, {"type": "null"}]},
        "v": {"oneOf": [{"type": "string", "pattern": "^a"}, {"type": "integer", "maximum": 3}]}},
        "required": ["pet", "v"], "additionalProperties": false})",
    R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 10, "maximum": 20},
        "x": {"type": "number", "exclusiveMinimum": -1, "maximum": 1, "multipleOf": 0.25}, "s": {"type": "string", "maxLength": 2}},
        "required": ["n", "x", "s"], "additionalProperties": false})",
};

TEST(SchemaMasker, MatchesBruteForceAlongRandomWalks) {
    const auto vocab = toy_vocab();
    auto trie = std::make_shared<const TokenTrie>(vocab);
    std::mt19937_64 rng(7);
    size_t n_complete = 0;
    for (const char* schema : kSchemas) {
        auto g = std::make_shared<const JsonSchemaGrammar>(json::parse(schema), "}\n</tool_call>", "tool \"t\"");
        SchemaMasker masker(g, trie);
        for (int walk = 0; walk < 20; ++walk) {
            SchemaState state = g->start();
            std::string text;
            for (int step = 0; step < 200 && !g->complete(state); ++step) {
                const auto allowed = from_bits(masker.allowed(state), vocab.size());
                ASSERT_EQ(allowed, brute_force(*g, state, vocab)) << schema << " after " << text;
                ASSERT_FALSE(allowed.empty()) << "a dead end after " << text;
                // Prefer closing tokens late in the walk so most walks finish.
                uint32_t pick = allowed[rng() % allowed.size()];
                if (step > 40)
                    for (const uint32_t id : allowed)
                        if (vocab[id].find_first_of("}]\"") != std::string::npos && rng() % 2) pick = id;
                ASSERT_TRUE(g->advance(state, vocab[pick]));
                text += vocab[pick];
            }
            if (!g->complete(state)) continue;
            ++n_complete;
            // The value is the text before the tail, and the plain validator accepts it.
            const std::string value = text.substr(0, text.size() - std::string("}\n</tool_call>").size());
            json parsed;
            ASSERT_NO_THROW(parsed = json::parse(value)) << value;
            EXPECT_TRUE(cc::json_schema_valid(json::parse(schema), parsed)) << value;
        }
    }
    EXPECT_GT(n_complete, 20u);
}

TEST(SchemaMasker, MasksLogitsAndCachesStates) {
    const auto vocab = toy_vocab();
    auto trie = std::make_shared<const TokenTrie>(vocab);
    auto g = std::make_shared<const JsonSchemaGrammar>(json::parse(kWeather), "}", "tool \"t\"");
    SchemaMasker masker(g, trie);
    SchemaState s = g->start();
    ASSERT_TRUE(g->advance(s, "{\"city\": \"O"));
    std::vector<float> logits(vocab.size() + 5, 1.0f);  // padding rows past the vocabulary
    masker.mask(s, logits);
    for (size_t id = vocab.size(); id < logits.size(); ++id) EXPECT_TRUE(std::isinf(logits[id]));
    EXPECT_TRUE(std::isinf(logits[0]));  // the special token
    EXPECT_FALSE(std::isinf(logits[1 + 'x' - 0x20]));
    // Inside a string every step is the same state: one entry.
    const size_t before = masker.cached_states();
    ASSERT_TRUE(g->advance(s, "sl"));
    masker.allowed(s);
    EXPECT_EQ(masker.cached_states(), before);
}

TEST(JsonSchemaValid, ChecksTheSupportedKeywords) {
    const json s = json::parse(kWeather);
    EXPECT_TRUE(cc::json_schema_valid(s, json::parse(R"({"city": "x", "unit": "f"})")));
    EXPECT_FALSE(cc::json_schema_valid(s, json::parse(R"({"city": "x", "unit": "k"})")));
    EXPECT_FALSE(cc::json_schema_valid(s, json::parse(R"({"unit": "f"})")));
    EXPECT_FALSE(cc::json_schema_valid(s, json::parse(R"({"city": "x", "extra": 1})")));
    EXPECT_FALSE(cc::json_schema_valid(s, json::parse(R"("x")")));
}

}  // namespace
