"""The diagnosis's scores on the labelled corpus never fall: each measure on each part stays at or above
the count it reached when these floors were last raised (benchmarks/bench_diagnose.py prints the same
scores per engine). A rule that fixes one log and breaks two others fails here, on the training part
where rules are written and on the held-out part that no rule was written from."""

from __future__ import annotations

import corpus  # tests/core/logs/corpus.py (pytest puts this test's folder on the path)
import pytest

from vramtui.core.logs.diagnose import diagnose_text

# (right, counted) as of the last raise; "counted" pins the corpus itself (a case lost or added shows).
FLOORS: dict[str, dict[str, tuple[int, int]]] = {
    "train": {
        "stage": (1007, 1041),
        "class": (1015, 1041),
        "memory": (291, 308),
        "first_error": (601, 625),
        "quiet": (183, 203),
        "calm": (129, 158),
        "engine": (989, 1041),
    },
    "heldout": {
        "stage": (380, 414),
        "class": (380, 414),
        "memory": (114, 131),
        "first_error": (216, 239),
        "quiet": (63, 84),
        "calm": (45, 62),
        "engine": (393, 414),
    },
}


@pytest.fixture(scope="module")
def scores() -> dict[str, dict[str, tuple[int, int]]]:
    rows: dict[str, list] = {"train": [], "heldout": []}
    for case in corpus.cases():
        diagnosis = diagnose_text(case["log"], kernel_log=lambda: None)
        rows[case["split"]].append((case, corpus.judge_case(case, diagnosis)))
    return {part: corpus.score(part_rows) for part, part_rows in rows.items()}


@pytest.mark.parametrize("part", ["train", "heldout"])
def test_no_score_falls_below_its_floor(scores: dict, part: str) -> None:
    fallen = {
        measure: (scores[part][measure], floor)
        for measure, floor in FLOORS[part].items()
        if scores[part][measure][1] != floor[1] or scores[part][measure][0] < floor[0]
    }
    assert not fallen, f"{part}: (now, floor) per measure {fallen}"
