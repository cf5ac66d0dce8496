#!/usr/bin/env python3
"""Drive the checkpoint calls of the official Tinker SDK's RestClient (0.25 or 0.19) against `nexrl serve`.

Trains a LoRA model for two steps, saves a checkpoint and sampler weights, then through
`ServiceClient.create_rest_client()`: lists training runs (paginated) and gets one, lists the
run's checkpoints and every checkpoint, reads weights info, gets an archive URL and downloads
the archive (a gzipped tar holding a PEFT adapter), publishes and unpublishes, sets and clears
a TTL, and deletes a checkpoint. Every check prints a line; the script exits 1 on the first
failure and prints PASS at the end.

Usage (see scripts/tinker-sdk-check.md; test/server/tinker-sdk-rest.test.ts runs it):
    python3 scripts/tinker-sdk-rest-check.py               # starts nexrl serve (node dist/cli/main.js)
    TINKER_BASE_URL=http://127.0.0.1:8000 TINKER_API_KEY=tml-local python3 scripts/tinker-sdk-rest-check.py
"""

from __future__ import annotations

import io
import json
import os
import sys
import tarfile
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from importlib import import_module

sdk_check = import_module("tinker-sdk-check")
check, fail, byte_tokens = sdk_check.check, sdk_check.fail, sdk_check.byte_tokens


