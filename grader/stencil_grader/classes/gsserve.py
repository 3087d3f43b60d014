#!/usr/bin/env python3
"""Gradescope's autograder of one lab of the stencil lab kit: it serves the grade the kit already
computed on the instructor's GPUs (grade.py class); it grades nothing and runs no student code.

This file is not imported by the kit: `grade.py gradescope-autograder` (gsautograder.py) copies it
into the autograder zip beside index.json and the class's results.json files.  Gradescope unpacks
that zip into /autograder/source and runs run_autograder, which runs this file, once per
submission.  It reads who submitted and which submission this is from
/autograder/submission_metadata.json (users[].email, users[].sid and the submission's "id":
https://gradescope-autograders.readthedocs.io/en/latest/submission_metadata/), finds the first
submitter in index.json (the e-mail, case-insensitive, else the SID the class roster holds),
and, when this submission's id is the one the kit graded, copies that grade's results.json to
/autograder/results/results.json, the file Gradescope reads
(https://gradescope-autograders.readthedocs.io/en/latest/specs/).

A submitter the zip has no grade of, or a submission other than the one graded (a resubmission
after the export), gets no results file and a failed run whose output says "not graded yet":
Gradescope shows "The autograder failed to execute correctly", never a 0 that nobody graded,
nor the grade of another kernel.cu.  Standard library only (Gradescope's base image has Python 3; setup.sh installs it where
missing).  AUTOGRADER_ROOT replaces /autograder (the kit's tests run it in a folder).
"""

from __future__ import annotations          # Python 3.7 and later (Ubuntu 20.04 images)

import json
import os
import shutil
import sys
from pathlib import Path


def find(index: dict, users: list) -> tuple[str, dict] | None:
    """(who, their index entry: {"grade", "submission"}) of the first user index.json knows, else None."""
    for user in users:
        email = str(user.get("email") or "").strip().lower()
        sid = str(user.get("sid") or "").strip()
        if email and email in index["by_email"]:
            return email, index["by_email"][email]
        if sid and sid in index["by_sid"]:
            return f"SID {sid}", index["by_sid"][sid]
    return None


def main() -> int:
    root = Path(os.environ.get("AUTOGRADER_ROOT", "/autograder"))
    here = Path(__file__).resolve().parent
    index = json.loads((here / "index.json").read_text(encoding="utf-8"))
    metadata = root / "submission_metadata.json"
    try:
        data = json.loads(metadata.read_text(encoding="utf-8"))
        users, this = data.get("users") or [], str(data.get("id", ""))
    except (OSError, ValueError, AttributeError) as err:
        print(f"Cannot read {metadata}: {err}. Ask your instructor.")
        return 1
    found = find(index, users)
    if found is None:
        names = ", ".join(str(u.get("email") or u.get("sid") or u.get("name") or "?") for u in users) or "nobody"
        print(f"Not graded yet: the kit has no grade of {index['lab']} for {names} in this autograder (made "
              f"{index['made_at']} from the class grading). Ask your instructor: your submission was not graded, "
              f"and no score was given.")
        return 1
    who, entry = found
    if this != str(entry["submission"]):
        print(f"Not graded yet: this submission (id {this or '?'}) of {who} is not the one the kit graded for "
              f"{index['lab']} (id {entry['submission']}, in the autograder made {index['made_at']}). Your "
              f"instructor grades it with the next class grading; no score was given.")
        return 1
    (root / "results").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(here / entry["grade"], root / "results" / "results.json")
    print(f"Served the grade of {index['lab']} for {who}, graded by the stencil lab kit on the course's GPUs.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
