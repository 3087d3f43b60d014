#!/usr/bin/env bash
# pack.sh OUT.tar.gz -- the student kit, for `make dist` (run from the kit's root).
#
# What ships: the files git tracks (so no build output or local file slips in), as they are
# in the working tree, without reference/ (the solutions), tests/ (the kit's own tests and
# the known submissions), .ci/, grader/dist/ itself, and the grader's instructor packages
# (grader/stencil_grader/classes/: class grading; instructor/: the tour, calibration, tuning,
# the handouts' figures; their page templates and grader/requirements.txt), whose commands grade.py
# then does not offer.  Then, in the kit:
#   - README.md is grader/dist/README.md and Makefile is grader/dist/Makefile (the student
#     kit's own: its `make help` lists only what works without the solutions and the tests);
#   - the Markdown files' parts marked instructor-only are left out (the marks are explained
#     in grader/dist/instructor_only.py): what documents the instructor's parts (the known
#     submissions, calibration, the kit's tests) is written once, in the full kit, and the
#     student kit does not mention what it does not ship.
# Every file lies under stencil-lab-kit/ in the archive.  Exit status 2, and nothing
# written, when any of this cannot be done.
set -euo pipefail

fail() { echo "make dist: $*" >&2; exit 2; }

out=${1:?usage: pack.sh OUT.tar.gz}
git rev-parse --is-inside-work-tree >/dev/null 2>&1 \
  || fail "not a git checkout: the student kit is made of the files git tracks; run it in a clone of the kit"
for f in README.md Makefile; do
  test -f "grader/dist/$f" || fail "grader/dist/$f is missing"
done

mkdir -p "$(dirname "$out")"
stage=$(mktemp -d "$(dirname "$out")/.stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
kit="$stage/stencil-lab-kit"
mkdir "$kit"

# Tracked files that still exist (one deleted in the working tree is not shipped).
git ls-files -z | grep -z -v -e '^reference/' -e '^tests/' -e '^\.ci/' -e '^grader/dist/' \
    -e '^grader/stencil_grader/classes/' -e '^grader/stencil_grader/instructor/' -e '^grader/requirements.txt$' \
    -e '^grader/stencil_grader/templates/\(base\|class\|student\|pair\)\.html$' \
  | while IFS= read -r -d '' f; do if [ -e "$f" ]; then printf '%s\0' "$f"; fi; done > "$stage/files"
[ -s "$stage/files" ] || fail "git lists no file to ship"
tar -cf - --null -T "$stage/files" | tar -xf - -C "$kit"
cp grader/dist/README.md "$kit/README.md"
cp grader/dist/Makefile "$kit/Makefile"

# The instructor-only parts of the Markdown files (grader/dist/instructor_only.py).
here=$(pwd)
(cd "$kit" && find . -name '*.md' -print0 | { xargs -0 -r grep -l -Z -F '<!-- instructor-only' || true; } \
  | xargs -0 -r "${PYTHON:-python3}" "$here/grader/dist/instructor_only.py") || exit 2

tar czf "$stage/kit.tar.gz" -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner stencil-lab-kit
mv "$stage/kit.tar.gz" "$out"
echo "wrote $out: $(tr -cd '\0' < "$stage/files" | wc -c) files (no reference solutions, no kit tests, no" \
  "instructor tools; README.md and Makefile are the student kit's, from grader/dist/)"
