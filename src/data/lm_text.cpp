#include "data/lm_text.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <stdexcept>

#include "data/corpus.h"

namespace normlab::data {
namespace {

bool is_blank(char c) { return c == ' ' || c == '\t'; }
bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool starts_with_ci(const std::string& s, const std::string& prefix) {
  return s.size() >= prefix.size() && lower(s.substr(0, prefix.size())) == lower(prefix);
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = text.find('\n', begin);
    if (end == std::string::npos) {
      if (begin < text.size()) lines.push_back(text.substr(begin));
      break;
    }
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines;
}

// Trims, collapses every run of white space (ASCII and the Unicode space separators, e.g. a
// literal U+00A0 in wikitext) to one ASCII space: corpus.h's normalize_whitespace.
std::string squeeze(const std::string& line) { return normalize_whitespace(line); }

// Joins lines with LF, one blank line at most between text lines, none at either end.
std::string join_paragraphs(const std::vector<std::string>& lines) {
  std::string out;
  bool blank_pending = false;
  for (const auto& line : lines) {
    if (line.empty()) {
      blank_pending = !out.empty();
      continue;
    }
    if (blank_pending) out += '\n';
    blank_pending = false;
    out += line;
    out += '\n';
  }
  return out;
}

std::string to_utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// &#N; or &#xH; starting at text[i] == '&': the code point's UTF-8 and the length consumed, or
// {"", 0} when it is not a valid numeric reference (NUL, surrogates and > U+10FFFF are invalid).
std::pair<std::string, size_t> numeric_reference(const std::string& text, size_t i) {
  if (i + 3 >= text.size() || text[i + 1] != '#') return {"", 0};
  size_t j = i + 2;
  const bool hex = text[j] == 'x' || text[j] == 'X';
  if (hex) ++j;
  uint64_t cp = 0;
  const size_t digits_begin = j;
  while (j < text.size() && j - digits_begin < 8 &&
         (hex ? std::isxdigit(static_cast<unsigned char>(text[j])) : std::isdigit(static_cast<unsigned char>(text[j])))) {
    const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(text[j])));
    cp = cp * (hex ? 16 : 10) + static_cast<uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
    ++j;
  }
  if (j == digits_begin || j >= text.size() || text[j] != ';') return {"", 0};
  if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {"", 0};
  return {to_utf8(static_cast<uint32_t>(cp)), j + 1 - i};
}

const std::map<std::string, std::string>& html_entities() {
  static const std::map<std::string, std::string> table = {
      {"amp", "&"}, {"lt", "<"}, {"gt", ">"}, {"quot", "\""}, {"apos", "'"},
      {"nbsp", " "}, {"thinsp", " "}, {"ensp", " "}, {"emsp", " "},
      {"shy", ""}, {"zwj", ""}, {"zwnj", ""},
      {"ndash", "\u2013"}, {"mdash", "\u2014"}, {"minus", "\u2212"}, {"times", "\u00D7"},
      {"hellip", "\u2026"}, {"laquo", "\u00AB"}, {"raquo", "\u00BB"}, {"lsquo", "\u2018"},
      {"rsquo", "\u2019"}, {"ldquo", "\u201C"}, {"rdquo", "\u201D"}, {"deg", "\u00B0"},
      {"frac12", "\u00BD"}, {"pound", "\u00A3"}, {"euro", "\u20AC"}, {"copy", "\u00A9"},
      {"sect", "\u00A7"}, {"middot", "\u00B7"}, {"bull", "\u2022"}, {"prime", "\u2032"},
      {"Prime", "\u2033"},
  };
  return table;
}

// Replaces references at '&' using `named` and numeric references.
std::string decode_references(const std::string& text, const std::map<std::string, std::string>& named) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text[i] != '&') {
      out += text[i++];
      continue;
    }
    const auto [num, used] = numeric_reference(text, i);
    if (used > 0) {
      out += num;
      i += used;
      continue;
    }
    const size_t semi = text.find(';', i + 1);
    if (semi != std::string::npos && semi - i <= 10) {
      const auto it = named.find(text.substr(i + 1, semi - i - 1));
      if (it != named.end()) {
        out += it->second;
        i = semi + 1;
        continue;
      }
    }
    out += text[i++];
  }
  return out;
}

