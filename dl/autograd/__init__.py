"""Reverse-mode autodiff: the tape, grad mode, and custom differentiable functions."""
from .function import Function
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .hooks import RemovableHandle, register_post_accumulate_grad_hook
from .inference_mode import inference_mode, is_inference_mode_enabled
from .tape import GradFn, backward, needs_grad, record, saved_output
