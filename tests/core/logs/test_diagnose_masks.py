"""The digit-mask memo gives the verdict the line-by-line analysis gives, on logs whose lines differ.

Real server logs prefix every line with a timestamp and carry ids, token counts and timings, so no two
lines are equal; the log diagnosis memoizes lines by their digit mask. Here every corpus log is rewritten
with unique prefixes and varied numbers, and read three ways: the file path, the live `feed` path, and
the reference where every line is analysed on its own text (the mask memo switched off).
"""

from __future__ import annotations

import functools
import json
import random
import re
from dataclasses import asdict
from pathlib import Path
from types import ModuleType

import pytest

from vramtui.core.logs import diagnose, memo, textclean


def small_reads(patch: pytest.MonkeyPatch, build: ModuleType, chunk_bytes: int = 512) -> None:
    """Reads of `chunk_bytes`: many blocks, so that lines cross them."""
    patch.setattr(
        build,
        "iter_raw_line_batches",
        functools.partial(textclean.iter_raw_line_batches, chunk_bytes=chunk_bytes),
    )


DATA = Path(__file__).resolve().parents[2] / "data"
_DIGITS = re.compile(r"\d+")


def _logs() -> dict[str, str]:
    logs: dict[str, str] = {}
    for row in (DATA / "corpus.jsonl").read_text().splitlines():
        if row.strip():
            case = json.loads(row)
            logs[case["id"]] = case["log"]
    for path in sorted((DATA / "logs").glob("*.log")):
        logs[path.name] = path.read_text(errors="replace")
    return logs


LOGS = _logs()


def _unique(text: str, seed: int, vary_numbers: str) -> str:
    rng = random.Random(seed)
    prefixes = ("{a}.{b:02d}.{c:03d}.{d:03d} I ", "INFO 11-{b:02d} 18:{b:02d}:{a:02d} [engine.py:{c}] ", "")
    out = []
    for number, line in enumerate(text.split("\n")):
        if vary_numbers == "same width":
            line = _DIGITS.sub(lambda m: str(rng.randrange(10 ** len(m.group()))).zfill(len(m.group())), line)
        elif vary_numbers == "any width":
            line = _DIGITS.sub(lambda m: str(rng.randrange(10 ** rng.randint(1, len(m.group()) + 1))), line)
        prefix = prefixes[number % 3].format(
            a=number % 60, b=number % 97, c=rng.randrange(1000), d=number % 1000
        )
        out.append(prefix + line)
    # Repeat the log twice so that masks are met again with other digits.
    return "\n".join(out + out[::-1]) + "\n"


def _per_line(monkeypatch: pytest.MonkeyPatch, lines: list[str]) -> tuple[dict, list[dict]]:
    """The reference: every line analysed on its own text (the mask memo switched off)."""
    with monkeypatch.context() as patch:
        patch.setattr(diagnose, "_mask_entry", lambda masked, text: memo._EACH_LINE)
        patch.setattr(memo, "_COLLAPSED", {})
        diagnoser = diagnose.LogDiagnoser(kernel_log=lambda: None)
        tags = [asdict(diagnoser.feed(line)) for line in lines]
        return asdict(diagnoser.result()), tags


def _agrees(
    build: ModuleType, path: Path, lines: list[str], expected: dict, expected_tags: list[dict]
) -> None:
    assert asdict(build.diagnose_file(path, kernel_log=lambda: None)) == expected
    diagnoser = build.LogDiagnoser(kernel_log=lambda: None)
    assert [asdict(diagnoser.feed(line)) for line in lines] == expected_tags
    assert asdict(diagnoser.result()) == expected
    # the log pane's path: each line's bytes, its stage and severity as `feed` tags them
    raw = build.LogDiagnoser(kernel_log=lambda: None)
    tags = [raw.feed_raw(line.encode("utf-8")) for line in lines]
    assert tags == [(tag["stage"], tag["severity"]) for tag in expected_tags]
    assert asdict(raw.result()) == expected


