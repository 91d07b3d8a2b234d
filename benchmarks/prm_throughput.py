"""PRM scoring throughput: the service's batched scorer vs a naive transformers loop, same model, same inputs.

The model is a Qwen2 token-classification PRM built from a config with random weights (throughput does not depend
on the weights). Inputs are random token ids with a separator every ~40 tokens, lengths spread like ProcessBench
solutions. The naive baseline runs one sample per forward pass (``model(ids).logits``, read at the separators);
the scorer receives every sample from many concurrent callers through its batcher (token budget, length sorting,
gather-then-head). Printed: tokens/s of each, their RATIO, and model FLOP/s utilisation
(2 x non-embedding parameters x tokens / time / peak).

    python benchmarks/prm_throughput.py                                  # CPU, small model
    python benchmarks/prm_throughput.py --preset 1.5b --preset 7b        # GPU host (bf16, sdpa / flash-attn)
    python benchmarks/prm_throughput.py --preset 1.5b --preset 7b --json # also append a line per run to
                                                                         # benchmarks/results/prm_throughput.jsonl
    python benchmarks/prm_throughput.py --remote                         # + the remote path (vLLM /pooling wire
                                                                         # format) against a double started here
    python benchmarks/prm_throughput.py --remote http://rm:8000 --remote-model Qwen/Qwen2.5-Math-PRM-7B \
        --step-tag-id 151651 --preset 7b                                 # + a real vLLM server

The remote path sends the same samples as token ids to ``POST /pooling`` (STEP pooling) through the service's
``RemoteScorer`` (coalescing, ``--remote-concurrency`` requests in flight) and prints its tokens/s beside the local
scorer's, with their ratio and the largest score difference. Without a URL it starts the test double
(tests/support/fakes/reward_model_server.py) in this process, serving the same random model (full logits, one padded
forward per request); client and double then share this machine's cores.

On a lent GPU machine without this project's dependencies: scripts/gpu_wheels.sh (here) then the command it prints.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PRESETS = {
    # name: hidden, intermediate, layers, heads, kv heads, vocab, (min, max) tokens per sample
    "cpu-small": (256, 704, 4, 4, 2, 8192, (64, 448)),
    "0.5b": (896, 4864, 24, 14, 2, 151936, (128, 1536)),
    "1.5b": (1536, 8960, 28, 12, 2, 151936, (128, 1536)),
    "7b": (3584, 18944, 28, 28, 4, 152064, (128, 1536)),
}
# Dense bf16 tensor-core peaks (TFLOP/s, SXM parts, no sparsity).
PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L40S": 362.0, "A10": 125.0}
RESULTS = Path(__file__).resolve().parent / "results" / "prm_throughput.jsonl"


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parent, timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def build(preset: str, device: str, dtype, attn: str):
    import torch
    from transformers import Qwen2Config, Qwen2ForTokenClassification

    h, inter, layers, heads, kv, vocab, _ = PRESETS[preset]
    config = Qwen2Config(
        vocab_size=vocab, hidden_size=h, intermediate_size=inter, num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=kv, max_position_embeddings=4096, num_labels=2, pad_token_id=0,
        attn_implementation=attn, dtype=dtype,
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForTokenClassification(config).to(dtype).eval()
    return model


def make_inputs(preset: str, n: int, sep_id: int, seed: int = 0):
    from verifiers.kinds.reward_models.formats import Encoded

    rng = random.Random(seed)
    lo, hi = PRESETS[preset][6]
    vocab = PRESETS[preset][5]
    out = []
    for _ in range(n):
        length = int(lo + (hi - lo) * rng.random() ** 1.5)  # skewed to shorter, like real solutions
        ids = [t if t != sep_id else 10 for t in (rng.randrange(10, vocab) for _ in range(length))]
        positions = sorted({*range(40, length, 40), length - 1})
        for p in positions:
            ids[p] = sep_id
        out.append(Encoded(ids, positions))
    return out


def naive(model, samples, device: str) -> tuple[float, list[list[float]]]:
    import torch

    results = []
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    sync()
    t0 = time.perf_counter()
    with torch.inference_mode():
        for e in samples:
            logits = model(input_ids=torch.tensor([e.ids], device=device)).logits[0]
            results.append(torch.softmax(logits[e.positions].float(), -1)[:, 1].cpu().tolist())
    sync()
    return time.perf_counter() - t0, results


def batched(model, samples, device: str, dtype, budget: int, clients: int) -> tuple[float, list]:
    from verifiers.kinds.reward_models.batcher import Batcher
    from verifiers.kinds.reward_models.loading import LoadedModel, _make_forward
    from verifiers.kinds.reward_models.spec import ModelSpec

    spec = ModelSpec(name="bench", path="-", format="separator", max_batch_tokens=budget)
    n_params = sum(p.numel() for p in model.parameters())
    loaded = LoadedModel(spec, None, model, device, dtype, 0, 4096, n_params, "")
    loaded._forward = _make_forward(spec, model, None)

    async def main() -> tuple[float, list]:
        b = Batcher(loaded.run, max_batch_tokens=budget, max_batch_size=512, max_wait_ms=5)
        await b.score(samples[:2])  # start the loop and thread
        chunks = [samples[i::clients] for i in range(clients)]  # many callers, a few samples each
        t0 = time.perf_counter()
        parts = await asyncio.gather(*(_client(b, c) for c in chunks))
        elapsed = time.perf_counter() - t0
        await b.close()
        order = {id(e): r for chunk, res in zip(chunks, parts) for e, r in zip(chunk, res)}
        return elapsed, [order[id(e)] for e in samples]

    elapsed, results = asyncio.run(main())
    return elapsed, results


def remote(samples, url: str, model: str, budget: int, clients: int, concurrency: int) -> tuple[float, list, object]:
    """Time the remote path: the service's RemoteScorer against ``url``, many callers of 4 samples each."""
    from verifiers.kinds.reward_models.remote import RemoteScorer
    from verifiers.kinds.reward_models.spec import ModelSpec

    spec = ModelSpec(name="bench", path=model, format="separator", backend="vllm", url=url, max_batch_tokens=budget,
                     max_items_per_request=512, max_concurrency=concurrency, max_wait_ms=5, timeout_s=600)

    async def main() -> tuple[float, list, object]:
        scorer = RemoteScorer(spec)
        warm = await scorer.score(samples[:2])
        if any(isinstance(r, BaseException) for r in warm):
            raise SystemExit(f"remote server failed: {warm}")
        chunks = [samples[i::clients] for i in range(clients)]
        t0 = time.perf_counter()
        parts = await asyncio.gather(*(_client(scorer, c) for c in chunks))
        elapsed = time.perf_counter() - t0
        await scorer.close()
        order = {id(e): r for chunk, res in zip(chunks, parts) for e, r in zip(chunk, res)}
        return elapsed, [order[id(e)] for e in samples], scorer.stats

    return asyncio.run(main())