// Removes <!-- ... --> (an unclosed comment runs to the end, as MediaWiki renders it).
std::string remove_comments(const std::string& s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const size_t open = s.find("<!--", i);
    if (open == std::string::npos) {
      out.append(s, i, std::string::npos);
      break;
    }
    out.append(s, i, open - i);
    const size_t close = s.find("-->", open + 4);
    if (close == std::string::npos) break;
    i = close + 3;
  }
  return out;
}

// Whether s[i..] opens an element named `name` ("<name>", "<name ...>", "<name/>"), case-insensitive.
bool opens_element(const std::string& s, size_t i, const std::string& name) {
  if (s[i] != '<' || i + 1 + name.size() > s.size()) return false;
  if (lower(s.substr(i + 1, name.size())) != name) return false;
  const size_t after = i + 1 + name.size();
  return after == s.size() || s[after] == '>' || s[after] == '/' || is_ascii_space(s[after]);
}

// Drops <name ...>...</name> and <name .../> with what they hold. An unclosed element is
// dropped to the end of its line (never the rest of the article).
std::string remove_elements(const std::string& s, const std::vector<std::string>& names) {
  std::string out;
  out.reserve(s.size());
  const std::string ls = lower(s);
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] != '<') {
      out += s[i++];
      continue;
    }
    const std::string* hit = nullptr;
    for (const auto& n : names)
      if (opens_element(s, i, n)) hit = &n;
    if (!hit) {
      out += s[i++];
      continue;
    }
    const size_t tag_end = s.find('>', i);
    if (tag_end == std::string::npos) {  // "<ref" never closed: keep the rest as text
      out += s[i++];
      continue;
    }
    if (s[tag_end - 1] == '/') {  // self-closing
      i = tag_end + 1;
      continue;
    }
    const size_t close = ls.find("</" + *hit, tag_end + 1);
    if (close == std::string::npos) {
      const size_t eol = s.find('\n', tag_end);
      i = eol == std::string::npos ? s.size() : eol;
      continue;
    }
    const size_t close_end = s.find('>', close);
    i = close_end == std::string::npos ? s.size() : close_end + 1;
  }
  return out;
}

// Drops {{ ... }} with nesting; a "{{" never closed is kept as text.
std::string remove_templates(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (!(s[i] == '{' && i + 1 < s.size() && s[i + 1] == '{')) {
      out += s[i++];
      continue;
    }
    int depth = 0;
    size_t j = i;
    for (; j < s.size(); ++j) {
      if (s[j] == '{' && j + 1 < s.size() && s[j + 1] == '{') {
        ++depth;
        ++j;
      } else if (s[j] == '}' && j + 1 < s.size() && s[j + 1] == '}') {
        --depth;
        ++j;
        if (depth == 0) break;
      }
    }
    if (depth != 0) {  // unbalanced to the end: keep the braces as text
      out += s[i++];
      continue;
    }
    i = j + 1;
  }
  return out;
}

// Drops tables: from a line starting "{|" to the matching line starting "|}" (nested).
std::vector<std::string> remove_tables(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  int depth = 0;
  for (const auto& raw : lines) {
    const std::string line = squeeze(raw);
    if (line.rfind("{|", 0) == 0) {
      ++depth;
      continue;
    }
    if (depth > 0) {
      if (line.rfind("|}", 0) == 0) --depth;
      continue;
    }
    out.push_back(raw);
  }
  return out;
}

bool dropped_namespace(const std::string& prefix) {
  const std::string p = lower(squeeze(prefix));
  return p == "file" || p == "image" || p == "media" || p == "category";
}

// Interlanguage link prefixes: "de", "zh-min-nan", "simple" (lowercase letters and '-').
bool language_prefix(const std::string& prefix) {
  if (prefix.size() < 2 || prefix.size() > 12) return false;
  for (char c : prefix)
    if (!(std::islower(static_cast<unsigned char>(c)) || c == '-')) return false;
  return true;
}

