#!/usr/bin/env python3
"""Gradescope's autograder of one lab of the stencil lab kit: it serves the grade the kit already
computed on the instructor's GPUs (grade.py class); it grades nothing and runs no student code.

This file is not imported by the kit: `grade.py gradescope-autograder` (gsautograder.py) copies it
into the autograder zip beside index.json and the class's results.json files.  Gradescope unpacks
that zip into /autograder/source and runs run_autograder, which runs this file, once per
submission.  It reads who submitted from /autograder/submission_metadata.json (users[].email and
users[].sid: https://gradescope-autograders.readthedocs.io/en/latest/submission_metadata/), finds
the first of them in index.json (the e-mail, case-insensitive, else the SID the class roster
holds), and copies that student's results.json to /autograder/results/results.json, the file
Gradescope reads (https://gradescope-autograders.readthedocs.io/en/latest/specs/).

A submitter the zip has no grade of gets no results file and a failed run whose output names
them: Gradescope shows "The autograder failed to execute correctly", never a 0 that nobody
graded.  Standard library only (Gradescope's base image has Python 3; setup.sh installs it where
missing).  AUTOGRADER_ROOT replaces /autograder (the kit's tests run it in a folder).
"""

from __future__ import annotations          # Python 3.7 and later (Ubuntu 20.04 images)

import json
import os
import shutil
import sys
from pathlib import Path


def find(index: dict, users: list) -> tuple[str, str] | None:
    """(who, the zip's path of their results.json) of the first user index.json knows, else None."""
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
        users = json.loads(metadata.read_text(encoding="utf-8")).get("users") or []
    except (OSError, ValueError, AttributeError) as err:
        print(f"Cannot read {metadata}: {err}. Ask your instructor.")
        return 1
    found = find(index, users)
    if found is None:
        names = ", ".join(str(u.get("email") or u.get("sid") or u.get("name") or "?") for u in users) or "nobody"
        print(f"The kit has no grade of {index['lab']} for {names} in this autograder (made {index['made_at']} "
              f"from the class grading). Ask your instructor: your submission was not graded, and no score "
              f"was given.")
        return 1
    who, path = found
    (root / "results").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(here / path, root / "results" / "results.json")
    print(f"Served the grade of {index['lab']} for {who}, graded by the stencil lab kit on the course's GPUs.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
