"""Models already on disk: the Hugging Face cache, Ollama's store (manifests -> GGUF blobs), GGUF folders."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

OLLAMA_MODEL_MEDIA_TYPE = "application/vnd.ollama.image.model"


@dataclass(frozen=True)
class FoundModel:
    name: str  # what the user types: org/name, llama3:8b, or the file name
    path: Path  # folder (HF snapshot) or .gguf file / Ollama blob
    kind: str  # hf | ollama | gguf
    size_bytes: int

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "path": str(self.path), "kind": self.kind, "size_bytes": self.size_bytes}


def hf_cache_dir() -> Path:
    """The hub cache huggingface_hub uses: HF_HUB_CACHE, else HF_HOME/hub, else under XDG_CACHE_HOME (QA 11:
    a cache there was not found), else ~/.cache/huggingface/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME")
    if not home:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        home = os.path.join(cache, "huggingface")
    return Path(home).expanduser() / "hub"


def hf_snapshot(repo_id: str, cache: Path | None = None) -> Path | None:
    """The newest snapshot of `repo_id` ("org/name") in the local hub cache that holds a config.json."""
    if repo_id.count("/") != 1 or repo_id.startswith(("/", ".", "~")):
        return None
    cache = cache or hf_cache_dir()
    wanted = "models--" + repo_id.lower().replace("/", "--")
    repos = cache.glob("models--*") if cache.is_dir() else ()
    # only the repository asked for is read (find_hf_cache sizes every snapshot of the cache)
    return next((_newest_snapshot(repo) for repo in repos if repo.name.lower() == wanted), None)


def _newest_snapshot(repo: Path) -> Path | None:
    """A cached repository's newest snapshot that holds a config.json (models--org--name/snapshots/<rev>/)."""
    snapshots = [s for s in (repo / "snapshots").glob("*") if (s / "config.json").is_file()]
    return max(snapshots, key=lambda s: s.stat().st_mtime, default=None)


def ollama_models_dir() -> Path:
    if os.environ.get("OLLAMA_MODELS"):
        return Path(os.environ["OLLAMA_MODELS"])
    return Path.home() / ".ollama" / "models"


def _size(path: Path) -> int:
    try:
        if path.is_file():
            return path.stat().st_size
        # snapshot files are symlinks to blobs: stat follows them
        return sum(p.stat().st_size for p in path.iterdir() if p.is_file())
    except OSError:
        return 0


def find_hf_cache(cache: Path | None = None) -> list[FoundModel]:
    """Snapshots with a config.json in the HF hub cache (models--org--name/snapshots/<rev>/)."""
    cache = cache or hf_cache_dir()
    found = []
    if not cache.is_dir():
        return found
    for repo in sorted(cache.glob("models--*")):
        name = repo.name[len("models--") :].replace("--", "/")
        snapshot = _newest_snapshot(repo)
        if snapshot is not None:
            found.append(FoundModel(name, snapshot, "hf", _size(snapshot)))
    return found


def _manifest_name(manifests: Path, manifest: Path) -> str:
    parts = manifest.relative_to(manifests).parts  # registry/namespace/model/tag
    if len(parts) >= 4 and parts[0] == "registry.ollama.ai" and parts[1] == "library":
        return f"{parts[2]}:{parts[3]}"
    return "/".join(parts[:-1]) + ":" + parts[-1]


def ollama_blob_of(manifest: Path, models_dir: Path) -> Path | None:
    """The GGUF blob an Ollama manifest names (the layer with the model media type)."""
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    for layer in data.get("layers", []) if isinstance(data, dict) else []:
        if isinstance(layer, dict) and layer.get("mediaType") == OLLAMA_MODEL_MEDIA_TYPE:
            digest = str(layer.get("digest", "")).replace(":", "-")
            blob = models_dir / "blobs" / digest
            if blob.is_file():
                return blob
    return None


def find_ollama(models_dir: Path | None = None) -> list[FoundModel]:
    models_dir = models_dir or ollama_models_dir()
    manifests = models_dir / "manifests"
    found = []
    if not manifests.is_dir():
        return found
    for manifest in sorted(p for p in manifests.rglob("*") if p.is_file()):
        blob = ollama_blob_of(manifest, models_dir)
        if blob is not None:
            found.append(FoundModel(_manifest_name(manifests, manifest), blob, "ollama", _size(blob)))
    return found


def find_gguf(folders: list[Path], max_depth: int = 4) -> list[FoundModel]:
    found = []
    for folder in folders:
        folder = Path(folder).expanduser()
        if folder.is_file() and folder.suffix == ".gguf":
            found.append(FoundModel(folder.name, folder, "gguf", _size(folder)))
            continue
        if not folder.is_dir():
            continue
        base_depth = len(folder.parts)
        for root, dirs, files in os.walk(folder):
            if len(Path(root).parts) - base_depth >= max_depth:
                dirs.clear()
            for name in sorted(files):
                if name.endswith(".gguf"):
                    path = Path(root) / name
                    found.append(FoundModel(name, path, "gguf", _size(path)))
    return found


def discover_models(gguf_folders: list[Path] | None = None) -> list[FoundModel]:
    """Everything found: HF cache, Ollama store, and GGUF files under the folders given."""
    return find_hf_cache() + find_ollama() + find_gguf(list(gguf_folders or []))


def resolve_model_name(name: str) -> Path | None:
    """'llama3:8b' / 'llama3' -> Ollama blob; 'org/name' -> newest HF cache snapshot; else None."""
    text = name.strip()
    if not text:
        return None
    models_dir = ollama_models_dir()
    model, _, tag = text.partition(":")
    tag = tag or "latest"
    if "/" in model and model.count("/") == 1 and ":" not in text:
        snapshot = hf_snapshot(text)
        if snapshot is not None:
            return snapshot
    namespace = "library" if "/" not in model else model.split("/")[0]
    model_name = model.rsplit("/", 1)[-1]
    manifest = models_dir / "manifests" / "registry.ollama.ai" / namespace / model_name / tag
    if manifest.is_file():
        return ollama_blob_of(manifest, models_dir)
    return None
