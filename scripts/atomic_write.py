"""The scripts' one way of writing a result file: the whole text into PATH.tmp, then renamed over
PATH, so that no reader ever sees it half-written."""
import os


def write_text(path, text):
    """`text` into `path` through PATH.tmp and a rename."""
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        f.write(text)
    os.replace(tmp, path)
