#!/usr/bin/env python3
"""Per-shard scores of a whole-crate cargo-mutants run (round-robin, n=10).

usage: shards.py RUN [RERUN ...] [--explained FILE] [--rename OLD_FILE NEW_FILE]
                 [--rename-fn OLD_FN NEW_FN] [--gone RE]
--rename and --rename-fn match a mutant to its re-run where a later commit
moved its code to another file or function (`... in instant_after` ->
`... in after`).
--gone RE names mutants (by their first-run name, with line:col) whose code
a later commit removed: a simpler form of the code that has no such
operator. Only a mutant still missed after the re-runs can be gone; it is
counted in the "gone" column and left out of the score (it no longer
exists). Each such commit is named in TESTING.md.
A RUN is a cargo-mutants output folder or a record written by record.py
(a .tsv in tests/mutants/runs/).
A mutant's shard is its index in mutants.json modulo 10, which is how
`--shard k/10 --sharding round-robin` picks them. A re-run (of missed
mutants, on a later commit) overrides by file + description (the name
without line:col), in order.
"""
import json, re, sys, collections
args = sys.argv[1:]
explained = set()
gone = None
if '--gone' in args:
    i = args.index('--gone'); gone = re.compile(args[i+1]); del args[i:i+2]
fn_renames = []
while '--rename-fn' in args:
    i = args.index('--rename-fn'); fn_renames.append((args[i+1], args[i+2])); del args[i:i+3]
renames = []
while '--rename' in args:
    i = args.index('--rename'); renames.append((args[i+1], args[i+2])); del args[i:i+3]
if '--explained' in args:
    i = args.index('--explained'); f = args[i+1]; del args[i:i+2]
    explained = {l.strip() for l in open(f) if l.strip() and not l.startswith('#')}
run, reruns = args[0], args[1:]
def key(name):
    f, rest = name.split(':', 1)
    for a, b in renames:
        if f == a: f = b
    desc = re.sub(r'^\d+:\d+: ', '', rest)
    for a, b in fn_renames:
        if desc.endswith(' in ' + a): desc = desc[:-len(a)] + b
    return f + ' ' + desc
def records(d):
    """(name, outcome) pairs in mutants.json order."""
    if d.endswith('.tsv'):
        for l in open(d):
            s, n = l.rstrip('\n').split('\t', 1)
            yield n, s
        return
    res = {}
    for oc in json.load(open(d + '/mutants.out/outcomes.json'))['outcomes']:
        sc = oc['scenario']
        if isinstance(sc, dict) and 'Mutant' in sc:
            res[sc['Mutant']['name']] = oc['summary']
    for m in json.load(open(d + '/mutants.out/mutants.json')):
        yield m['name'], res.get(m['name'], 'NotRun')
def load(d):
    return {n: s for n, s in records(d) if s != 'NotRun'}
mutants = [n for n, _ in records(run)]
first = load(run)
# Mutants of the first run by key, in order: a re-run selects by file and
# description, so it holds every mutant of a key (the caught ones too), and
# the n-th of a key in the re-run is the n-th in the first run.
by_key = collections.defaultdict(list)
for i, n in enumerate(mutants):
    by_key[key(n)].append(i)
state = [first.get(n, 'NotRun') for n in mutants]
KILLS = ('CaughtMutant', 'Timeout', 'Unviable')
for r in reruns:
    got = collections.defaultdict(list)
    later = load(r)
    for n, s in later.items():
        got[key(n)].append(s)
    # The same name (file, line, column, description): the same mutant,
    # where the file did not change in between.
    for i, n in enumerate(mutants):
        o = later.get(n)
        if state[i] == 'MissedMutant' and o in KILLS:
            state[i] = 'Killed' if o != 'Unviable' else 'Unviable'
    for k, outs in got.items():
        idx = by_key.get(k, [])
        # A count that differs (code added or removed, a re-run that left
        # some out) cannot be paired: those stay as the first run had them.
        pairs = zip(idx, outs) if len(outs) == len(idx) else ()
        for i, o in pairs:
            if state[i] == 'MissedMutant' and o in KILLS:
                state[i] = 'Killed' if o != 'Unviable' else 'Unviable'
for i, n in enumerate(mutants):
    if gone and gone.search(n) and state[i] == 'MissedMutant':
        state[i] = 'Gone'
rows = collections.defaultdict(collections.Counter)
still = []
for i, n in enumerate(mutants):
    s = state[i]
    if s == 'MissedMutant' and key(n) in explained:
        s = 'Explained'
    if s == 'MissedMutant': still.append(n)
    rows[i % 10][s] += 1
print('| shard | mutants | caught | timeout | killed after | unviable | gone | missed, explained | missed | score | score, explained as unviable |')
print('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |')
tot = collections.Counter()
for k in range(10):
    c = rows[k]; tot.update(c)
def line(label, c):
    good = c['CaughtMutant'] + c['Timeout'] + c['Killed']
    viable = good + c['MissedMutant'] + c['Explained']
    sc = 100 * good / viable if viable else 100
    sc2 = 100 * good / (viable - c['Explained']) if viable - c['Explained'] else 100
    n = sum(c.values())
    print(f"| {label} | {n} | {c['CaughtMutant']} | {c['Timeout']} | {c['Killed']} | {c['Unviable']} | {c['Gone']} | {c['Explained']} | {c['MissedMutant']} | {sc:.1f} % | {sc2:.1f} % |" + (f" ({c['NotRun']} not run)" if c['NotRun'] else ''))
for k in range(10): line(f'{k}/10', rows[k])
line('crate', tot)
print('\nstill missed:'); print('\n'.join(still))
