"""Small helpers shared by the subcommands."""

from __future__ import annotations

import json
import sys
from typing import Any


def print_json(obj: Any) -> None:
    """One JSON object on stdout, as scripts read it."""
    json.dump(obj, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")
    sys.stdout.flush()
