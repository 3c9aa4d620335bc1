"""PyTorch eager training session: SGD + cross-entropy, one synchronous step per call.

float32 is IEEE float32 (cuBLAS, cuDNN and oneDNN switches set and read back by
``harness.cells.mathmode`` before the model is built); ``tf32`` trains the float32 model
in TensorFloat-32 on a GPU that has it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from dlbench.core.errors import UserError
from dlbench.harness.cells import mathmode
from dlbench.harness.training.base import TrainConfig, TrainSession
from dlbench.harness.training.objectives import inputs_of, label_dtype, labels_of, loss_for
from dlbench.models.registry import ModelSpec


def apply_threads(intra: int, inter: int) -> None:
    """Apply thread counts through torch's own API.

    The inter-op pool can be sized only once per process, before any inter-op
    work; a second session in the same process (tests, sweeps) keeps whatever
    is in force, and ``runtime()`` reports that instead of failing the run.
    """
    torch.set_num_threads(intra)
    if torch.get_num_interop_threads() != inter:
        with contextlib.suppress(RuntimeError):
            torch.set_num_interop_threads(inter)


def resolve_device(device: str) -> torch.device:
    """The torch device for ``--device``; never falls back to another one."""
    if device == "cpu":
        return torch.device("cpu")
    if device == "gpu":
        if not torch.cuda.is_available():
            raise UserError("--device gpu: PyTorch sees no CUDA device")
        return torch.device("cuda")
    if device == "ascend":
        raise UserError(
            "--device ascend: dlbench's PyTorch backend does not support Ascend "
            "(torch_npu); use --framework mindspore"
        )
    raise UserError(f"--device {device}: unknown device (choose cpu, gpu or ascend)")


def classification_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy with classes on the last axis (objectives: per-position outputs)."""
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1))


def regression_loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(outputs.float(), targets)


class Session(TrainSession):
    framework = "pytorch"
    layout = "NCHW"
    checkpoint_suffix = ".pt"
    checkpoint_name = "model.pt"

    def __init__(self, spec: ModelSpec, cfg: TrainConfig, batches: list[tuple[np.ndarray, np.ndarray]]):
        super().__init__(spec, cfg, batches)
        if cfg.precision not in ("fp32", "amp", "tf32"):
            raise UserError(f"--precision {cfg.precision}: PyTorch supports fp32, tf32 and amp")
        self.device = resolve_device(cfg.device)
        if cfg.distributed:
            self._join_group()
        self.math = mathmode.torch_math(torch, self.device.type, cfg.precision)
        apply_threads(cfg.intra_op_threads, cfg.inter_op_threads)
        # CPU autocast supports bf16 only; fp16 on CUDA needs loss scaling to not underflow.
        self.amp_dtype = (
            {"cpu": torch.bfloat16, "cuda": torch.float16}[self.device.type]
            if cfg.precision == "amp"
            else None
        )
        self.scaler = torch.amp.GradScaler("cuda") if self.amp_dtype == torch.float16 else None

        torch.manual_seed(cfg.seed)  # seeds CUDA generators too
        self.model = spec.build_for_training("pytorch").to(self.device).train()
        # DDP averages gradients during backward; the bare model is what is saved.
        self.net = self.model
        if cfg.distributed:
            from torch.nn.parallel import DistributedDataParallel

            self.net = DistributedDataParallel(
                self.model, device_ids=[self.device] if self.device.type == "cuda" else None
            )
        self.loss_fn = loss_for(spec.objective, self.framework)
        # Frozen parameters (the LSTM's b_hh) are not the optimizer's.
        self.optimizer = torch.optim.SGD(
            [p for p in self.model.parameters() if p.requires_grad],
            lr=cfg.learning_rate,
            momentum=cfg.momentum,
        )
        self.label_dtype = getattr(torch, label_dtype(spec.objective, "int64"))
        self.batches = [self.place(b) for b in batches]

    def _join_group(self) -> None:
        """Join torchrun's process group: gloo on a CPU, NCCL on a GPU (one per local rank)."""
        import torch.distributed as dist

        from dlbench.harness.training.scaling import JOIN_TIMEOUT_S

        backend = "gloo"
        if self.device.type == "cuda":
            self.device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
            torch.cuda.set_device(self.device)
            backend = "nccl"
        dist.init_process_group(backend, timeout=timedelta(seconds=JOIN_TIMEOUT_S))
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()

    def all_gather(self, row: np.ndarray) -> np.ndarray:
        if not self.cfg.distributed:
            return super().all_gather(row)
        import torch.distributed as dist

        mine = torch.from_numpy(np.asarray(row, np.float64)).to(self.device)
        rows = [torch.zeros_like(mine) for _ in range(self.world_size)]
        dist.all_gather(rows, mine)
        return torch.stack(rows).cpu().numpy()

    def weights_sum(self) -> float:
        with torch.no_grad():
            return float(sum(p.double().abs().sum() for p in self.model.parameters()))

    @staticmethod
    def version() -> str:
        return torch.__version__

    def _autocast(self):
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.amp_dtype)

    def step(self, index: int) -> float:
        x, y = self.batches[index % len(self.batches)]
        self.optimizer.zero_grad(set_to_none=True)
        with self._autocast():
            outputs = self.net(*x)
        loss = self.loss_fn(outputs, y)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        return loss.item()  # blocks until the device has finished the step

    def place(self, batch):
        """(tuple of input tensors, label tensor or tuple) on the device; losses take
        int64 class indices (or float targets), converted here, outside the clock."""
        x, y = batch
        inputs = tuple(torch.from_numpy(a).to(self.device) for a in inputs_of(self.spec, x))
        y = labels_of(self.spec, y)

        def label(a):
            return torch.from_numpy(a).to(self.device, self.label_dtype)

        labels = tuple(label(a) for a in y) if isinstance(y, tuple) else label(y)
        return inputs, labels

    def eval_outputs(self, batches):
        self.model.eval()
        try:
            with torch.no_grad():
                for batch in batches:
                    x, _ = self.place(batch)
                    with self._autocast():
                        out = self.model(*x)
                    out = out if isinstance(out, (tuple, list)) else (out,)
                    yield tuple(o.float().cpu().numpy() for o in out), batch[1]
        finally:
            self.model.train()

    def save(self, directory: Path) -> str:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / self.checkpoint_name
        try:
            torch.save(self.model.state_dict(), path)
        except RuntimeError as exc:
            # A full disk reads "[enforce fail at inline_container.cc:...] unexpected pos",
            # which never names the disk: say what happened, and to which file.
            if shutil.disk_usage(directory).free < 1 << 20:
                raise OSError(
                    errno.ENOSPC, "No space left on device (saving the checkpoint)", str(path)
                ) from exc
            raise
        return self.checkpoint_name

    def runtime(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "device": str(self.device),
            "intra_op_threads": torch.get_num_threads(),
            "inter_op_threads": torch.get_num_interop_threads(),
            "precision": self.cfg.precision,
            "autocast_dtype": str(self.amp_dtype).removeprefix("torch.") if self.amp_dtype else None,
            "math_mode": self.math,
        }
        if self.cfg.distributed:
            import torch.distributed as dist

            info.update(
                launcher="torchrun",
                data_parallel="DistributedDataParallel",
                backend=dist.get_backend(),
                world_size=self.world_size,
            )
        if self.device.type == "cuda":
            info["device_name"] = torch.cuda.get_device_name(self.device)
            info["cuda"] = torch.version.cuda
            info["cudnn"] = torch.backends.cudnn.version()
        return info
