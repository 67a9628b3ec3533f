"""A small OpenAI-compatible server for a local Hugging Face model, loaded with transformers.

    python -m vramtui.runners.transformers_server --model DIR [--quantization bnb-4bit|bnb-8bit]
        [--device-map auto] [--max-memory 0=10GiB,cpu=30GiB] [--dtype auto|float16|bfloat16|float32]
        [--attn-implementation sdpa|eager|flash_attention_2] [--max-length N] [--batch-size N]

It prints one line per stage, as real servers do, so the log engine can follow it:
`loading tokenizer`, `loading weights`, `weights loaded`, `ready`; errors print the library's own
traceback (the real `CUDA out of memory`, the real bitsandbytes error). Endpoints: GET /health,
GET /v1/models, POST /v1/chat/completions (stream or not). One stdlib ThreadingHTTPServer; at most
`--batch-size` generations run at once, the rest wait.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import traceback
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PREFIX = "vramtui-runner:"

DEFAULT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def log(message: str) -> None:
    print(f"{PREFIX} {message}", flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m vramtui.runners.transformers_server", description=__doc__
    )
    parser.add_argument("--model", required=True, help="a local model folder (config.json + weights)")
    parser.add_argument("--served-model-name", help="the name clients use (default: the --model value)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--quantization", choices=["bnb-4bit", "bnb-8bit"], help="bitsandbytes at load time")
    parser.add_argument("--device-map", help='accelerate device map: "auto", "cpu", "cuda:0" ...')
    parser.add_argument("--max-memory", help="per-device caps for the device map: 0=10GiB,cpu=30GiB")
    parser.add_argument("--dtype", default="auto", help="auto | float16 | bfloat16 | float32")
    parser.add_argument("--attn-implementation", help="sdpa | eager | flash_attention_2")
    parser.add_argument("--max-length", type=int, help="longest prompt + answer in tokens")
    parser.add_argument("--batch-size", type=int, default=1, help="generations at once (the rest queue)")
    parser.add_argument("--threads", type=int, help="torch CPU threads")
    return parser.parse_args(argv)


def parse_max_memory(text: str) -> dict[Any, str]:
    """'0=10GiB,cpu=30GiB' -> {0: '10GiB', 'cpu': '30GiB'} as accelerate wants it."""
    caps: dict[Any, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        device, sep, size = part.partition("=")
        if not sep or not size.strip():
            raise ValueError(f"--max-memory: expected DEVICE=SIZE, got {part!r}")
        key = device.strip()
        caps[int(key) if key.isdigit() else key] = size.strip()
    return caps


def with_every_gpu(caps: dict[Any, str], free_bytes: list[int]) -> dict[Any, str]:
    """A cap that names only the host (vramtui's cpu_offload: `cpu=NGiB`) also gives every GPU its free
    memory: accelerate reads a missing GPU as 0 bytes and would load the whole model in host RAM."""
    if any(isinstance(key, int) for key in caps) or not free_bytes:
        return caps
    gpus: dict[Any, str] = {index: f"{free // 2**20}MiB" for index, free in enumerate(free_bytes)}
    return {**gpus, **caps}


class Engine:
    """The loaded model and tokenizer, and a lock-free way to run at most N generations at once."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.name = args.served_model_name or args.model
        self.slots = threading.BoundedSemaphore(max(1, args.batch_size))
        self.model: Any = None
        self.tokenizer: Any = None
        self.device: Any = None

    def load(self) -> None:
        import torch
        import transformers

        args = self.args
        if args.threads:
            torch.set_num_threads(args.threads)
        log(
            f"transformers {transformers.__version__}, torch {torch.__version__}, cuda={torch.cuda.is_available()}"
        )
        log(f"loading tokenizer from {args.model}")
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(args.model)
        if self.tokenizer.chat_template is None:
            self.tokenizer.chat_template = DEFAULT_TEMPLATE
            log("warning: the tokenizer has no chat template; using a plain 'role: content' one")

        kwargs: dict[str, Any] = {}
        if args.dtype and args.dtype != "auto":
            kwargs["dtype"] = getattr(torch, args.dtype)
        else:
            kwargs["dtype"] = "auto"
        if args.quantization:
            four = args.quantization == "bnb-4bit"
            kwargs["quantization_config"] = transformers.BitsAndBytesConfig(
                load_in_4bit=four,
                load_in_8bit=not four,
                bnb_4bit_quant_type="nf4",
                bnb_4bit_compute_dtype=torch.bfloat16,
            )
        if args.device_map:
            kwargs["device_map"] = args.device_map
        if args.max_memory:
            free = [torch.cuda.mem_get_info(i)[0] for i in range(torch.cuda.device_count())]
            kwargs["max_memory"] = with_every_gpu(parse_max_memory(args.max_memory), free)
            kwargs.setdefault("device_map", "auto")
        if args.attn_implementation:
            kwargs["attn_implementation"] = args.attn_implementation
        shown = {k: (str(v) if k != "quantization_config" else args.quantization) for k, v in kwargs.items()}
        log(
            f"loading weights from {args.model} ({', '.join(f'{k}={v}' for k, v in shown.items()) or 'defaults'})"
        )
        started = time.monotonic()
        self.model = transformers.AutoModelForCausalLM.from_pretrained(args.model, **kwargs)
        if "device_map" not in kwargs and torch.cuda.is_available():
            self.model = self.model.to("cuda")
        self.model.eval()
        self.device = next(self.model.parameters()).device
        n_params = sum(p.numel() for p in self.model.parameters())
        size = self.model.get_memory_footprint()
        log(
            f"weights loaded: {n_params} parameters, {size / 2**20:.2f} MiB on {self.device} "
            f"in {time.monotonic() - started:.2f} s"
        )
        if torch.cuda.is_available():
            for index in range(torch.cuda.device_count()):
                log(
                    f"cuda:{index} allocated {torch.cuda.memory_allocated(index) / 2**20:.2f} MiB, "
                    f"reserved {torch.cuda.memory_reserved(index) / 2**20:.2f} MiB"
                )

    def max_length(self) -> int:
        limit = self.args.max_length or getattr(self.model.config, "max_position_embeddings", None) or 2048
        return int(limit)

    def prompt_ids(self, messages: list[dict[str, str]]) -> Any:
        encoded = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        return encoded["input_ids"].to(self.device)

    def generate(self, input_ids: Any, max_new_tokens: int, streamer: Any = None) -> Any:
        import torch

        with torch.inference_mode():
            return self.model.generate(
                input_ids,
                attention_mask=torch.ones_like(input_ids),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                streamer=streamer,
                pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id or 0,
            )


class Handler(BaseHTTPRequestHandler):
    engine: Engine
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        log(f'{self.address_string()} "{self.requestline}" {args[1] if len(args) > 1 else ""}')

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str, kind: str) -> None:
        # the reason goes to the log too: a bare "400" there leaves diagnose (and the user) guessing
        log(f"request refused with HTTP {status}: {message}")
        self._send_json(status, {"error": {"message": message, "type": kind, "code": status}})

    def do_GET(self) -> None:
        if self.path in ("/health", "/v1/health"):
            self._send_json(200, {"status": "ok"})
        elif self.path == "/v1/models":
            model = {
                "id": self.engine.name,
                "object": "model",
                "owned_by": "vramtui",
                "max_model_len": self.engine.max_length(),
            }
            self._send_json(200, {"object": "list", "data": [model]})
        else:
            self._error(404, f"no route {self.path}", "NotFoundError")

    def do_POST(self) -> None:
        if self.path != "/v1/chat/completions":
            self._error(404, f"no route {self.path}", "NotFoundError")
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
            request = json.loads(self.rfile.read(length) or b"{}")
            messages = request["messages"]
            if not isinstance(messages, list):
                raise TypeError("messages must be a list")
        except (ValueError, KeyError, TypeError) as error:
            self._error(400, f"bad request: {error}", "BadRequestError")
            return
        model = request.get("model")
        if model and model not in {self.engine.name, self.engine.args.model}:
            self._error(404, f"The model `{model}` does not exist.", "NotFoundError")
            return
        max_new = int(request.get("max_tokens") or request.get("max_completion_tokens") or 16)
        with self.engine.slots:
            input_ids = self.engine.prompt_ids(messages)
            prompt_tokens = int(input_ids.shape[-1])
            limit = self.engine.max_length()
            if prompt_tokens + max_new > limit:
                self._error(
                    400,
                    f"This model's maximum context length is {limit} tokens. However, you requested "
                    f"{prompt_tokens + max_new} tokens ({prompt_tokens} in the messages, {max_new} in the completion).",
                    "BadRequestError",
                )
                return
            if request.get("stream"):
                self._stream(input_ids, max_new, prompt_tokens)
                return
            try:
                self._complete(input_ids, max_new, prompt_tokens)
            except Exception as error:  # the log keeps the traceback; the client gets why (QA 32 D15)
                traceback.print_exc()
                self._error(500, f"{type(error).__name__}: {error}", "InternalServerError")

    def _complete(self, input_ids: Any, max_new: int, prompt_tokens: int) -> None:
        output = self.engine.generate(input_ids, max_new)
        new_ids = output[0][prompt_tokens:]
        text = self.engine.tokenizer.decode(new_ids, skip_special_tokens=True)
        self._send_json(
            200,
            {
                "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": self.engine.name,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": len(new_ids),
                    "total_tokens": prompt_tokens + len(new_ids),
                },
            },
        )

    def _stream(self, input_ids: Any, max_new: int, prompt_tokens: int) -> None:
        from transformers import TextIteratorStreamer

        streamer = TextIteratorStreamer(self.engine.tokenizer, skip_prompt=True, skip_special_tokens=True)
        result: dict[str, Any] = {}

        def work() -> None:
            try:
                result["output"] = self.engine.generate(input_ids, max_new, streamer)
            except Exception as error:  # the real error goes to the log; the stream just ends
                traceback.print_exc()
                result["error"] = error
                streamer.end()

        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        ident = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def send(
            delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None
        ) -> None:
            chunk: dict[str, Any] = {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": self.engine.name,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            if usage is not None:
                chunk["usage"] = usage
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()

        send({"role": "assistant"})
        for piece in streamer:
            if piece:
                send({"content": piece})
        thread.join()
        if "error" in result:  # said inside the stream, as vLLM does: the 200 went out before it failed
            error = result["error"]
            said = {"message": f"{type(error).__name__}: {error}", "type": "InternalServerError", "code": 500}
            self.wfile.write(f"data: {json.dumps({'error': said})}\n\ndata: [DONE]\n\n".encode())
            self.wfile.flush()
            return
        completion = int(result["output"].shape[-1] - prompt_tokens) if "output" in result else 0
        send(
            {},
            finish="length",
            usage={
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion,
                "total_tokens": prompt_tokens + completion,
            },
        )
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not Path(args.model).exists():
        log(f"error: model path does not exist: {args.model}")
        print(f"FileNotFoundError: No such file or directory: '{args.model}'", file=sys.stderr, flush=True)
        return 1
    engine = Engine(args)
    try:
        engine.load()
    except Exception:
        traceback.print_exc()
        sys.stderr.flush()
        log("error: loading failed")
        return 1
    Handler.engine = engine
    try:
        server = ThreadingHTTPServer((args.host, args.port), Handler)
    except OSError as error:
        log(f"error: cannot listen on {args.host}:{args.port}: {error.strerror}")
        return 1
    server.daemon_threads = True
    log(
        f"ready: serving {engine.name!r} on http://{args.host}:{args.port} (max length {engine.max_length()})"
    )
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        log("shut down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
