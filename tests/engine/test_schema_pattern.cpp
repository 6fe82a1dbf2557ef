// JSON Schema `pattern` (core/engine/schema_pattern.h): searches as ECMA-262's RegExp does
// (std::regex's ECMAScript grammar is the reference on ASCII text), code points rather than
// bytes, the syntax refused by name, and "can a match still end within the lengths" against a
// brute force over every short completion.
#include "core/engine/schema_pattern.h"
#include "tests/test_support.h"

#include <map>
#include <random>
#include <regex>
#include <set>

namespace {

using cc::SchemaPattern;

TEST(SchemaPattern, SearchesAsEcmaScriptRegExpDoes) {
    const char* const patterns[] = {
        "^[0-2][0-9]:[0-5][0-9]$",  // tools_100.json
        "^\\+[1-9][0-9]{6,14}$",    // tools_100.json, the greenhouse family
        "abc",
        "a|b",
        "^(ab)*$",
        "x{2,3}y?",
        "^[^a-c]+$",
        "\\d+\\.\\d{2}",
        "^\\w+@\\w+\\.(com|org)$",
        "^$",
        "a.c",
        "^(?:a|bc){1,3}$",
        "[a\\-z]",
        "^\\s*$",
        "colou?r",
        "^[A-Z]{2}-\\d{3,}$",
        "(\\d{4})-(\\d{2})",
        "^a+?b*?$",
        "[\\d.]x",
        "\\W\\S\\D",
        "^(a|)+$",
        "^[]a|b",
        "^[^]$",
        "b$|^a",
        "^\\x41\\u0042\\t",
        "[\\b]",
    };
    const std::string alphabet = "abcrxyzACZ0129:+-.@_ \t\n{}\bB";
    std::mt19937_64 rng(11);
    for (const char* p : patterns) {
        const SchemaPattern ours(p);
        const std::regex reference(p, std::regex::ECMAScript);
        for (int i = 0; i < 3000; ++i) {
            std::string text;
            const size_t n = rng() % 12;
            for (size_t k = 0; k < n; ++k) text += alphabet[rng() % alphabet.size()];
            if (i < 40) text = std::string(i % 2 ? "12:34" : "+4712345678").substr(0, i / 2 % 12);  // near-matches
            ASSERT_EQ(ours.matches(text), std::regex_search(text, reference))
                << "pattern " << p << " on \"" << text << "\"";
        }
    }
}

TEST(SchemaPattern, ReadsCodePoints) {
    EXPECT_TRUE(SchemaPattern("^.$").matches("\xf0\x9f\x98\x80"));  // one code point, as with RegExp's u flag
    EXPECT_TRUE(SchemaPattern("^\xc3\xa9+$").matches("\xc3\xa9\xc3\xa9"));
    EXPECT_FALSE(SchemaPattern("^\xc3\xa9+$").matches("e"));
    EXPECT_TRUE(SchemaPattern("^[\xce\xb1-\xcf\x89]{2}$").matches("\xce\xbb\xce\xbc"));  // [α-ω]{2}: λμ
    EXPECT_TRUE(SchemaPattern("^\\u00e9\\uD83D\\uDE00\\u{1F600}$").matches("\xc3\xa9\xf0\x9f\x98\x80\xf0\x9f\x98\x80"));
    EXPECT_FALSE(SchemaPattern("^.$").matches("\n"));
    EXPECT_TRUE(SchemaPattern("^\\s$").matches("\xe3\x80\x80"));  // U+3000 is white space
    // What std::regex does not read: named groups, and a "{" that is no quantifier (Annex B).
    EXPECT_TRUE(SchemaPattern("^(?<year>\\d{4})-\\d{2}$").matches("2026-12"));
    EXPECT_FALSE(SchemaPattern("^(?<year>\\d{4})-\\d{2}$").matches("226-12"));
    EXPECT_TRUE(SchemaPattern("^a{2}{$").matches("aa{"));
    EXPECT_TRUE(SchemaPattern("^{,}$").matches("{,}"));
}

TEST(SchemaPattern, RefusesWhatItDoesNotReadByName) {
    const auto refused = [](const char* p, const char* what) {
        try {
            SchemaPattern pattern(p);
            ADD_FAILURE() << p << " was accepted";
        } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find(std::string("pattern \"") + p + "\""), std::string::npos) << e.what();
        }
    };
    refused("(a)\\1", "backreferences");
    refused("(?<n>a)\\k<n>", "backreferences");
    refused("(?=a)", "lookahead");
    refused("(?!a)", "lookahead");
    refused("(?<=a)b", "lookbehind");
    refused("\\bword", "word boundaries");
    refused("\\p{L}", "property escapes");
    refused("a{2000}", "past 1000");
    refused("a{3,2}", "greater than");
    refused("*a", "nothing to repeat");
    refused("a**", "nothing to repeat");
    refused("^*", "cannot be repeated");
    refused("(a", "without a \")\"");
    refused("a)", "without a \"(\"");
    refused("[a", "without a \"]\"");
    refused("[z-a]", "out of order");
    refused("[\\d-z]", "two characters");
    refused("\\A", "unknown escape");
    refused("\\", "end with a backslash");
    refused("\\x4", "hex digits");
    refused("(?i)a", "unknown group");
    refused("a^b", "no string a call can write");
    refused("^\\x01$", "no string a call can write");  // a string a strict call writes has no \u0001
    refused("(((a|b|c|d){1,1000}){1,1000})", "too large");
}

