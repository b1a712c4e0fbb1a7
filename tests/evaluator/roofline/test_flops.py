"""Tests of evaluator/py/korch_flops.py (run with /usr/bin/python3, which has torch)."""

import json
import os
import pathlib
import subprocess
import sys
import unittest

import torch

_REPO = pathlib.Path(os.environ.get("KORCH_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[3]))
_SCRIPT = _REPO / "evaluator" / "py" / "korch_flops.py"
_KERNELBENCH = pathlib.Path(
    os.environ.get("KORCH_SHARED_KERNELBENCH", _REPO.parent / "shared" / "kernelbench"))
sys.path.insert(0, str(_SCRIPT.parent))

import korch_flops  # noqa: E402


def _lambda_model(fn):
    class M(torch.nn.Module):
        def forward(self, *xs):
            return fn(*xs)

    return M()


class CountTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)

    def test_square_matmul(self):
        n = 64
        a, b = torch.rand(n, n), torch.rand(n, n)
        r = korch_flops.count(_lambda_model(torch.matmul), [a, b])
        self.assertEqual(r["flops"], 2 * n**3)
        self.assertEqual(r["flops_dense"], 2 * n**3)
        self.assertEqual(r["bytes"], 3 * n * n * 4)
        self.assertEqual(r["by_op"], {"mm": 2 * n**3})
        self.assertEqual(r["dtype"], "float32")

    def test_linear_counts_matmul_not_bias(self):
        m = torch.nn.Linear(32, 16)
        x = torch.rand(8, 32)
        r = korch_flops.count(m, [x])
        self.assertEqual(r["flops"], 2 * 8 * 32 * 16)
        # input + weight + bias read, output written
        self.assertEqual(r["bytes"], 4 * (8 * 32 + 32 * 16 + 16 + 8 * 16))

    def test_batched_matmul(self):
        a, b = torch.rand(3, 5, 7), torch.rand(3, 7, 11)
        r = korch_flops.count(_lambda_model(torch.bmm), [a, b])
        self.assertEqual(r["flops"], 2 * 3 * 5 * 7 * 11)

    def test_matrix_vector(self):
        a, v = torch.rand(6, 9), torch.rand(9)
        r = korch_flops.count(_lambda_model(torch.matmul), [a, v])
        self.assertEqual(r["flops"], 2 * 6 * 9)

    def test_zero_aware_diagonal_and_triangular(self):
        n, m = 32, 48
        d = torch.rand(n) + 0.5
        b = torch.rand(n, m) + 0.5
        r = korch_flops.count(_lambda_model(lambda x, y: torch.diag(x) @ y), [d, b])
        self.assertEqual(r["by_op"]["mm"], 2 * n * m)  # one nonzero per row of diag(d)
        self.assertEqual(r["flops_dense"], 2 * n * n * m)
        ua = torch.triu(torch.rand(n, n) + 0.5)
        ub = torch.triu(torch.rand(n, n) + 0.5)
        r = korch_flops.count(_lambda_model(torch.matmul), [ua, ub])
        # Products a[i,k] * b[k,j] with i <= k <= j: sum over k of (k + 1) * (n - k).
        expected = 2 * sum((k + 1) * (n - k) for k in range(n))
        self.assertEqual(r["by_op"]["mm"], expected)
        dense = korch_flops.count(_lambda_model(torch.matmul), [ua, ub], zero_aware=False)
        self.assertEqual(dense["flops"], 2 * n**3)

    def test_conv2d_formula(self):
        n, cin, cout, k, h, w = 2, 3, 8, 3, 16, 12
        conv = torch.nn.Conv2d(cin, cout, k, stride=2, padding=1)
        x = torch.rand(n, cin, h, w)
        ho, wo = (h + 2 - k) // 2 + 1, (w + 2 - k) // 2 + 1
        r = korch_flops.count(conv, [x])
        self.assertEqual(r["by_op"], {"convolution": 2 * n * cout * ho * wo * cin * k * k})

    def test_grouped_dilated_conv1d_and_conv3d(self):
        conv = torch.nn.Conv1d(8, 4, 5, groups=2, dilation=2, bias=False)
        x = torch.rand(3, 8, 40)
        lo = 40 - 2 * (5 - 1)
        r = korch_flops.count(conv, [x])
        self.assertEqual(r["flops"], 2 * 3 * 4 * lo * (8 // 2) * 5)
        conv3 = torch.nn.Conv3d(2, 3, (1, 2, 3), bias=False)
        x3 = torch.rand(1, 2, 4, 5, 6)
        r = korch_flops.count(conv3, [x3])
        self.assertEqual(r["flops"], 2 * 1 * 3 * (4 * 4 * 4) * 2 * (1 * 2 * 3))

    def test_transposed_conv(self):
        n, cin, cout, k, h, w = 2, 4, 6, 3, 5, 7
        conv = torch.nn.ConvTranspose2d(cin, cout, k, stride=2, groups=2, bias=False)
        x = torch.rand(n, cin, h, w)
        r = korch_flops.count(conv, [x])
        # Every input element meets cout/groups * k*k weights.
        self.assertEqual(r["flops"], 2 * n * h * w * cin * (cout // 2) * k * k)

    def test_elementwise_relu_and_reductions(self):
        x = torch.rand(7, 13) - 0.5
        r = korch_flops.count(_lambda_model(torch.relu), [x])
        self.assertEqual(r["flops"], 7 * 13)
        self.assertEqual(r["bytes"], 2 * 7 * 13 * 4)
        r = korch_flops.count(_lambda_model(lambda t: t.sum(dim=1)), [x])
        self.assertEqual(r["flops"], 7 * 13)
        r = korch_flops.count(_lambda_model(lambda t: torch.softmax(t, dim=1)), [x])
        self.assertEqual(r["flops"], 5 * 7 * 13)
        r = korch_flops.count(_lambda_model(lambda t: t.view(13, 7).transpose(0, 1)), [x])
        self.assertEqual(r["flops"], 0)

    def test_layer_norm_and_pooling(self):
        x = torch.rand(4, 6, 10, 10)
        r = korch_flops.count(torch.nn.LayerNorm([10, 10]), [x])
        self.assertEqual(r["flops"], 5 * x.numel())
        r = korch_flops.count(torch.nn.MaxPool2d(2), [x])
        self.assertEqual(r["flops"], 4 * 6 * 5 * 5 * 4)

    def test_half_dtype_reported(self):
        a = torch.rand(4, 4).to(torch.bfloat16)
        r = korch_flops.count(_lambda_model(torch.relu), [a])
        self.assertEqual(r["dtype"], "bfloat16")
        self.assertEqual(r["bytes"], 2 * 16 * 2)

    @unittest.skipUnless(hasattr(torch.nn.functional, "scaled_dot_product_attention"),
                         "torch without scaled_dot_product_attention")
    def test_attention_counts_two_matmuls(self):
        b, h, l, e = 2, 3, 16, 8
        q, k, v = (torch.rand(b, h, l, e) for _ in range(3))
        sdpa = torch.nn.functional.scaled_dot_product_attention
        r = korch_flops.count(_lambda_model(sdpa), [q, k, v])
        matmul_flops = 2 * 2 * b * h * l * l * e
        counted = sum(f for op, f in r["by_op"].items() if "softmax" not in op)
        self.assertGreaterEqual(counted, matmul_flops)
        self.assertLessEqual(counted, matmul_flops + 2 * b * h * l * l)  # scale/mask extras


class AttentionFormulaTest(unittest.TestCase):
    """The attention count on plain tensors (this torch may lack SDPA, and
    the dispatch test above then skips): 2 * batch * (query, key) pairs *
    (E + Ev), the pairs of a causal mask counted by hand."""

    def qkv(self, b, h, l, s, e, ev):
        return torch.empty(b, h, l, e), torch.empty(b, h, s, e), torch.empty(b, h, s, ev)

    def test_full_attention(self):
        q, k, v = self.qkv(2, 3, 16, 24, 8, 4)
        f = korch_flops._attention_flops("scaled_dot_product_attention", (q, k, v), {})
        self.assertEqual(f, 2 * (2 * 3) * (16 * 24) * (8 + 4))

    def test_causal_by_keyword_and_by_position(self):
        q, k, v = self.qkv(1, 2, 4, 4, 8, 8)
        pairs = 1 + 2 + 3 + 4  # row i sees i + 1 keys
        want = 2 * 2 * pairs * 16
        self.assertEqual(korch_flops._attention_flops(
            "scaled_dot_product_attention", (q, k, v), {"is_causal": True}), want)
        # (q, k, v, attn_mask, dropout_p, is_causal)
        self.assertEqual(korch_flops._attention_flops(
            "scaled_dot_product_attention", (q, k, v, None, 0.0, True), {}), want)
        # flash: (q, k, v, dropout_p, is_causal)
        self.assertEqual(korch_flops._attention_flops(
            "_scaled_dot_product_flash_attention", (q, k, v, 0.0, True), {}), want)
        # efficient: (q, k, v, attn_bias, compute_log_sumexp, dropout_p, is_causal)
        self.assertEqual(korch_flops._attention_flops(
            "_scaled_dot_product_efficient_attention", (q, k, v, None, False, 0.0, True), {}), want)

    def test_causal_with_more_queries_than_keys(self):
        q, k, v = self.qkv(1, 1, 6, 3, 2, 2)
        pairs = 1 + 2 + 3 + 3 + 3 + 3  # rows past S see all S keys
        self.assertEqual(korch_flops._attention_flops(
            "scaled_dot_product_attention", (q, k, v), {"is_causal": True}), 2 * pairs * 4)


@unittest.skipUnless((_KERNELBENCH / "level1").is_dir(), "KernelBench copy absent")
class KernelBenchCliTest(unittest.TestCase):
    def _run(self, name, *flags):
        out = subprocess.run(
            [sys.executable, str(_SCRIPT), str(_KERNELBENCH / "level1" / name), *flags],
            check=True, capture_output=True, text=True, timeout=240)
        return json.loads(out.stdout)

    def test_square_matmul_meta(self):
        r = self._run("1_Square_matrix_multiplication_.py", "--meta")
        n = 4096
        self.assertTrue(r["meta"])
        self.assertEqual(r["flops"], 2 * n**3)
        self.assertEqual(r["bytes"], 3 * n * n * 4)
        self.assertEqual(r["dtype"], "float32")

    def test_relu_meta_needs_no_memory(self):
        r = self._run("19_ReLU.py", "--meta")
        numel = 4096 * 393216  # 6.4 GB as real fp32 tensors
        self.assertTrue(r["meta"])
        self.assertEqual(r["flops"], numel)
        self.assertEqual(r["bytes"], 2 * numel * 4)

    def test_conv_task_meta_matches_formula(self):
        path = _KERNELBENCH / "level1" / "50_conv_standard_2D__square_input__square_kernel.py"
        task = korch_flops.load_task(path)
        torch.manual_seed(0)
        model = task.Model(*task.get_init_inputs())
        conv = model.conv1
        r = self._run(path.name, "--meta")
        x_shape = [task.batch_size, 3, 224, 224]
        ho = (x_shape[2] + 2 * conv.padding[0] - conv.kernel_size[0]) // conv.stride[0] + 1
        wo = (x_shape[3] + 2 * conv.padding[1] - conv.kernel_size[1]) // conv.stride[1] + 1
        w = conv.weight.shape
        self.assertEqual(r["by_op"]["convolution"], 2 * x_shape[0] * ho * wo * w.numel())


if __name__ == "__main__":
    unittest.main()
