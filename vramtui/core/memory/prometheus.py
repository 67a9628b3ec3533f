"""GPU memory from a Prometheus text endpoint the box already runs: no agent of our own.

- The NVIDIA DCGM exporter (`:9400/metrics`): `DCGM_FI_DEV_FB_USED`, `DCGM_FI_DEV_FB_FREE` and, where
  the driver reports it, `DCGM_FI_DEV_FB_RESERVED`, all in MiB, labelled `gpu`, `UUID`, `modelName`,
  `Hostname` (newer exporters: `hostname`), and `GPU_I_ID` for a MIG instance. Total = used + free
  (+ reserved), as DCGM computes its own used ratio.
- A Prometheus server's `/federate?match[]=...` answers the same format for a whole fleet, each series
  with its scrape's `instance` label: the GPUs of several hosts are distinct devices, named host:gpu.
- vLLM's and llama-server's `/metrics` carry no GPU memory figures (KV-cache usage, requests): the
  source says so in one line instead of drawing nothing.

`PrometheusSource(url)` is a memory source like `NvmlSource` (`.sample()`, `.status()`, `.close()`);
`check()` fetches once and raises `VramtuiError` with one line for an endpoint that cannot be used.
Parsing is `prometheus_client`'s text parser, never our own.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from vramtui.core.errors import VramtuiError
from vramtui.core.memory.sampling import GpuReading, Sample, SourceStatus
from vramtui.core.units import MIB

TIMEOUT_S = 2.0  # a scrape of a healthy exporter takes milliseconds; a slow one must not stall the pane
MAX_BODY = 16 << 20  # a federated fleet of a few hundred GPUs is a few MB
FB_USED, FB_FREE, FB_RESERVED, FB_TOTAL = (
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_DEV_FB_TOTAL",
)
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
_FIGURES = {FB_USED: "used", FB_FREE: "free", FB_RESERVED: "reserved", FB_TOTAL: "total", GPU_UTIL: "util"}
# What a federating Prometheus is asked for when the URL names no match[] of its own.
FEDERATE_MATCH = (
    '{__name__=~"DCGM_FI_DEV_FB_USED|DCGM_FI_DEV_FB_FREE|DCGM_FI_DEV_FB_RESERVED|DCGM_FI_DEV_GPU_UTIL"}'
)
# The model servers' own figures, by metric name: what their /metrics offers instead of GPU memory.
ENGINE_METRICS = {
    "llamacpp:kv_cache_usage_ratio": "KV-cache usage",
    "llamacpp:requests_processing": "requests running",
    "llamacpp:requests_deferred": "requests waiting",
    "vllm:kv_cache_usage_perc": "KV-cache usage",
    "vllm:gpu_cache_usage_perc": "KV-cache usage",
    "vllm:num_requests_running": "requests running",
    "vllm:num_requests_waiting": "requests waiting",
}
_HOST_LABELS = ("Hostname", "hostname", "instance")


@dataclass(frozen=True, slots=True)
class DeviceKey:
    """One GPU (or MIG instance) in a payload: the host that reports it, DCGM's `gpu` and `GPU_I_ID`."""

    host: str
    gpu: str
    mig: str | None = None

    @property
    def label(self) -> str:
        mig = f" MIG {self.mig}" if self.mig is not None else ""
        return f"{self.host}:{self.gpu}{mig}" if self.host else f"gpu {self.gpu}{mig}"


# No card has more memory than this (MiB): an exporter that reports more, or less than 0, is broken.
_MAX_MIB = 64 * 1024 * 1024


def _impossible(figures: DeviceFigures) -> str | None:
    """Why a device's figures are no memory reading (negative, NaN, past 64 TiB), or None."""
    for name in ("used", "free", "reserved", "total"):
        value = getattr(figures, name)
        if value is not None and not 0 <= value <= _MAX_MIB:
            return f"the exporter reported an impossible reading ({name} {value:g} MiB): skipped"
    return None


