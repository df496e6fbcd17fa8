#!/bin/bash
# Whole-crate mutation run of stallwarden-sources (issue 26, R10.4), one
# group of files at a time, each against the test binaries that exercise
# it: a mutant's test run then costs what its group's tests cost, not the
# whole suite's. Run it in a clone of its own (mutants are applied in
# place there). A mutant a group's tests miss is then re-tested against
# the whole suite (rerun.py), so a group never hides a kill.
#
#   git clone . /tmp/sg-mut && cd /tmp/sg-mut && bash tests/mutants/sources-groups.sh OUT [GROUP...]
set -u
out=${1:?output folder}; shift
export PROPTEST_CASES=32 CARGO_PROFILE_DEV_DEBUG=0
common=(-p stallwarden-sources --no-config --in-place --profile mutants --baseline skip --timeout 40
        -E '<impl fmt::Debug for ' --cargo-test-arg=--lib)
declare -A files tests
files[output]="sources/src/output.rs";                         tests[output]="output"
files[notify]="sources/src/notify/*.rs";                       tests[notify]="notify"
files[filemcp]="sources/src/file.rs sources/src/mcp.rs";       tests[filemcp]="file_mcp hostile"
files[args]="sources/src/args/*.rs";                           tests[args]="args hostile recorded agent"
files[agent]="sources/src/agent/*.rs sources/src/tools.rs sources/src/background.rs sources/src/refusal.rs sources/src/lib.rs"
tests[agent]="agent agent_real background recorded args"
files[procs]="sources/src/procs/*.rs";                         tests[procs]="blocked cpu_exact net procs procs_log"
groups=("$@"); [ ${#groups[@]} -eq 0 ] && groups=(output notify filemcp args agent procs)
for g in "${groups[@]}"; do
  args=()
  for f in ${files[$g]}; do args+=(-f "$f"); done
  for t in ${tests[$g]}; do args+=(--cargo-test-arg=--test --cargo-test-arg="$t"); done
  echo "== $g $(date +%T)"
  cargo mutants "${common[@]}" "${args[@]}" -o "$out/$g" > "$out/$g.log" 2>&1
done