@pytest.mark.parametrize("name", sorted(LOGS))
@pytest.mark.parametrize("vary_numbers", ["none", "same width", "any width"])
def test_mask_memo_agrees_with_per_line_analysis(
    name: str, vary_numbers: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build = diagnose
    text = _unique(LOGS[name], seed=len(name), vary_numbers=vary_numbers)
    lines = text.split("\n")[:-1]
    expected, expected_tags = _per_line(monkeypatch, lines)
    path = tmp_path / "unique.log"
    path.write_text(text)
    _agrees(build, path, lines, expected, expected_tags)
    with monkeypatch.context() as patch:
        small_reads(patch, build)
        assert asdict(build.diagnose_file(path, kernel_log=lambda: None)) == expected


def test_digits_that_matter_are_read_from_each_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build = diagnose
    # Same mask, different meaning: exit code 137 is the OOM killer, 139 is not; figures differ by line.
    lines = [
        "llama_kv_cache:      CUDA0 KV buffer size =   256.00 MiB",
        "llama_kv_cache:      CUDA1 KV buffer size =   512.00 MiB",
        "worker exited with code 139",
        "worker exited with code 137",
    ]
    path = tmp_path / "x.log"
    path.write_text("\n".join(lines) + "\n")
    by_file = build.diagnose_file(path, kernel_log=lambda: None)
    by_feed = build.diagnose_lines(lines, kernel_log=lambda: None)
    assert by_file.to_dict() == by_feed.to_dict()
    assert by_file.failure == "host_oom_killed" and by_file.first_error_line == 4
    figures = {
        key: value for key, value in by_file.engine_figures.items() if key.endswith((".CUDA0", ".CUDA1"))
    }
    assert sorted(figures.values()) == [256 * 2**20, 512 * 2**20]


def test_masked_regex_matches_the_mask_of_what_the_rule_matches() -> None:
    for check in memo._DIGIT_CHECKS:
        if check.regex is None or check.masked_regex is None:
            continue
        for sample in (
            "exit code 137",
            "exited with status 137",
            "get failed (401)",
            "error: 0",
            "error: 12",
        ):
            if check.regex.search(sample):
                assert check.masked_regex.search(memo._mask(sample)), (check.anchor, sample)


def test_numbers_of_other_widths_share_an_analysis_only_where_no_regex_reads_digits() -> None:
    memo._COLLAPSED.clear()
    diagnoser = diagnose.LogDiagnoser(kernel_log=lambda: None)
    for width in range(1, 8):
        diagnoser.feed(
            f"INFO 06-16 10:03:14 Engine {'7' * width}: Avg prompt throughput: {'3' * width}.4 tokens/s"
        )
    assert memo._COLLAPSED, "a line no digit-reading regex looks at is shared across widths"
    # llama.cpp's context line is read by a figure regex (\d): never shared across widths.
    assert not memo._run_blind("llama_context: n_ctx         = 4096")
    assert not memo._run_blind('  File "x.py", line 12, in forward')
    assert memo._sees_digits(re.compile(r"\d{3}")) and memo._sees_digits(re.compile(r"[^ ]+"))
    assert not memo._sees_digits(re.compile(r"log_server_r: request: post"))
    assert not memo._sees_digits(re.compile(r"[^0-9]+ done"))


def test_a_run_three_digits_wide_keeps_its_width_in_the_shared_key() -> None:
    # An HTTP status (always three digits) is read by `\|\s*\d{3}\s*\|`; every other width is one.
    key = memo._width_key("0 00 000 0000 00000|000|0| 000 |000| 0000 |00")
    assert key == "0 0 0 0 0|\0|0| \0 |\0| 0 |0"
    assert not memo._sees_digits(re.compile(r"\|\s*\d{3}\s*\|.*\"/api/chat\""))
    assert not memo._sees_digits(re.compile(r"^\s*panic:"))
    # A run that is not fenced by non-digits on both sides, another width, \b, `.+`: still width-sensitive.
    for pattern in (
        r"x\d{3}",
        r"\|\d{3}.*",
        r".*\d{3}\s*\|",
        r"\|\s*\d{3}\s*\d",
        r"\|\d{3}\b",
        r"a.+b",
        r"\|\d{2}\|",
    ):
        assert memo._sees_digits(re.compile(pattern)), pattern


def _other_widths(line: str, rng: random.Random) -> str:
    """The line with every digit run made another width (the caller keeps those of the same key)."""

    def width(match: re.Match[str]) -> str:
        return str(rng.randrange(1, 10)) * rng.choice((1, 2, 3, 3, 4, 5, 9))

    return _DIGITS.sub(width, line)


def test_regexes_let_through_answer_alike_for_every_width_the_key_merges() -> None:
    from vramtui.core.logs import rules as ls

    lenient = [
        rule.regex
        for table in (ls.STAGE_RULES, ls.ERROR_RULES, ls.NOTICE_RULES, ls.RECOVERY_RULES, ls.FIGURE_RULES)
        for rule in table
        if rule.regex is not None and not memo._sees_digits(rule.regex)
    ]
    rng = random.Random(7)
    lines = [line.lower() for log in LOGS.values() for line in log.split("\n") if _DIGITS.search(line)]
    lines += [
        f'[gin] 2025/11/06 - 06:23:22 | {status} | {latency}s | 172.18.0.3 | post "/api/chat"'
        for status in ("200", "500", "20", "5000")
        for latency in ("2.859719514", "12.5", "1")
    ]
    hits = compared = 0
    for line in lines:
        key = memo._width_key(memo._mask(line))
        others = [other for other in (_other_widths(line, rng) for _ in range(12)) if other != line]
        others = [other for other in others if memo._width_key(memo._mask(other)) == key]
        for regex in lenient:
            answer = regex.search(line) is not None
            hits += answer
            for other in others:
                compared += 1
                assert (regex.search(other) is not None) == answer, (regex.pattern, line, other)
    assert hits and compared, "some line is matched by a regex the shared key lets through"


def test_ollama_request_lines_of_other_widths_share_one_analysis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build = diagnose
    rng = random.Random(3)
    lines = [
        f"[GIN] 2025/11/{rng.randrange(1, 31):02d} - 06:23:22 | {rng.choice(('200', '500', '20', '5000'))} |"
        f" {rng.randrange(10 ** rng.randint(1, 6))}.{rng.randrange(10 ** rng.randint(1, 9))}ms |"
        f' 172.18.0.{rng.randrange(256)} | POST     "/api/chat"'
        for _ in range(400)
    ]
    memo._COLLAPSED.clear()
    path = tmp_path / "ollama.log"
    path.write_text("\n".join(lines) + "\n")
    expected, expected_tags = _per_line(monkeypatch, lines)
    assert asdict(build.diagnose_file(path, kernel_log=lambda: None)) == expected
    assert any("| \0 |" in key for key in memo._COLLAPSED)
    _agrees(build, path, lines, expected, expected_tags)
    assert expected_tags[0]["stage"] == "inference"


def test_a_check_is_gated_by_a_word_every_line_holding_it_contains() -> None:
    # A 3-digit number alone never sends a line through a check, nor makes a word of it.
    assert not any(memo._mask(check.gate) == "000" for check in memo._DIGIT_CHECKS)
    assert "000" not in memo._MASKED_DIGIT_KEYS
    samples = [
        "worker exited with code 137",
        "process exit status 137",
        "GET failed (401): unauthorized",
        "404 Client Error: Not Found for url",
        "error: 12 things went wrong",
        "load_in_8bit=True",
        "llama_context: flash_attn = 1",
        "dtype fp8 not supported",
    ]
    held = 0
    for sample in samples:
        low = sample.lower()
        for check in memo._DIGIT_CHECKS:
            if check.holds(low, sample):
                held += 1
                assert check.gate and check.gate in memo._mask(low), (check.anchor, sample)
                # ... and the gate's collapsed form is in the line's shared key, at any width.
                shared_key = memo._width_key(memo._mask(sample))
                assert memo._may_hold_a_check(shared_key), (check.anchor, sample)
    assert held >= len(samples)
    assert not any("|" in gate for gate in memo._CHECK_GATES)


@pytest.mark.parametrize(
    "lines",
    [
        ["worker exited with code 1", "worker exited with code 13", "worker exited with code 137"],
        ["step 4 client error: bad", "step 40 client error: bad", "step 404 client error: bad"],
        ['"POST /v12/x HTTP/1.1" 200', '"POST /v1/x HTTP/1.1" 200'],
        ["downloading part 7 of 10", "downloading part 13 of 10", "downloading part 137 of 10"],
    ],
)
def test_a_shared_key_never_stands_for_a_width_that_holds_a_check(
    lines: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build = diagnose
    memo._COLLAPSED.clear()
    path = tmp_path / "widths.log"
    path.write_text("\n".join(lines) + "\n")
    expected, expected_tags = _per_line(monkeypatch, lines)
    _agrees(build, path, lines, expected, expected_tags)
