"""The engine benchmark's PyTorch baseline: the same GPT-2-shaped transformer as nexrl's engine.

Token and learned positional embeddings, pre-LayerNorm blocks with causal multi-head attention
and a 4x-wide tanh-GELU MLP, a final LayerNorm and an output projection tied to the token
embeddings; weights in GPT-2's Conv1D layout (input-major), loaded from the engine's own initial
weights so both sides are the same model. A training step is forward + backward + AdamW on the
summed, per-token-weighted cross-entropy; sampling decodes with a K/V cache.

Driven by bench/torch/baseline.ts over pipes, one JSON object per line each way:
  {"op": "load", ...}    -> {"torch": ..., "threads": ...}
  {"op": "train"}        -> {"ms": ..., "loss": ...}   (loss before the update)
  {"op": "sample"}       -> {"ms": ..., "tokens": ...}
Each reply times the work alone, so the pipe's round trip is not charged to PyTorch.
"""

import json
import math
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

LN_EPS = 1e-5


class Model:
    def __init__(self, config, weights_file, layout):
        self.d = config["dModel"]
        self.heads = config["nHeads"]
        self.layers = config["nLayers"]
        flat = np.fromfile(weights_file, dtype="<f4")
        self.params = {}
        offset = 0
        for tensor in layout:
            size = math.prod(tensor["shape"])
            data = torch.from_numpy(flat[offset : offset + size].copy()).reshape(tensor["shape"])
            self.params[tensor["name"]] = data.requires_grad_(True)
            offset += size
        if offset != flat.size:
            raise ValueError(f"layout covers {offset} floats, the weights file holds {flat.size}")

    def p(self, name):
        return self.params[name]

    def block(self, l, x, attend):
        """One pre-LayerNorm block on x [b, t, d]; `attend(layer, q, k, v)` does the attention."""
        p = f"h.{l}"
        h = F.layer_norm(x, (self.d,), self.p(f"{p}.ln_1.weight"), self.p(f"{p}.ln_1.bias"), LN_EPS)
        qkv = torch.matmul(h, self.p(f"{p}.attn.c_attn.weight")) + self.p(f"{p}.attn.c_attn.bias")
        b, t, _ = qkv.shape
        # [b, t, 3d] -> q, k, v as [b, heads, t, dh] each.
        q, k, v = qkv.view(b, t, 3, self.heads, self.d // self.heads).permute(2, 0, 3, 1, 4)
        context = attend(l, q, k, v).transpose(1, 2).reshape(b, t, self.d)
        x = x + torch.matmul(context, self.p(f"{p}.attn.c_proj.weight")) + self.p(f"{p}.attn.c_proj.bias")
        h = F.layer_norm(x, (self.d,), self.p(f"{p}.ln_2.weight"), self.p(f"{p}.ln_2.bias"), LN_EPS)
        up = F.gelu(torch.matmul(h, self.p(f"{p}.mlp.c_fc.weight")) + self.p(f"{p}.mlp.c_fc.bias"), approximate="tanh")
        return x + torch.matmul(up, self.p(f"{p}.mlp.c_proj.weight")) + self.p(f"{p}.mlp.c_proj.bias")

    def logits(self, x):
        h = F.layer_norm(x, (self.d,), self.p("ln_f.weight"), self.p("ln_f.bias"), LN_EPS)
        return torch.matmul(h, self.p("wte.weight").t())

    def embed(self, ids, start):
        return self.p("wte.weight")[ids] + self.p("wpe.weight")[start : start + ids.shape[1]]

    def forward(self, ids):
        """Logits [b, t, vocab] of a full causal forward."""
        t = ids.shape[1]
        mask = torch.full((t, t), float("-inf")).triu(1)

        def attend(_l, q, k, v):
            scores = torch.matmul(q, k.transpose(-1, -2)) * (1 / math.sqrt(q.shape[-1])) + mask
            return torch.matmul(torch.softmax(scores, -1), v)

        x = self.embed(ids, 0)
        for l in range(self.layers):
            x = self.block(l, x, attend)
        return self.logits(x)


class Baseline:
    def __init__(self, msg):
        self.model = Model(msg["config"], msg["weightsFile"], msg["layout"])
        batch = msg["batch"]
        self.inputs = torch.tensor([s["inputs"] for s in batch])
        self.targets = torch.tensor([s["targets"] for s in batch]).reshape(-1)
        self.weights = torch.tensor([s["weights"] for s in batch], dtype=torch.float32).reshape(-1)
        adam = msg["adam"]
        self.clip = adam["gradClipNorm"]
        self.optimizer = torch.optim.AdamW(
            list(self.model.params.values()),
            lr=adam["learningRate"],
            betas=(adam["beta1"], adam["beta2"]),
            eps=adam["eps"],
            weight_decay=adam["weightDecay"],
        )
        self.sampling = msg["sample"]
        self.generator = torch.Generator().manual_seed(self.sampling["seed"])

    def train(self):
        logits = self.model.forward(self.inputs)
        nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), self.targets, reduction="none")
        loss = (nll * self.weights).sum()
        loss.backward()
        if self.clip > 0:
            # The engine's clipping: scale by clip / (norm + 1e-6) when the norm exceeds it.
            torch.nn.utils.clip_grad_norm_(self.model.params.values(), self.clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return {"loss": loss.item()}

    @torch.inference_mode()
    def sample(self):
        """Samples maxTokens tokens for numSamples copies of the prompt; a row leaves at EOS (kept)."""
        m = self.model
        s = self.sampling
        prompt = torch.tensor([s["prompt"]] * s["numSamples"])
        rows, length = prompt.shape
        dh = m.d // m.heads
        capacity = length + s["maxTokens"]
        cache_k = [torch.empty(rows, m.heads, capacity, dh) for _ in range(m.layers)]
        cache_v = [torch.empty(rows, m.heads, capacity, dh) for _ in range(m.layers)]
        filled = 0

        def attend(l, q, k, v):
            t = q.shape[2]
            cache_k[l][:, :, filled : filled + t] = k
            cache_v[l][:, :, filled : filled + t] = v
            keys = cache_k[l][:, :, : filled + t]
            scores = torch.matmul(q, keys.transpose(-1, -2)) * (1 / math.sqrt(dh))
            if t > 1:
                scores = scores + torch.full((t, filled + t), float("-inf")).triu(filled + 1)
            return torch.matmul(torch.softmax(scores, -1), cache_v[l][:, :, : filled + t])

        ids = prompt
        generated = 0
        for _ in range(s["maxTokens"]):
            x = m.embed(ids, filled)
            for l in range(m.layers):
                x = m.block(l, x, attend)
            filled += ids.shape[1]
            probs = torch.softmax(m.logits(x[:, -1]) / s["temperature"], -1)
            ids = torch.multinomial(probs, 1, generator=self.generator)
            generated += ids.shape[0]
            keep = (ids[:, 0] != s["eosId"]).nonzero()[:, 0]
            if keep.numel() == 0:
                break
            if keep.numel() < ids.shape[0]:
                ids = ids[keep]
                cache_k = [c[keep] for c in cache_k]
                cache_v = [c[keep] for c in cache_v]
        return {"tokens": generated}


def main():
    baseline = None
    for line in sys.stdin:
        msg = json.loads(line)
        op = msg["op"]
        start = time.perf_counter()
        if op == "load":
            torch.set_num_threads(msg["threads"])
            baseline = Baseline(msg)
            reply = {"torch": torch.__version__, "threads": torch.get_num_threads()}
        elif op == "train":
            reply = baseline.train()
        elif op == "sample":
            reply = baseline.sample()
        else:
            raise ValueError(f"unknown op {op!r}")
        reply["ms"] = (time.perf_counter() - start) * 1000
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
