"""The PyTorch peer of SpecLab's EAGLE3 training step, for timing side by side (bench/step-peer.ts).

    python bench/peers/eagle3_step_torch.py --config-json FILE --batch B --seq S --ttt L
        [--steps N] [--warmup N] [--threads N] [--fixture DIR]

One step is what bench/train-rig.ts times for SpecLab: the draft's forward over L test-time-training
steps (SpecForge's cache_hidden attention: the causal keys of step 0 plus the diagonal key of every later
step, RoPE at position t + k), the teacher, the per-step soft cross-entropy weighted 0.8^k, the accuracy
and acceptance metrics, autograd's backward through the whole unroll, gradient clipping to norm 0.5 and
one AdamW step. The math is written out from the fixture's facts (fixtures/eagle3/facts.json), in
float32, the way SpecForge's classes compute it; no SpecForge import, so it runs with PyTorch alone.

--fixture DIR runs on the SpecForge fixture's own weights and batch (DIR/eagle3/eagle3_reference
.safetensors) and refuses to time anything unless its total loss and pre-clip gradient norm match
SpecForge's within 1e-5 relative: the peer must compute the same step before its time means anything.
Without it the weights and batch are random (uniform, std 0.02, as bench/train-rig.ts draws them; every
position in the loss), at the config's shape.

Prints one JSON line: the step's median, minimum and mean wall milliseconds over --steps after --warmup,
PyTorch's version, its BLAS and thread count, and the first step's total loss.
"""

import argparse
import json
import math
import os
import statistics
import struct
import sys
import time

torch = None  # imported in main(), after the BLAS thread variables are set

PLOSS_DECAY = 0.8
CLIP_NORM = 0.5
ADAMW = dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.01)


def fail(msg):
    print(f"bench/peers/eagle3_step_torch.py: {msg}", file=sys.stderr)
    sys.exit(2)


def read_safetensors(path):
    """Every tensor of a safetensors file, by name (the format is a JSON header and raw little-endian data)."""
    dtypes = {"F32": torch.float32, "I64": torch.int64, "BOOL": torch.bool}
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + n])
    out = {}
    for name, spec in header.items():
        if name == "__metadata__" or spec["dtype"] not in dtypes:
            continue
        a, b = spec["data_offsets"]
        raw = bytearray(data[8 + n + a : 8 + n + b])
        out[name] = torch.frombuffer(raw, dtype=dtypes[spec["dtype"]]).reshape(spec["shape"]).clone()
    return out


def blas_name():
    """The BLAS this PyTorch multiplies with: its build's BLAS_INFO, or for a `generic` build (Debian's) the
    BLAS library file the process loaded (Debian picks it with update-alternatives)."""
    info = torch.__config__.show()
    name = info.split("BLAS_INFO=")[1].split(",")[0] if "BLAS_INFO=" in info else "unknown"
    if name != "generic":
        return name
    with open("/proc/self/maps") as f:
        paths = {os.path.realpath(line.split()[-1]) for line in f if line.split()[-1].startswith("/")}
    libs = sorted(os.path.basename(x) for x in paths if "blas" in os.path.basename(x) and "lapack" not in x)
    return ",".join(libs) or "generic"


def shift(x, k, fill):
    """Rows of [B, S, ...] shifted left by k within their sequence, `fill` past the end (SpecForge's padding)."""
    if k == 0:
        return x
    pad = torch.full_like(x[:, :k], fill)
    return torch.cat([x[:, k:], pad], dim=1)


