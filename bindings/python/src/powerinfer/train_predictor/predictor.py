"""The low-rank predictor PowerInfer runs: scores = fc2 · relu(fc1 · x), bias-free,
fc1 [rank, n_embd], fc2 [n_ff, rank]; a neuron is predicted active where its score >= T."""

from __future__ import annotations

import torch
from torch import nn


class LowRankPredictor(nn.Module):
    def __init__(self, n_embd: int, n_ff: int, rank: int, input_scale: torch.Tensor) -> None:
        super().__init__()
        self.fc1 = nn.Linear(n_embd, rank, bias=False)
        self.fc2 = nn.Linear(rank, n_ff, bias=False)
        # Training sees x / input_scale (unit RMS per channel, which Adam likes); the scale is
        # folded into fc1's columns when written, since the engine feeds the raw residual.
        self.register_buffer("input_scale", input_scale.clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x / self.input_scale)))

    def exported(self, dtype: torch.dtype) -> dict[str, torch.Tensor]:
        """PowerInfer's state dict: what model_{L}.pt holds, in the raw input's units."""
        fc1 = self.fc1.weight.detach() / self.input_scale[None, :]
        return {
            "fc1.weight": fc1.to(dtype).contiguous().clone(),
            "fc2.weight": self.fc2.weight.detach().to(dtype).contiguous().clone(),
        }

    def load_exported(self, state: dict[str, torch.Tensor]) -> None:
        """Takes back exported (rounded) weights, so metrics describe what is written."""
        with torch.no_grad():
            self.fc1.weight.copy_(state["fc1.weight"].float() * self.input_scale[None, :])
            self.fc2.weight.copy_(state["fc2.weight"].float())
