#include "data/synthetic.h"

#include <filesystem>
#include <set>
#include <stdexcept>

#include "core/file_io.h"
#include "core/problems.h"

namespace normlab::data {
namespace {

// SplitMix64 (Steele et al. 2014): the same stream on every platform and standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n), unbiased (rejection of the incomplete last block).
  uint64_t below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = next(); while (x >= limit);
    return x % n;
  }
  bool chance(double p) { return static_cast<double>(next() >> 11) * 0x1.0p-53 < p; }
  template <typename T>
  const T& pick(const std::vector<T>& v) { return v[below(v.size())]; }

 private:
  uint64_t state_;
};

// Function words and inflections (grammar.json carries the same values for checkers).
const char* const kSrcDefinite = "the";
const char* const kSrcIndefinite = "a";
const char* const kSrcIndefinitePlural = "some";
const char* const kSrcAnd = "and";
const char* const kSrcThat = "that";
const char* const kTgtAnd = "e";
const char* const kTgtThat = "ke";
const std::vector<std::string> kGenders = {"m", "f", "n"};
const std::vector<std::string> kTgtDefinite = {"lo", "la", "le"};    // by gender; plural "li"
const std::vector<std::string> kTgtIndefinite = {"un", "una", "une"};  // by gender; plural "dei"
const std::vector<std::string> kTgtAdjectiveVowel = {"o", "a", "e"};   // by gender; plural adds "s"

// Generation probabilities (documented in grammar.json and docs/synthetic.md).
constexpr double kPlural = 0.3, kDefinite = 0.5, kCoordinated = 0.1, kTransitive = 0.65,
                 kPrepositional = 0.3;
constexpr double kOneAdjective = 0.35, kTwoAdjectives = 0.15;
const std::vector<double> kSubordinate = {0.35, 0.25};  // at clause depth 0, 1; none deeper

struct Entry {
  std::string src, tgt;
  int gender = 0;  // nouns: index into kGenders
};

struct Lexicon {
  std::vector<Entry> nouns, adjectives, transitive, intransitive, prepositions;
};

// Source stems: 2-3 CV syllables, so they end in a vowel and no inflected form (+s) is a stem.
std::string src_stem(Rng& rng) {
  static const std::vector<std::string> c = {"b", "d", "f", "g", "k", "l", "m",
                                             "n", "p", "r", "s", "t", "v", "z"};
  static const std::vector<std::string> v = {"a", "e", "i", "o", "u"};
  std::string w;
  for (uint64_t i = 0, n = 2 + rng.below(2); i < n; ++i) w += rng.pick(c) + rng.pick(v);
  return w;
}

// Target stems: 1-2 CV syllables and a final consonant outside {s, t, n}, so no inflected
// form (+vowel, +vowel s, +t, +n, +i) equals a stem or a function word.
std::string tgt_stem(Rng& rng) {
  static const std::vector<std::string> c = {"h", "j", "k", "q", "r", "w", "x", "y", "z", "ch", "sh"};
  static const std::vector<std::string> v = {"a", "e", "i", "o", "u", "ai"};
  static const std::vector<std::string> f = {"k", "l", "m", "r", "sh", "v"};
  std::string w;
  for (uint64_t i = 0, n = 1 + rng.below(2); i < n; ++i) w += rng.pick(c) + rng.pick(v);
  return w + rng.pick(f);
}