@dataclass
class DeviceFigures:
    key: DeviceKey
    uuid: str = ""
    model: str = ""
    used: float | None = None  # MiB, as DCGM reports them
    free: float | None = None
    reserved: float | None = None
    total: float | None = None
    util: float | None = None

    @property
    def total_mib(self) -> float | None:
        if self.used is not None and self.free is not None:
            return self.used + self.free + (self.reserved or 0.0)
        return self.total


@dataclass
class Payload:
    """What one answer held: every GPU's figures, the engine figures, and how many samples in all."""

    devices: dict[DeviceKey, DeviceFigures]
    engine: dict[str, float]
    samples: int
    metric_names: int


def _host_of(labels: dict[str, str]) -> str:
    for name in _HOST_LABELS:
        value = labels.get(name)
        if value:
            return value
    return ""


def parse_payload(text: str) -> Payload:
    """Read one Prometheus text answer. ValueError when it is not the exposition format at all."""
    from prometheus_client.parser import text_string_to_metric_families

    devices: dict[DeviceKey, DeviceFigures] = {}
    engine: dict[str, float] = {}
    count = 0
    names: set[str] = set()
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, TypeError, IndexError, KeyError) as error:
        raise ValueError("not the Prometheus text format") from error
    for family in families:
        for sample in family.samples:
            count += 1
            names.add(sample.name)
            figure = _FIGURES.get(sample.name)
            if figure is None:
                what = ENGINE_METRICS.get(sample.name)
                if what is not None:  # summed over label sets: several models or engines
                    engine[what] = engine.get(what, 0.0) + float(sample.value)
                continue
            labels = dict(sample.labels)
            key = DeviceKey(_host_of(labels), labels.get("gpu", "0"), labels.get("GPU_I_ID") or None)
            device = devices.get(key)
            if device is None:
                device = devices[key] = DeviceFigures(
                    key, labels.get("UUID", ""), labels.get("modelName", "")
                )
            setattr(device, figure, float(sample.value))
    return Payload(devices, engine, count, len(names))


def _gpu_order(key: DeviceKey) -> tuple[str, int, str, int, str]:
    gpu, mig = key.gpu, key.mig or ""
    return (
        key.host,
        int(gpu) if gpu.isdigit() else 1 << 30,
        gpu,
        int(mig) if mig.isdigit() else -1,
        mig,
    )


def describe_engine(engine: dict[str, float]) -> str:
    """'KV-cache usage 0.0%, requests running 0' for the one line that says what an endpoint offers."""
    parts = []
    for what, value in engine.items():
        parts.append(f"{what} {value * 100:.1f}%" if what == "KV-cache usage" else f"{what} {value:g}")
    return ", ".join(parts)


