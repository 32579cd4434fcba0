"""Writes the KJV text the default model (models/ridgeline-tiny) never saw in training: every 50th chapter
(chapter index % 50 == 25, 24 of 1189), as tools/train_tiny.py splits it. Verse references are stripped, one
verse a line, each chapter followed by <|endoftext|> (as the training stream). For `ridgeline perplexity`.

usage: bible -f "Gen1:1-Rev22:21" | python3 bench/kjv_heldout.py > heldout.txt   (Debian package bible-kjv)"""
import re
import sys

VERSE_RE = re.compile(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$")
EVERY, PHASE = 50, 25

chapters = []
for num, line in enumerate(sys.stdin, 1):
    line = line.rstrip("\n")
    if not line.strip():
        continue
    m = VERSE_RE.match(line)
    if not m:
        sys.exit(f"line {num}: not a '<Book><chapter>:<verse> text' line: {line[:60]!r}")
    book, chapter, text = m.group(1), int(m.group(2)), m.group(4).strip()
    if not chapters or chapters[-1][0] != book or chapters[-1][1] != chapter:
        chapters.append((book, chapter, []))
    chapters[-1][2].append(text)
held = [c for i, c in enumerate(chapters) if i % EVERY == PHASE]
sys.stdout.write("".join("\n".join(c[2]) + "\n<|endoftext|>" for c in held))
print(f"{len(held)} of {len(chapters)} chapters held out", file=sys.stderr)
