#!/usr/bin/env python3
"""Command-line entry of the stencil lab kit's grader: python3 grader/grade.py --help

Standard library only (Python 3.11+).  The commands live in stencil_grader/cli.py.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from stencil_grader.cli import main  # noqa: E402  (needs the path above)

if __name__ == "__main__":
    sys.exit(main())
