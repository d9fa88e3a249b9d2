#include "metrics/text.h"

#include <clocale>
#include <cwctype>
#include <locale.h>
#include <stdexcept>
#include <wctype.h>

namespace normlab::metrics {

std::u32string decode_utf8(const std::string& bytes) {
  std::u32string out;
  out.reserve(bytes.size());
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  for (size_t i = 0; i < n;) {
    const unsigned char b = s[i];
    int len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > n)
      throw std::invalid_argument("invalid UTF-8 at byte " + std::to_string(i + 1));
    char32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    for (int k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80)
        throw std::invalid_argument("invalid UTF-8 at byte " + std::to_string(i + 1));
      c = (c << 6) | (s[i + k] & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are rejected, as Python's codec does.
    const char32_t min = len == 1 ? 0 : len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
      throw std::invalid_argument("invalid UTF-8 at byte " + std::to_string(i + 1));
    out.push_back(c);
    i += len;
  }
  return out;
}

std::string encode_utf8(const std::u32string& text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

std::vector<std::u32string> split_python(const std::u32string& text) {
  std::vector<std::u32string> out;
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    while (i < n && is_python_space(text[i])) ++i;
    size_t j = i;
    while (j < n && !is_python_space(text[j])) ++j;
    if (j > i) out.emplace_back(text, i, j - i);
    i = j;
  }
  return out;
}

std::u32string lowercase(const std::u32string& text) {
  static const locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0));
  std::u32string out;
  out.reserve(text.size());
  for (char32_t c : text) {
    if (c < 0x80) {
      out += (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c;
    } else if (c == 0x130) {
      out += U"i\u0307";  // Python's only one-to-two lowercase mapping (checked over all code points)
    } else {
      out += utf8 != static_cast<locale_t>(0)
                 ? static_cast<char32_t>(towlower_l(static_cast<wint_t>(c), utf8))
                 : c;
    }
  }
  return out;
}

std::vector<std::u32string> split_lines(const std::string& bytes, const std::string& name) {
  std::vector<std::u32string> lines;
  size_t start = 0;
  while (start < bytes.size()) {
    size_t end = bytes.find('\n', start);
    if (end == std::string::npos) end = bytes.size();
    try {
      lines.push_back(decode_utf8(bytes.substr(start, end - start)));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(name + ":" + std::to_string(lines.size() + 1) + ": " + e.what());
    }
    start = end + 1;
  }
  return lines;
}

}  // namespace normlab::metrics
