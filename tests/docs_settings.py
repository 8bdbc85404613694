"""docs/reference/settings.md's table of every setting, made from
``hotkv serve --help-config`` (hotkv's own config table), so the page cannot
drift from the code: tests/test_docs.py compares the two.

    python tests/docs_settings.py --write     # regenerate the table in the page
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "reference", "settings.md")
BEGIN = "<!-- settings table: made by `python tests/docs_settings.py --write`; do not edit -->"
END = "<!-- end of settings table -->"


def help_config() -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    return subprocess.run([sys.executable, "-m", "hotkv", "serve", "--help-config"],
                          capture_output=True, text=True, check=True, env=env,
                          cwd=ROOT).stdout


def settings() -> list[tuple[str, str, list[str], list[str]]]:
    """(name, default, flags, aliases) for every setting, in --help-config's order."""
    rows = []
    for line in help_config().splitlines():
        alias = re.match(r"^\s+alias(?:es)?:\s*(.+)$", line)
        if alias and rows:
            rows[-1][3].extend(a.strip() for a in alias.group(1).split(","))
            continue
        m = re.match(r"^([a-z0-9][a-z0-9_-]*)\s{2,}(.*?)((?:\s+\((?:[a-z ]+)\))*)\s*$", line)
        if not m:
            continue
        flags = re.findall(r"\(([a-z ]+)\)", m.group(3))
        rows.append((m.group(1), m.group(2), flags, []))
    return rows


def setting_names() -> list[str]:
    names = []
    for name, _, _, aliases in settings():
        names.append(name)
        names.extend(aliases)
    return names


def _cell(text: str) -> str:
    return "`%s`" % text.replace("|", "\\|") if text else ""


def table() -> str:
    lines = [BEGIN, "", "| setting | default | in hotkv | aliases |", "|---|---|---|---|"]
    for name, default, flags, aliases in settings():
        acts = "inert" if "inert" in flags else "acts"
        if "immutable" in flags:
            acts += ", immutable"
        lines.append("| `%s` | %s | %s | %s |" % (
            name, _cell(default), acts, ", ".join("`%s`" % a for a in aliases)))
    lines += ["", END]
    return "\n".join(lines)


def current() -> str:
    with open(PAGE, encoding="utf-8") as f:
        text = f.read()
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < 0:
        return ""
    return text[start:end + len(END)]


def write() -> None:
    with open(PAGE, encoding="utf-8") as f:
        text = f.read()
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < 0:
        raise SystemExit("%s has no %r ... %r markers" % (PAGE, BEGIN, END))
    text = text[:start] + table() + text[end + len(END):]
    with open(PAGE, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    else:
        print(table())
