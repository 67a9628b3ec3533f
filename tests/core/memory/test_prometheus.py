"""PrometheusSource against a real HTTP server on loopback answering recorded exporter payloads."""

from __future__ import annotations

import time

import pytest
from prometheus_server import PayloadServer, federated, recorded, with_memory, without_gpu

from vramtui.core.errors import VramtuiError
from vramtui.core.memory.prometheus import FEDERATE_MATCH, PrometheusSource, normalise_url, parse_payload
from vramtui.core.units import MIB

A100 = "GPU-0946f70c-659b-4c39-8b78-7e7600000000"
T4 = "GPU-6d5c0ac5-74d7-3130-46f1-e93ed57f469a"


def _figures(text: str) -> dict[str, dict[str, float]]:
    """Each GPU's FB figures read straight off the payload's lines, to compare the source with."""
    found: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        for kind in ("USED", "FREE", "RESERVED"):
            if line.startswith(f"DCGM_FI_DEV_FB_{kind}{{"):
                uuid = line.split('UUID="')[1].split('"')[0]
                found.setdefault(uuid, {})[kind] = float(line.rsplit(" ", 1)[1])
    return found


@pytest.mark.parametrize("name", ["dcgm-a100-vgpu.prom", "dcgm-t4.prom"])
def test_a_recorded_exporter_payload_gives_each_gpu_used_and_total(name: str) -> None:
    text = recorded(name)
    expected = _figures(text)
    with PayloadServer(text) as server:
        source = PrometheusSource(server.url + "/metrics")
        source.check()
        sample = source.sample()
        source.close()
    assert [g.uuid for g in sample.gpus] == list(expected)
    for gpu in sample.gpus:
        want = expected[gpu.uuid]
        assert gpu.used_bytes == int(want["USED"] * MIB)
        assert gpu.total_bytes == int((want["USED"] + want["FREE"] + want.get("RESERVED", 0)) * MIB)
        assert gpu.reserved_bytes == int(want["RESERVED"] * MIB)
        assert gpu.name and gpu.name in text  # the modelName label
    assert source.status().ok and "1 GPU(s)" in source.status().message


def test_the_figures_follow_the_endpoint_as_they_change() -> None:
    text = recorded("dcgm-t4.prom")
    with PayloadServer(text) as server:
        source = PrometheusSource(server.url)
        source.check()
        seen = []
        for used in (512, 4096, 9000):
            server.set_payload(with_memory(text, {T4: used}))
            seen.append(source.sample().gpus[0])
        source.close()
    assert [g.used_bytes for g in seen] == [512 * MIB, 4096 * MIB, 9000 * MIB]
    assert len({g.total_bytes for g in seen}) == 1  # used + free is the card, whatever is in use


@pytest.mark.parametrize(
    ("name", "offers"),
    [("llama-server.prom", "requests running"), ("vllm-0.10.prom", "KV-cache usage")],
)
def test_a_model_server_metrics_page_is_named_as_having_no_gpu_memory(name: str, offers: str) -> None:
    with PayloadServer(recorded(name)) as server:
        source = PrometheusSource(server.url + "/metrics")
        with pytest.raises(VramtuiError) as caught:
            source.check()
        source.close()
    message = str(caught.value)
    assert "no GPU memory figures" in message and offers in message and "\n" not in message


def test_a_fleet_behind_federate_is_one_device_per_host_gpu() -> None:
    answer = federated(
        {"box-a:9400": recorded("dcgm-a100-vgpu.prom"), "box-b:9400": recorded("dcgm-t4.prom")}
    )
    with PayloadServer(answer) as server:
        source = PrometheusSource(server.url + "/federate")
        source.check()
        sample = source.sample()
        source.close()
        asked = server.paths[0]
    assert "match%5B%5D=" in asked  # the memory metrics were asked for by name
    assert sorted(g.uuid for g in sample.gpus) == sorted([A100, T4])
    assert len({g.index for g in sample.gpus}) == 2
    hosts = {g.uuid: g.name.split(":")[0] for g in sample.gpus}
    # The exporter's own Hostname label wins over the scrape's instance when both are there.
    assert hosts == {A100: "test-ai-1-node-pool-40c-d5ds8-br9r6-9tb2c", T4: "cp-bm14r7"}
    assert "on 2 hosts" in source.status().message


def test_a_host_label_missing_falls_back_to_the_scrape_instance() -> None:
    payload = "\n".join(
        line.replace(',Hostname="cp-bm14r7"', "") for line in recorded("dcgm-t4.prom").splitlines()
    )
    answer = federated({"box-a:9400": payload, "box-b:9400": payload.replace(T4, "GPU-other")})
    devices = parse_payload(answer).devices
    assert sorted(key.label for key in devices) == ["box-a:9400:0", "box-b:9400:0"]


def test_a_gpu_that_leaves_the_answer_keeps_its_index_and_shows_as_gone() -> None:
    two = federated({"a": recorded("dcgm-a100-vgpu.prom"), "b": recorded("dcgm-t4.prom")})
    with PayloadServer(two) as server:
        source = PrometheusSource(server.url + "/federate")
        source.check()
        first = {g.uuid: g for g in source.sample().gpus}
        server.set_payload(without_gpu(two, T4))
        gone = {g.index: g for g in source.sample().gpus}
        status = source.status()
        server.set_payload(two)
        back = {g.uuid: g for g in source.sample().gpus}
        source.close()
    lost = gone[first[T4].index]
    assert lost.used_bytes is None and lost.error and "gone" in lost.error
    assert lost.uuid == T4  # still named as the GPU it was
    assert gone[first[A100].index].used_bytes == first[A100].used_bytes
    assert "gone from the answer" in status.message
    assert back[T4].index == first[T4].index and back[T4].used_bytes == first[T4].used_bytes


