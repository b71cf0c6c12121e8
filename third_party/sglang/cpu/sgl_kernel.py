"""The two `sgl_kernel` CPU helpers that SGLang's CPU engine calls on plain decoding, in torch.

SGLang's CPU engine (SGLANG_USE_CPU_ENGINE=1) imports helpers from `sgl_kernel` at module level, and the CPU
build of that package is not on PyPI. Plain decoding of a dense model with the torch_native attention backend
calls only the two below; every other name raises NotImplementedError when called, naming the helper.
"""

from __future__ import annotations

import ctypes

import numpy as np
import torch

__version__ = "0.0.0+harnessrl-cpu-stand-in"


def assign_req_to_token_pool_cpu(req_pool_indices: torch.Tensor, req_to_token: torch.Tensor,
                                 start_offset: torch.Tensor, end_offset: torch.Tensor, out_cache_loc: torch.Tensor,
                                 pool_len: int) -> None:
    """For each request b, in order: req_to_token[req_pool_indices[b], start[b]:end[b]] = the next end[b] -
    start[b] entries of out_cache_loc (request b's entries follow those of requests 0..b-1)."""
    del pool_len  # the row length of req_to_token, which torch knows
    starts, ends = start_offset.tolist(), end_offset.tolist()
    at = 0
    for row, start, end in zip(req_pool_indices.tolist(), starts, ends):
        req_to_token[row, start:end] = out_cache_loc[at:at + end - start].to(req_to_token.dtype)
        at += end - start


def copy_all_layer_kv_cache_cpu(data_ptrs: torch.Tensor, strides: torch.Tensor, tgt_loc: torch.Tensor,
                                src_loc: torch.Tensor) -> None:
    """Copy row src_loc[j] to row tgt_loc[j] of every buffer; buffer i starts at address data_ptrs[i] and its rows
    are strides[i] bytes apart. All sources are read before any target is written (the copy may be in place)."""
    tgt, src = tgt_loc.to(torch.int64).numpy(), src_loc.to(torch.int64).numpy()
    if tgt.size == 0:
        return
    rows = int(max(tgt.max(), src.max())) + 1
    for address, stride in zip(data_ptrs.tolist(), strides.tolist()):
        view = np.ctypeslib.as_array((ctypes.c_uint8 * (rows * stride)).from_address(address))
        view = view.reshape(rows, stride)
        view[tgt] = view[src]  # numpy gathers the right-hand side first


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)

    def missing(*args, **kwargs):
        raise NotImplementedError(f"sgl_kernel.{name} has no CPU stand-in here (only assign_req_to_token_pool_cpu "
                                  f"and copy_all_layer_kv_cache_cpu): this server setting needs the real CPU build "
                                  f"of sgl_kernel")

    missing.__name__ = name
    return missing
