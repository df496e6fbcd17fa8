#!/usr/bin/env python3
"""Prints `--re` arguments that select, on a later commit, the mutants a
run missed: same file and description, any line and column."""
import re, sys
def esc(s): return ''.join('\\' + c if c in '\\.+*?()|[]{}^$' else c for c in s)
seen = set()
for line in open(sys.argv[1]):
    line = line.strip()
    if not line: continue
    f, rest = line.split(':', 1)
    desc = re.sub(r'^\d+:\d+: ', '', rest)
    pat = '^' + esc(f) + r':\d+:\d+: ' + esc(desc) + '$'
    if pat in seen: continue
    seen.add(pat); print('--re'); print(pat)
