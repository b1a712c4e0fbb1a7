"""FLOP and compulsory-byte counter for KernelBench reference models.

Runs inside the trusted reference worker (torch already imported), on the
reference Model and its inputs, and feeds the roofline (evaluator/roofline.hpp,
DESIGN section 5). Works on torch 1.13 (no torch.utils.flop_counter) and 2.x:
it intercepts aten ops with a TorchDispatchMode, which sees the ops after
autograd's decompositions (matmul -> mm/bmm/mv, linear -> addmm, conv2d ->
convolution), so each op is counted once.

Counting rules (FLOPs; a multiply-add is 2):
  - mm/addmm/bmm/baddbmm/addbmm/mv/addmv/dot: 2 per multiply-add. On real
    tensors only the products whose two operands are both nonzero are counted
    (zero_aware, the default), so a reference that multiplies by a diagonal or
    triangular matrix does not inflate the bound past what a kernel exploiting
    that structure needs. Bias terms are not counted.
  - convolution (any dims, stride, padding, dilation, groups, transposed):
    2 * N * spatial * prod(weight.shape), with spatial the output's spatial
    size (forward) or the input's (transposed).
  - scaled dot-product attention kernels: the two matmuls, 2*L*S*(E + Ev) per
    batch-head, about halved when causal. Softmax inside is not counted.
  - softmax/log_softmax: 5 per element; layer/batch/group/RMS norms: 5 per
    input element; reductions and losses: 1 per input element; pooling:
    1 per output element per kernel tap; views, copies, factories: 0;
    everything else (elementwise): 1 per output element.
Compulsory bytes: every input tensor and every parameter and buffer read once,
every output written once (dense, no zero skipping).

These are lower-bound estimates: when unsure, count less.

CLI (always with the system interpreter, which has torch):
  /usr/bin/python3 evaluator/py/korch_flops.py TASK_FILE [--meta] [--dense]
prints {"flops", "bytes", "by_op", "dtype", ...} as one JSON object. --meta
builds the model and inputs on the "meta" device (no memory, no values: the
zero-aware matmul count is then dense); if that fails it falls back to real
tensors and says so ("meta": false, "meta_error").
"""

import argparse
import importlib.util
import json
import re
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

__all__ = ["count", "count_task", "load_task"]

# Ops that move, view, create or fill data without arithmetic.
_ZERO_FLOP = frozenset(
    """
    view _unsafe_view reshape _reshape_alias as_strided expand t transpose permute
    unsqueeze squeeze select slice narrow split split_with_sizes chunk unbind
    diagonal alias detach lift_fresh lift_fresh_copy clone copy_ _to_copy to
    contiguous cat stack index index_select gather scatter embedding flip roll
    repeat expand_copy view_copy permute_copy t_copy transpose_copy unsqueeze_copy
    squeeze_copy slice_copy select_copy alias_copy detach_copy as_strided_copy
    empty empty_like empty_strided zeros zeros_like ones ones_like full full_like
    fill fill_ zero_ new_empty new_empty_strided new_zeros new_ones new_full
    arange linspace rand randn randint rand_like randn_like randint_like randperm
    uniform_ normal_ bernoulli bernoulli_ random_ scalar_tensor _local_scalar_dense
    item resize_ set_ diag diag_embed constant_pad_nd pad reflection_pad1d
    reflection_pad2d reflection_pad3d replication_pad1d replication_pad2d
    replication_pad3d sym_size sym_stride sym_numel sym_storage_offset
    is_same_size _has_compatible_shallow_copy_type unfold im2col col2im
    _conj _neg_view resolve_conj resolve_neg dropout native_dropout
    """.split()
)

# One FLOP per element of the first input.
_REDUCTIONS = frozenset(
    """
    sum mean amax amin max min prod argmax argmin norm linalg_vector_norm
    frobenius_norm var std var_mean std_mean any all logsumexp cumsum cumprod
    cummax cummin logcumsumexp count_nonzero nansum nanmean median nanmedian
    mode kthvalue aminmax sort topk argsort mse_loss l1_loss smooth_l1_loss
    huber_loss kl_div binary_cross_entropy binary_cross_entropy_with_logits
    nll_loss nll_loss_forward nll_loss2d_forward nll_loss_nd soft_margin_loss
    multilabel_margin_loss_forward multi_margin_loss hinge_embedding_loss
    margin_ranking_loss
    """.split()
)

_SOFTMAX = frozenset("_softmax _log_softmax softmax log_softmax _safe_softmax".split())
_SOFTMAX_FLOPS_PER_ELT = 5

