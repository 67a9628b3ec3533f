"""The log pane's header names the first error by the log engine's line number, not the view's row."""

from __future__ import annotations

from array import array

from vramtui.tui.panes.log import first_error_number


def test_a_note_no_engine_read_does_not_shift_the_first_errors_number() -> None:
    # QA 38 F8: the demo's view held a note line the log engine never read (number 0) ahead of the error,
    # and the header said "line 255" where the file and `diagnose` say 254
    numbers = array("I", [1, 2, 0, 3, 4])  # the third row is the app's own note
    assert first_error_number(numbers, 4) == 4
    assert first_error_number(numbers, None) is None
    assert first_error_number(array("I", [1, 0]), 1) == 2  # a row no engine numbered: its place
