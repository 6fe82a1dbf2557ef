#include "core/base/json_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string_view>
#include <system_error>

namespace cc {
namespace {

// Python's json encoder with ensure_ascii=False escapes only '"', '\\' and the C0 controls.
void append_string(std::string& out, std::string_view s) {
    out.push_back('"');
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out.push_back(ch);
                }
        }
    }
    out.push_back('"');
}

// float.__repr__: the shortest digits that round-trip, in fixed notation when the decimal
// exponent e satisfies -4 <= e < 16 (with ".0" when there is no fraction), else d.ddde+XX.
void append_float(std::string& out, double v) {
    if (std::isnan(v)) { out += "NaN"; return; }
    if (std::isinf(v)) { out += v < 0 ? "-Infinity" : "Infinity"; return; }
    char buf[64];
    const auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));  // e.g. "-1.2345e+03"
    bool negative = false;
    if (!sci.empty() && sci.front() == '-') { negative = true; sci.remove_prefix(1); }
    const size_t epos = sci.find('e');
    std::string digits;
    for (const char c : sci.substr(0, epos)) if (c != '.') digits.push_back(c);
    int exponent = 0;
    std::string_view exp_text = sci.substr(epos + 1);
    if (!exp_text.empty() && exp_text.front() == '+') exp_text.remove_prefix(1);
    std::from_chars(exp_text.data(), exp_text.data() + exp_text.size(), exponent);
    while (digits.size() > 1 && digits.back() == '0') digits.pop_back();

    if (negative) out.push_back('-');
    if (exponent >= -4 && exponent < 16) {
        const int n_digits = static_cast<int>(digits.size());
        if (exponent < 0) {
            out += "0.";
            out.append(static_cast<size_t>(-exponent - 1), '0');
            out += digits;
        } else if (exponent + 1 >= n_digits) {
            out += digits;
            out.append(static_cast<size_t>(exponent + 1 - n_digits), '0');
            out += ".0";
        } else {
            out += digits.substr(0, static_cast<size_t>(exponent + 1));
            out.push_back('.');
            out += digits.substr(static_cast<size_t>(exponent + 1));
        }
    } else {
        out.push_back(digits[0]);
        if (digits.size() > 1) {
            out.push_back('.');
            out += digits.substr(1);
        }
        char ebuf[16];
        std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
        out += ebuf;
    }
}

void dump(std::string& out, const ordered_json& v, int indent, int level) {
    auto newline = [&](int lvl) {
        out.push_back('\n');
        out.append(static_cast<size_t>(indent * lvl), ' ');
    };
    switch (v.type()) {
        case ordered_json::value_t::null: out += "null"; break;
        case ordered_json::value_t::boolean: out += v.get<bool>() ? "true" : "false"; break;
        case ordered_json::value_t::number_integer: out += std::to_string(v.get<int64_t>()); break;
        case ordered_json::value_t::number_unsigned: out += std::to_string(v.get<uint64_t>()); break;
        case ordered_json::value_t::number_float: append_float(out, v.get<double>()); break;
        case ordered_json::value_t::string: append_string(out, v.get_ref<const std::string&>()); break;
        case ordered_json::value_t::array: {
            if (v.empty()) { out += "[]"; break; }
            out.push_back('[');
            bool first = true;
            for (const auto& item : v) {
                if (!first) out += indent < 0 ? ", " : ",";
                first = false;
                if (indent >= 0) newline(level + 1);
                dump(out, item, indent, level + 1);
            }
            if (indent >= 0) newline(level);
            out.push_back(']');
            break;
        }
        case ordered_json::value_t::object: {
            if (v.empty()) { out += "{}"; break; }
            out.push_back('{');
            bool first = true;
            for (const auto& [key, item] : v.items()) {
                if (!first) out += indent < 0 ? ", " : ",";
                first = false;
                if (indent >= 0) newline(level + 1);
                append_string(out, key);
                out += ": ";
                dump(out, item, indent, level + 1);
            }
            if (indent >= 0) newline(level);
            out.push_back('}');
            break;
        }
        case ordered_json::value_t::binary:
        case ordered_json::value_t::discarded: throw std::logic_error("py_json_dumps: value has no JSON text");
    }
}

}  // namespace

std::string py_json_dumps(const ordered_json& value, int indent) {
    std::string out;
    dump(out, value, indent, 0);
    return out;
}

ordered_json parse_json_text(std::string_view text, const std::string& source, int max_depth) {
    // Depth is checked on the raw text first: nlohmann's parser recurses once per level.
    int depth = 0;
    bool in_string = false;
    bool escaped = false;
    size_t line = 1;
    for (const char c : text) {
        if (c == '\n') ++line;
        if (in_string) {
            if (escaped) escaped = false;
            else if (c == '\\') escaped = true;
            else if (c == '"') in_string = false;
            continue;
        }
        if (c == '"') in_string = true;
        else if (c == '[' || c == '{') {
            if (++depth > max_depth)
                throw std::runtime_error(source + ": JSON nesting deeper than " + std::to_string(max_depth) +
                                         " levels (line " + std::to_string(line) + ")");
        } else if (c == ']' || c == '}') --depth;
    }
    try {
        return ordered_json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e999
        std::string what = e.what();
        // Drop nlohmann's "[json.exception.parse_error.101] " tag: users need the position and reason.
        if (const auto p = what.find("] "); p != std::string::npos && what.starts_with("[json.exception."))
            what = what.substr(p + 2);
        throw std::runtime_error(source + ": invalid JSON: " + what);
    }
}

}  // namespace cc