Lexicon make_lexicon(const SyntheticConfig& config, Rng& rng) {
  std::set<std::string> src_used = {kSrcDefinite, kSrcIndefinite, kSrcIndefinitePlural, kSrcAnd, kSrcThat};
  std::set<std::string> tgt_used;
  auto fresh = [&](std::string (*stem)(Rng&), std::set<std::string>& used) {
    std::string w;
    do w = stem(rng); while (!used.insert(w).second);
    return w;
  };
  auto entries = [&](int64_t n, bool gendered) {
    std::vector<Entry> out(n);
    for (auto& e : out) {
      e.src = fresh(src_stem, src_used);
      e.tgt = fresh(tgt_stem, tgt_used);
      if (gendered) e.gender = static_cast<int>(rng.below(kGenders.size()));
    }
    return out;
  };
  Lexicon lex;
  lex.nouns = entries(config.nouns, true);
  lex.adjectives = entries(config.adjectives, false);
  lex.transitive = entries(config.transitive_verbs, false);
  lex.intransitive = entries(config.intransitive_verbs, false);
  lex.prepositions = entries(config.prepositions, false);
  return lex;
}

struct Words {
  std::vector<std::string> src, tgt;
  void append(const Words& w) {
    src.insert(src.end(), w.src.begin(), w.src.end());
    tgt.insert(tgt.end(), w.tgt.begin(), w.tgt.end());
  }
};

struct Phrase {
  Words words;
  bool plural = false;  // decides the verb's agreement when this is a subject
};

// det adj* noun  ->  det' noun' adj'* (adjectives mirrored, article and adjectives agreeing
// with the target noun's gender and number).
Phrase noun_phrase(const Lexicon& lex, Rng& rng) {
  const Entry& noun = rng.pick(lex.nouns);
  const bool plural = rng.chance(kPlural), definite = rng.chance(kDefinite);
  const double a = static_cast<double>(rng.next() >> 11) * 0x1.0p-53;
  const int n_adj = a < kTwoAdjectives ? 2 : a < kTwoAdjectives + kOneAdjective ? 1 : 0;
  std::vector<const Entry*> adjs;
  while (static_cast<int>(adjs.size()) < n_adj) {
    const Entry* e = &rng.pick(lex.adjectives);
    if (adjs.empty() || adjs[0] != e) adjs.push_back(e);
  }
  Phrase p;
  p.plural = plural;
  auto& s = p.words.src;
  auto& t = p.words.tgt;
  s.push_back(definite ? kSrcDefinite : plural ? kSrcIndefinitePlural : kSrcIndefinite);
  for (const Entry* e : adjs) s.push_back(e->src);
  s.push_back(noun.src + (plural ? "s" : ""));
  t.push_back(plural ? (definite ? "li" : "dei") : (definite ? kTgtDefinite : kTgtIndefinite)[noun.gender]);
  t.push_back(noun.tgt + (plural ? "i" : ""));
  for (auto it = adjs.rbegin(); it != adjs.rend(); ++it)
    t.push_back((*it)->tgt + kTgtAdjectiveVowel[noun.gender] + (plural ? "s" : ""));
  return p;
}

// NP or "NP and NP" (plural).
Phrase argument(const Lexicon& lex, Rng& rng) {
  Phrase p = noun_phrase(lex, rng);
  if (!rng.chance(kCoordinated)) return p;
  const Phrase q = noun_phrase(lex, rng);
  p.words.src.push_back(kSrcAnd);
  p.words.tgt.push_back(kTgtAnd);
  p.words.append(q.words);
  p.plural = true;
  return p;
}

// subject verb [object] [prep NP], then possibly "that" + a subordinate clause.
// Target: main clauses keep S V O PP; subordinate clauses are verb-final: ke S O PP V.
Words clause(const Lexicon& lex, Rng& rng, size_t depth) {
  const Phrase subject = argument(lex, rng);
  const bool transitive = rng.chance(kTransitive);
  const Entry& verb = rng.pick(transitive ? lex.transitive : lex.intransitive);
  Words object, pp;
  if (transitive) object = argument(lex, rng).words;
  if (rng.chance(kPrepositional)) {
    const Entry& prep = rng.pick(lex.prepositions);
    pp.src.push_back(prep.src);
    pp.tgt.push_back(prep.tgt);
    pp.append(noun_phrase(lex, rng).words);
  }
  Words w;
  w.append(subject.words);
  w.src.push_back(verb.src + (subject.plural ? "" : "s"));
  const std::string tgt_verb = verb.tgt + (subject.plural ? "n" : "t");
  if (depth == 0) w.tgt.push_back(tgt_verb);
  w.append(object);
  w.append(pp);
  if (depth > 0) w.tgt.push_back(tgt_verb);
  if (depth < kSubordinate.size() && rng.chance(kSubordinate[depth])) {
    w.src.push_back(kSrcThat);
    w.tgt.push_back(kTgtThat);
    w.append(clause(lex, rng, depth + 1));
  }
  return w;
}

