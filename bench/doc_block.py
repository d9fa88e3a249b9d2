"""The benchmarks' one way of writing their table into docs/performance.md: the text between
`<!-- bench:NAME:begin -->` and `<!-- bench:NAME:end -->` is replaced (or appended, under
`heading` when given), through a temporary file renamed over the page; and the one way of naming
the machine in it."""
import os
import platform


def cpu_name():
    """The CPU's model name from /proc/cpuinfo (else platform.processor())."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), platform.processor())
    except OSError:
        return platform.processor()


def write_block(path, name, text, heading=None):
    begin, end = f"<!-- bench:{name}:begin -->", f"<!-- bench:{name}:end -->"
    old = open(path).read() if os.path.exists(path) else "# Performance\n"
    block = f"{begin}\n{text}{end}"
    if begin in old:
        new = old[: old.index(begin)] + block + old[old.index(end) + len(end):]
    else:
        new = old.rstrip("\n") + "\n\n" + (f"## {heading}\n\n" if heading else "") + block + "\n"
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(new)
    os.replace(tmp, path)