// The formats strict calls check (OpenAI's strict mode list, less ipv6), each with values on both
// sides of its rules; any other format stays an annotation.
TEST(SchemaPattern, Formats) {
    const std::map<std::string, std::pair<std::vector<std::string>, std::vector<std::string>>> cases = {
        {"date",
         {{"2026-12-07", "2024-02-29", "2000-02-29", "0400-02-29", "1999-04-30"},
          {"2023-02-29", "1900-02-29", "2026-04-31", "2026-13-01", "2026-00-10", "26-12-07", "2026-12-7",
           "2026-12-07 "}}},
        {"time",
         {{"09:30:00Z", "23:59:60+01:00", "09:30:00.123-05:30", "00:00:00z"},
          {"24:00:00Z", "09:30Z", "09:30:00", "09:30:00+5:00", "9:30:00Z"}}},
        {"date-time",
         {{"2026-12-07T06:02:51Z", "2026-12-07t06:02:51.5+05:45"},
          {"2026-12-07 06:02:51Z", "2026-12-07T06:02:51", "2026-02-30T00:00:00Z"}}},
        {"duration", {{"P1D", "PT1H30M", "P1Y2M3DT4H5M6S", "P2W", "PT0S"}, {"P", "PT", "P1DT", "1D", "P1W2D", "P1H"}}},
        {"email",
         {{"a.b+c@example.com", "x_y@mail.example.org"}, {"a@b", ".a@b.com", "a..b@c.com", "a@-b.com", "a b@c.com"}}},
        {"hostname", {{"example.com", "a", "example.com.", "x-1.y2"}, {"-a", "a-.com", "a..b", "a_b.com"}}},
        {"ipv4", {{"192.168.0.1", "0.0.0.0", "255.255.255.255"}, {"256.1.1.1", "01.1.1.1", "1.1.1", "1.1.1.1.1"}}},
        {"uuid",
         {{"123e4567-e89b-12d3-a456-426614174000", "123E4567-E89B-12D3-A456-426614174000"},
          {"123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400g"}}},
    };
    for (const auto& [format, values] : cases) {
        const auto regex = SchemaPattern::format_regex(format);
        ASSERT_TRUE(regex) << format;
        const SchemaPattern p(*regex);
        for (const auto& ok : values.first) EXPECT_TRUE(p.matches(ok)) << format << ": " << ok;
        for (const auto& bad : values.second) EXPECT_FALSE(p.matches(bad)) << format << ": " << bad;
    }
    EXPECT_FALSE(SchemaPattern::format_regex("ipv6"));
    EXPECT_FALSE(SchemaPattern::format_regex("uri"));

    // A pattern and a format together: strings must match both.
    const SchemaPattern both(
        {{"^2026-", "pattern \"^2026-\""}, {*SchemaPattern::format_regex("date"), "format \"date\""}}, 0,
        SchemaPattern::k_none);
    EXPECT_TRUE(both.matches("2026-02-28"));
    EXPECT_FALSE(both.matches("2025-02-28"));
    EXPECT_FALSE(both.matches("2026-02-29"));
    try {
        SchemaPattern({{"^x", "pattern \"^x\""}, {*SchemaPattern::format_regex("date"), "format \"date\""}}, 0,
                      SchemaPattern::k_none);
        ADD_FAILURE() << "a pattern no date matches was accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(
            std::string(e.what()).find("pattern \"^x\" and format \"date\": no string a call can write matches it"),
            std::string::npos)
            << e.what();
    }
}

