// Cleaning English running text for language models (docs/data.md, "English text for language
// models"): Project Gutenberg files and MediaWiki wikitext to plain UTF-8 lines. Pure string
// functions, deterministic, no torch; lm_corpus.h reads the files and splits them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace normlab::data {

// Names the cleaning rules below; written into every manifest. Change it with any rule.
constexpr const char* kLmCleaningVersion = "lm-text-1";

// What clean_gutenberg found and removed.
struct GutenbergCleanInfo {
  bool start_marker = false;  // a "*** START OF ..." (or "*END*THE SMALL PRINT") line ended the header
  bool end_marker = false;    // an "*** END OF ..." / "End of (the) Project Gutenberg" line began the footer
  int64_t lines_removed = 0;  // header and footer lines dropped
  int64_t line_numbers_removed = 0;  // poem line numbers cut from line ends
};

// A Gutenberg text file to clean text. Rules, in order:
// 1. a UTF-8 byte-order mark is dropped, CR LF and lone CR become LF, other control characters
//    (below U+0020 but TAB and LF, and U+007F) are dropped;
// 2. header: everything up to and including the last line that starts with "*** START OF" or
//    "***START OF" or contains "*END*THE SMALL PRINT" within the first 25% of lines;
//    footer: everything from the first line after that which starts with "*** END OF",
//    "***END OF", "End of the Project Gutenberg", "End of Project Gutenberg" (any case);
//    a file with neither marker is kept whole (the text then is all work, as in ../shared/data/lm);
// 3. per line: a line number set off by two or more spaces at the end is cut ("... fear'd,   900"),
//    a leading run of four or more periods (an indentation leader) is cut, white space is trimmed
//    and every run of white space (ASCII, TAB, U+00A0 and the other Unicode space separators)
//    becomes one ASCII space (normalize_whitespace of corpus.h);
// 4. runs of blank lines become one blank line; none at the start or the end.
// Speaker names, stage directions, titles, "FINIS" and "THE END" stay, as text.
std::string clean_gutenberg(const std::string& raw, GutenbergCleanInfo* info = nullptr);

// HTML character references to UTF-8: the named ones MediaWiki text uses most (amp lt gt quot
// apos nbsp ndash mdash minus times hellip laquo raquo lsquo rsquo ldquo rdquo deg frac12 pound
// euro copy sect middot bull prime Prime thinsp ensp emsp shy zwj zwnj) and &#N; / &#xH;.
// Non-breaking and thin spaces become an ASCII space, shy/zwj/zwnj nothing; unknown names and
// invalid numbers are left as written.
std::string decode_html_entities(const std::string& text);

// XML's five predefined entities and numeric references (the escaping of a dump's <text>).
std::string xml_unescape(const std::string& text);

// Wikitext to plain lines (rules in order; docs/data.md compares them with gensim's filter_wiki):
// 1. comments <!-- --> and the elements ref, references, math, chem, gallery, timeline, imagemap,
//    score, syntaxhighlight, source, graph (with their contents; also self-closing <ref .../>);
// 2. templates and parser functions {{ ... }} (nested, counted by brace pairs) and tables
//    {| ... |} (nested), dropped whole;
// 3. links from the innermost out: [[File:/Image:/Media:/Category:...]] and interlanguage links
//    ([[de:...]]) dropped; [[target|label]] -> label; [[target]] -> target; [[:Category:X]] -> Category:X;
//    [url label] -> label, [url] -> nothing;
// 4. runs of two or more apostrophes (''italic'', '''bold''') removed; every other HTML tag removed,
//    its content kept (<br> becomes a space); magic words __TOC__ removed;
// 5. per line: "== Heading ==" -> "Heading"; leading list/indent marks (* # : ;) removed;
//    "----" rules dropped; HTML entities decoded last; white space as in clean_gutenberg;
//    a line emptied by the removals is dropped (only the source's blank lines separate
//    paragraphs); a heading whose section has no text line left is dropped.
std::string clean_wikitext(const std::string& wikitext);

// One <page> of a MediaWiki XML dump.
struct WikiPage {
  std::string title;
  int ns = 0;             // namespace number: 0 for articles
  bool redirect = false;  // has a <redirect .../> element
  std::string text;       // the <text> content, XML-unescaped (wikitext)
};

// Every <page> of a dump, in order. Throws std::runtime_error naming `name` when a <page> has
// no </page>, no <title> or a malformed <ns>, or when the text has no <page> and no <mediawiki.
std::vector<WikiPage> parse_mediawiki_pages(const std::string& xml, const std::string& name);

// Whitespace-separated tokens (as `wc -w` counts them) and UTF-8 code points.
int64_t count_words(const std::string& text);
int64_t count_chars(const std::string& text);

}  // namespace normlab::data