def test_an_endpoint_that_stops_answering_mid_run_gives_rows_without_figures() -> None:
    server = PayloadServer(recorded("dcgm-t4.prom")).__enter__()
    source = PrometheusSource(server.url, timeout_s=0.5)
    source.check()
    assert source.sample().gpus[0].used_bytes is not None
    server.__exit__(None, None, None)
    sample = source.sample()
    source.close()
    assert [g.uuid for g in sample.gpus] == [T4]
    assert sample.gpus[0].used_bytes is None and "no answer" in (sample.gpus[0].error or "")
    assert not source.status().ok


@pytest.mark.parametrize(
    ("status", "kind", "body", "words"),
    [
        (200, "text/html", b"<!DOCTYPE html><html><body>Grafana</body></html>", "answered HTML"),
        (200, "application/json", b'{"status": "success", "data": {"result": []}}', "answered JSON"),
        (200, "application/octet-stream", bytes(range(256)) * 4, "binary"),
        (200, "text/plain", b"", "no Prometheus samples"),
        (200, "text/plain", b"hello there\n", "not the Prometheus text format"),
        (500, "text/plain", b"oops", "HTTP 500"),
        (404, "text/plain", b"", "HTTP 404"),
    ],
)
def test_an_answer_that_is_not_a_metrics_page_is_one_line(
    status: int, kind: str, body: bytes, words: str
) -> None:
    with PayloadServer("") as server:
        server.routes["/bad"] = (status, kind, body)
        source = PrometheusSource(server.url + "/bad")
        with pytest.raises(VramtuiError) as caught:
            source.check()
        source.close()
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_nothing_listening_is_one_line() -> None:
    with PayloadServer("") as server:
        url = server.url
    source = PrometheusSource(url)
    with pytest.raises(VramtuiError, match="cannot connect"):
        source.check()
    source.close()


def test_a_slow_endpoint_is_given_up_on_after_the_timeout() -> None:
    with PayloadServer(recorded("dcgm-t4.prom"), delay_s=3.0) as server:
        source = PrometheusSource(server.url, timeout_s=0.3)
        started = time.monotonic()
        with pytest.raises(VramtuiError, match=r"within 0\.3 s"):
            source.check()
        took = time.monotonic() - started
        source.close()
    assert took < 2.0


@pytest.mark.parametrize(
    ("given", "url"),
    [
        ("gpu-box:9400", "http://gpu-box:9400/metrics"),
        ("http://gpu-box:9400/", "http://gpu-box:9400/metrics"),
        ("https://prom.example/metrics", "https://prom.example/metrics"),
        ("http://prom:9090/federate?match[]=up", "http://prom:9090/federate?match[]=up"),
    ],
)
def test_urls_are_completed_the_way_people_type_them(given: str, url: str) -> None:
    assert normalise_url(given) == url


def test_a_bare_federate_asks_for_the_memory_metrics() -> None:
    assert "match%5B%5D=" in normalise_url("prom:9090/federate")
    assert "DCGM_FI_DEV_FB_USED" in FEDERATE_MATCH


@pytest.mark.parametrize("bad", ["", "ftp://box/metrics", "http://", "http://[::1", "gpu-box:abc"])
def test_a_url_that_is_no_http_url_is_one_line(bad: str) -> None:
    with pytest.raises(VramtuiError):
        normalise_url(bad)


def test_an_impossible_reading_is_an_error_of_that_tick_not_a_figure() -> None:
    """QA (session 13): an exporter answering FB_USED 1e20 was recorded as 10^20 MiB rows, and a
    replay of them drew its 80% line at 78 quadrillion GiB."""
    text = recorded("dcgm-t4.prom")
    with PayloadServer(text) as server:
        source = PrometheusSource(server.url)
        source.check()
        server.set_payload(with_memory(text, {T4: 1e20}))
        broken = source.sample().gpus[0]
        server.set_payload(with_memory(text, {T4: 4096}))
        healed = source.sample().gpus[0]
        source.close()
    assert broken.used_bytes is None and broken.total_bytes is None
    assert "impossible reading (used 1e+20 MiB)" in (broken.error or "")
    assert healed.used_bytes == 4096 * MIB and not healed.error


def test_a_listener_that_answers_in_no_http_is_said_without_its_bytes() -> None:
    """QA 23 D8: `record --source` on a socket that answers garbage echoed its bytes, NUL included, to the
    terminal ("cannot read the answer: BadStatusLine \\x00\\xff..."); now it says what the attach probe says."""
    from no_http import no_http_listener

    from vramtui.core.memory.prometheus import FetchError, fetch_text

    with no_http_listener() as url, pytest.raises(FetchError) as caught:
        fetch_text(f"{url}/metrics", timeout_s=5)
    said = str(caught.value)
    assert said == "it does not answer in HTTP (BadStatusLine)", said