class Draft:
    def __init__(self, c, params):
        self.c = c
        self.embed = params.pop("embed_tokens.weight")  # frozen: the target's embedding
        self.p = {k: v.clone().requires_grad_(True) for k, v in params.items()}
        hd = c["head_dim"]
        self.inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))

    def w(self, name):
        return self.p[name]

    def rms(self, x, name):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.w(name) * (x * torch.rsqrt(var + self.c["rms_norm_eps"]))

    def rope(self, x, k):
        S = x.shape[1]
        freqs = torch.outer(torch.arange(S, dtype=torch.float32) + k, self.inv_freq)
        emb = torch.cat([freqs, freqs], dim=-1)
        cos, sin = emb.cos()[None, :, None, :], emb.sin()[None, :, None, :]
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    def attention(self, q, k_cache, v_cache, allowed):
        """q [B, S, Hq, hd]; caches of [B, S, G, hd]; allowed [B, S, S] (causal and padding) for step 0's keys."""
        c = self.c
        rep = c["num_attention_heads"] // c["num_key_value_heads"]
        scale = 1.0 / math.sqrt(c["head_dim"])
        qh = q.transpose(1, 2)  # [B, Hq, S, hd]
        k0 = k_cache[0].repeat_interleave(rep, dim=2).transpose(1, 2)
        v0 = v_cache[0].repeat_interleave(rep, dim=2).transpose(1, 2)
        s0 = (qh @ k0.transpose(-1, -2)) * scale
        s0 = s0.masked_fill(~allowed[:, None], torch.finfo(torch.float32).min)
        diag = [((q * kj.repeat_interleave(rep, dim=2)).sum(-1) * scale).transpose(1, 2)[..., None] for kj in k_cache[1:]]
        p = torch.softmax(torch.cat([s0, *diag], dim=-1), dim=-1)
        S = q.shape[1]
        o = p[..., :S] @ v0
        for j, vj in enumerate(v_cache[1:]):
            o = o + p[..., S + j, None] * vj.repeat_interleave(rep, dim=2).transpose(1, 2)
        return o.transpose(1, 2).reshape(q.shape[0], S, -1)

    def step(self, batch, ttt):
        c = self.c
        B, S = batch["input_ids"].shape
        H, hd = c["hidden_size"], c["head_dim"]
        Hq, G = c["num_attention_heads"], c["num_key_value_heads"]
        ids, target, loss_mask = batch["input_ids"], batch["target"], batch["loss_mask"]
        t2d, d2t = batch["t2d"], batch["d2t"]
        D = d2t.shape[0]
        used = d2t + torch.arange(D)
        causal = torch.ones(S, S, dtype=torch.bool).tril()
        allowed = causal[None] & batch["attention_mask"].bool()[:, None, :]
        # The teacher, from step 0; later steps read it shifted.
        with torch.no_grad():
            target_p = torch.softmax(target[..., t2d], dim=-1)
            lse = torch.logsumexp(target, dim=-1, keepdim=True)
            p_tilde = torch.exp(target[..., t2d] - lse)
            tokens = target.argmax(-1)
            position_mask = t2d[tokens].long() * loss_mask
        h_in = batch["hidden_states"] @ self.w("fc.weight").t()
        k_cache, v_cache = [], []
        total = 0.0
        metrics = []
        for k in range(ttt):
            emb = self.embed[shift(ids, k, 0)]
            z = torch.cat([self.rms(emb, "midlayer.input_layernorm.weight"), self.rms(h_in, "midlayer.hidden_norm.weight")], -1)
            q = (z @ self.w("midlayer.self_attn.q_proj.weight").t()).view(B, S, Hq, hd)
            kk = (z @ self.w("midlayer.self_attn.k_proj.weight").t()).view(B, S, G, hd)
            v = (z @ self.w("midlayer.self_attn.v_proj.weight").t()).view(B, S, G, hd)
            k_cache.append(self.rope(kk, k))
            v_cache.append(v)
            o = self.attention(self.rope(q, k), k_cache, v_cache, allowed)
            h1 = h_in + o @ self.w("midlayer.self_attn.o_proj.weight").t()
            n = self.rms(h1, "midlayer.post_attention_layernorm.weight")
            act = torch.nn.functional.silu(n @ self.w("midlayer.mlp.gate_proj.weight").t()) * (n @ self.w("midlayer.mlp.up_proj.weight").t())
            h_out = h1 + act @ self.w("midlayer.mlp.down_proj.weight").t()
            logits = self.rms(h_out, "norm.weight") @ self.w("lm_head.weight").t()
            log_p = torch.log_softmax(logits, dim=-1)
            p_k, pm_k = shift(target_p, k, 1.0 / D), shift(position_mask, k, 0)
            ploss = (pm_k * -(p_k * log_p).sum(-1)).sum() / (B * S)
            total = total + PLOSS_DECAY**k * ploss
            with torch.no_grad():
                lm_k = shift(loss_mask, k, 0)
                best = logits.argmax(-1)
                correct = ((used[best] == shift(tokens, k, 0)) * lm_k).sum()
                accept = (torch.minimum(shift(p_tilde, k, 0.0), log_p.exp()).sum(-1) * pm_k).sum()
                metrics.append((correct / lm_k.sum().clamp(min=1e-6), accept / pm_k.sum().clamp(min=1e-8)))
            h_in = h_out
        return total, metrics


def fixture_setup(fixture_dir):
    ref = read_safetensors(f"{fixture_dir}/eagle3/eagle3_reference.safetensors")
    with open(f"{fixture_dir}/eagle3/draft_config.json") as f:
        c = json.load(f)
    params = {k[len("param.") :]: v for k, v in ref.items() if k.startswith("param.")}
    batch = {
        "input_ids": ref["input_ids"],
        "attention_mask": ref["attention_mask"],
        "loss_mask": ref["loss_mask"][..., 0],
        "hidden_states": ref["hidden_states"],
        "target": ref["target"],
        "t2d": ref["t2d"],
        "d2t": ref["d2t"],
    }
    expect = {"total_loss": ref["total_loss"].item(), "grad_norm": ref["grad_norm_preclip"].item()}
    return c, params, batch, expect


