#!/usr/bin/env python3
"""A tool-using agent in plain Python (standard library only) that trains with nexrl.

It claims tasks from a running nexrl agent gateway, answers each one by chatting with the policy
through the rollout's OpenAI-compatible base URL (calling the `get` or `calc` tool of the
agent_tools recipe when the model asks for one), scores its own answer, and pushes the finished episode back as trajectories built
from the token ids the gateway reported.

    python3 examples/python_agent/agent.py --gateway http://127.0.0.1:8765 \
        --codes recipe/agent_tools/data/codes.json

Start the run first with `rollout_worker.agent.external: true` and a fixed
`rollout_worker.agent.gateway.port`. The agent exits when the run ends (the gateway goes away) or
after --idle seconds without a task.
"""

import argparse
import ast
import json
import operator
import sys
import time
import urllib.error
import urllib.request

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get",
            "description": "The secret code of an animal.",
            "parameters": {"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "calc",
            "description": "Evaluates an integer expression with + - * and parentheses.",
            "parameters": {"type": "object", "properties": {"e": {"type": "string"}}, "required": ["e"]},
        },
    },
]

OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.USub: operator.neg}


class GatewayGone(Exception):
    """The gateway stopped answering or is shutting down: the run is over."""


def post(url, body, timeout=60):
    """POSTs JSON; returns (status, parsed body or None)."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            text = response.read().decode()
            return response.status, (json.loads(text) if text else None)
    except urllib.error.HTTPError as error:
        text = error.read().decode()
        return error.code, (json.loads(text) if text else None)
    except (urllib.error.URLError, ConnectionError) as error:
        raise GatewayGone(str(error)) from error


def calc(expression):
    """Evaluates + - * on integers, nothing else."""

    def walk(node):
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
            return OPERATORS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in OPERATORS:
            return OPERATORS[type(node.op)](walk(node.operand))
        raise ValueError("only integers, + - * and parentheses")

    return str(walk(ast.parse(expression, mode="eval")))


def run_tool(call, codes):
    """The tool message content answering one tool call."""
    name = call["function"]["name"]
    try:
        args = json.loads(call["function"]["arguments"] or "{}")
        if name == "get":
            key = str(args.get("k", "")).strip().lower()
            return codes.get(key, 'no code for "%s"' % key)
        if name == "calc":
            return calc(str(args.get("e", "")))
        return "error: unknown tool " + name
    except (ValueError, SyntaxError, TypeError) as error:
        return "error: " + str(error)


def merge(calls):
    """Consecutive calls whose token histories continue each other become one trajectory."""
    trajectories = []
    current = None
    previous = None
    for prompt, completion, logprobs in calls:
        continues = current is not None and prompt[: len(previous)] == previous
        if not continues:
            current = {"tokens": [], "loss_mask": [], "logprobs": []}
            trajectories.append(current)
        added = prompt[len(current["tokens"]) :]
        current["tokens"] += added + completion
        current["loss_mask"] += [0] * len(added) + [1] * len(completion)
        current["logprobs"] += [0.0] * len(added) + logprobs
        previous = prompt + completion
    return trajectories


def episode(claim, codes, max_turns, max_tokens):
    """Runs one task; returns the body of its push, or None when the rollout ended first (410)."""
    task = claim["task"]
    data = task["data"]
    question = task["prompt"] if isinstance(task["prompt"], str) else data.get("question", "")
    messages = [{"role": "user", "content": question}]
    calls = []
    answer = ""
    for _ in range(max_turns):
        status, response = post(claim["base_url"] + "/chat/completions", {
            "model": claim["model"],
            "messages": messages,
            "tools": TOOLS,
            "max_tokens": max_tokens,
            "logprobs": True,
            "return_token_ids": True,
        })
        if status == 410:
            return None  # the rollout ended (its timeout): nothing to push
        if status != 200:
            break  # a limit of the episode (turns, tokens, context): score what there is
        choice = response["choices"][0]
        calls.append((response["prompt_token_ids"], choice["token_ids"], [entry["logprob"] for entry in choice["logprobs"]["content"]]))
        message = choice["message"]
        messages.append(message)
        if not message.get("tool_calls"):
            answer = (message.get("content") or "").strip()
            break
        for call in message["tool_calls"]:
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": run_tool(call, codes)})
    reward = 1.0 if answer and answer == str(data.get("answer", "")) else 0.0
    body = {"rollout_id": claim["rollout_id"], "reward": reward, "final_answer": answer, "extra_info": {"agent": "python", "turns": len(calls)}}
    if calls:
        body["trajectories"] = merge(calls)
    return body


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gateway", required=True, help="the agent gateway's address, e.g. http://127.0.0.1:8765")
    parser.add_argument("--codes", help="JSON file of the get tool's codes (animal -> code)")
    parser.add_argument("--episodes", type=int, default=0, help="stop after this many episodes (0: until the run ends)")
    parser.add_argument("--idle", type=float, default=60.0, help="stop after this many seconds without a task")
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=80)
    args = parser.parse_args()
    codes = {}
    if args.codes:
        with open(args.codes, encoding="utf-8") as file:
            codes = json.load(file)
    gateway = args.gateway.rstrip("/")
    done = 0
    idle_since = time.monotonic()
    connected = False
    try:
        while args.episodes == 0 or done < args.episodes:
            try:
                status, claim = post(gateway + "/tasks/claim", {"wait_seconds": 2})
            except GatewayGone:
                if connected or time.monotonic() - idle_since > args.idle:
                    raise
                time.sleep(0.5)  # the run is still starting its gateway
                continue
            connected = True
            if status == 503:
                break
            if status == 204:
                if time.monotonic() - idle_since > args.idle:
                    break
                continue
            if status != 200:
                sys.exit("claim failed with %d: %s" % (status, claim))
            body = episode(claim, codes, args.max_turns, args.max_tokens)
            if body is None:
                continue
            status, answer = post(gateway + "/trajectories", body)
            message = answer["error"]["message"] if status != 200 and answer else ""
            if status in (404, 409):
                print("push not taken: " + message, flush=True)  # the rollout ended meanwhile
                continue
            if status != 200:
                sys.exit("push rejected with %d: %s" % (status, message))
            done += 1
            idle_since = time.monotonic()
            print("episode %d: reward %.1f, %d trajectories" % (done, body["reward"], len(body.get("trajectories", []))), flush=True)
    except GatewayGone:
        pass
    print("pushed %d episodes" % done, flush=True)


if __name__ == "__main__":
    main()