_NORMS = frozenset(
    """
    native_layer_norm layer_norm native_batch_norm batch_norm _native_batch_norm_legit
    _native_batch_norm_legit_no_training _native_batch_norm_legit_functional
    native_group_norm group_norm instance_norm cudnn_batch_norm miopen_batch_norm
    _batch_norm_with_update _batch_norm_no_update rms_norm _fused_rms_norm
    """.split()
)
_NORM_FLOPS_PER_ELT = 5

_CONVOLUTIONS = frozenset(
    """
    convolution _convolution convolution_overrideable cudnn_convolution
    cudnn_convolution_transpose mkldnn_convolution miopen_convolution
    miopen_convolution_transpose _slow_conv2d_forward slow_conv3d_forward
    slow_conv_transpose2d slow_conv_transpose3d thnn_conv2d
    """.split()
)

_ATTENTION = frozenset(
    """
    _scaled_dot_product_flash_attention _scaled_dot_product_efficient_attention
    _scaled_dot_product_cudnn_attention _scaled_dot_product_flash_attention_for_cpu
    _scaled_dot_product_fused_attention_overrideable scaled_dot_product_attention
    _flash_attention_forward _efficient_attention_forward
    """.split()
)

_POOL_RE = re.compile(r"^(max|avg)_pool(\d)d(_with_indices)?$")


def _tensors(obj):
    flat, _ = tree_flatten(obj)
    return [x for x in flat if isinstance(x, torch.Tensor)]


def _is_meta(t):
    return t.device.type == "meta"


def _prod(xs):
    out = 1
    for x in xs:
        out *= int(x)
    return out


def _nz(t):
    return t != 0


def _nonzero_products_mm(a, b, zero_aware):
    """Multiply-adds of a[..., M, K] @ b[..., K, N], counting nonzero pairs only."""
    m, k = a.shape[-2], a.shape[-1]
    n = b.shape[-1]
    batch = _prod(a.shape[:-2]) if a.dim() > 2 else 1
    dense = batch * m * k * n
    if not zero_aware or _is_meta(a) or _is_meta(b):
        return dense
    col_a = _nz(a).sum(dim=-2, dtype=torch.float64)  # [..., K]: nonzeros per column of a
    row_b = _nz(b).sum(dim=-1, dtype=torch.float64)  # [..., K]: nonzeros per row of b
    return int(round(float((col_a * row_b).sum().item())))


def _mm_flops(func_name, args, kwargs, zero_aware):
    if func_name in ("mm", "bmm", "_int_mm", "_scaled_mm"):
        a, b = args[0], args[1]
        return 2 * _nonzero_products_mm(a, b, zero_aware)
    if func_name in ("addmm", "baddbmm", "_addmm_activation"):
        return 2 * _nonzero_products_mm(args[1], args[2], zero_aware)
    if func_name == "addbmm":
        return 2 * _nonzero_products_mm(args[1], args[2], zero_aware)
    if func_name in ("mv", "addmv"):
        a, v = (args[0], args[1]) if func_name == "mv" else (args[1], args[2])
        return 2 * _nonzero_products_mm(a, v.unsqueeze(-1), zero_aware)
    if func_name in ("dot", "vdot"):
        a, b = args[0], args[1]
        if not zero_aware or _is_meta(a):
            return 2 * a.numel()
        return 2 * int((_nz(a) & _nz(b)).sum().item())
    return None


_MATMUL_OPS = frozenset(
    "mm bmm _int_mm _scaled_mm addmm baddbmm _addmm_activation addbmm mv addmv dot vdot".split()
)


def _conv_flops(args, kwargs, out):
    x, w = args[0], args[1]
    transposed = False
    if len(args) > 6 and isinstance(args[6], bool):
        transposed = args[6]
    elif "transposed" in kwargs:
        transposed = bool(kwargs["transposed"])
    spatial_dims = w.dim() - 2
    if transposed:
        spatial = _prod(x.shape[-spatial_dims:]) if spatial_dims else 1
    else:
        spatial = _prod(out.shape[-spatial_dims:]) if spatial_dims else 1
    batch = x.shape[0] if x.dim() == w.dim() else 1  # unbatched input has one dim less
    return 2 * batch * spatial * _prod(w.shape)