def normalise_url(url: str) -> str:
    """`host:9400` -> `http://host:9400/metrics`; a bare `/federate` gets the DCGM memory match[]."""
    text = url.strip()
    if not text:
        raise VramtuiError("--source needs a URL (e.g. http://gpu-box:9400/metrics)")
    if any(ch.isspace() or ord(ch) < 32 for ch in text):  # http.client refuses these with its own words
        raise VramtuiError(
            f"--source {url!r}: not a URL (it holds a space; e.g. http://gpu-box:9400/metrics)"
        )
    if "://" not in text:
        text = "http://" + text
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises on a port that is no number
    except ValueError as error:  # an unclosed [ of an IPv6 address, a port that is no number
        raise VramtuiError(f"--source {url}: not a URL ({error})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise VramtuiError(f"--source {url}: not an http(s) URL")
    path = parts.path if parts.path not in ("", "/") else "/metrics"
    query = parts.query
    if path.rstrip("/").endswith("/federate") and not any(k == "match[]" for k, _ in parse_qsl(query)):
        query = urlencode([*parse_qsl(query), ("match[]", FEDERATE_MATCH)])
    return urlunsplit((parts.scheme, parts.netloc, path, query, ""))


class FetchError(Exception):
    """The endpoint did not give a usable answer this time: why, in words."""


def fetch_text(url: str, timeout_s: float) -> str:
    """One GET with a deadline over the whole answer (a server that drips bytes cannot stall us).

    urllib, not httpx: importing httpx loads rich (its command line), and the core loads no UI library.
    """
    deadline = time.monotonic() + timeout_s
    request = urllib.request.Request(url, headers={"Accept": "text/plain"})
    chunks: list[bytes] = []
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            size = 0
            while chunk := response.read(1 << 16):
                size += len(chunk)
                if size > MAX_BODY:
                    raise FetchError(f"answer over {MAX_BODY >> 20} MiB: not a metrics page")
                if time.monotonic() > deadline:
                    raise FetchError(f"answer not complete within {timeout_s:g} s")
                chunks.append(chunk)
    except urllib.error.HTTPError as error:
        raise FetchError(_http_error(error)) from None
    except TimeoutError:
        raise FetchError(f"no answer within {timeout_s:g} s") from None
    except urllib.error.URLError as error:
        reason = error.reason
        if isinstance(reason, TimeoutError | socket.timeout):
            raise FetchError(f"no answer within {timeout_s:g} s") from None
        words = getattr(reason, "strerror", None) or str(reason)
        raise FetchError(f"cannot connect: {words}") from None
    except (
        http.client.HTTPException
    ) as error:  # a listener that is no HTTP: its bytes are not echoed (QA 23 D8)
        raise FetchError(f"it does not answer in HTTP ({type(error).__name__})") from None
    except OSError as error:  # reset mid-answer
        raise FetchError(f"cannot read the answer: {error.strerror or type(error).__name__}") from None
    body = b"".join(chunks)
    if b"\x00" in body[:4096]:
        raise FetchError("answered binary data, not the Prometheus text format")
    return body.decode("utf-8", "replace")


def _http_error(error: urllib.error.HTTPError) -> str:
    """`HTTP 501 Not Implemented`, with what the server said why (a JSON error's message, as
    llama-server gives one), and what a bare 501 on a metrics page means."""
    said = f"HTTP {error.code} {error.reason}".strip()
    try:
        body = json.loads(error.read(4096) or b"null")
    except (OSError, ValueError):
        body = None
    problem = body.get("error") if isinstance(body, dict) else None
    message = problem.get("message") if isinstance(problem, dict) else problem
    if isinstance(message, str) and message.strip():
        said += f": {' '.join(message.split())[:200]}"
    if error.code == 501:
        # QA 39 F13: the advice to restart with --metrics led to a second refusal (no GPU memory there)
        said += (
            " (a model server serves /metrics only when asked, llama-server with --metrics, and even then"
            " it reports requests and its KV cache, no GPU memory: point --source at the box's DCGM"
            " exporter, port 9400)"
        )
    return said


class PrometheusSource:
    """The GPUs one Prometheus text endpoint reports, as a memory source.

    Each device keeps the index it got when first seen (in payload order: host, gpu, MIG instance),
    so a curve stays one curve; one that vanishes from a later answer is reported with no figures and
    an error, never dropped silently, and comes back under its own index if it returns.
    """

    def __init__(self, url: str, timeout_s: float = TIMEOUT_S) -> None:
        self.url = normalise_url(url)
        self.timeout_s = timeout_s
        self._indices: dict[DeviceKey, int] = {}
        self._names: dict[DeviceKey, tuple[str, str]] = {}
        self._hosts: set[str] = set()
        self._problem: str | None = None
        self._gone: list[str] = []
        self.engine: dict[str, float] = {}
        self.last: Payload | None = None

    # -- one answer --------------------------------------------------------------------------------

    def _read(self) -> Payload:
        text = fetch_text(self.url, self.timeout_s)
        try:
            payload = parse_payload(text)
        except ValueError:
            kind = _kind_of(text)
            detail = f" (it begins {_first_line(text)!r})" if kind == "answered text" else ""
            raise FetchError(f"{kind}, not the Prometheus text format{detail}") from None
        if not payload.samples:
            raise FetchError("answered no Prometheus samples (an empty page)")
        return payload

    def check(self) -> Payload:
        """Fetch once; one line (VramtuiError) for an endpoint that is not a usable memory source."""
        try:
            payload = self._read()
        except FetchError as error:
            raise VramtuiError(f"--source {self.url}: {error}") from None
        if not _has_memory(payload):
            offers = describe_engine(payload.engine)
            offers = (
                f"it offers {offers}" if offers else f"{payload.metric_names} metric(s), none of them memory"
            )
            raise VramtuiError(
                f"--source {self.url}: no GPU memory figures ({FB_USED}/{FB_FREE}); {offers}. "
                "Point --source at the box's DCGM exporter (port 9400) for its GPU memory"
            )
        self._remember(payload)
        return payload

    def _remember(self, payload: Payload) -> None:
        self.last = payload
        self.engine = dict(payload.engine)
        for key in sorted(payload.devices, key=_gpu_order):
            if key not in self._indices:
                self._indices[key] = len(self._indices)
            if key.host:
                self._hosts.add(key.host)

    def _reading(self, key: DeviceKey, figures: DeviceFigures | None, error: str | None) -> GpuReading:
        if figures is not None:
            self._names[key] = (self._name(key, figures.model), figures.uuid)
        name, uuid = self._names.get(key, (key.label, ""))
        broken = _impossible(figures) if figures is not None else None
        if figures is None or broken:  # a reading no card gives is an error of this tick, not a figure
            return GpuReading(self._indices[key], name, uuid, None, None, error=broken or error)
        total = figures.total_mib
        return GpuReading(
            index=self._indices[key],
            name=name,
            uuid=uuid,
            used_bytes=None if figures.used is None else int(figures.used * MIB),
            total_bytes=None if total is None else int(total * MIB),
            reserved_bytes=None if figures.reserved is None else int(figures.reserved * MIB),
            util_percent=None if figures.util is None else int(figures.util),
            free_bytes=None if figures.free is None else int(figures.free * MIB),
        )

    def _name(self, key: DeviceKey, model: str) -> str:
        """The model name; with a MIG instance or several hosts, where it is (host:gpu) before it."""
        if len(self._hosts) > 1 or key.mig is not None:
            return f"{key.label} {model}".strip()
        return model or key.label

    # -- the source interface ----------------------------------------------------------------------

    def sample(self) -> Sample:
        t = time.time()
        try:
            payload = self._read()
        except FetchError as error:
            self._problem = str(error)
            # Every known GPU gets a row with no figures: the gap shows at its time, nothing is lost.
            keys = sorted(self._indices, key=self._indices.__getitem__)
            return Sample(t, tuple(self._reading(k, None, f"no answer: {error}") for k in keys), None)
        self._problem = None if _has_memory(payload) else "no GPU memory figures in the answer"
        self._remember(payload)
        readings = []
        gone = []
        for key in sorted(self._indices, key=self._indices.__getitem__):
            figures = payload.devices.get(key)
            if figures is None:
                gone.append(key.label)
            readings.append(self._reading(key, figures, "gone from the endpoint's answer"))
        self._gone = gone
        return Sample(t, tuple(readings), None)

    def status(self) -> SourceStatus:
        hosts = len(self._hosts)
        where = f" on {hosts} hosts" if hosts > 1 else ""
        message = f"{self.url}: {len(self._indices)} GPU(s){where} (Prometheus text)"
        if self.engine:
            message += f"; {describe_engine(self.engine)}"
        if self._gone:
            message += f"; gone from the answer: {', '.join(self._gone)}"
        if self._problem:
            return SourceStatus(False, f"{self.url}: {self._problem}")
        return SourceStatus(bool(self._indices), message)

    def close(self) -> None:
        self._gone = []  # one request per sample: no connection is held between them


def _has_memory(payload: Payload) -> bool:
    return any(d.used is not None for d in payload.devices.values())


def _first_line(text: str) -> str:
    """What a page that is no metrics page says first (its words, not the parser's)."""
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return line[:60]


def _kind_of(text: str) -> str:
    """Name what answered when it is not a metrics page."""
    head = text.lstrip()[:200].lower()
    if head.startswith("<"):
        return "answered HTML"
    if head.startswith(("{", "[")):
        return "answered JSON"
    return "answered text"
