"""`Conv2d`: nn.Conv2d whose 3x3, stride 1, padding 1 convolutions run the Winograd operator.

    from kernels_sass.winograd import Conv2d
    conv = Conv2d(64, 64, 3, padding=1, bias=False).cuda()    # an nn.Conv2d: same parameters,
    conv.load_state_dict(torch_conv.state_dict())             # initialisation and state_dict

A subclass of nn.Conv2d: the parameters, their initialisation, state_dict, repr and everything
else are nn.Conv2d's; only forward differs. It calls torch.ops.sassas_winograd.conv2d3x3 (op.py)
where the layer is a 3x3 convolution with stride 1, padding 1 (zeros), dilation 1 and one
group; the bias is added after it by PyTorch. Any other layer runs nn.Conv2d.forward. Where the
tensors are not the kernels' (CPU, not float32, another GPU than sm_90, shapes past their
limits), the operator itself runs PyTorch's convolution. Either way the layer warns once per
reason (warnings.warn, UserWarning) and keeps going.
"""
from __future__ import annotations

import warnings
from typing import Optional

import torch
from torch import nn

from . import op

_WARNED: set[str] = set()


def warn_once(reason: str) -> None:
    if reason not in _WARNED:
        _WARNED.add(reason)
        # 5: the caller of the module (warn_once, forward, Module._call_impl, Module._wrapped_call_impl)
        warnings.warn(f"kernels_sass.winograd.Conv2d runs PyTorch's convolution: {reason}", stacklevel=5)


class Conv2d(nn.Conv2d):
    """nn.Conv2d with the Winograd operator for 3x3/stride 1/padding 1 layers (module docstring).

    impl, algo: the operator's (op.IMPLS, api.ALGOS); input_grad, weight_grad: its backward
    switches (op.INPUT_GRADS, op.WEIGHT_GRADS). Attributes, so they can be changed on a built
    model; not part of state_dict."""

    def __init__(self, *args, impl: str = "auto", algo: str = "auto", input_grad: str = "winograd",
                 weight_grad: str = "auto", **kwargs):
        super().__init__(*args, **kwargs)
        self.impl, self.algo, self.input_grad, self.weight_grad = impl, algo, input_grad, weight_grad

    def geometry_reason(self) -> Optional[str]:
        """Why this layer is not the operator's (None: it is)."""
        if self.kernel_size != (3, 3):
            return f"kernel size {self.kernel_size} (the kernels are 3x3)"
        if self.stride != (1, 1):
            return f"stride {self.stride} (the kernels have stride 1)"
        if self.padding not in ((1, 1), "same") or self.padding_mode != "zeros":
            return f"padding {self.padding!r} ({self.padding_mode}) (the kernels pad 1 with zeros)"
        if self.dilation != (1, 1):
            return f"dilation {self.dilation} (the kernels have dilation 1)"
        if self.groups != 1:
            return f"groups={self.groups} (the kernels have one group)"
        return None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        reason = self.geometry_reason() or (None if x.dim() == 4 else "an unbatched input (the operator takes NCHW)")
        if reason is not None:
            warn_once(reason)
            return super().forward(x)
        if not torch.compiler.is_compiling():
            reason = op.uncovered(x, self.weight, self.impl, self.algo)
            if reason is not None:
                warn_once(reason)
        y = op.conv2d(x, self.weight, self.impl, self.algo, self.input_grad, self.weight_grad)
        if self.bias is not None:
            y = y + self.bias.view(1, -1, 1, 1)
        return y

    def extra_repr(self) -> str:
        return super().extra_repr() + f", impl={self.impl!r}, algo={self.algo!r}"
