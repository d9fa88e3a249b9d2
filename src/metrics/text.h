// Unicode text as sacreBLEU's Python sees it: code points, str.split() white space, str.lower().
#pragma once

#include <string>
#include <vector>

namespace normlab::metrics {

// UTF-8 -> code points. Throws std::invalid_argument("invalid UTF-8 at byte N") on bad input.
std::u32string decode_utf8(const std::string& bytes);
std::string encode_utf8(const std::u32string& text);

// Python's str.isspace(): the white space str.split() and str.rstrip() use.
bool is_python_space(char32_t c);
// str.split() with no argument.
std::vector<std::u32string> split_python(const std::u32string& text);
// str.lower(): towlower in C.UTF-8, plus U+0130 -> "i\u0307" (the one code point where they differ).
std::u32string lowercase(const std::u32string& text);

// Lines of a file as sacreBLEU reads them (UTF-8, newline="\n": split on '\n' only, no final
// empty line after a trailing '\n'; a byte-order mark stays, as in Python's "utf-8" codec).
// `name` prefixes errors: "NAME:LINE: invalid UTF-8 at byte N".
std::vector<std::u32string> split_lines(const std::string& bytes, const std::string& name);

}  // namespace normlab::metrics
