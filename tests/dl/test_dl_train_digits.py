"""The digits example: a few training steps lower the loss; weights survive safetensors."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import dl

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import train_digits  # noqa: E402


def test_a_few_steps_lower_the_loss(tmp_path):
    model, losses, _, _ = train_digits.train(epochs=1, device="cpu", max_steps=12, quiet=True)
    assert len(losses) == 12
    assert np.mean(losses[-3:]) < losses[0] - 0.3, losses
    _, _, xte, yte = train_digits.load_data()
    acc = train_digits.accuracy(model, xte[:128], yte[:128])
    path = tmp_path / "w.safetensors"
    dl.save_file(model.state_dict(), str(path))
    again = train_digits.build_model()
    again.load_state_dict(dl.load_file(str(path)))
    assert train_digits.accuracy(again, xte[:128], yte[:128]) == acc