// What an innermost [[inner]] shows.
std::string link_text(const std::string& inner) {
  const bool leading_colon = !inner.empty() && inner[0] == ':';
  const std::string body = leading_colon ? inner.substr(1) : inner;
  const size_t bar = body.find('|');
  const std::string target = bar == std::string::npos ? body : body.substr(0, bar);
  const size_t colon = target.find(':');
  if (!leading_colon && colon != std::string::npos) {
    const std::string prefix = target.substr(0, colon);
    if (dropped_namespace(prefix)) return "";
    if (language_prefix(prefix) && bar == std::string::npos) return "";
  }
  if (bar == std::string::npos) return target;
  const std::string label = body.substr(bar + 1);
  if (squeeze(label).empty()) return target;  // the pipe trick shows the target
  return label;
}

// Replaces [[...]] from the innermost out; "[[" without "]]" stays as text.
std::string replace_wiki_links(std::string s) {
  for (int pass = 0; pass < 16; ++pass) {
    std::string out;
    out.reserve(s.size());
    bool changed = false;
    size_t i = 0;
    while (i < s.size()) {
      const size_t open = s.find("[[", i);
      if (open == std::string::npos) {
        out.append(s, i, std::string::npos);
        break;
      }
      const size_t close = s.find("]]", open + 2);
      const size_t next_open = s.find("[[", open + 2);
      if (close == std::string::npos) {
        out.append(s, i, std::string::npos);
        break;
      }
      if (next_open != std::string::npos && next_open < close) {  // not innermost: later pass
        out.append(s, i, next_open - i);
        i = next_open;
        continue;
      }
      out.append(s, i, open - i);
      out += link_text(s.substr(open + 2, close - open - 2));
      i = close + 2;
      changed = true;
    }
    s = std::move(out);
    if (!changed) break;
  }
  return s;
}

// [http://x label] -> label, [http://x] -> "" (single brackets whose content starts with a URL scheme).
std::string replace_external_links(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '[' && (i + 1 >= s.size() || s[i + 1] != '[')) {
      const size_t close = s.find(']', i + 1);
      const size_t eol = s.find('\n', i + 1);
      if (close != std::string::npos && (eol == std::string::npos || close < eol)) {
        const std::string inner = s.substr(i + 1, close - i - 1);
        const size_t scheme = inner.find("://");
        const bool url = starts_with_ci(inner, "//") ||
                         (scheme != std::string::npos && scheme > 0 && scheme <= 6 &&
                          std::all_of(inner.begin(), inner.begin() + static_cast<long>(scheme),
                                      [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }));
        if (url) {
          const size_t space = inner.find(' ');
          if (space != std::string::npos) out += inner.substr(space + 1);
          i = close + 1;
          continue;
        }
      }
    }
    out += s[i++];
  }
  return out;
}

// Removes runs of two or more apostrophes, remaining HTML tags (<br> -> space) and __MAGIC__ words.
std::string remove_inline_markup(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '\'' && i + 1 < s.size() && s[i + 1] == '\'') {
      while (i < s.size() && s[i] == '\'') ++i;
      continue;
    }
    if (s[i] == '<' && i + 1 < s.size() &&
        (std::isalpha(static_cast<unsigned char>(s[i + 1])) ||
         (s[i + 1] == '/' && i + 2 < s.size() && std::isalpha(static_cast<unsigned char>(s[i + 2]))))) {
      const size_t close = s.find('>', i);
      const size_t eol = s.find('\n', i);
      if (close != std::string::npos && (eol == std::string::npos || close < eol)) {
        const std::string name = lower(s.substr(i + 1, std::min<size_t>(3, close - i - 1)));
        if (name.rfind("br", 0) == 0) out += ' ';
        i = close + 1;
        continue;
      }
    }
    if (s[i] == '_' && i + 1 < s.size() && s[i + 1] == '_') {
      size_t j = i + 2;
      while (j < s.size() && std::isupper(static_cast<unsigned char>(s[j]))) ++j;
      if (j > i + 2 && j + 1 < s.size() && s[j] == '_' && s[j + 1] == '_') {
        i = j + 2;
        continue;
      }
    }
    out += s[i++];
  }
  return out;
}

