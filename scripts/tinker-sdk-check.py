#!/usr/bin/env python3
"""Drive `nexrl serve --protocol tinker` with the official Tinker Python SDK, unchanged.

Trains a LoRA model for a few steps (forward_backward + optim_step), runs a forward pass,
saves a checkpoint and sampler weights, samples and computes logprobs, then resumes: a new
training client from the checkpoint (weights and optimizer state) must reproduce the trained
model's logprobs and keep training. Every check prints a line; the script exits 1 on the
first failure.

Usage (see scripts/tinker-sdk-check.md):
    python3 scripts/tinker-sdk-check.py                     # starts nexrl serve (node dist/cli/main.js)
    python3 scripts/tinker-sdk-check.py --flag pjwt_auth_enabled=true
    TINKER_BASE_URL=http://127.0.0.1:8000 TINKER_API_KEY=tml-local python3 scripts/tinker-sdk-check.py

The SDK itself must be importable (`pip install tinker==0.25.0`, or its source on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def fail(message: str) -> None:
    print(f"FAIL: {message}", flush=True)
    sys.exit(1)


def check(condition: bool, message: str) -> None:
    if not condition:
        fail(message)
    print(f"ok: {message}", flush=True)


def start_server(flags: list[str]) -> tuple[subprocess.Popen[str], str]:
    """Starts nexrl serve on a free loopback port and returns it with its URL."""
    main = REPO / "dist" / "cli" / "main.js"
    if not main.exists():
        fail(f"{main} is missing; run `npm run build` first")
    command = ["node", str(main), "serve", "--protocol", "tinker", "--port", "0"]
    for flag in flags:
        command += ["--tinker-flag", flag]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = server.stdout.readline()
        if not line:
            break
        match = re.search(r"(http://127\.0\.0\.1:\d+)", line)
        if match:
            return server, match.group(1)
    server.kill()
    fail("nexrl serve did not print its URL")
    raise AssertionError("unreachable")


def byte_tokens(text: str) -> list[int]:
    """The tokens of the local engine's byte tokenizer: BOS (256), the UTF-8 bytes, EOS (257)."""
    return [256, *text.encode("utf-8"), 257]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flag", action="append", default=[], help="client/config flag KEY=VALUE for nexrl serve")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()

    import tinker
    from tinker import types

    print(f"tinker SDK {tinker.__version__} from {Path(tinker.__file__).parent}", flush=True)
    server = None
    if not os.environ.get("TINKER_BASE_URL"):
        server, url = start_server(args.flag)
        os.environ["TINKER_BASE_URL"] = url
        print(f"nexrl serve at {url} with flags {args.flag or 'none'}", flush=True)
    os.environ.setdefault("TINKER_API_KEY", "tml-nexrl-sdk-check")
    try:
        run(tinker, types, args.steps)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)


def datum(types, text: str):
    tokens = byte_tokens(text)
    n = len(tokens) - 1
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": types.TensorData(data=tokens[1:], dtype="int64", shape=[n]),
            "weights": types.TensorData(data=[1.0] * n, dtype="float32", shape=[n]),
        },
    )


def logprobs_of(output) -> list[list[float]]:
    return [[float(v) for v in o["logprobs"].tolist()] for o in output.loss_fn_outputs]


