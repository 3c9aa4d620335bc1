"""Today's models through the whole chain, as a new user runs them: one ``dlbench run NAME``
each, by name (timm, torchvision, Hugging Face configs, keras.applications), and a table of
what each stage made of it: ok / unverified / failed, with the reason.

Hugging Face models are built from their published configs (written here as config.json
files, no weights: random initialization), so nothing is downloaded.  Every model runs
in its own ``dlbench run`` process with a timeout; the table reads each run's stage
files and its records.

    .venv/bin/python benchmarks/ecosystem_table.py --out /tmp/eco-table
    .venv/bin/python benchmarks/ecosystem_table.py --models timm:resnet18,hf:bert-tiny
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1]))

# The published configs' shapes (google/bert_uncased_L-2_H-128_A-2, distilbert-base-uncased,
# gpt2, t5-small, openai/whisper-tiny); RoBERTa at a small size of its own layout.
HF_CONFIGS = {
    "bert-tiny": {
        "model_type": "bert",
        "hidden_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 512,
        "vocab_size": 30522,
    },
    "distilbert": {"model_type": "distilbert", "dim": 768, "n_layers": 6, "n_heads": 12, "hidden_dim": 3072},
    "roberta-small": {
        "model_type": "roberta",
        "hidden_size": 256,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "intermediate_size": 1024,
        "vocab_size": 50265,
        "max_position_embeddings": 514,
        "pad_token_id": 1,
        "type_vocab_size": 1,
    },
    "gpt2": {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257},
    "t5-small": {
        "model_type": "t5",
        "d_model": 512,
        "d_ff": 2048,
        "num_layers": 6,
        "num_heads": 8,
        "d_kv": 64,
        "vocab_size": 32128,
    },
    "whisper-tiny": {
        "model_type": "whisper",
        "d_model": 384,
        "encoder_layers": 4,
        "decoder_layers": 4,
        "encoder_attention_heads": 6,
        "decoder_attention_heads": 6,
        "encoder_ffn_dim": 1536,
        "decoder_ffn_dim": 1536,
        "num_mel_bins": 80,
        "max_source_positions": 1500,
        "vocab_size": 51865,
    },
}
MODELS = (
    "timm:resnet18",
    "timm:efficientnet_b0",
    "timm:convnext_atto",
    "timm:mobilenetv3_small_100",
    "timm:regnety_002",
    "timm:vit_tiny_patch16_224",
    "timm:deit_tiny_patch16_224",
    "torchvision:squeezenet1_1",
    "torchvision:shufflenet_v2_x1_0",
    *(f"hf:{k}" for k in HF_CONFIGS),
    "keras:MobileNetV3Small",
    "keras:EfficientNetV2B0",
    "keras:ConvNeXtTiny",
)
STAGES = ("export", "build-int8", "build-fp16")


def _arg(name: str, configs: Path) -> str:
    """``hf:KEY`` becomes the directory of that config, written once."""
    if not name.startswith("hf:"):
        return name
    key = name[3:]
    d = configs / key
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(HF_CONFIGS[key]))
    return f"hf:{d}"


def _stage(stages: dict, prefix: str) -> str:
    hit = next((v for k, v in stages.items() if k.startswith(prefix)), None)
    if hit is None:
        return "–"
    why = (hit.get("reason") or "")[:90]
    return hit["status"] + (f": {why}" if why and hit["status"] != "ok" else "")


def _bench(db: Path, model: str) -> str:
    from dlbench.harness.store.results import ResultStore

    if not db.is_file():
        return "no records"
    recs = ResultStore(db).records("kind = 'bench' AND model = ?", [model])
    cells = []
    for r in recs:
        fmt = r["context"]["artifact"]["format"]
        where = "native" if fmt != "onnx" else r.get("precision") or "fp32"
        value = r["metrics"].get("throughput_sps") if r["status"] in ("ok", "unstable") else None
        cells.append(f"{where} {value:.0f}/s" if value else f"{where} {r['status']}")
    return ", ".join(sorted(cells)) or "no cells"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="eco-table")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batch-size", default="1")
    ap.add_argument("--timeout", type=float, default=1200)
    ap.add_argument("--table-only", action="store_true", help="read the runs in --out again, run nothing")
    args = ap.parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.models.split(","):
        from dlbench.models.user import record_name

        arg = _arg(name, out / "configs")
        model = record_name(arg)
        wd = out / model
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "dlbench.harness", "run", arg, "--workdir", str(wd), "--resume"]
        native = "tensorflow" if name.startswith("keras:") else "pytorch"
        cmd += ["--backends", f"onnxruntime,{native}", "--batch-sizes", args.batch_size]
        cmd += ["--iterations", "20", "-q"]
        env = dict(os.environ, DLBENCH_DB=str(out / "results.sqlite"))
        try:
            if args.table_only:
                run = "(not run again)"
            else:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
                tail = " ".join(proc.stderr.strip().splitlines()[-1:])[-160:]
                run = "ok" if proc.returncode == 0 else f"exit {proc.returncode}: {tail}"
        except subprocess.TimeoutExpired:
            run = f"timed out after {args.timeout:.0f} s"
        stages = {p.stem: json.loads(p.read_text()) for p in (wd / "stages").glob("*.json")}
        row = [name, *(_stage(stages, s) for s in STAGES), _bench(out / "results.sqlite", model), run]
        row.append(f"{time.perf_counter() - t0:.0f} s")
        rows.append(row)
        print(" | ".join(row), flush=True)
    heads = ["Model", "export", "build int8", "build fp16", "bench (onnxruntime, native)", "run", "time"]
    lines = ["| " + " | ".join(heads) + " |", "|" + " --- |" * len(heads)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    (out / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