// "== Heading ==" -> "Heading", or "" when the line is not a heading.
std::string heading_text(const std::string& line) {
  if (line.size() < 3 || line.front() != '=' || line.back() != '=') return "";
  size_t a = 0, b = line.size();
  while (a < b && line[a] == '=') ++a;
  while (b > a && line[b - 1] == '=') --b;
  return squeeze(line.substr(a, b - a));
}

}  // namespace

std::string clean_gutenberg(const std::string& raw, GutenbergCleanInfo* info) {
  GutenbergCleanInfo local;
  GutenbergCleanInfo& inf = info ? *info : local;
  inf = {};
  std::string text = raw;
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);
  std::string lf;
  lf.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (text[i] == '\r') {
      lf += '\n';
      if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
    } else if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7F) {
      continue;  // control characters, e.g. the DOS end-of-file ^Z closing Paradise Lost
    } else {
      lf += text[i];
    }
  }
  const auto lines = split_lines(lf);

  size_t begin = 0, end = lines.size();
  const size_t header_zone = lines.size() / 4 + 1;
  for (size_t i = 0; i < lines.size() && i < header_zone; ++i) {
    const std::string t = squeeze(lines[i]);
    if (starts_with_ci(t, "*** START OF") || starts_with_ci(t, "***START OF") ||
        t.find("*END*THE SMALL PRINT") != std::string::npos) {
      begin = i + 1;
      inf.start_marker = true;
    }
  }
  for (size_t i = begin; i < lines.size(); ++i) {
    const std::string t = squeeze(lines[i]);
    if (starts_with_ci(t, "*** END OF") || starts_with_ci(t, "***END OF") ||
        starts_with_ci(t, "End of the Project Gutenberg") || starts_with_ci(t, "End of Project Gutenberg")) {
      end = i;
      inf.end_marker = true;
      break;
    }
  }
  inf.lines_removed = static_cast<int64_t>(begin + (lines.size() - end));

  std::vector<std::string> kept;
  kept.reserve(end - begin);
  for (size_t i = begin; i < end; ++i) {
    std::string line = lines[i];
    // A poem's line number: digits at the end, after two or more blanks and some text.
    size_t k = line.size();
    while (k > 0 && is_blank(line[k - 1])) --k;
    size_t d = k;
    while (d > 0 && std::isdigit(static_cast<unsigned char>(line[d - 1]))) --d;
    if (d < k && d >= 2 && is_blank(line[d - 1]) && is_blank(line[d - 2])) {
      size_t t = d;
      while (t > 0 && is_blank(line[t - 1])) --t;
      if (t > 0) {
        line.erase(t);
        ++inf.line_numbers_removed;
      }
    }
    line = squeeze(line);
    size_t dots = 0;
    while (dots < line.size() && line[dots] == '.') ++dots;
    if (dots >= 4) line = squeeze(line.substr(dots));
    kept.push_back(std::move(line));
  }
  return join_paragraphs(kept);
}

std::string decode_html_entities(const std::string& text) { return decode_references(text, html_entities()); }

std::string xml_unescape(const std::string& text) {
  static const std::map<std::string, std::string> xml = {
      {"amp", "&"}, {"lt", "<"}, {"gt", ">"}, {"quot", "\""}, {"apos", "'"}};
  return decode_references(text, xml);
}

