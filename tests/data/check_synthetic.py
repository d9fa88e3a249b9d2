#!/usr/bin/env python3
"""`normlab synth` against an independent re-implementation of its grammar: every source
sentence is parsed here with the lexicon of grammar.json and translated by the rules written
out below (docs/synthetic.md); the target line must be exactly that translation. Also: the
same seed gives the same bytes, another seed other bytes, lengths 3..30, equal word counts,
the lexicon sizes, every rule exercised, and `normlab train --src src --tgt tgt` reads it."""
import filecmp
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cli_setup  # noqa: E402

FILES = [f"{s}.{l}" for s in ("train", "valid", "test") for l in ("src", "tgt")] + ["grammar.json", "README.md"]


class Grammar:
    """The rules, re-implemented from docs/synthetic.md; only words come from grammar.json."""

    def __init__(self, g):
        lex = g["lexicon"]
        self.nouns = {e["src"]: e for e in lex["nouns"]}
        self.adjectives = {e["src"]: e for e in lex["adjectives"]}
        self.transitive = {e["src"]: e for e in lex["transitive_verbs"]}
        self.intransitive = {e["src"]: e for e in lex["intransitive_verbs"]}
        self.prepositions = {e["src"]: e for e in lex["prepositions"]}
        self.seen = {k: 0 for k in ("plural", "coordinated", "subordinate", "nested", "adjectives2", "pp",
                                    "intransitive", "m", "f", "n")}

    def parse(self, words):
        self.w, self.i = words, 0
        out = self.clause(0)
        assert self.i == len(words), f"trailing words {words[self.i:]}"
        return out

    def peek(self):
        return self.w[self.i] if self.i < len(self.w) else None

    def take(self):
        self.i += 1
        return self.w[self.i - 1]

    def noun_phrase(self):
        det = self.take()
        assert det in ("the", "a", "some"), f"article expected, got {det}"
        adjs = []
        while self.peek() in self.adjectives:
            adjs.append(self.adjectives[self.take()])
        word = self.take()
        if word in self.nouns:
            noun, plural = self.nouns[word], False
        else:
            assert word.endswith("s") and word[:-1] in self.nouns, f"noun expected, got {word}"
            noun, plural = self.nouns[word[:-1]], True
        assert (det == "a" and not plural) or (det == "some" and plural) or det == "the", (det, word)
        g = noun["gender"]
        self.seen[g] += 1
        self.seen["plural"] += plural
        self.seen["adjectives2"] += len(adjs) == 2
        if det == "the":
            article = "li" if plural else {"m": "lo", "f": "la", "n": "le"}[g]
        else:
            article = "dei" if plural else {"m": "un", "f": "una", "n": "une"}[g]
        ending = {"m": "o", "f": "a", "n": "e"}[g] + ("s" if plural else "")
        tgt = [article, noun["tgt"] + ("i" if plural else "")] + [a["tgt"] + ending for a in reversed(adjs)]
        return tgt, plural

    def argument(self):
        tgt, plural = self.noun_phrase()
        if self.peek() == "and":
            self.take()
            more, _ = self.noun_phrase()
            self.seen["coordinated"] += 1
            return tgt + ["e"] + more, True
        return tgt, plural

    def clause(self, depth):
        subject, plural = self.argument()
        verb = self.take()
        stem = verb if plural else verb[:-1]
        assert plural or verb.endswith("s"), f"singular subject needs verb+s: {verb}"
        if stem in self.transitive:
            v, obj = self.transitive[stem], self.argument()[0]
        else:
            assert stem in self.intransitive, f"verb expected, got {verb}"
            v, obj = self.intransitive[stem], []
            self.seen["intransitive"] += 1
        pp = []
        if self.peek() in self.prepositions:
            pp = [self.prepositions[self.take()]["tgt"]] + self.noun_phrase()[0]
            self.seen["pp"] += 1
        tv = v["tgt"] + ("n" if plural else "t")
        out = subject + [tv] + obj + pp if depth == 0 else subject + obj + pp + [tv]
        if self.peek() == "that":
            self.take()
            assert depth < 2, "subordinate clauses nest at most 2 deep"
            self.seen["subordinate"] += 1
            self.seen["nested"] += depth == 1
            out += ["ke"] + self.clause(depth + 1)
        return out


def lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def main():
    args, w = cli_setup.start()
    check = cli_setup.Checks()

    def synth(out, seed, *more):
        r = subprocess.run([args.normlab, "synth", "--out", w(out), "--seed", str(seed), "--train", "3000",
                            "--valid", "200", "--test", "200", *more], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr

    synth("a", 7)
    synth("b", 7)
    synth("c", 8)
    check(all(filecmp.cmp(w("a/" + f), w("b/" + f), shallow=False) for f in FILES), "same seed: same bytes")
    check(all(not filecmp.cmp(w("a/" + f), w("c/" + f), shallow=False) for f in FILES if f != "README.md"),
          "another seed: other bytes in every file")

    with open(w("a/grammar.json"), encoding="utf-8") as f:
        g = json.load(f)
    lex = g["lexicon"]
    sizes = {k: len(v) for k, v in lex.items()}
    check(sizes == {"nouns": 300, "adjectives": 100, "transitive_verbs": 80, "intransitive_verbs": 40,
                    "prepositions": 12}, f"lexicon sizes {sizes}")
    src_words = [e["src"] for v in lex.values() for e in v]
    tgt_words = [e["tgt"] for v in lex.values() for e in v]
    check(len(set(src_words)) == len(src_words) and len(set(tgt_words)) == len(tgt_words), "distinct words")
    check({e["gender"] for e in lex["nouns"]} == {"m", "f", "n"}, "three genders")

    grammar = Grammar(g)
    n_pairs = 0
    for split, n in (("train", 3000), ("valid", 200), ("test", 200)):
        src, tgt = lines(w(f"a/{split}.src")), lines(w(f"a/{split}.tgt"))
        check(len(src) == n and len(tgt) == n, f"{split}: {len(src)}/{len(tgt)} lines, expected {n}")
        for k, (s, t) in enumerate(zip(src, tgt)):
            sw, tw = s.split(" "), t.split(" ")
            if not 3 <= len(sw) <= 30 or len(sw) != len(tw):
                check.failures.append(f"{split}:{k + 1}: {len(sw)} source / {len(tw)} target words")
                continue
            try:
                expected = grammar.parse(sw)
            except AssertionError as e:
                check.failures.append(f"{split}:{k + 1}: source does not parse ({e}): {s}")
                continue
            if expected != tw:
                check.failures.append(f"{split}:{k + 1}: target differs from the rules:\n  {t}\n  {' '.join(expected)}")
            n_pairs += 1
    check(all(v >= 20 for v in grammar.seen.values()), f"every rule exercised at least 20 times: {grammar.seen}")
    src_all = lines(w("a/train.src"))
    lengths = [len(s.split()) for s in src_all]
    check(min(lengths) == 3 and max(lengths) >= 25, f"lengths span 3..{max(lengths)}")

    # normlab train reads the files with --src src --tgt tgt.
    r = subprocess.run([args.normlab, "train", "--train", w("a/train"), "--valid", w("a/valid"), "--src", "src",
                        "--tgt", "tgt", "--vocab-size", "400", "--d-model", "16", "--ffn-dim", "32", "--heads", "2",
                        "--encoder-layers", "1", "--decoder-layers", "1", "--max-steps", "2", "--max-tokens", "2000",
                        "--threads", "1", "--device", "cpu", "--out", w("run")], capture_output=True, text=True)
    check(r.returncode == 0 and os.path.exists(w("run/metrics.jsonl")), f"normlab train on it: {r.stderr[-400:]}")

    return check.finish(f"{n_pairs} pairs match the re-implemented grammar", show=20)


if __name__ == "__main__":
    sys.exit(main())
