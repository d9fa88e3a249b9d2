#!/usr/bin/env python3
"""normlab lm-data end to end on a hand-made data folder (two editions of one play, a Milton
work, a Wikipedia dump with a redirect and a talk page): outputs, grouping, counts; broken inputs
give exit 2 and one line naming the file; on ../shared/data/lm two runs are byte-identical."""
import bz2
import gzip
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cli_setup  # noqa: E402

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def gz(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with gzip.open(path, "wb") as f:
        f.write(text.encode("utf-8"))


def run(normlab, *args):
    return subprocess.run([normlab, "lm-data", *args], capture_output=True, text=True)


def main():
    args, w = cli_setup.start("data", add_arguments=None)
    d = w("data")
    meta = ("[play_gut]\nurl = http://www.gutenberg.org/dirs/etext98/2ws0110.txt\ntitle = Play\n\n"
            "[play_f_gut_f]\nurl = http://www.gutenberg.org/dirs/etext00/0ws0110.txt\ntitle = The Play\n\n"
            "[poem_gut]\nurl = http://www.gutenberg.org/dirs/etext98/2ws9910.txt\ntitle = Poem\n")
    gz(f"{d}/shakespeare/metadata.txt.gz", meta)
    gz(f"{d}/shakespeare/play_gut.txt.gz", "PLAY\n\nHam.\nTo be, or not to be.\n")
    gz(f"{d}/shakespeare/play_f_gut_f.txt.gz", "The Play\n\n  Ham. To be, or not to be\n")
    gz(f"{d}/shakespeare/poem_gut.txt.gz", "A POEM\n\nShall I compare thee\n")
    gz(f"{d}/milton/metadata.txt.gz", "[pl_gut]\nurl = x\ntitle = Paradise Lost\n")
    gz(f"{d}/milton/pl_gut.txt.gz", "Of Mans First Disobedience,   1\nand the Fruit\n")
    gz(f"{d}/milton/pl.txt.gz", "Of Mans First Disobedience,   1\nand the Fruit\n")  # same text
    xml = ("<mediawiki>"
           "<page><title>Cat</title><ns>0</ns><revision><text>'''Cats''' are [[mammal|mammals]]."
           "{{Infobox|x}}&lt;ref&gt;r&lt;/ref&gt;\n\n== Diet ==\nMice &amp;amp; fish.</text></revision></page>"
           "<page><title>Kitty</title><ns>0</ns><redirect title=\"Cat\" /><text>#REDIRECT [[Cat]]</text></page>"
           "<page><title>Talk:Cat</title><ns>1</ns><text>talk</text></page>"
           "<page><title>Dog</title><ns>0</ns><text>Dogs bark.</text></page></mediawiki>")
    os.makedirs(f"{d}/wikipedia", exist_ok=True)
    with open(f"{d}/wikipedia/dump.xml.bz2", "wb") as f:
        f.write(bz2.compress(xml.encode("utf-8")))

    r = run(args.normlab, "--data", d, "--out", w("out"))
    check(r.returncode == 0, f"lm-data failed: {r.stderr}")
    m = json.load(open(w("out/manifest.json")))
    docs = {doc["name"]: (split, doc) for split, v in m["splits"].items() for doc in v["document_list"]}
    check(sorted(docs) == ["milton/pl_gut", "shakespeare/play_f_gut_f", "shakespeare/play_gut",
                           "shakespeare/poem_gut", "wikipedia/Cat", "wikipedia/Dog"], f"documents {sorted(docs)}")
    check(docs["shakespeare/play_gut"][0] == docs["shakespeare/play_f_gut_f"][0], "editions split apart")
    check(docs["shakespeare/play_gut"][1]["group"] == docs["shakespeare/play_f_gut_f"][1]["group"],
          "editions not grouped")
    wiki = m["sources"][2]
    check((wiki["pages"], wiki["redirects_skipped"], wiki["other_namespaces_skipped"]) == (4, 1, 1), f"wiki {wiki}")
    check(m["sources"][1]["duplicates_dropped"] == ["milton/pl.txt.gz (same text as milton/pl_gut.txt.gz)"],
          f"milton {m['sources'][1]}")
    split, cat = docs["wikipedia/Cat"]
    text = open(w(f"out/{split}.txt"), encoding="utf-8").read()
    check(text[cat["offset"]:cat["offset"] + cat["bytes"]] == "Cat\n\nCats are mammals.\n\nDiet\nMice & fish.\n",
          "Cat article: " + repr(text[cat["offset"]:cat["offset"] + cat["bytes"]]))
    total = sum(v["words"] for v in m["splits"].values())
    check(total == sum(doc["words"] for _, doc in docs.values()), "split word totals")
    check(m["cleaning_version"].startswith("lm-text-"), "cleaning version")

    # Broken inputs: one line on stderr naming the file, exit 2.
    with open(f"{d}/wikipedia/dump.xml.bz2", "wb") as f:
        f.write(bz2.compress(xml.encode("utf-8"))[:60])
    r = run(args.normlab, "--data", d, "--out", w("bad"))
    check(r.returncode == 2 and "dump.xml.bz2" in r.stderr and r.stderr.count("\n") == 1, f"truncated bz2: {r}")
    r = run(args.normlab, "--data", w("nowhere"), "--out", w("bad"), "--sources", "milton")
    check(r.returncode == 2 and "nowhere" in r.stderr and r.stderr.count("\n") == 1, f"missing folder: {r}")
    r = run(args.normlab, "--data", d, "--out", w("bad"), "--sources", "milton,poetry")
    check(r.returncode == 2 and "poetry" in r.stderr, f"unknown source: {r}")
    check(not os.path.exists(w("bad/train.txt")), "a failed run left output")

    real = os.path.join(args.data, "lm")
    if os.path.isdir(real):
        for run_dir in ("real1", "real2"):
            r = run(args.normlab, "--data", real, "--out", w(run_dir))
            check(r.returncode == 0, f"real data: {r.stderr}")
        for f in ("train.txt", "valid.txt", "test.txt", "manifest.json"):
            check(open(w("real1/" + f), "rb").read() == open(w("real2/" + f), "rb").read(), f"{f} differs")
    else:
        print(f"SKIP real data: no {real}")

    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