def random_setup(c, B, S, seed):
    g = torch.Generator().manual_seed(seed)
    rand = lambda *shape, scale=0.02 * math.sqrt(3): (torch.rand(*shape, generator=g) * 2 - 1) * scale
    H, I, Ht = c["hidden_size"], c["intermediate_size"], c.get("target_hidden_size", c["hidden_size"])
    V, D = c["vocab_size"], c["draft_vocab_size"]
    q, kv = c["num_attention_heads"] * c["head_dim"], c["num_key_value_heads"] * c["head_dim"]
    shapes = {
        "embed_tokens.weight": (V, H),
        "fc.weight": (H, 3 * Ht),
        "midlayer.self_attn.q_proj.weight": (q, 2 * H),
        "midlayer.self_attn.k_proj.weight": (kv, 2 * H),
        "midlayer.self_attn.v_proj.weight": (kv, 2 * H),
        "midlayer.self_attn.o_proj.weight": (H, q),
        "midlayer.mlp.gate_proj.weight": (I, H),
        "midlayer.mlp.up_proj.weight": (I, H),
        "midlayer.mlp.down_proj.weight": (H, I),
        "lm_head.weight": (D, H),
    }
    params = {k: rand(*s) for k, s in shapes.items()}
    for name in ["midlayer.hidden_norm.weight", "midlayer.input_layernorm.weight", "midlayer.post_attention_layernorm.weight", "norm.weight"]:
        params[name] = torch.ones(H)
    t2d = torch.zeros(V, dtype=torch.bool)
    t2d[:D] = True  # the first D target ids, as bench/train-rig.ts keeps them
    batch = {
        "input_ids": torch.randint(0, V, (B, S), generator=g),
        "attention_mask": torch.ones(B, S, dtype=torch.int64),
        "loss_mask": torch.ones(B, S, dtype=torch.int64),
        "hidden_states": rand(B, S, 3 * Ht, scale=1.0),
        "target": rand(B, S, V, scale=4.0),
        "t2d": t2d,
        "d2t": torch.zeros(D, dtype=torch.int64),
    }
    return params, batch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config-json", help="the draft's config (Hugging Face field names); not with --fixture")
    ap.add_argument("--fixture", help="the fixtures folder: run the SpecForge fixture's step and check it first")
    ap.add_argument("--batch", type=int)
    ap.add_argument("--seq", type=int)
    ap.add_argument("--ttt", type=int)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    for flag in ("steps", "warmup", "threads"):
        if getattr(a, flag) < 1:
            fail(f"--{flag} must be a positive integer, got {getattr(a, flag)}")
    # A BLAS library reads its thread count when it loads: set it before torch loads one
    # (Debian's PyTorch calls the system BLAS, OpenBLAS or another, without setting its threads).
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(a.threads)
    global torch
    import torch

    torch.set_num_threads(a.threads)
    if a.fixture:
        c, params, batch, expect = fixture_setup(a.fixture)
        ttt = a.ttt or 4
    else:
        if not a.config_json or not a.batch or not a.seq or not a.ttt:
            fail("without --fixture, --config-json, --batch, --seq and --ttt are all needed")
        with open(a.config_json) as f:
            c = json.load(f)
        params, batch = random_setup(c, a.batch, a.seq, a.seed)
        ttt, expect = a.ttt, None
    model = Draft(c, params)
    trainable = list(model.p.values())
    opt = torch.optim.AdamW(trainable, **ADAMW)

    def step():
        opt.zero_grad(set_to_none=True)
        loss, metrics = model.step(batch, ttt)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(trainable, CLIP_NORM)
        opt.step()
        return loss.item(), norm.item(), [(x.item(), y.item()) for x, y in metrics]

    first_loss, first_norm, _ = step()
    if expect is not None:
        for name, got, want in (("total loss", first_loss, expect["total_loss"]), ("gradient norm", first_norm, expect["grad_norm"])):
            if abs(got - want) > 1e-5 * abs(want):
                fail(f"the fixture's {name} is {got!r}, SpecForge's is {want!r}: this peer does not compute the same step")
    for _ in range(a.warmup - 1):
        step()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    print(
        json.dumps(
            {
                "peer": "pytorch",
                "torch": torch.__version__,
                "blas": blas_name(),
                "threads": torch.get_num_threads(),
                "stepMsMedian": round(statistics.median(times), 2),
                "stepMsMin": round(min(times), 2),
                "stepMsMean": round(statistics.fmean(times), 2),
                "firstLoss": first_loss,
                "checkedAgainstFixture": expect is not None,
            }
        )
    )


if __name__ == "__main__":
    main()