std::string clean_wikitext(const std::string& wikitext) {
  // Blank lines of the source mark paragraphs; a line emptied by removed markup (a template,
  // a category link) is dropped, as MediaWiki renders nothing for it.
  constexpr char kBlank = '\x01';
  std::string s;
  for (const auto& line : split_lines(wikitext)) (s += squeeze(line).empty() ? std::string(1, kBlank) : line) += '\n';
  s = remove_comments(s);
  s = remove_elements(s, {"ref", "references", "math", "chem", "gallery", "timeline", "imagemap", "score",
                          "syntaxhighlight", "source", "graph"});
  s = remove_templates(s);
  {
    const auto lines = remove_tables(split_lines(s));
    s.clear();
    for (const auto& l : lines) (s += l) += '\n';
  }
  s = replace_wiki_links(s);
  s = replace_external_links(s);
  s = remove_inline_markup(s);

  enum class Kind { kText, kBlank, kHeading };
  std::vector<std::pair<Kind, std::string>> lines;
  for (const auto& raw : split_lines(s)) {
    std::string line = squeeze(raw);
    if (line.find(kBlank) != std::string::npos) {
      line.erase(std::remove(line.begin(), line.end(), kBlank), line.end());
      line = squeeze(line);
      if (line.empty()) {
        lines.emplace_back(Kind::kBlank, "");
        continue;
      }
    }
    const std::string heading = heading_text(line);
    if (!heading.empty()) {
      lines.emplace_back(Kind::kHeading, squeeze(decode_html_entities(heading)));
      continue;
    }
    size_t marks = 0;
    while (marks < line.size() && std::strchr("*#:;", line[marks]) != nullptr) ++marks;
    line = line.substr(marks);
    if (line.size() >= 4 && line.find_first_not_of('-') == std::string::npos) line.clear();
    line = squeeze(decode_html_entities(line));
    if (!line.empty()) lines.emplace_back(Kind::kText, line);
  }
  // A heading is kept only when a text line follows it before the next heading of any level.
  std::vector<std::string> kept;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].first == Kind::kHeading) {
      bool has_text = false;
      for (size_t j = i + 1; j < lines.size() && lines[j].first != Kind::kHeading; ++j)
        if (lines[j].first == Kind::kText) {
          has_text = true;
          break;
        }
      if (!has_text) continue;
      kept.emplace_back();  // a heading starts a paragraph
    }
    kept.push_back(lines[i].second);
  }
  return join_paragraphs(kept);
}

std::vector<WikiPage> parse_mediawiki_pages(const std::string& xml, const std::string& name) {
  auto element = [&](const std::string& page, const std::string& tag, size_t* at) -> std::string {
    const size_t open = page.find("<" + tag, at ? *at : 0);
    if (open == std::string::npos) return "";
    const size_t gt = page.find('>', open);
    if (gt == std::string::npos || page[gt - 1] == '/') return "";
    const size_t close = page.find("</" + tag + ">", gt);
    if (close == std::string::npos)
      throw std::runtime_error(name + ": <" + tag + "> without </" + tag + "> (corrupt or truncated dump)");
    if (at) *at = close;
    return page.substr(gt + 1, close - gt - 1);
  };
  std::vector<WikiPage> pages;
  size_t i = 0;
  while (true) {
    const size_t open = xml.find("<page>", i);
    if (open == std::string::npos) break;
    const size_t close = xml.find("</page>", open);
    if (close == std::string::npos)
      throw std::runtime_error(name + ": <page> " + std::to_string(pages.size() + 1) +
                               " has no </page> (corrupt or truncated dump)");
    const std::string page = xml.substr(open, close - open);
    WikiPage p;
    if (page.find("<title>") == std::string::npos)
      throw std::runtime_error(name + ": <page> " + std::to_string(pages.size() + 1) + " has no <title>");
    p.title = xml_unescape(element(page, "title", nullptr));
    const std::string ns = element(page, "ns", nullptr);
    if (!ns.empty()) {
      try {
        size_t used = 0;
        p.ns = std::stoi(ns, &used);
        if (used != ns.size()) throw std::invalid_argument(ns);
      } catch (const std::exception&) {
        throw std::runtime_error(name + ": page \"" + p.title + "\" has a malformed <ns>" + ns + "</ns>");
      }
    }
    p.redirect = page.find("<redirect") != std::string::npos;
    p.text = xml_unescape(element(page, "text", nullptr));
    pages.push_back(std::move(p));
    i = close + 7;
  }
  if (pages.empty() && xml.find("<mediawiki") == std::string::npos)
    throw std::runtime_error(name + ": not a MediaWiki XML dump (no <mediawiki> and no <page>)");
  return pages;
}

int64_t count_words(const std::string& text) {
  int64_t n = 0;
  bool in_word = false;
  for (char c : text) {
    const bool space = is_ascii_space(c);
    if (!space && !in_word) ++n;
    in_word = !space;
  }
  return n;
}

int64_t count_chars(const std::string& text) {
  int64_t n = 0;
  for (char c : text)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  return n;
}

}  // namespace normlab::data