def _attention_flops(func_name, args, kwargs):
    q, k, v = args[0], args[1], args[2]
    l, e = q.shape[-2], q.shape[-1]
    s, ev = k.shape[-2], v.shape[-1]
    batch = _prod(q.shape[:-2])
    causal = bool(kwargs.get("is_causal", False))
    if not causal:
        # Positional is_causal: flash (q, k, v, dropout_p, is_causal),
        # efficient/cudnn (q, k, v, attn_bias, compute_log_sumexp, dropout_p, is_causal).
        pos = 4 if func_name in ("_scaled_dot_product_flash_attention",
                                 "_scaled_dot_product_flash_attention_for_cpu",
                                 "scaled_dot_product_attention") else 6
        if func_name == "scaled_dot_product_attention":
            pos = 5  # (q, k, v, attn_mask, dropout_p, is_causal)
        if len(args) > pos and isinstance(args[pos], bool):
            causal = args[pos]
    if causal:
        # torch's causal mask is tril(ones(L, S)): row i sees min(i + 1, S) keys.
        pairs = l * (l + 1) // 2 if l <= s else s * (s + 1) // 2 + (l - s) * s
    else:
        pairs = l * s
    return 2 * batch * pairs * (e + ev)


def _pool_flops(func_name, args, out):
    m = _POOL_RE.match(func_name)
    if not m:
        return None
    dims = int(m.group(2))
    kernel = args[1] if len(args) > 1 else 1
    if isinstance(kernel, int):
        kernel = [kernel]
    kernel = list(kernel)
    if len(kernel) == 1:
        kernel = kernel * dims
    return out.numel() * _prod(kernel)


def _op_flops(func_name, args, kwargs, outs, zero_aware):
    """FLOPs of one aten op; `outs` are its tensor outputs."""
    if func_name in _ZERO_FLOP or (func_name.endswith("_copy") and func_name[:-5] in _ZERO_FLOP):
        return 0
    if func_name in _MATMUL_OPS:
        return _mm_flops(func_name, args, kwargs, zero_aware)
    if func_name in _CONVOLUTIONS:
        return _conv_flops(args, kwargs, outs[0])
    if func_name in _ATTENTION:
        return _attention_flops(func_name, args, kwargs)
    inputs = _tensors(args)
    first_in = inputs[0].numel() if inputs else 0
    first_out = outs[0].numel() if outs else 0
    if func_name in _SOFTMAX:
        return _SOFTMAX_FLOPS_PER_ELT * first_in
    if func_name in _NORMS:
        return _NORM_FLOPS_PER_ELT * first_in
    if func_name in _REDUCTIONS:
        return first_in
    if func_name.startswith("adaptive_") or func_name.startswith("_adaptive_"):
        return first_in
    pooled = _pool_flops(func_name, args, outs[0]) if outs else None
    if pooled is not None:
        return pooled
    return first_out  # elementwise


def _func_name(func):
    return func.overloadpacket.__name__


def _has_device_arg(func):
    schema = getattr(func, "_schema", None)
    return schema is not None and any(a.name == "device" for a in schema.arguments)


class _CountingMode(TorchDispatchMode):
    """Counts FLOPs per aten op; optionally sends factory calls to "meta"."""

    def __init__(self, zero_aware=True, meta_factories=False, counting=True):
        super().__init__()
        self.zero_aware = zero_aware
        self.meta_factories = meta_factories
        self.counting = counting
        self.by_op = {}        # op -> FLOPs (zero-aware matmuls when enabled)
        self.by_op_dense = {}  # op -> FLOPs, every product counted
        self.errors = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if self.meta_factories and not _tensors((args, kwargs)) and _has_device_arg(func):
            kwargs["device"] = torch.device("meta")
        out = func(*args, **kwargs)
        if self.counting:
            name = _func_name(func)
            outs = _tensors(out)
            try:
                dense = _op_flops(name, args, kwargs, outs, False)
                flops = dense
                if self.zero_aware and name in _MATMUL_OPS:
                    flops = _op_flops(name, args, kwargs, outs, True)
            except Exception as e:  # never let counting break the reference run
                self.errors[name] = "%s: %s" % (type(e).__name__, e)
                dense = flops = 0
            if dense:
                self.by_op[name] = self.by_op.get(name, 0) + int(flops)
                self.by_op_dense[name] = self.by_op_dense.get(name, 0) + int(dense)
        return out


def _bytes_of(tensors):
    seen = set()
    total = 0
    for t in tensors:
        if id(t) in seen:
            continue
        seen.add(id(t))
        total += t.numel() * t.element_size()
    return total


def _dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def _main_dtype(inputs, model):
    for t in _tensors(inputs):
        if t.is_floating_point():
            return _dtype_name(t.dtype)
    if isinstance(model, torch.nn.Module):
        for p in model.parameters():
            if p.is_floating_point():
                return _dtype_name(p.dtype)
    return "float32"


