#!/usr/bin/env python3
"""Writes a cargo-mutants run as a record kept in the repository.

usage: record.py RUN_DIR > tests/mutants/runs/CRATE-COMMIT.tsv

One line per mutant, in the order of mutants.json (so a line's index
modulo 10 is its round-robin shard): the outcome, a tab, the mutant's
name. A mutant the run did not reach is `NotRun`. The run's folder lives
outside the repository and a machine can lose it; the record cannot.
"""
import json, sys
d = sys.argv[1]
outcomes = {}
for oc in json.load(open(d + '/mutants.out/outcomes.json'))['outcomes']:
    sc = oc['scenario']
    if isinstance(sc, dict) and 'Mutant' in sc:
        outcomes[sc['Mutant']['name']] = oc['summary']
for m in json.load(open(d + '/mutants.out/mutants.json')):
    print(f"{outcomes.get(m['name'], 'NotRun')}\t{m['name']}")
