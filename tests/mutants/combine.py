#!/usr/bin/env python3
"""Joins the group runs of one crate into one record in the crate's order.

usage: combine.py LIST.json GROUP... > tests/mutants/runs/CRATE-COMMIT.tsv

LIST.json is `cargo mutants -p CRATE --list --json` (with the run's
exclusions) on the commit the groups ran at: the order a whole-crate run
would give, so a line's index modulo 10 is still its round-robin shard.
A GROUP is a cargo-mutants output folder or a record written by
record.py. A mutant no group holds is `NotRun`; a mutant two groups hold
is an error, as is a group's mutant the list does not name (a group run
on another commit, where lines moved).
"""
import json, sys


def records(d):
    """(name, outcome) pairs of one group."""
    if d.endswith('.tsv'):
        for line in open(d):
            s, n = line.rstrip('\n').split('\t', 1)
            yield n, s
        return
    res = {}
    for oc in json.load(open(d + '/mutants.out/outcomes.json'))['outcomes']:
        sc = oc['scenario']
        if isinstance(sc, dict) and 'Mutant' in sc:
            res[sc['Mutant']['name']] = oc['summary']
    for m in json.load(open(d + '/mutants.out/mutants.json')):
        yield m['name'], res.get(m['name'], 'NotRun')


listing = [m['name'] for m in json.load(open(sys.argv[1]))]
known = set(listing)
got = {}
for g in sys.argv[2:]:
    for n, s in records(g):
        if n not in known:
            sys.exit(f'{g}: {n!r} is not in {sys.argv[1]} (another commit?)')
        if n in got:
            sys.exit(f'{g}: {n!r} is in two groups')
        got[n] = s
for n in listing:
    print(f"{got.get(n, 'NotRun')}\t{n}")