std::string join(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

SyntheticSplit sentences(const SyntheticConfig& config, const Lexicon& lex, Rng& rng, int64_t n) {
  SyntheticSplit split;
  while (static_cast<int64_t>(split.src.size()) < n) {
    const Words w = clause(lex, rng, 0);
    const auto len = static_cast<int64_t>(w.src.size());
    if (len < config.min_length || len > config.max_length) continue;  // rejection keeps 3..30
    split.src.push_back(join(w.src));
    split.tgt.push_back(join(w.tgt));
  }
  return split;
}

nlohmann::json grammar_json(const SyntheticConfig& config, const Lexicon& lex) {
  using nlohmann::json;
  auto list = [](const std::vector<Entry>& entries, bool gendered) {
    json out = json::array();
    for (const auto& e : entries) {
      json j = {{"src", e.src}, {"tgt", e.tgt}};
      if (gendered) j["gender"] = kGenders[e.gender];
      out.push_back(j);
    }
    return out;
  };
  return {
      {"seed", config.seed},
      {"languages", {{"src", "English-like: SVO, adjectives before the noun"},
                     {"tgt", "gendered, adjectives after the noun, verb-final subordinate clauses"}}},
      {"rules",
       {"sentence = clause; clause = subject verb [object] [preposition noun-phrase] [that clause] "
        "(subordinate clauses nest at most 2 deep); subject/object = noun-phrase [and noun-phrase]",
        "src noun-phrase = article adjective* noun; tgt noun-phrase = article' noun' adjective'* with the "
        "adjectives in mirrored order",
        "src article: 'the' (definite), 'a' (indefinite singular), 'some' (indefinite plural); tgt article "
        "agrees with the tgt noun's gender and number: definite lo/la/le (m/f/n), li (plural); "
        "indefinite un/una/une, dei (plural)",
        "plural nouns: src stem+s, tgt stem+i; tgt adjective = stem + o/a/e (noun's gender m/f/n) + s if plural",
        "verbs agree with the subject (plural if its noun is plural or it is coordinated with 'and'): "
        "src stem+s (singular) / stem (plural); tgt stem+t (singular) / stem+n (plural)",
        "main clause: tgt keeps S V O PP; subordinate clause ('that' -> 'ke'): tgt is verb-final, ke S O PP V",
        "every src word has exactly one tgt word: equal word counts"}},
      {"function_words",
       {{"src", {{"definite", kSrcDefinite}, {"indefinite", kSrcIndefinite},
                 {"indefinite_plural", kSrcIndefinitePlural}, {"and", kSrcAnd}, {"that", kSrcThat}}},
        {"tgt", {{"definite", {{"m", "lo"}, {"f", "la"}, {"n", "le"}, {"plural", "li"}}},
                 {"indefinite", {{"m", "un"}, {"f", "una"}, {"n", "une"}, {"plural", "dei"}}},
                 {"and", kTgtAnd}, {"that", kTgtThat}}}}},
      {"morphology",
       {{"src", {{"noun_plural", "s"}, {"verb_singular", "s"}}},
        {"tgt", {{"noun_plural", "i"}, {"adjective", {{"m", "o"}, {"f", "a"}, {"n", "e"}}},
                 {"adjective_plural", "s"}, {"verb", {{"singular", "t"}, {"plural", "n"}}}}}}},
      {"probabilities",
       {{"plural", kPlural}, {"definite", kDefinite}, {"coordinated", kCoordinated},
        {"transitive", kTransitive}, {"prepositional_phrase", kPrepositional},
        {"one_adjective", kOneAdjective}, {"two_adjectives", kTwoAdjectives},
        {"subordinate_by_depth", kSubordinate}}},
      {"lengths", {{"min", config.min_length}, {"max", config.max_length}}},
      {"splits", {{"train", config.train}, {"valid", config.valid}, {"test", config.test}}},
      {"lexicon",
       {{"nouns", list(lex.nouns, true)}, {"adjectives", list(lex.adjectives, false)},
        {"transitive_verbs", list(lex.transitive, false)},
        {"intransitive_verbs", list(lex.intransitive, false)},
        {"prepositions", list(lex.prepositions, false)}}},
  };
}

}  // namespace