def run(tinker, types, steps: int) -> None:
    service = tinker.ServiceClient()
    config = service.holder._client_config
    print(f"client/config as the SDK resolved it: {config.model_dump()}", flush=True)

    training = service.create_lora_training_client(base_model="tiny", rank=8)
    check(isinstance(training.model_id, str) and ":train:" in training.model_id, f"created model {training.model_id}")

    data = [datum(types, text) for text in ["the cat sat", "on the mat", "a dog ran far"]]
    adam = types.AdamParams(learning_rate=0.01)
    losses = []
    for _ in range(steps):
        fwdbwd = training.forward_backward(data, "cross_entropy")
        optim = training.optim_step(adam)
        result = fwdbwd.result()
        optim.result()
        losses.append(result.metrics["loss:sum"])
        check(
            [len(o["logprobs"].tolist()) for o in result.loss_fn_outputs] == [len(byte_tokens(t)) - 1 for t in ["the cat sat", "on the mat", "a dog ran far"]],
            f"forward_backward returned one logprob per target token (loss:sum {losses[-1]:.4f})",
        )
    check(losses[-1] < losses[0], f"loss fell over {steps} steps: {losses[0]:.4f} -> {losses[-1]:.4f}")

    forward = training.forward(data, "cross_entropy").result()
    trained = logprobs_of(forward)
    check(
        math.isclose(sum(-v for row in trained for v in row), forward.metrics["loss:sum"], rel_tol=1e-4),
        f"forward (no gradients) loss:sum {forward.metrics['loss:sum']:.4f} is minus the sum of its logprobs",
    )

    checkpoint = training.save_state("sdk-check").result().path
    check(checkpoint.startswith("tinker://") and "/weights/" in checkpoint, f"saved state at {checkpoint}")

    sampler_path = training.save_weights_for_sampler("sdk-check-sampler").result().path
    check("/sampler_weights/" in sampler_path, f"saved sampler weights at {sampler_path}")
    sampler = service.create_sampling_client(model_path=sampler_path)
    prompt = types.ModelInput.from_ints(byte_tokens("the cat")[:-1])
    samples = sampler.sample(
        prompt, num_samples=2, sampling_params=types.SamplingParams(max_tokens=6, temperature=1.0, seed=7)
    ).result()
    check(
        len(samples.sequences) == 2 and all(1 <= len(s.tokens) <= 6 for s in samples.sequences),
        f"sampled 2 sequences: {[list(s.tokens) for s in samples.sequences]}",
    )
    check(
        all(s.logprobs is not None and len(s.logprobs) == len(s.tokens) for s in samples.sequences),
        "every sampled token has a logprob",
    )
    prompt_logprobs = sampler.compute_logprobs(types.ModelInput.from_ints(byte_tokens("the cat sat"))).result()
    check(
        prompt_logprobs[0] is None and all(isinstance(v, float) for v in prompt_logprobs[1:]),
        f"compute_logprobs: None, then {len(prompt_logprobs) - 1} logprobs",
    )

    quick = training.save_weights_and_get_sampling_client()
    same = quick.sample(
        prompt, num_samples=2, sampling_params=types.SamplingParams(max_tokens=6, temperature=1.0, seed=7)
    ).result()
    check(
        [list(s.tokens) for s in same.sequences] == [list(s.tokens) for s in samples.sequences],
        "save_weights_and_get_sampling_client samples what the saved sampler weights sample",
    )

    resumed = service.create_training_client_from_state_with_optimizer(checkpoint)
    check(resumed.model_id != training.model_id, f"resumed into a new model {resumed.model_id}")
    again = logprobs_of(resumed.forward(data, "cross_entropy").result())
    worst = max(abs(a - b) for row_a, row_b in zip(again, trained) for a, b in zip(row_a, row_b))
    check(worst < 1e-4, f"the resumed model reproduces the trained logprobs (largest difference {worst:.2e})")
    next_a = training.forward_backward(data, "cross_entropy")
    training.optim_step(adam).result()
    next_b = resumed.forward_backward(data, "cross_entropy")
    resumed.optim_step(adam).result()
    after_a = logprobs_of(training.forward(data, "cross_entropy").result())
    after_b = logprobs_of(resumed.forward(data, "cross_entropy").result())
    next_a.result()
    next_b.result()
    drift = max(abs(a - b) for row_a, row_b in zip(after_a, after_b) for a, b in zip(row_a, row_b))
    check(drift < 1e-4, f"one more step from the resumed state (optimizer included) matches the original (difference {drift:.2e})")
    print(f"PASS: tinker SDK {tinker.__version__} trained, sampled, saved and resumed against {os.environ['TINKER_BASE_URL']}")


if __name__ == "__main__":
    main()