// Every string over `alphabet` of at most `max_total` characters that matches within the lengths.
std::set<std::string> matching(const SchemaPattern& p, const std::string& alphabet, size_t max_total, uint32_t min_len,
                               uint32_t max_len) {
    std::set<std::string> out;
    std::vector<std::string> layer{""};
    for (size_t len = 0; len <= max_total; ++len) {
        std::vector<std::string> next;
        for (const auto& t : layer) {
            if (len >= min_len && len <= max_len && p.matches(t)) out.insert(t);
            if (len < max_total)
                for (const char c : alphabet) next.push_back(t + c);
        }
        layer = std::move(next);
    }
    return out;
}

TEST(SchemaPattern, CanEndAgreesWithEveryShortCompletion) {
    struct Case {
        const char* pattern;
        uint32_t min_len, max_len;
    };
    const Case cases[] = {{"^a*b$", 3, 5},
                          {"ab", 0, 3},
                          {"^(ab|ba)+$", 2, 6},
                          {"a", 4, 6},
                          {"^[01]{2,4}$", 0, 3},
                          {"b$", 5, SchemaPattern::k_none},
                          {"^a?b?$", 0, SchemaPattern::k_none}};
    const std::string alphabet = "ab01";
    const size_t max_total = 7;
    for (const Case& c : cases) {
        const SchemaPattern p(c.pattern, c.min_len, c.max_len);
        const auto all = matching(p, alphabet, max_total, c.min_len, c.max_len);
        // Every prefix of at most max_total - 2 characters (shorter than every completion we enumerate
        // needs: a match that ends at all ends within a few characters for these patterns).
        std::vector<std::string> layer{""};
        for (size_t len = 0; len + 2 <= max_total; ++len) {
            std::vector<std::string> next;
            for (const auto& prefix : layer) {
                uint32_t state = p.start();
                for (const char ch : prefix) state = state == SchemaPattern::k_none ? state : p.step(state, ch);
                const bool brute =
                    std::any_of(all.begin(), all.end(), [&](const std::string& m) { return m.rfind(prefix, 0) == 0; });
                const bool ours = state != SchemaPattern::k_none && p.can_end(state, static_cast<uint32_t>(len));
                EXPECT_EQ(ours, brute) << c.pattern << " [" << c.min_len << ", " << c.max_len << "] after \"" << prefix
                                       << "\"";
                for (const char ch : alphabet) next.push_back(prefix + ch);
            }
            layer = std::move(next);
        }
    }
    EXPECT_THROW(SchemaPattern("^$", 1), std::invalid_argument);
    EXPECT_THROW(SchemaPattern("abc", 0, 2), std::invalid_argument);
    EXPECT_THROW(SchemaPattern("^\\d{3}$", 4, 10), std::invalid_argument);
    EXPECT_NO_THROW(SchemaPattern("^\\d{3}", 4, 10));
}

}  // namespace