std::vector<std::string> SyntheticConfig::problems() const {
  std::vector<std::string> p;
  auto positive = [&](int64_t v, const char* name) {
    if (v <= 0) p.push_back(std::string(name) + " must be positive, got " + std::to_string(v));
  };
  positive(train, "--train");
  positive(valid, "--valid");
  positive(test, "--test");
  positive(nouns, "--nouns");
  positive(adjectives, "--adjectives");
  positive(transitive_verbs, "--transitive-verbs");
  positive(intransitive_verbs, "--intransitive-verbs");
  positive(prepositions, "--prepositions");
  // The shortest sentence ("the N Vs") has 3 words; 3 <= min <= max keeps rejection finite.
  if (min_length < 3 || max_length < min_length)
    p.push_back("lengths must satisfy 3 <= --min-length <= --max-length, got " +
                std::to_string(min_length) + " and " + std::to_string(max_length));
  // Stems are distinct: keeps the draw of fresh ones (from > 25,000 candidates) quick.
  if (nouns + adjectives + transitive_verbs + intransitive_verbs + prepositions > 2000)
    p.push_back("at most 2000 lexicon entries in all");
  return p;
}

SyntheticTask generate_synthetic_task(const SyntheticConfig& config) {
  core::throw_if_problems(config.problems());
  Rng rng(config.seed);
  const Lexicon lex = make_lexicon(config, rng);
  SyntheticTask task;
  task.grammar = grammar_json(config, lex);
  task.train = sentences(config, lex, rng, config.train);
  task.valid = sentences(config, lex, rng, config.valid);
  task.test = sentences(config, lex, rng, config.test);
  return task;
}

void write_synthetic_task(const SyntheticTask& task, const std::string& dir) {
  std::filesystem::create_directories(dir);
  auto lines = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& l : v) s += l + "\n";
    return s;
  };
  const std::pair<const char*, const SyntheticSplit*> splits[] = {
      {"train", &task.train}, {"valid", &task.valid}, {"test", &task.test}};
  for (const auto& [name, split] : splits) {
    core::write_file_atomic(dir + "/" + name + ".src", lines(split->src));
    core::write_file_atomic(dir + "/" + name + ".tgt", lines(split->tgt));
  }
  core::write_file_atomic(dir + "/grammar.json", task.grammar.dump(1) + "\n");
  std::string readme =
      "# normlab synthetic translation task (seed " + task.grammar["seed"].dump() + ")\n\n"
      "Generated by `normlab synth`; the grammar is described in docs/synthetic.md and, with the\n"
      "whole lexicon, in grammar.json. Files: {train,valid,test}.{src,tgt}, one sentence a line.\n"
      "Train on it with `normlab train --train DIR/train --valid DIR/valid --src src --tgt tgt`.\n\nRules:\n";
  for (const auto& r : task.grammar["rules"]) readme += "- " + r.get<std::string>() + "\n";
  core::write_file_atomic(dir + "/README.md", readme);
}

}  // namespace normlab::data