def run(tinker, types) -> None:
    service = tinker.ServiceClient()
    training = service.create_lora_training_client(base_model="tiny", rank=4)
    run_id = training.model_id
    data = [sdk_check.datum(types, text) for text in ["the cat sat", "on the mat"]]
    for _ in range(2):
        training.forward_backward(data, "cross_entropy").result()
        training.optim_step(types.AdamParams(learning_rate=0.01)).result()
    state_path = training.save_state("rest-check").result().path
    sampler_path = training.save_weights_for_sampler("rest-check-sampler").result().path
    other = service.create_lora_training_client(base_model="tiny", rank=4)

    rest = service.create_rest_client()
    runs = rest.list_training_runs(limit=1).result()
    check(
        len(runs.training_runs) == 1 and runs.cursor.total_count == 2 and runs.cursor.limit == 1,
        f"list_training_runs(limit=1): 1 of {runs.cursor.total_count} runs",
    )
    second = rest.list_training_runs(limit=1, offset=1).result()
    ids = {runs.training_runs[0].training_run_id, second.training_runs[0].training_run_id}
    check(ids == {run_id, other.model_id}, f"the two pages hold both runs: {sorted(ids)}")

    info = rest.get_training_run(run_id).result()
    check(
        info.training_run_id == run_id and info.base_model == "tiny" and info.is_lora and info.lora_rank == 4,
        f"get_training_run: base {info.base_model}, lora_rank {info.lora_rank}",
    )
    check(
        info.last_checkpoint is not None and info.last_checkpoint.tinker_path == state_path,
        f"its last checkpoint is {state_path}",
    )
    check(
        info.last_sampler_checkpoint is not None and info.last_sampler_checkpoint.tinker_path == sampler_path,
        f"its last sampler checkpoint is {sampler_path}",
    )
    by_path = rest.get_training_run_by_tinker_path(sampler_path).result()
    check(by_path.training_run_id == run_id, "get_training_run_by_tinker_path finds the run")

    listed = rest.list_checkpoints(run_id).result()
    kinds = sorted((c.checkpoint_type, c.checkpoint_id) for c in listed.checkpoints)
    check(
        kinds == [("sampler", "sampler_weights/rest-check-sampler"), ("training", "weights/rest-check")],
        f"list_checkpoints: {kinds}",
    )
    mine = rest.list_user_checkpoints(limit=10).result()
    check(
        {c.tinker_path for c in mine.checkpoints} == {state_path, sampler_path} and mine.cursor.total_count == 2,
        f"list_user_checkpoints: {mine.cursor.total_count} checkpoints",
    )
    weights = rest.get_weights_info_by_tinker_path(state_path).result()
    check(weights.base_model == "tiny" and weights.lora_rank == 4, "get_weights_info_by_tinker_path: tiny, rank 4")

    archive = rest.get_checkpoint_archive_url_from_tinker_path(sampler_path).result()
    check(archive.url.startswith("http://") and archive.expires.year >= 2024, f"archive URL expiring {archive.expires}")
    with urllib.request.urlopen(archive.url) as response:
        body = response.read()
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        names = sorted(tar.getnames())
        config = json.load(tar.extractfile("adapter_config.json"))
        tensors = tar.extractfile("adapter_model.safetensors").read()
    check(
        {"adapter_config.json", "adapter_model.safetensors", "checkpoint.json"} <= set(names),
        f"the archive ({len(body)} bytes, gzipped tar) holds {names}",
    )
    check(
        config["peft_type"] == "LORA" and config["r"] == 4 and config["lora_alpha"] == 32,
        f"adapter_config: r {config['r']}, lora_alpha {config['lora_alpha']} (the rank trained, alpha 32)",
    )
    try:
        from safetensors.numpy import load

        loaded = load(tensors)
        check(
            any(k.endswith(".lora_A.weight") for k in loaded)
            and all(v.ndim == 2 for v in loaded.values())
            and all(v.shape[0] == 4 for k, v in loaded.items() if k.endswith(".lora_A.weight"))
            and all(v.shape[1] == 4 for k, v in loaded.items() if k.endswith(".lora_B.weight")),
            f"adapter_model.safetensors loads with the safetensors package: {len(loaded)} tensors",
        )
    except ImportError:
        print("skip: the safetensors package is not installed", flush=True)

    rest.publish_checkpoint_from_tinker_path(state_path).result()
    check(next(c for c in rest.list_checkpoints(run_id).result().checkpoints if c.tinker_path == state_path).public, "published")
    # (Publishing twice answers 409, which the SDK retries as a conflict: not driven here.)
    rest.unpublish_checkpoint_from_tinker_path(state_path).result()
    check(not rest.list_checkpoints(run_id).result().checkpoints[0].public, "unpublished")

    rest.set_checkpoint_ttl_from_tinker_path(state_path, 3600).result()
    expiring = next(c for c in rest.list_checkpoints(run_id).result().checkpoints if c.tinker_path == state_path)
    check(expiring.expires_at is not None, f"set_checkpoint_ttl: expires at {expiring.expires_at}")
    rest.set_checkpoint_ttl_from_tinker_path(state_path, None).result()
    kept = next(c for c in rest.list_checkpoints(run_id).result().checkpoints if c.tinker_path == state_path)
    check(kept.expires_at is None, "set_checkpoint_ttl(None) removes the expiry")

    rest.delete_checkpoint_from_tinker_path(state_path).result()
    left = [c.tinker_path for c in rest.list_checkpoints(run_id).result().checkpoints]
    check(left == [sampler_path], f"delete_checkpoint: left {left}")
    try:
        rest.get_checkpoint_archive_url_from_tinker_path(state_path).result()
        fail("the archive of a deleted checkpoint should answer 404")
    except tinker.APIStatusError as error:
        check(error.status_code == 404, "the archive URL of a deleted checkpoint answers 404")
    print(f"PASS: tinker SDK {tinker.__version__} RestClient against {os.environ['TINKER_BASE_URL']}")


def main() -> None:
    import tinker
    from tinker import types

    print(f"tinker SDK {tinker.__version__} from {Path(tinker.__file__).parent}", flush=True)
    server = None
    if not os.environ.get("TINKER_BASE_URL"):
        server, url = sdk_check.start_server(["use_pyqwest_transport=false"])
        os.environ["TINKER_BASE_URL"] = url
    os.environ.setdefault("TINKER_API_KEY", "tml-nexrl-sdk-check")
    try:
        run(tinker, types)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
