// Cleaning of Gutenberg text and wikitext (data/lm_text.h) on hand-written inputs whose
// outputs were written by hand from the rules, and counts on the real files against coreutils.
#include "data/lm_text.h"

#include <cstdio>
#include <memory>

#include <gtest/gtest.h>

#include "data/lm_corpus.h"
#include "test_data.h"

namespace normlab::data {
namespace {

// Output of a shell command (the independent count), trailing newline dropped.
std::string shell(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(command.c_str(), "r"), pclose);
  std::string out;
  char buf[256];
  while (p && fgets(buf, sizeof buf, p.get())) out += buf;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

TEST(LmText, GutenbergMarkersCutHeaderAndFooter) {
  GutenbergCleanInfo info;
  const std::string raw =
      "The Project Gutenberg EBook of X\n*** START OF THIS PROJECT GUTENBERG EBOOK X ***\r\n\r\n"
      "Text line one\r\n\r\n\r\nLine two\n*** END OF THIS PROJECT GUTENBERG EBOOK X ***\nlicence\n";
  EXPECT_EQ(clean_gutenberg(raw, &info), "Text line one\n\nLine two\n");
  EXPECT_TRUE(info.start_marker);
  EXPECT_TRUE(info.end_marker);
  EXPECT_EQ(info.lines_removed, 4);
}

TEST(LmText, GutenbergOldSmallPrintAndEndOfEtext) {
  GutenbergCleanInfo info;
  EXPECT_EQ(clean_gutenberg("blah\n*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*\n"
                            "The text\nEnd of the Project Gutenberg Etext of X\nmore licence\n",
                            &info),
            "The text\n");
  EXPECT_TRUE(info.start_marker);
  EXPECT_TRUE(info.end_marker);
}

TEST(LmText, GutenbergWithoutMarkersKeptWholeWithLineRules) {
  GutenbergCleanInfo info;
  EXPECT_EQ(clean_gutenberg("\xEF\xBB\xBFTitle\r\n\r\n\r\n  Of Mans First Disobedience,   900\n"
                            "............Of Cerberus\n  Ham. To be,\tor not  \nTHE END.\n\x1a\n\n",
                            &info),
            "Title\n\nOf Mans First Disobedience,\nOf Cerberus\nHam. To be, or not\nTHE END.\n");
  EXPECT_FALSE(info.start_marker);
  EXPECT_FALSE(info.end_marker);
  EXPECT_EQ(info.lines_removed, 0);
  EXPECT_EQ(info.line_numbers_removed, 1);
  // A number alone on a line, or after one space, is text.
  EXPECT_EQ(clean_gutenberg("SONNET\n  18\nin 1609 4\n"), "SONNET\n18\nin 1609 4\n");
}

TEST(LmText, WikiLinksTemplatesRefsAndQuotes) {
  EXPECT_EQ(clean_wikitext("'''Anarchism''' is a [[political philosophy]] that advocates "
                           "[[self-governance|self-governed]] societies.{{sfn|x|y}}<ref>Cite {{a|{{b}}}}</ref>"
                           "<ref name=\"n\"/>"),
            "Anarchism is a political philosophy that advocates self-governed societies.\n");
  EXPECT_EQ(clean_wikitext("{{Infobox\n| a = {{b|c}}\n| d = e\n}}\nText after."), "Text after.\n");
  EXPECT_EQ(clean_wikitext("''Italic'' and '''bold''' and '''''both''''' and Smith's"),
            "Italic and bold and both and Smith's\n");
}

TEST(LmText, WikiTablesFilesCategoriesLanguages) {
  EXPECT_EQ(clean_wikitext("Before\n{| class=\"wikitable\"\n|-\n| a || b\n{|\n| nested\n|}\n|}\nAfter"),
            "Before\nAfter\n");
  EXPECT_EQ(clean_wikitext("[[File:X.jpg|thumb|A [[cat]] sleeping]]Cats sleep. [[Image:Y.png]]"),
            "Cats sleep.\n");
  EXPECT_EQ(clean_wikitext("Text.\n[[Category:Animals]]\n[[de:Katze]]\n[[wikt:cat|cat]] [[:Category:Cats]]"),
            "Text.\ncat Category:Cats\n");
  EXPECT_EQ(clean_wikitext("See [http://example.com the site] and [https://x.org]."), "See the site and .\n");
}

TEST(LmText, WikiHeadingsListsCommentsTagsEntities) {
  EXPECT_EQ(clean_wikitext("Intro.\n\n== History ==\nOld.\n\n== See also ==\n* {{portal|x}}\n"),
            "Intro.\n\nHistory\nOld.\n");
  EXPECT_EQ(clean_wikitext("* one\n# two\n: three\n----\n__TOC__\nA<!-- hidden\nline -->B<br/>C <small>d</small>"),
            "one\ntwo\nthree\nAB C d\n");
  EXPECT_EQ(clean_wikitext("AT&amp;T &lt;b&gt; 5&nbsp;km &quot;q&quot; &#8212; &#x41; &bogus; x<y"),
            "AT&T <b> 5 km \"q\" \u2014 A &bogus; x<y\n");
  EXPECT_EQ(clean_wikitext("a <math>\\frac{1}{2}</math> b <nowiki>[[x]]</nowiki>"), "a b x\n");
}

TEST(LmText, WikiUnbalancedMarkupStaysText) {
  EXPECT_EQ(clean_wikitext("a {{ b\n[[c\nd ]] e"), "a {{ b\nc\nd e\n");
}

TEST(LmText, XmlPagesAndUnescape) {
  const std::string xml =
      "<mediawiki><page>\n<title>A &amp; B</title>\n<ns>0</ns>\n<revision><text xml:space=\"preserve\">"
      "x &lt;ref&gt;y&lt;/ref&gt; &amp;amp;</text></revision></page>"
      "<page><title>R</title><ns>0</ns><redirect title=\"A\" /><text>#REDIRECT [[A]]</text></page>"
      "<page><title>Wikipedia:About</title><ns>4</ns><text /></page></mediawiki>";
  const auto pages = parse_mediawiki_pages(xml, "dump.xml");
  ASSERT_EQ(pages.size(), 3u);
  EXPECT_EQ(pages[0].title, "A & B");
  EXPECT_EQ(pages[0].text, "x <ref>y</ref> &amp;");
  EXPECT_EQ(clean_wikitext(pages[0].text), "x &\n");
  EXPECT_TRUE(pages[1].redirect);
  EXPECT_EQ(pages[2].ns, 4);
  EXPECT_EQ(pages[2].text, "");
  try {
    parse_mediawiki_pages("<mediawiki><page><title>T</title><text>cut", "dump.xml");
    FAIL() << "a truncated dump was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("dump.xml"), std::string::npos) << e.what();
  }
}

TEST(LmText, CountsAgainstWc) {
  EXPECT_EQ(count_words(" a  b\tc\n\nd "), 4);
  EXPECT_EQ(count_chars("a\u00e9\u2014"), 3);
  for (const std::string file : {"lm/shakespeare/hamlet_gut.txt.gz", "lm/milton/comus_gut.txt.gz"}) {
    NORMLAB_REQUIRE_SHARED_DATA(path, file);
    const auto wc = shell("zcat '" + path + "' | LC_ALL=C wc -w");
    EXPECT_EQ(std::to_string(count_words(read_compressed_file(path))), wc) << path;
  }
}

TEST(LmText, RealDumpPagesRedirectsAndNamespaces) {
  NORMLAB_REQUIRE_SHARED_DATA(path, "lm/wikipedia/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2");
  const auto pages = parse_mediawiki_pages(read_compressed_file(path), path);
  int redirects = 0, other_ns = 0;
  for (const auto& p : pages) {
    redirects += p.redirect;
    other_ns += p.ns != 0;
  }
  EXPECT_EQ(std::to_string(pages.size()), shell("bzcat '" + path + "' | grep -c '<page>'"));
  EXPECT_EQ(std::to_string(redirects), shell("bzcat '" + path + "' | grep -c '<redirect'"));
  EXPECT_EQ(std::to_string(other_ns), shell("bzcat '" + path + "' | grep '<ns>' | grep -vc '<ns>0</ns>'"));
}

}  // namespace
}  // namespace normlab::data
