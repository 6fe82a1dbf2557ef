#!/usr/bin/env python3
"""Check that every relative Markdown link (and #anchor) in README.md and docs/*.md resolves."""
import re, sys, pathlib, unicodedata
root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
files = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
link = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
def slug(h):
    h = h.strip().lower()
    h = re.sub(r"[^\w\- ]", "", h)  # GitHub: drop punctuation, keep word chars, '-', ' '
    return h.replace(" ", "-")
def anchors(p):
    out, seen = set(), {}
    text = re.sub(r"```.*?```", "", p.read_text(), flags=re.S)
    for m in re.finditer(r"^#{1,6}\s+(.*)$", text, flags=re.M):
        s = slug(m.group(1)); n = seen.get(s, 0); seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out
bad = 0
for f in files:
    text = re.sub(r"```.*?```", "", f.read_text(), flags=re.S)
    for m in link.finditer(text):
        target = m.group(1)
        if re.match(r"^[a-z]+:", target): continue
        path, _, frag = target.partition("#")
        dest = (f.parent / path).resolve() if path else f
        if not dest.exists():
            print(f"{f.relative_to(root)}: missing file {target}"); bad += 1; continue
        if root not in dest.parents and dest != root:
            print(f"{f.relative_to(root)}: outside the repository {target}"); bad += 1; continue
        if frag and dest.suffix == ".md" and frag not in anchors(dest):
            print(f"{f.relative_to(root)}: missing anchor {target}"); bad += 1
print(f"{len(files)} files checked, {bad} bad links"); sys.exit(1 if bad else 0)