@contextlib.contextmanager
def double_for(model, sep_id: int):
    """The vLLM test double serving ``model`` with STEP pooling at ``sep_id``; yields its URL."""
    from tests.support.fakes.reward_model_server import RewardServerDouble, serve

    with serve(RewardServerDouble(model, served_name="bench", step_tag_id=sep_id)) as double:
        yield double.url


async def _client(b, chunk):
    out = []
    for i in range(0, len(chunk), 4):  # each caller sends requests of 4 samples, one after the other
        out.extend(await b.score(chunk[i:i + 4]))
    return out


def main() -> None:
    import torch

    from verifiers.kinds.reward_models.loading import pick_attention, pick_device, pick_dtype

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", action="append", choices=sorted(PRESETS), help="model size (repeatable)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float16", "float32"])
    ap.add_argument("--samples", type=int, default=0, help="samples per run (default: 64 on CPU, 512 on GPU)")
    ap.add_argument("--max-batch-tokens", type=int, default=0, help="default: 8192 on CPU, 65536 on GPU")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--peak-tflops", type=float, default=0.0, help="device peak for utilisation (auto on known GPUs)")
    ap.add_argument("--json", action="store_true", help=f"append one JSON line per run to {RESULTS}")
    ap.add_argument("--remote", nargs="?", const="double", default=None, metavar="URL",
                    help="also time the remote path (vLLM /pooling) against URL; without URL, a double started here")
    ap.add_argument("--remote-model", default="bench", help="model name on the remote server")
    ap.add_argument("--step-tag-id", type=int, default=5, help="STEP pooling tag id (151651: Qwen PRMs)")
    ap.add_argument("--remote-concurrency", type=int, default=4, help="HTTP requests in flight")
    args = ap.parse_args()
    device = pick_device(args.device)
    gpu = device.startswith("cuda")
    dtype = pick_dtype(args.dtype, device)
    attn = pick_attention("auto", device)
    presets = args.preset or (["1.5b", "7b"] if gpu else ["cpu-small"])
    n = args.samples or (512 if gpu else 64)
    budget = args.max_batch_tokens or (65536 if gpu else 8192)
    peak = args.peak_tflops
    name = torch.cuda.get_device_name(device) if gpu else "cpu"
    if not peak and gpu:
        peak = next((v for k, v in PEAK_TFLOPS.items() if k in name), 0.0)
    print(f"device {name}, dtype {str(dtype).replace('torch.', '')}, attention {attn}, {n} samples, "
          f"budget {budget} tokens, {args.clients} clients")
    for preset in presets:
        model = build(preset, device, dtype, attn)
        samples = make_inputs(preset, n, sep_id=args.step_tag_id)
        tokens = sum(len(e) for e in samples)
        dense = sum(p.numel() for p in model.parameters()) - model.get_input_embeddings().weight.numel()
        naive(model, samples[:3], device)  # warm-up
        t_naive, r_naive = naive(model, samples, device)
        t_ours, r_ours = batched(model, samples, device, dtype, budget, args.clients)
        worst = max(abs(a - b) for x, y in zip(r_naive, r_ours) for a, b in zip(x, y))
        tps_naive, tps_ours = tokens / t_naive, tokens / t_ours
        line = (f"{preset}: {dense / 1e6:,.1f}M dense params, {tokens} tokens | naive loop {tps_naive:,.0f} tok/s | "
                f"scorer {tps_ours:,.0f} tok/s | RATIO {tps_ours / tps_naive:.2f}x | max |score diff| {worst:.1e}")
        mfu = 2 * dense * tps_ours / (peak * 1e12) if peak else None
        if mfu is not None:
            line += f" | utilisation {100 * mfu:.1f}% of {peak:g} TFLOP/s (naive {100 * mfu * t_ours / t_naive:.1f}%)"
        print(line, flush=True)
        remote_record = {}
        if args.remote:
            with contextlib.ExitStack() as stack:
                url = args.remote
                if url == "double":
                    url = stack.enter_context(double_for(model, args.step_tag_id))
                t_remote, r_remote, stats = remote(samples, url, args.remote_model, budget, args.clients,
                                                   args.remote_concurrency)
            diff = max(abs(a - b) for x, y in zip(r_ours, r_remote) for a, b in zip(x, y))
            tps_remote = tokens / t_remote
            where = "test double in this process" if args.remote == "double" else args.remote
            print(f"{preset}: remote path ({where}) {tps_remote:,.0f} tok/s | local scorer {tps_ours:,.0f} tok/s | "
                  f"RATIO remote/local {tps_remote / tps_ours:.2f}x | {stats.requests} requests, "
                  f"{stats.sequences / max(stats.requests, 1):.1f} samples each | max |score diff| {diff:.1e}",
                  flush=True)
            remote_record = {"remote": where, "tokens_per_s_remote": round(tps_remote, 1),
                             "remote_ratio": round(tps_remote / tps_ours, 3), "remote_max_score_diff": diff}
        if args.json:
            RESULTS.parent.mkdir(parents=True, exist_ok=True)
            record = {
                "device": name, "preset": preset, "dtype": str(dtype).replace("torch.", ""), "attention": attn,
                "samples": n, "tokens": tokens, "max_batch_tokens": budget, "clients": args.clients,
                "tokens_per_s_ours": round(tps_ours, 1), "tokens_per_s_naive": round(tps_naive, 1),
                "ratio": round(tps_ours / tps_naive, 3), "mfu": None if mfu is None else round(mfu, 4),
                "peak_tflops": peak or None, "max_score_diff": worst, "torch": torch.__version__,
                "commit": _commit(), "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
                **remote_record,
            }
            with RESULTS.open("a") as f:
                f.write(json.dumps(record) + "\n")
        del model
        if gpu:
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