def count(model, inputs, zero_aware=True):
    """Counts the work of one `model(*inputs)` call.

    Returns {"flops", "bytes", "by_op", "dtype", "flops_dense", "errors"}:
    flops with zero-aware matmuls (equal to flops_dense on meta tensors or
    with zero_aware=False), compulsory bytes, FLOPs per aten op, and the
    task's floating dtype. Runs the model once, without autograd.
    """
    return _run_counted(model, list(inputs), _CountingMode(zero_aware=zero_aware))


def _run_counted(model, inputs, mode):
    with torch.no_grad():
        with mode:
            out = model(*inputs)
    params = []
    if isinstance(model, torch.nn.Module):
        params = list(model.parameters()) + list(model.buffers())
    read = _bytes_of(_tensors(inputs) + params)
    written = _bytes_of(_tensors(out))
    return {
        "flops": int(sum(mode.by_op.values())),
        "flops_dense": int(sum(mode.by_op_dense.values())),
        "bytes": int(read + written),
        "by_op": dict(sorted(mode.by_op.items())),
        "dtype": _main_dtype(inputs, model),
        "errors": mode.errors,
    }


def load_task(path):
    """Imports a KernelBench task file (Model, get_inputs, get_init_inputs)."""
    spec = importlib.util.spec_from_file_location("korch_flops_task", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, name):
            raise ValueError("%s defines no %s" % (path, name))
    return module


def _to_meta(obj):
    if isinstance(obj, torch.Tensor):
        return obj if _is_meta(obj) else obj.to("meta")
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_meta(x) for x in obj)
    return obj


def _build(task, meta):
    torch.manual_seed(0)
    if not meta:
        model = task.Model(*task.get_init_inputs())
        return model, list(task.get_inputs())
    with _CountingMode(meta_factories=True, counting=False):
        model = task.Model(*task.get_init_inputs())
        inputs = list(task.get_inputs())
    return model.to("meta"), [_to_meta(x) for x in inputs]


# The largest model + inputs (bytes) that --meta falls back to building for real.
DEFAULT_MAX_REAL_BYTES = 2 << 30


def _one_line(e):
    text = str(e).splitlines()
    return "%s: %s" % (type(e).__name__, text[0] if text else "")


def count_task(path, meta=False, zero_aware=True, max_real_bytes=DEFAULT_MAX_REAL_BYTES):
    """Builds a task file's Model and inputs under torch.manual_seed(0) and counts.

    With meta=True, builds on the meta device; if that fails, falls back to
    real tensors unless they would take more than max_real_bytes (then it
    raises RuntimeError rather than risk running out of memory).
    """
    task = load_task(path)
    result = None
    meta_error = None
    if meta:
        needed = None
        try:
            model, inputs = _build(task, meta=True)
            needed = _bytes_of(_tensors(inputs) + list(model.parameters()) + list(model.buffers()))
            # Factories called inside forward (torch.zeros(...) without a
            # device) must land on meta too, so the counting mode redirects them.
            result = _run_counted(model, inputs,
                                  _CountingMode(zero_aware=zero_aware, meta_factories=True))
        except Exception as e:  # meta kernels are missing for some ops
            meta_error = _one_line(e)
        if result is None and needed is not None and needed > max_real_bytes:
            raise RuntimeError("meta count failed (%s) and real tensors need %d bytes (limit %d)"
                               % (meta_error, needed, max_real_bytes))
    if result is None:
        model, inputs = _build(task, meta=False)
        result = count(model, inputs, zero_aware=zero_aware)
    result["meta"] = meta and meta_error is None
    if meta_error is not None:
        result["meta_error"] = meta_error
    result["torch"] = torch.__version__
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task_file")
    parser.add_argument("--meta", action="store_true",
                        help="build on the meta device (no memory); falls back to real tensors")
    parser.add_argument("--dense", action="store_true",
                        help="count every matmul product, zeros included")
    parser.add_argument("--max-real-bytes", type=int, default=DEFAULT_MAX_REAL_BYTES,
                        help="with --meta: largest model + inputs to fall back to building for real")
    args = parser.parse_args(argv)
    try:
        result = count_task(args.task_file, meta=args.meta, zero_aware=not args.dense,
                            max_real_bytes=args.max_real_bytes)
    except Exception as e:
        sys.stderr.write("korch_flops: %s\n" % _one_line(e))
        return 1
    json.dump(result, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
